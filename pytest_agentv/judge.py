"""The only code that talks to models: two transports behind one client, one retry policy,
deadlines, usage and cost.

Transports. ``openai/<model>`` and ``azure/<deployment>`` models — which covers every
OpenAI-compatible server reached as ``openai/<model>`` with an API base (vLLM, Ollama, LM Studio,
OpenRouter, Groq, Together...) — are called by a lean transport: chat completions over one pooled
httpx client, with prices and capabilities read from litellm's price table (``prices.py``)
without importing litellm. Every other model goes through litellm, imported the first time such a
model is called (offline: its remote price list is switched off), as does every model when the
transport is forced to ``litellm`` (``--agentv-judge-transport``).

Retries belong to this module alone (litellm's and the OpenAI SDK's are set to zero): timeouts,
connection errors, 408, 409, 429 and 5xx are retried with exponential backoff and jitter,
honouring ``Retry-After`` up to a cap, all within one deadline per call; 400, 401, 403, 404, 422
and exhausted quotas get exactly one attempt. When the policy gives up the call raises
``NotGradedError`` with the provider's (redacted) message.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import email.utils
import json
import os
import random
import ssl
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar, get_args
from urllib.parse import quote

from . import prices
from .budget import Budget
from .errors import NotGradedError, ReplayMissError
from .models import finite_number
from .redaction import redact, register_secret, valid_text
from .replay import ReplayStore, request_key
from .results import UsageRow

if TYPE_CHECKING:
    import httpx

T = TypeVar("T")

RETRYABLE_STATUS = frozenset({408, 409, 429})


class ReplyError(ValueError):
    """A reply that does not answer its request's contract; ``reply`` is its text."""

    reply: str = ""


NONCE_PLACEHOLDER = "{nonce}"
_MESSAGE_LIMIT = 400

#: auto: the lean transport for the providers in ``LEAN_PROVIDERS``, litellm for the rest;
#: litellm: litellm for every model.
TransportChoice = Literal["auto", "litellm"]
TRANSPORT_CHOICES: tuple[TransportChoice, ...] = get_args(TransportChoice)
LEAN_PROVIDERS = frozenset({"openai", "azure"})
OPENAI_API_BASE = "https://api.openai.com/v1"
#: The Azure OpenAI API version used when neither the target nor AZURE_API_VERSION gives one.
AZURE_API_VERSION = "2024-10-21"


def uses_lean_transport(model: str, choice: str = "auto") -> bool:
    """The one routing rule: ``openai/...`` and ``azure/...`` take the lean transport unless
    litellm is forced; everything else (other prefixes, bare names) goes through litellm."""
    provider, slash, _ = model.partition("/")
    return choice != "litellm" and bool(slash) and provider in LEAN_PROVIDERS


@dataclass
class Usage:
    """Model calls made for one case (or one ``assert_judged`` call)."""

    calls: int = 0
    reused: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    #: The cost of the calls whose price is known.
    cost_usd: float = 0.0
    #: What the replies reused from the store cost when they were recorded: trials count it
    #: against ``cost_limit_usd``, so a replayed run stops where the recording stopped.
    replayed_cost_usd: float = 0.0
    #: Calls to models without a known price: while there is one, the total cost is unknown.
    unpriced_calls: int = 0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def charge(self, reply: Reply) -> None:
        """Count one call that was made (not a reply reused from the store)."""
        self.calls += 1
        self.prompt_tokens += reply.prompt_tokens
        self.completion_tokens += reply.completion_tokens
        if reply.cost_usd is None:
            self.unpriced_calls += 1
        else:
            self.cost_usd += reply.cost_usd

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
            cost_usd=None if self.unpriced_calls else round(self.cost_usd, 8),
            unpriced_calls=self.unpriced_calls,
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
    #: None when the model's price is unknown; for a reused reply, what its recording cost.
    cost_usd: float | None = None

    def __post_init__(self) -> None:
        # A model may send a lone surrogate escape: the store and reports must be UTF-8.
        object.__setattr__(self, "text", valid_text(self.text))


@dataclass(frozen=True)
class Failure:
    retryable: bool
    message: str
    retry_after: float | None = None
    rate_limited: bool = False


class TransportError(Exception):
    """A lean-transport call that failed: an HTTP error status (with the server's headers), or
    a broken exchange (``status_code`` None: a malformed body), which is worth retrying."""

    def __init__(
        self, message: str, status_code: int | None = None, headers: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.headers = headers


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
    """Decide whether a failed call may be retried, from either transport's exception."""
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


class Transport(Protocol):
    """Sends one chat request to one model, once: retries and deadlines are the client's.

    Raises ``NotGradedError`` for a request that cannot be made at all (no credentials),
    anything else for a failed attempt (see ``classify``).
    """

    def supports_response_schema(self) -> bool: ...

    async def send(
        self,
        messages: Sequence[dict[str, str]],
        *,
        temperature: float | None,
        max_tokens: int | None,
        response_format: dict[str, Any] | None,
        timeout: float,
    ) -> Reply: ...


class LitellmTransport:
    """Any provider litellm knows; litellm is imported at the first call."""

    def __init__(self, spec: ModelSpec) -> None:
        self.spec = spec

    def supports_response_schema(self) -> bool:
        try:
            return bool(litellm_module().supports_response_schema(model=self.spec.model))
        except Exception:
            return False

    def _kwargs(self) -> dict[str, Any]:
        spec = self.spec
        kwargs: dict[str, Any] = {"model": spec.model}
        if spec.api_base:
            kwargs["api_base"] = spec.api_base
        if spec.api_version:
            kwargs["api_version"] = spec.api_version
        if spec.model.startswith("azure/"):
            kwargs["api_version"] = azure_api_version(spec)
        key = spec.api_key
        if key is None and spec.api_base and spec.model.startswith("openai/"):
            key = os.environ.get("OPENAI_API_KEY") or "sk-no-key-needed"
        if key:
            kwargs["api_key"] = key
        return kwargs

    async def send(
        self,
        messages: Sequence[dict[str, str]],
        *,
        temperature: float | None,
        max_tokens: int | None,
        response_format: dict[str, Any] | None,
        timeout: float,
    ) -> Reply:
        # Importing litellm takes seconds: in a thread, so other cases' calls go on meanwhile.
        litellm = _litellm if _litellm is not None else await asyncio.to_thread(litellm_module)
        kwargs = self._kwargs()
        kwargs.update(messages=list(messages), num_retries=0, max_retries=0, drop_params=True)
        if temperature is not None:
            kwargs["temperature"] = temperature
        if max_tokens is not None:
            kwargs["max_tokens"] = max_tokens
        if response_format is not None:
            kwargs["response_format"] = response_format
        # litellm caches HTTP clients by timeout: pass it a constant one, so connections are
        # reused; the client enforces what is left of the deadline.
        response = await litellm.acompletion(**kwargs, timeout=timeout)
        choice = response.choices[0]
        usage = getattr(response, "usage", None)
        try:
            cost: float | None = float(litellm.completion_cost(completion_response=response))
        except Exception:
            cost = None
        return Reply(
            text=getattr(choice.message, "content", None) or "",
            cached=False,
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            cost_usd=cost,
        )


#: Requests in flight per httpx client. httpcore's pool does work quadratic in its idle
#: connections whenever a request starts or ends (at 32 connections, more CPU than the rest of
#: the request), so many calls at once are spread over several small pools.
POOL_REQUESTS = 8


class _HttpPools:
    """The httpx clients of one event loop for one scheme (their connections belong to that
    loop), each with at most ``POOL_REQUESTS`` requests in flight.

    https clients share one TLS context, made when the first one is (loading the CA bundle
    costs about 20 ms); plain-http clients, for local servers, get a context that verifies but
    trusts no certificate, so it costs nothing and fails closed if ever used.
    """

    _tls: ssl.SSLContext | None = None

    def __init__(self, secure: bool) -> None:
        self.secure = secure
        self._clients: list[httpx.AsyncClient] = []
        self._in_flight: list[int] = []

    def _context(self) -> ssl.SSLContext:
        if not self.secure:
            return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        if _HttpPools._tls is None:
            import httpx

            _HttpPools._tls = httpx.create_ssl_context()
        return _HttpPools._tls

    @contextlib.contextmanager
    def client(self) -> Iterator[httpx.AsyncClient]:
        in_flight = self._in_flight
        index = min(range(len(in_flight)), key=in_flight.__getitem__, default=-1)
        if index < 0 or in_flight[index] >= POOL_REQUESTS:
            import httpx

            limits = httpx.Limits(max_connections=None, max_keepalive_connections=POOL_REQUESTS)
            self._clients.append(httpx.AsyncClient(limits=limits, verify=self._context()))
            in_flight.append(0)
            index = len(in_flight) - 1
        in_flight[index] += 1
        try:
            yield self._clients[index]
        finally:
            in_flight[index] -= 1


_http_pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[bool, _HttpPools]] = (
    weakref.WeakKeyDictionary()
)


def _http_client(url: str) -> contextlib.AbstractContextManager[httpx.AsyncClient]:
    """An httpx client of the running loop's pools for ``url``'s scheme, for one request."""
    loop = asyncio.get_running_loop()
    pools = _http_pools.get(loop)
    if pools is None:
        pools = _http_pools[loop] = {}
    secure = url.startswith("https://")
    scheme = pools.get(secure)
    if scheme is None:
        scheme = pools[secure] = _HttpPools(secure)
    return scheme.client()


def _env(*names: str) -> str | None:
    for name in names:
        value = os.environ.get(name)
        if value:
            return value
    return None


def azure_api_version(spec: ModelSpec) -> str:
    """The spec's, else ``AZURE_API_VERSION``, else ours: the same on both transports."""
    return spec.api_version or _env("AZURE_API_VERSION") or AZURE_API_VERSION


@dataclass(frozen=True)
class _Endpoint:
    url: str
    headers: dict[str, str]
    model: str


class LeanTransport:
    """OpenAI-compatible chat completions over httpx, for ``openai/`` and ``azure/`` models.

    Endpoints and credentials follow litellm's conventions. ``openai/<model>``: the API base,
    else ``OPENAI_BASE_URL``, ``OPENAI_API_BASE``, else api.openai.com; the key, else
    ``OPENAI_API_KEY`` (optional when an API base is given); ``OPENAI_ORGANIZATION``.
    ``azure/<deployment>``: the API base, else ``AZURE_API_BASE`` or ``AZURE_OPENAI_ENDPOINT``;
    ``azure_api_version``; the key, else ``AZURE_OPENAI_API_KEY`` or ``AZURE_API_KEY``, else a
    bearer token from ``AZURE_AD_TOKEN`` or ``AZURE_OPENAI_AD_TOKEN``.

    Reasoning models (per the price table) get ``max_completion_tokens`` and no temperature
    other than 1, as litellm sends them with ``drop_params``.
    """

    def __init__(self, spec: ModelSpec) -> None:
        self.spec = spec
        self._endpoint: _Endpoint | None = None
        self._reasoning = False
        self._price: prices.Price | None = None

    def supports_response_schema(self) -> bool:
        return prices.supports(self.spec.model, "supports_response_schema")

    def _resolve(self) -> _Endpoint:
        spec = self.spec
        provider, _, name = spec.model.partition("/")
        headers = {"content-type": "application/json", "accept": "application/json"}
        if provider == "azure":
            base = spec.api_base or _env("AZURE_API_BASE", "AZURE_OPENAI_ENDPOINT")
            if not base:
                raise NotGradedError(
                    f"no endpoint for {spec.model}: set AZURE_API_BASE (or the target's "
                    "api_base/endpoint) to https://<resource>.openai.azure.com"
                )
            version = azure_api_version(spec)
            key = spec.api_key or _env("AZURE_OPENAI_API_KEY", "AZURE_API_KEY")
            token = None if key else _env("AZURE_AD_TOKEN", "AZURE_OPENAI_AD_TOKEN")
            if key:
                headers["api-key"] = key
            elif token:
                headers["authorization"] = f"Bearer {token}"
            else:
                raise NotGradedError(
                    f"no credentials for {spec.model}: set AZURE_API_KEY (or AZURE_AD_TOKEN); "
                    "for Azure AD app credentials use --agentv-judge-transport=litellm"
                )
            url = (
                f"{base.rstrip('/')}/openai/deployments/{quote(name, safe='')}/chat/completions"
                f"?api-version={quote(version, safe='')}"
            )
        else:
            base = spec.api_base or _env("OPENAI_BASE_URL", "OPENAI_API_BASE") or OPENAI_API_BASE
            key = spec.api_key or _env("OPENAI_API_KEY")
            if key:
                headers["authorization"] = f"Bearer {key}"
            elif base == OPENAI_API_BASE:
                raise NotGradedError(
                    f"no API key for {spec.model}: set OPENAI_API_KEY (or give an api_base "
                    "for a server that needs none)"
                )
            organization = _env("OPENAI_ORGANIZATION")
            if organization:
                headers["openai-organization"] = organization
            url = f"{base.rstrip('/')}/chat/completions"
        if not url.startswith(("http://", "https://")):
            raise NotGradedError(f"the API base of {spec.model} must start with http(s)://")
        self._reasoning = prices.supports(spec.model, "supports_reasoning")
        self._price = prices.price_for(spec.model)
        return _Endpoint(url, headers, name)

    async def send(
        self,
        messages: Sequence[dict[str, str]],
        *,
        temperature: float | None,
        max_tokens: int | None,
        response_format: dict[str, Any] | None,
        timeout: float,
    ) -> Reply:
        endpoint = self._endpoint
        if endpoint is None:
            endpoint = self._endpoint = self._resolve()
        body: dict[str, Any] = {"model": endpoint.model, "messages": list(messages)}
        if temperature is not None and not (self._reasoning and temperature != 1):
            body["temperature"] = temperature
        if max_tokens is not None:
            body["max_completion_tokens" if self._reasoning else "max_tokens"] = max_tokens
        if response_format is not None:
            body["response_format"] = response_format
        content = json.dumps(body, ensure_ascii=False).encode("utf-8")
        import httpx

        try:
            with _http_client(endpoint.url) as client:
                response = await client.post(
                    endpoint.url, content=content, headers=endpoint.headers, timeout=timeout
                )
        except httpx.TimeoutException as exc:
            raise TimeoutError(f"{type(exc).__name__}: {exc}") from None
        except httpx.TransportError as exc:
            raise ConnectionError(f"{type(exc).__name__}: {exc or 'connection failed'}") from None
        status = response.status_code
        if not 200 <= status < 300:
            raise TransportError(
                f"HTTP {status}: {_error_message(response.text)}", status, response.headers
            )
        return self._reply(response.content, status)

    def _reply(self, content: bytes, status: int) -> Reply:
        try:
            data = json.loads(content)
            choice = data["choices"][0]
            text = choice["message"].get("content")
            usage = data.get("usage") or {}
            prompt_tokens = int(usage.get("prompt_tokens") or 0)
            completion_tokens = int(usage.get("completion_tokens") or 0)
        except (ValueError, TypeError, KeyError, IndexError, AttributeError):
            raise TransportError(
                f"HTTP {status} with a body that is not a chat completion: "
                f"{content[:200].decode('utf-8', 'replace')}"
            ) from None
        price = self._price
        return Reply(
            text=text if isinstance(text, str) else "",
            cached=False,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost_usd=price.cost(prompt_tokens, completion_tokens) if price else None,
        )


def _error_message(body: str) -> str:
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
        return message or body[:_MESSAGE_LIMIT]
    if isinstance(error, str):
        return error
    return body[:_MESSAGE_LIMIT] or "no body"


class LlmClient:
    """Calls one model under the retry policy, with the replay store in front and the run's
    budget consulted before each call; the transport (``uses_lean_transport``) is chosen when
    the first call must be made."""

    def __init__(
        self,
        spec: ModelSpec,
        policy: RetryPolicy | None = None,
        store: ReplayStore | None = None,
        on_rate_limit: Callable[[], None] | None = None,
        on_success: Callable[[], None] | None = None,
        transport: str = "auto",
        budget: Budget | None = None,
    ) -> None:
        self.spec = spec
        self.policy = policy or RetryPolicy()
        self.store = store
        self.budget = budget
        self._on_rate_limit = on_rate_limit
        self._on_success = on_success
        self.transport_choice = transport
        self._transport: Transport | None = None
        self._schema_support: bool | None = None

    @property
    def model(self) -> str:
        return self.spec.model

    @property
    def transport(self) -> Transport:
        if self._transport is None:
            lean = uses_lean_transport(self.spec.model, self.transport_choice)
            self._transport = LeanTransport(self.spec) if lean else LitellmTransport(self.spec)
        return self._transport

    def supports_response_schema(self) -> bool:
        if self._schema_support is None:
            self._schema_support = self.transport.supports_response_schema()
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
        send where the model supports it. Whether it does is only asked (which may read the price
        table or import litellm) when a call must be made: a reply stored for either choice is
        reused, so replaying imports neither litellm nor the HTTP client. Store keys do not depend
        on the transport. The per-call ``nonce`` never reaches the store: keys and stored replies
        hold a placeholder in its place.
        """

        def unnonced(value: Any) -> Any:
            if not nonce:
                return value
            return json.loads(json.dumps(value).replace(nonce, NONCE_PLACEHOLDER))

        keyed = unnonced(list(replay_as or messages))

        def fingerprint(response_format: dict[str, Any] | None) -> dict[str, Any]:
            return self._request(
                keyed, temperature, max_tokens, unnonced(response_format), protocol, trial
            )

        def judged(text: str) -> T:
            try:
                return accept(text)
            except ReplyError as exc:
                exc.reply = text
                raise

        usage = current_usage.get()
        store = self.store
        if store is not None:
            stored = self._stored(fingerprint, structured)
            if stored is not None:
                text = stored["content"]
                recorded = stored.get("nonce")
                if nonce:
                    text = text.replace(
                        recorded if isinstance(recorded, str) else NONCE_PLACEHOLDER, nonce
                    )
                reply = _recorded_reply(text, stored)
                if usage is not None:
                    usage.reused += 1
                    usage.replayed_cost_usd += reply.cost_usd or 0.0
                return judged(text), reply
            if store.mode == "replay":
                raise ReplayMissError(
                    f"{label or 'model call'}: no stored reply for this request in "
                    f"{store.label} (cache mode 'replay'). Record it by running once with "
                    "--agentv-cache-mode readwrite and a configured model, then commit the store"
                )
        if structured is not None and self._schema_support is None:
            # The first answer may import litellm or read the price table: not on the loop.
            await asyncio.to_thread(self.supports_response_schema)
        response_format = (
            structured if structured is not None and self.supports_response_schema() else None
        )
        if self.budget is not None:
            self.budget.check(self.spec.model)
        reply = await self._call(messages, temperature, max_tokens, response_format, label)
        if self.budget is not None:
            self.budget.charge(
                self.spec.model, reply.cost_usd, reply.prompt_tokens, reply.completion_tokens
            )
        if usage is not None:
            usage.charge(reply)
        value = judged(reply.text)
        if store is not None:
            request = fingerprint(response_format)
            store.put(request_key(request), request, _stored_reply(reply, nonce))
        return value, reply

    def _request(
        self,
        keyed: Any,
        temperature: float | None,
        max_tokens: int | None,
        response_format: dict[str, Any] | None,
        protocol: str,
        trial: int,
    ) -> dict[str, Any]:
        """What a store key is made of (the messages with the nonce as its placeholder)."""
        return {
            "model": self.spec.model,
            "messages": keyed,
            "temperature": temperature,
            "max_tokens": max_tokens,
            "response_format": response_format,
            "protocol": protocol,
            "trial": trial,
        }

    def _stored(
        self,
        fingerprint: Callable[[dict[str, Any] | None], dict[str, Any]],
        structured: dict[str, Any] | None,
    ) -> dict[str, Any] | None:
        """The stored reply to a request, asked for with or without its response format."""
        if self.store is None:
            return None
        for choice in [structured, None] if structured is not None else [None]:
            stored = self.store.get(request_key(fingerprint(choice)))
            if stored is not None and isinstance(stored.get("content"), str):
                return stored
        return None

    def stored_reply(
        self,
        messages: Sequence[dict[str, str]],
        *,
        temperature: float | None = 0.0,
        max_tokens: int | None = None,
        structured: dict[str, Any] | None = None,
        trial: int = 0,
        protocol: str = "",
    ) -> str | None:
        """The text ``complete`` would reuse for this request, without calling anything:
        ``messages`` hold ``NONCE_PLACEHOLDER`` where a call would put its nonce."""
        keyed = list(messages)
        stored = self._stored(
            lambda choice: self._request(keyed, temperature, max_tokens, choice, protocol, trial),
            structured,
        )
        return None if stored is None else str(stored["content"])

    async def _call(
        self,
        messages: Sequence[dict[str, str]],
        temperature: float | None,
        max_tokens: int | None,
        response_format: dict[str, Any] | None,
        label: str,
    ) -> Reply:
        transport = self.transport
        policy = self.policy
        loop = asyncio.get_running_loop()
        deadline = loop.time() + policy.deadline
        who = label or f"call to {self.spec.model}"
        attempt = 0
        while True:
            attempt += 1
            budget = max(min(deadline - loop.time(), policy.attempt_timeout), 0.001)
            try:
                reply = await asyncio.wait_for(
                    transport.send(
                        messages,
                        temperature=temperature,
                        max_tokens=max_tokens,
                        response_format=response_format,
                        timeout=policy.attempt_timeout,
                    ),
                    budget,
                )
            except (asyncio.CancelledError, NotGradedError):
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


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _recorded_reply(text: str, stored: dict[str, Any]) -> Reply:
    """A stored reply, with the tokens and cost of the call that recorded it: what an answer
    took is part of the answer (a replayed agent's answer keeps its usage and cost)."""
    usage = stored.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    cost = stored.get("cost_usd")
    return Reply(
        text,
        cached=True,
        prompt_tokens=_count(usage.get("prompt_tokens")),
        completion_tokens=_count(usage.get("completion_tokens")),
        cost_usd=finite_number(cost),
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
    """One client per model and endpoint for the whole run, sharing its policy, store and
    transport choice."""

    def __init__(
        self,
        policy: RetryPolicy,
        store: ReplayStore | None,
        on_rate_limit: Callable[[], None] | None = None,
        on_success: Callable[[], None] | None = None,
        transport: str = "auto",
        budget: Budget | None = None,
    ) -> None:
        self.policy = policy
        self.store = store
        self.budget = budget
        self._on_rate_limit = on_rate_limit
        self._on_success = on_success
        self.transport = transport
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
                    transport=self.transport,
                    budget=self.budget,
                )
            return client
