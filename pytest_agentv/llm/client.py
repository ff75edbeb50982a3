"""A model client: the replay store in front, the run's budget consulted before each call, the
retry policy around it, and the usage of the case it works for counted."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from ..errors import ReplayMissError
from ..paths import display_path
from ..settings import Settings
from .budget import Budget, Ledger
from .http import CONNECTIONS
from .limits import UNLIMITED, CallLimits, Grant, Limits
from .replay import (
    NONCE_PLACEHOLDER,
    ReplayStore,
    keeps_meaning,
    recorded_reply,
    request_key,
    stored_reply,
)
from .reply import Reply
from .retry import RetryPolicy, with_retries
from .transports import (
    LeanTransport,
    LitellmTransport,
    ModelSpec,
    Transport,
    uses_lean_transport,
)
from .usage import REPLY_TOKENS, current_usage, prompt_tokens

T = TypeVar("T")


class ReplyError(ValueError):
    """A reply that does not answer its request's contract; ``reply`` is its text."""

    reply: str = ""


class LlmClient:
    """Calls one model under the retry policy, with the replay store in front and the run's
    budget consulted before each call; the transport (``uses_lean_transport``) is chosen when
    the first call must be made."""

    def __init__(
        self,
        spec: ModelSpec,
        policy: RetryPolicy | None = None,
        store: ReplayStore | None = None,
        limits: Limits | None = None,
        transport: str = "auto",
        budget: Budget | None = None,
        connections: int = CONNECTIONS,
    ) -> None:
        self.spec = spec
        self.connections = connections
        self.policy = policy or RetryPolicy()
        self.store = store
        self.budget = budget
        self.limits: Limits = limits if limits is not None else CallLimits(UNLIMITED)
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
            self._transport = (
                LeanTransport(self.spec, self.connections) if lean else LitellmTransport(self.spec)
            )
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

        keyed: list[Any] = []  # made when a store asks: without one, no key is needed

        def fingerprint(response_format: dict[str, Any] | None) -> dict[str, Any]:
            if not keyed:
                keyed.append(unnonced(list(replay_as or messages)))
            return self._request(
                keyed[0], temperature, max_tokens, unnonced(response_format), protocol, trial
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
                reply = recorded_reply(text, stored)
                if usage is not None:
                    usage.reuse(reply)
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
        reply = await self._call(messages, temperature, max_tokens, response_format, label)
        if usage is not None:
            usage.charge(reply)
        value = judged(reply.text)
        if store is not None and keeps_meaning(reply.text, value, accept):
            request = fingerprint(response_format)
            store.put(request_key(request), request, stored_reply(reply, nonce))
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

        async def send(timeout: float, grant: Grant) -> Reply:
            if self.budget is not None:
                # Once the slot is held: a call that waited for one sees what those before spent.
                self.budget.check(self.spec.model)
            reply = await transport.send(
                messages,
                temperature=temperature,
                max_tokens=max_tokens,
                response_format=response_format,
                timeout=timeout,
            )
            if reply.prompt_tokens is not None and reply.completion_tokens is not None:
                grant.used = reply.prompt_tokens + reply.completion_tokens
            grant.observed = reply.limits
            if self.budget is not None:  # before the slot is free: the next call sees it
                self.budget.charge(self.spec.model, reply)
            return reply

        await transport.ready()
        return await with_retries(
            send,
            self.policy,
            label or f"call to {self.spec.model}",
            limits=self.limits,
            model=self.spec.model,
            estimate=prompt_tokens(messages) + (max_tokens or REPLY_TOKENS),
        )


#: The judge is a model client like any other.
JudgeClient = LlmClient


class ModelClients:
    """One client per model and endpoint for the whole run, sharing its policy, store, limits,
    budget and transport choice."""

    @classmethod
    def for_run(
        cls, settings: Settings, rootdir: Path, ledger: Ledger | None, limits: Limits
    ) -> ModelClients:
        """The run's clients, from its options: the replay store (``--agentv-cache-mode``),
        the retry policy, the budget (``--agentv-budget-usd``, on the run's ``ledger``)."""
        store = (
            ReplayStore(
                settings.cache_dir,
                settings.cache_mode,
                display_path(settings.cache_dir, rootdir),
            )
            if settings.cache_mode != "off"
            else None
        )
        policy = RetryPolicy(
            retries=settings.judge_retries,
            deadline=settings.judge_timeout,
            attempt_timeout=settings.judge_attempt_timeout,
            backoff=settings.judge_backoff,
        )
        budget = (
            Budget(settings.budget_usd, ledger)
            if settings.budget_usd is not None and ledger is not None
            else None
        )
        return cls(
            policy,
            store,
            limits,
            transport=settings.judge_transport,
            budget=budget,
            connections=settings.concurrency,
        )

    def __init__(
        self,
        policy: RetryPolicy,
        store: ReplayStore | None,
        limits: Limits | None = None,
        transport: str = "auto",
        budget: Budget | None = None,
        connections: int = CONNECTIONS,
    ) -> None:
        self.policy = policy
        self.connections = connections
        self.store = store
        self.budget = budget
        self.limits = limits
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
                    limits=self.limits,
                    transport=self.transport,
                    budget=self.budget,
                    connections=self.connections,
                )
            return client
