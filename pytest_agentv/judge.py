"""The only code that talks to models: litellm on first use, one retry policy, deadlines, usage.

litellm is imported the first time a judge or LLM target is called, never at plugin import, with
its remote model-cost map switched off so the import never reaches the network. Retries belong to
this module alone (litellm's and the OpenAI SDK's are set to zero): timeouts, connection errors,
408, 409, 429 and 5xx are retried with exponential backoff and jitter, honouring ``Retry-After``
up to a cap, all within one deadline per call; 400, 401, 403, 404, 422 and exhausted quotas get
exactly one attempt. When the policy gives up the call raises ``NotGradedError`` with the
provider's (redacted) message.
"""

from __future__ import annotations

import asyncio
import contextvars
import email.utils
import json
import os
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, TypeVar

from .errors import NotGradedError, ReplayMissError
from .redaction import redact, register_secret
from .replay import ReplayStore, request_key
from .results import UsageRow

T = TypeVar("T")

RETRYABLE_STATUS = frozenset({408, 409, 429})


class ReplyError(ValueError):
    """A reply that does not answer its request's contract; ``reply`` is its text."""

    reply: str = ""


NONCE_PLACEHOLDER = "{nonce}"
_MESSAGE_LIMIT = 400


@dataclass
class Usage:
    """Model calls made for one case (or one ``assert_judged`` call)."""

    calls: int = 0
    reused: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    #: What the replies reused from the store cost when they were recorded: trials count it
    #: against ``cost_limit_usd``, so a replayed run stops where the recording stopped.
    replayed_cost_usd: float = 0.0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, other: Usage) -> None:
        self.calls += other.calls
        self.reused += other.reused
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cost_usd += other.cost_usd
        self.replayed_cost_usd += other.replayed_cost_usd

    @property
    def spent_usd(self) -> float:
        """Model spend as recorded: this run's calls plus what reused replies cost."""
        return self.cost_usd + self.replayed_cost_usd

    def row(self) -> UsageRow:
        return UsageRow(
            calls=self.calls,
            reused=self.reused,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            tokens=self.tokens,
            cost_usd=round(self.cost_usd, 8),
        )


#: The usage record of the case whose work is running; set by the runner per case task.
current_usage: contextvars.ContextVar[Usage | None] = contextvars.ContextVar(
    "agentv_usage", default=None
)

_litellm: ModuleType | None = None


def litellm_module() -> ModuleType:
    """Import litellm on first use, offline: no model-cost-map download, no debug banners."""
    global _litellm
    if _litellm is None:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        import litellm

        litellm.suppress_debug_info = True
        litellm.telemetry = False
        _litellm = litellm
    return _litellm


@dataclass(frozen=True)
class ModelSpec:
    """Which model to call and where. Credentials are never part of reports or store keys."""

    model: str
    api_base: str | None = None
    api_key: str | None = field(default=None, repr=False)
    api_version: str | None = None

    def __post_init__(self) -> None:
        if self.api_key:
            register_secret(self.api_key)

    def call_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"model": self.model}
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if self.api_version:
            kwargs["api_version"] = self.api_version
        key = self.api_key
        if key is None and self.api_base and self.model.startswith("openai/"):
            key = os.environ.get("OPENAI_API_KEY") or "sk-no-key-needed"
        if key:
            kwargs["api_key"] = key
        return kwargs


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
class Reply:
    text: str
    cached: bool
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    finish_reason: str | None = None


@dataclass(frozen=True)
class Failure:
    retryable: bool
    message: str
    retry_after: float | None = None
    rate_limited: bool = False


def _header(exc: BaseException, name: str) -> str | None:
    for source in (getattr(exc, "response", None), exc):
        headers = getattr(source, "headers", None) or getattr(
            source, "litellm_response_headers", None
        )
        if headers is not None:
            try:
                value = headers.get(name)
            except Exception:
                value = None
            if value is not None:
                return str(value)
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
    """Decide whether a failed call may be retried, from litellm's exception or a raw one."""
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) else None
    name = type(exc).__name__
    text = str(exc) or name
    message = redact(" ".join(text.split()))[:_MESSAGE_LIMIT]
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)) or name in (
        "Timeout",
        "APITimeoutError",
    ):
        return Failure(True, f"timed out: {message}")
    if status == 429:
        if "insufficient_quota" in text or ("quota" in text.lower() and "exceeded" in text.lower()):
            return Failure(False, message)
        return Failure(True, message, parse_retry_after(exc), rate_limited=True)
    if status is not None and (status in RETRYABLE_STATUS or status >= 500):
        return Failure(True, message, parse_retry_after(exc))
    if status is not None:
        return Failure(False, message)
    if name in ("APIConnectionError", "APIError", "InternalServerError", "ServiceUnavailableError"):
        return Failure(True, message)
    if isinstance(exc, (ConnectionError, OSError)):
        return Failure(True, message)
    return Failure(False, f"{name}: {message}")


class LlmClient:
    """Calls one model through litellm under the retry policy, with the replay store in front."""

    def __init__(
        self,
        spec: ModelSpec,
        policy: RetryPolicy | None = None,
        store: ReplayStore | None = None,
        on_rate_limit: Callable[[], None] | None = None,
        on_success: Callable[[], None] | None = None,
    ) -> None:
        self.spec = spec
        self.policy = policy or RetryPolicy()
        self.store = store
        self._on_rate_limit = on_rate_limit
        self._on_success = on_success
        self._schema_support: bool | None = None

    @property
    def model(self) -> str:
        return self.spec.model

    def supports_response_schema(self) -> bool:
        if self._schema_support is None:
            try:
                self._schema_support = bool(
                    litellm_module().supports_response_schema(model=self.spec.model)
                )
            except Exception:
                self._schema_support = False
        return self._schema_support

    async def complete(
        self,
        messages: Sequence[dict[str, str]],
        *,
        accept: Callable[[str], T],
        temperature: float | None = 0.0,
        max_tokens: int | None = None,
        structured: dict[str, Any] | None = None,
        nonce: str | None = None,
        trial: int = 0,
        protocol: str = "",
        label: str = "",
        replay_as: Sequence[dict[str, str]] | None = None,
    ) -> tuple[T, Reply]:
        """Return ``(accept(text), reply)``; a reply ``accept`` rejects is never stored.

        ``accept`` raises ``ReplyError`` (which then carries the reply's text) for a reply
        outside its contract. A call that corrects such a reply passes the first attempt's
        messages as ``replay_as``: its accepted reply is stored as the answer to that request,
        so a replayed run gets it at once. ``structured`` is a JSON-schema response format to
        send where the model supports it. Whether it does is only asked (which imports litellm)
        when a call must be made: a reply stored for either choice is reused, so replaying never
        imports litellm. The per-call ``nonce`` never reaches the store: keys and stored replies
        hold a placeholder in its place.
        """

        def unnonced(value: Any) -> Any:
            if not nonce:
                return value
            return json.loads(json.dumps(value).replace(nonce, NONCE_PLACEHOLDER))

        keyed = unnonced(list(replay_as or messages))

        def fingerprint(response_format: dict[str, Any] | None) -> dict[str, Any]:
            return {
                "model": self.spec.model,
                "messages": keyed,
                "temperature": temperature,
                "max_tokens": max_tokens,
                "response_format": unnonced(response_format),
                "protocol": protocol,
                "trial": trial,
            }

        def judged(text: str) -> T:
            try:
                return accept(text)
            except ReplyError as exc:
                exc.reply = text
                raise

        usage = current_usage.get()
        store = self.store
        if store is not None:
            for choice in [structured, None] if structured is not None else [None]:
                stored = store.get(request_key(fingerprint(choice)))
                if stored is None or not isinstance(stored.get("content"), str):
                    continue
                text = stored["content"]
                recorded = stored.get("nonce")
                if nonce:
                    text = text.replace(
                        recorded if isinstance(recorded, str) else NONCE_PLACEHOLDER, nonce
                    )
                if usage is not None:
                    usage.reused += 1
                    cost = stored.get("cost_usd")
                    if isinstance(cost, (int, float)) and not isinstance(cost, bool):
                        usage.replayed_cost_usd += float(cost)
                return judged(text), Reply(text, cached=True)
            if store.mode == "replay":
                raise ReplayMissError(
                    f"{label or 'model call'}: no stored reply for this request in "
                    f"{store.label} (cache mode 'replay'). Record it by running once with "
                    "--agentv-cache-mode readwrite and a configured model, then commit the store"
                )
        response_format = (
            structured if structured is not None and self.supports_response_schema() else None
        )
        reply = await self._call(messages, temperature, max_tokens, response_format, label)
        if usage is not None:
            usage.calls += 1
            usage.prompt_tokens += reply.prompt_tokens
            usage.completion_tokens += reply.completion_tokens
            usage.cost_usd += reply.cost_usd or 0.0
        value = judged(reply.text)
        if store is not None:
            request = fingerprint(response_format)
            store.put(request_key(request), request, _stored_reply(reply, nonce))
        return value, reply

    async def _call(
        self,
        messages: Sequence[dict[str, str]],
        temperature: float | None,
        max_tokens: int | None,
        response_format: dict[str, Any] | None,
        label: str,
    ) -> Reply:
        litellm = litellm_module()
        policy = self.policy
        loop = asyncio.get_running_loop()
        deadline = loop.time() + policy.deadline
        kwargs = self.spec.call_kwargs()
        kwargs.update(messages=list(messages), num_retries=0, max_retries=0, drop_params=True)
        if temperature is not None:
            kwargs["temperature"] = temperature
        if max_tokens is not None:
            kwargs["max_tokens"] = max_tokens
        if response_format is not None:
            kwargs["response_format"] = response_format
        who = label or f"call to {self.spec.model}"
        attempt = 0
        while True:
            attempt += 1
            budget = max(min(deadline - loop.time(), policy.attempt_timeout), 0.001)
            try:
                # litellm caches HTTP clients by timeout: pass it a constant one, so connections
                # are reused, and enforce what is left of the deadline here.
                response = await asyncio.wait_for(
                    litellm.acompletion(**kwargs, timeout=policy.attempt_timeout), budget
                )
                reply = self._reply(litellm, response)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                failure = classify(exc)
            else:
                if self._on_success is not None:
                    self._on_success()
                return reply
            if failure.rate_limited and self._on_rate_limit is not None:
                self._on_rate_limit()
            where = f"{who} failed after {attempt} attempt{'s' if attempt > 1 else ''}"
            if not failure.retryable:
                raise NotGradedError(f"{where} (not retryable): {failure.message}")
            if attempt > policy.retries:
                raise NotGradedError(f"{where} (retry budget spent): {failure.message}")
            if failure.retry_after is not None and failure.retry_after > policy.retry_after_cap:
                raise NotGradedError(
                    f"{where}: the server asked to retry after {failure.retry_after:.0f}s, more "
                    f"than the {policy.retry_after_cap:.0f}s cap: {failure.message}"
                )
            pause = policy.delay(attempt, failure.retry_after)
            if loop.time() + pause >= deadline:
                raise NotGradedError(
                    f"{where}: no time left within the {policy.deadline:g}s deadline: "
                    f"{failure.message}"
                )
            await asyncio.sleep(pause)

    @staticmethod
    def _reply(litellm: ModuleType, response: Any) -> Reply:
        choice = response.choices[0]
        text = getattr(choice.message, "content", None) or ""
        usage = getattr(response, "usage", None)
        prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        try:
            cost: float | None = float(litellm.completion_cost(completion_response=response))
        except Exception:
            cost = None
        return Reply(
            text=text,
            cached=False,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost_usd=cost,
            finish_reason=getattr(choice, "finish_reason", None),
        )


def _stored_reply(reply: Reply, nonce: str | None) -> dict[str, Any]:
    """A reply as the store keeps it: the nonce as a placeholder, so that the file is the same
    every time it is recorded. A reply that already holds the placeholder text (quoted from an
    answer) keeps its nonce instead, so that replaying never turns that quote into the nonce."""
    response: dict[str, Any] = {
        "content": reply.text,
        "usage": {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
        },
    }
    if reply.cost_usd is not None:
        response["cost_usd"] = reply.cost_usd
    if nonce and NONCE_PLACEHOLDER in reply.text:
        response["nonce"] = nonce
    elif nonce:
        response["content"] = reply.text.replace(nonce, NONCE_PLACEHOLDER)
    return response


#: The judge is a model client like any other.
JudgeClient = LlmClient


class ModelClients:
    """One client per model and endpoint for the whole run, sharing its policy and store."""

    def __init__(
        self,
        policy: RetryPolicy,
        store: ReplayStore | None,
        on_rate_limit: Callable[[], None] | None = None,
        on_success: Callable[[], None] | None = None,
    ) -> None:
        self.policy = policy
        self.store = store
        self._on_rate_limit = on_rate_limit
        self._on_success = on_success
        self._clients: dict[ModelSpec, LlmClient] = {}
        self._lock = threading.Lock()

    def __call__(self, spec: ModelSpec) -> LlmClient:
        with self._lock:
            client = self._clients.get(spec)
            if client is None:
                client = self._clients[spec] = LlmClient(
                    spec,
                    self.policy,
                    self.store,
                    on_rate_limit=self._on_rate_limit,
                    on_success=self._on_success,
                )
            return client
