"""The one retry policy for model calls: what is retried, how long to wait, and the deadline.

litellm's and the OpenAI SDK's own retries are set to zero. Timeouts, connection errors, 408, 409,
429 and 5xx are retried with exponential backoff and jitter, honouring ``Retry-After`` up to a
cap, all within one deadline per call; 400, 401, 403, 404, 422 and exhausted quotas get exactly
one attempt. When the policy gives up, the call raises ``NotGradedError`` with the provider's
(redacted) message.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import random
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TypeVar

from ..errors import NotGradedError
from ..redaction import redact
from .limits import Grant, Limits, Observed, observed

T = TypeVar("T")

MESSAGE_LIMIT = 400


class TransportError(Exception):
    """A lean-transport call that failed: an HTTP error status (with the server's headers), or
    a broken exchange (``status_code`` None: a malformed body), which is worth retrying."""

    def __init__(
        self, message: str, status_code: int | None = None, headers: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.headers = headers


def error_message(body: str) -> str:
    """The provider's own words from an error body (OpenAI's ``{"error": {...}}`` shape)."""
    try:
        error = json.loads(body).get("error")
    except (ValueError, AttributeError):
        error = None
    if isinstance(error, dict):
        message = str(error.get("message") or "")
        code = error.get("code") or error.get("type")
        if code and str(code) not in message:
            message = f"{message} ({code})" if message else str(code)
        return message or body[:MESSAGE_LIMIT]
    if isinstance(error, str):
        return error
    return body[:MESSAGE_LIMIT] or "no body"


RETRYABLE_STATUS = frozenset({408, 409, 429})


@dataclass(frozen=True)
class RetryPolicy:
    retries: int = 4
    deadline: float = 120.0
    attempt_timeout: float = 60.0
    backoff: float = 0.5
    max_backoff: float = 8.0
    retry_after_cap: float = 60.0

    def delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return retry_after + random.uniform(0, min(0.25, self.backoff))
        base: float = min(self.max_backoff, self.backoff * 2.0 ** (attempt - 1))
        return base * (0.5 + random.random() / 2)


@dataclass(frozen=True)
class Failure:
    retryable: bool
    message: str
    retry_after: float | None = None
    rate_limited: bool = False
    #: What the failed reply's rate-limit headers said, if it had any.
    observed: Observed | None = None
    #: No reply in time: the server may still be working on the request.
    timed_out: bool = False


@dataclass
class Attempts:
    """Requests sent for one answer, across the calls that ask for it again (a judge's
    contract retries): what a "failed after N attempts" counts."""

    sent: int = 0


def _headers(exc: BaseException) -> Iterator[Mapping[str, str]]:
    """The headers of the reply a failed call got: the lean transport's, an SDK response's,
    or those litellm's exceptions carry (``litellm_response_headers``)."""
    for source in (getattr(exc, "response", None), exc):
        headers = getattr(source, "headers", None) or getattr(
            source, "litellm_response_headers", None
        )
        if headers is not None and hasattr(headers, "get"):
            yield headers


def _header(exc: BaseException, name: str) -> str | None:
    for headers in _headers(exc):
        try:
            value = headers.get(name)
        except Exception:
            value = None
        if value is not None:
            return str(value)
    return None


def _observed(exc: BaseException) -> Observed | None:
    for headers in _headers(exc):
        try:
            found = observed({str(k).lower(): str(v) for k, v in headers.items()})
        except Exception:
            found = None
        if found is not None:
            return found
    return None


def parse_retry_after(exc: BaseException) -> float | None:
    """Seconds the server asked us to wait (``retry-after-ms``, seconds, or an HTTP date)."""
    raw_ms = _header(exc, "retry-after-ms")
    if raw_ms is not None:
        try:
            value = float(raw_ms) / 1000
        except ValueError:
            value = -1
        if 0 <= value < float("inf"):
            return value
    raw = _header(exc, "retry-after")
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(raw) if raw.strip() else None
        if parsed is None:
            return None
        value = parsed.timestamp() - time.time()
    if value != value or value in (float("inf"), float("-inf")):
        return None
    return max(0.0, value)


def classify(exc: BaseException) -> Failure:
    """Decide whether a failed call may be retried, from either transport's exception."""
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) else None
    name = type(exc).__name__
    text = str(exc) or name
    message = redact(" ".join(text.split()))[:MESSAGE_LIMIT]
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)) or name in (
        "Timeout",
        "APITimeoutError",
    ):
        return Failure(True, f"timed out: {message}", timed_out=True)
    if status == 429:
        if "insufficient_quota" in text or ("quota" in text.lower() and "exceeded" in text.lower()):
            return Failure(False, message)
        return Failure(True, message, parse_retry_after(exc), True, _observed(exc))
    if status is not None and (status in RETRYABLE_STATUS or status >= 500):
        return Failure(True, message, parse_retry_after(exc))
    if status is not None:
        return Failure(False, message)
    if isinstance(exc, TransportError) or name in (
        "APIConnectionError",
        "APIError",
        "InternalServerError",
        "ServiceUnavailableError",
    ):
        return Failure(True, message)
    if isinstance(exc, (ConnectionError, OSError)):
        return Failure(True, message)
    return Failure(False, f"{name}: {message}")


if sys.version_info >= (3, 11):

    async def within(awaitable: Awaitable[T], seconds: float) -> T:
        """``awaitable``'s result, or ``TimeoutError`` after ``seconds``. ``asyncio.timeout``
        runs it in the caller's task; ``asyncio.wait_for`` makes a task for each call, which
        cost more than the rest of an attempt's bookkeeping (Python 3.10 has only that)."""
        async with asyncio.timeout(seconds):
            return await awaitable

else:

    async def within(awaitable: Awaitable[T], seconds: float) -> T:
        return await asyncio.wait_for(awaitable, seconds)


async def with_retries(
    send: Callable[[float, Grant], Awaitable[T]],
    policy: RetryPolicy,
    who: str,
    *,
    limits: Limits,
    model: str,
    estimate: int,
    attempts: Attempts | None = None,
) -> T:
    """``send(attempt_timeout, grant)`` until it succeeds or the policy gives up
    (``NotGradedError`` naming ``who``, the attempts and the last failure). Each attempt first
    takes a slot of the run's ``limits`` (``send`` sets ``grant.used`` to the tokens it spent,
    and ``grant.observed`` to what its reply's rate-limit headers said); the call's deadline
    starts with its first slot, so waiting for the run's limits never counts against it, and
    each attempt is bounded by what is left of it. ``attempts`` counts the requests sent, and
    may go on from an earlier call's (a judge's contract retries).

    A 429 waits what its ``retry-after`` asks (every call of the model does: the limits hold
    them), or, when its rate-limit headers said when the limit is whole again, as long as the
    limits then hold the retry; only a 429 that said neither is retried after a backoff. A
    wait that would end past the deadline ends the call at once, saying so. An attempt that
    timed out slows the run down as a 429 does: a server that has not answered the last
    requests (it may still be working on them) gets fewer at once, not more."""
    loop = asyncio.get_running_loop()
    deadline: float | None = None
    failure: Failure | None = None
    attempts = attempts if attempts is not None else Attempts()
    tries = 0
    while True:
        tries += 1
        attempts.sent += 1
        attempt = attempts.sent
        async with limits.slot(
            model, estimate, hold=policy.attempt_timeout, retry=tries > 1
        ) as grant:
            deadline = deadline if deadline is not None else loop.time() + policy.deadline
            if failure is not None and loop.time() >= deadline:  # the limits held the retry
                tried = f"{attempt - 1} attempt{'s' if attempt > 2 else ''}"
                raise NotGradedError(
                    f"{who} failed after {tried}: no time left within the "
                    f"{policy.deadline:g}s deadline: {failure.message}"
                )
            budget = max(min(deadline - loop.time(), policy.attempt_timeout), 0.001)
            try:
                reply = await within(send(policy.attempt_timeout, grant), budget)
            except (asyncio.CancelledError, NotGradedError):
                raise
            except Exception as exc:
                failure = classify(exc)
                grant.observed = failure.observed
            else:
                limits.succeeded()
                return reply
        if failure.rate_limited:
            limits.rate_limited(model, failure.retry_after)
        elif failure.timed_out:  # fewer calls at once, but no 429 in the model's counts
            limits.rate_limited()
        where = f"{who} failed after {attempt} attempt{'s' if attempt > 1 else ''}"
        if not failure.retryable:
            raise NotGradedError(f"{where} (not retryable): {failure.message}")
        if tries > policy.retries:
            raise NotGradedError(f"{where} (retry budget spent): {failure.message}")
        asked = failure.retry_after
        if asked is not None and asked > policy.retry_after_cap:
            raise NotGradedError(
                f"{where}: the server asked to retry after {asked:.0f}s, more "
                f"than the {policy.retry_after_cap:.0f}s cap: {failure.message}"
            )
        if asked is not None and loop.time() + asked >= deadline:
            raise NotGradedError(
                f"{where}: the server asked to retry after {asked:g}s, past the call's "
                f"{policy.deadline:g}s deadline ({max(0.0, deadline - loop.time()):.1f}s "
                f"left): {failure.message}"
            )
        paced = failure.rate_limited and asked is None and failure.observed is not None
        pause = 0.0 if paced else policy.delay(tries, asked)
        if loop.time() + pause >= deadline:
            raise NotGradedError(
                f"{where}: no time left within the {policy.deadline:g}s deadline: {failure.message}"
            )
        await asyncio.sleep(pause)
