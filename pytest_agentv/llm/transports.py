"""The two ways a chat request reaches a model, each sending it once (retries are ``retry.py``'s).

``openai/<model>`` and ``azure/<deployment>`` models — which covers every OpenAI-compatible server
reached as ``openai/<model>`` with an API base (vLLM, Ollama, LM Studio, OpenRouter, Groq,
Together...) — go through the lean transport: chat completions through aiohttp (``http.py``), with
prices and capabilities read from litellm's price table (``prices.py``) without importing litellm.
Every other model goes through litellm, imported the first time such a model is called (offline:
its remote price list is switched off), as does every model when the transport is forced to
``litellm`` (``--agentv-judge-transport``).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Literal, Protocol, get_args
from urllib.parse import quote

from ..errors import NotGradedError
from ..jsonlines import json_decoder
from ..redaction import register_secret
from . import http, prices
from .limits import observed
from .reply import Reply
from .retry import TransportError, error_message

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
    """Which model to call and where, and what its entry (a target) says of it there.
    Credentials are never part of reports or store keys."""

    model: str
    api_base: str | None = None
    api_key: str | None = field(default=None, repr=False)
    api_version: str | None = None
    #: The structured-output dialect (``structured.py``); None: the run's.
    structured: str | None = None
    #: What the model costs at this endpoint; None: the run's price for it, if any.
    price: prices.Price | None = None
    #: The reply bound of a judge's requests; None: the reply schema's.
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.api_key:
            register_secret(self.api_key)


class Transport(Protocol):
    """Sends one chat request to one model, once: retries and deadlines are the client's.

    ``fields`` are more request fields (a structured-output dialect's, ``structured.py``). The
    reply's text is its message's content, else the arguments of its first tool call (the
    ``tools`` dialect). Raises ``NotGradedError`` for a request that cannot be made at all (no
    credentials), anything else for a failed attempt (see ``classify``).
    """

    async def ready(self) -> None:
        """One-off set-up (a slow import), in a thread, before an attempt's clock starts."""

    async def send(
        self,
        messages: Sequence[dict[str, str]],
        *,
        temperature: float | None,
        max_tokens: int | None,
        fields: Mapping[str, Any],
        timeout: float,
    ) -> Reply: ...


#: What a reasoning model may spend on its hidden reasoning beyond a request's reply bound:
#: ``max_completion_tokens`` counts both.
REASONING_TOKENS = 8192


def _field(value: Any, key: str) -> Any:
    """A key of a reply's JSON (a dict) or an attribute of litellm's reply objects."""
    return value.get(key) if isinstance(value, dict) else getattr(value, key, None)


def reply_text(message: Any) -> str:
    """A reply message's text: its content, else its first tool call's arguments."""
    content = _field(message, "content")
    if isinstance(content, str) and content:
        return content
    calls = _field(message, "tool_calls")
    if isinstance(calls, list) and calls:
        arguments = _field(_field(calls[0], "function"), "arguments")
        if isinstance(arguments, str):
            return arguments
    return ""


class LitellmTransport:
    """Any provider litellm knows; litellm is imported at the first call.

    The rate-limit headers of a failed call are read (litellm's exceptions carry them as
    ``litellm_response_headers``); those of a reply are not: litellm gives them only through
    private attributes (``_hidden_params``, ``_response_headers``). Such a model is paced by
    ``--agentv-rpm``/``--agentv-tpm`` and by what its 429s say."""

    def __init__(self, spec: ModelSpec) -> None:
        self.spec = spec
        self._reasoning: bool | None = None

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

    async def ready(self) -> None:
        if _litellm is None:
            await asyncio.to_thread(litellm_module)

    async def send(
        self,
        messages: Sequence[dict[str, str]],
        *,
        temperature: float | None,
        max_tokens: int | None,
        fields: Mapping[str, Any],
        timeout: float,
    ) -> Reply:
        litellm = litellm_module()
        kwargs = self._kwargs()
        kwargs.update(messages=list(messages), num_retries=0, max_retries=0, drop_params=True)
        if temperature is not None:
            kwargs["temperature"] = temperature
        if max_tokens is not None:
            if self._reasoning is None:
                self._reasoning = prices.supports(self.spec.model, "supports_reasoning")
            kwargs["max_tokens"] = max_tokens + (REASONING_TOKENS if self._reasoning else 0)
        kwargs.update(fields)
        # litellm caches HTTP clients by timeout: pass it a constant one, so connections are
        # reused; the client enforces what is left of the deadline.
        response = await litellm.acompletion(**kwargs, timeout=timeout)
        choice = response.choices[0]
        usage = getattr(response, "usage", None)
        return Reply(
            text=reply_text(choice.message),
            cached=False,
            prompt_tokens=getattr(usage, "prompt_tokens", None),
            completion_tokens=getattr(usage, "completion_tokens", None),
            truncated=getattr(choice, "finish_reason", None) == "length",
        )


def _env(*names: str) -> str | None:
    for name in names:
        value = os.environ.get(name)
        if value:
            return value
    return None


def at_provider(spec: ModelSpec) -> bool:
    """Whether the model is called at its provider's own endpoint, where a price list for its
    name holds: not at an API base of the target's or the environment's (a local server)."""
    provider, slash, _ = spec.model.partition("/")
    if provider == "azure":
        return True  # an Azure resource is always Azure's, priced per deployment's model
    if provider == "openai" or not slash:
        base = spec.api_base or _env("OPENAI_BASE_URL", "OPENAI_API_BASE")
        return base is None or base.rstrip("/") == OPENAI_API_BASE
    return spec.api_base is None


def azure_api_version(spec: ModelSpec) -> str:
    """The spec's, else ``AZURE_API_VERSION``, else ours: the same on both transports."""
    return spec.api_version or _env("AZURE_API_VERSION") or AZURE_API_VERSION


@dataclass(frozen=True)
class _Endpoint:
    route: http.Route
    model: str


class LeanTransport:
    """OpenAI-compatible chat completions over ``http.py``, for ``openai/`` and ``azure/`` models.

    Endpoints and credentials follow litellm's conventions. ``openai/<model>``: the API base,
    else ``OPENAI_BASE_URL``, ``OPENAI_API_BASE``, else api.openai.com; the key, else
    ``OPENAI_API_KEY`` (optional when an API base is given); ``OPENAI_ORGANIZATION``.
    ``azure/<deployment>``: the API base, else ``AZURE_API_BASE`` or ``AZURE_OPENAI_ENDPOINT``;
    ``azure_api_version``; the key, else ``AZURE_OPENAI_API_KEY`` or ``AZURE_API_KEY``, else a
    bearer token from ``AZURE_AD_TOKEN`` or ``AZURE_OPENAI_AD_TOKEN``.

    Reasoning models (per the price table) get ``max_completion_tokens`` and no temperature
    other than 1, as litellm sends them with ``drop_params``.
    """

    def __init__(self, spec: ModelSpec, connections: int = http.CONNECTIONS) -> None:
        self.spec = spec
        self.connections = connections
        self._endpoint: _Endpoint | None = None
        self._reasoning = False

    async def ready(self) -> None:
        endpoint = self._endpoint
        if endpoint is None:
            try:
                endpoint = self._endpoint = self._resolve()
            except NotGradedError:
                return  # raised again by the attempt, which reports it
        if not http.ready(endpoint.route):
            await asyncio.to_thread(http.prepare, endpoint.route)

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
        try:
            route = http.Route.to(url, headers)
        except ValueError as exc:
            raise NotGradedError(f"{spec.model}: {exc}") from None
        return _Endpoint(route, name)

    async def send(
        self,
        messages: Sequence[dict[str, str]],
        *,
        temperature: float | None,
        max_tokens: int | None,
        fields: Mapping[str, Any],
        timeout: float,
    ) -> Reply:
        endpoint = self._endpoint
        if endpoint is None:
            endpoint = self._endpoint = self._resolve()
        body: dict[str, Any] = {"model": endpoint.model, "messages": list(messages)}
        if temperature is not None and not (self._reasoning and temperature != 1):
            body["temperature"] = temperature
        if max_tokens is not None:
            if self._reasoning:
                body["max_completion_tokens"] = max_tokens + REASONING_TOKENS
            else:
                body["max_tokens"] = max_tokens
        body.update(fields)
        content = json.dumps(body, ensure_ascii=False).encode("utf-8")
        response = await http.post(endpoint.route, content, timeout, self.connections)
        status = response.status
        if not 200 <= status < 300:
            raise TransportError(
                f"HTTP {status}: {error_message(response.body.decode('utf-8', 'replace'))}",
                status,
                response.headers,
            )
        return self._reply(response.body, status, response.headers)

    def _reply(self, content: bytes, status: int, headers: Mapping[str, str]) -> Reply:
        try:
            data = json_decoder(nan=True).decode(content.decode("utf-8"))
            choice = data["choices"][0]
            text = reply_text(choice["message"])
            usage = data.get("usage")
            usage = usage if isinstance(usage, dict) else {}
        except (ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError):
            raise TransportError(
                f"HTTP {status} with a body that is not a chat completion: "
                f"{content[:200].decode('utf-8', 'replace')}"
            ) from None
        return Reply(
            text=text,
            cached=False,
            prompt_tokens=usage.get("prompt_tokens"),
            completion_tokens=usage.get("completion_tokens"),
            limits=observed(headers),
            truncated=choice.get("finish_reason") == "length",
        )
