"""A model client: the replay store in front of the model's endpoint (``endpoint.py``), and the
run's clients, one per model and endpoint."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from ..errors import ReplayMissError
from ..paths import display_path
from ..settings import Settings
from .budget import Budget, RunLedger
from .endpoint import Endpoint
from .http import CONNECTIONS
from .limits import UNLIMITED, CallLimits, Limits
from .prices import Price
from .replay import (
    NONCE_PLACEHOLDER,
    ReplayStore,
    keeps_meaning,
    recorded_reply,
    request_key,
    stored_reply,
)
from .reply import Reply
from .retry import Attempts, RetryPolicy
from .structured import StructuredOutput
from .transports import ModelSpec
from .usage import current_usage

T = TypeVar("T")


class ReplyError(ValueError):
    """A reply that does not answer its request's contract; ``reply`` is its text, and
    ``cut_off`` says it stopped at its length limit (ask again afresh, not for a correction)."""

    reply: str = ""
    cut_off: bool = False


class LlmClient:
    """Calls one model, with the replay store in front of its endpoint (``endpoint.py``: the
    retry policy, the run's budget and limits, the transport and the structured-output
    dialect)."""

    def __init__(
        self,
        spec: ModelSpec,
        policy: RetryPolicy | None = None,
        store: ReplayStore | None = None,
        limits: Limits | None = None,
        transport: str = "auto",
        budget: Budget | None = None,
        connections: int = CONNECTIONS,
        structured: str = "auto",
        prices: Mapping[str, Price] | None = None,
    ) -> None:
        self.spec = spec
        self.store = store
        self.endpoint = Endpoint(
            spec,
            policy or RetryPolicy(),
            limits if limits is not None else CallLimits(UNLIMITED),
            budget,
            transport,
            connections,
            StructuredOutput(spec.structured or structured),
            prices or {},
        )

    @property
    def model(self) -> str:
        return self.spec.model

    @property
    def price(self) -> Price | None:
        return self.endpoint.price

    @property
    def output(self) -> StructuredOutput:
        return self.endpoint.output

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
        attempts: Attempts | None = None,
    ) -> tuple[T, Reply]:
        """Return ``(accept(text), reply)``; a reply ``accept`` rejects is never stored.

        ``accept`` raises ``ReplyError`` (which then carries the reply's text) for a reply
        outside its contract; so does a reply to a ``structured`` request that was cut off at
        its length limit. A call that corrects such a reply passes the first attempt's messages
        as ``replay_as``: its accepted reply is stored as the answer to that request, so a
        replayed run gets it at once. ``structured`` is an OpenAI ``json_schema`` response
        format, sent in the endpoint's dialect (``structured.py``). A reply stored with or
        without it is reused, so replaying imports neither litellm nor the HTTP client. Store
        keys do not depend on the transport or the dialect. The per-call ``nonce`` never reaches
        the store: keys and stored replies hold a placeholder in its place. ``attempts`` counts
        the requests sent for one answer across calls.
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
        reply, asked = await self.endpoint.send(
            messages, temperature, max_tokens, structured, label, attempts or Attempts()
        )
        if reply.truncated and structured is not None:
            cut = ReplyError(
                f"the reply was cut off at its length limit of {max_tokens} tokens"
                if max_tokens
                else "the reply was cut off at the model's length limit"
            )
            cut.reply, cut.cut_off = reply.text, True
            raise cut
        value = judged(reply.text)
        if store is not None and keeps_meaning(reply.text, value, accept):
            request = fingerprint(structured if asked else None)
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


#: The judge is a model client like any other.
JudgeClient = LlmClient


class ModelClients:
    """One client per model and endpoint for the whole run, sharing its policy, store, limits,
    budget and transport choice."""

    @classmethod
    def for_run(
        cls, settings: Settings, rootdir: Path, ledger: RunLedger | None, limits: Limits
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
            structured=settings.judge_structured,
            prices={
                model: Price.per_million(prompt, completion)
                for model, prompt, completion in settings.model_prices
            },
        )

    def __init__(
        self,
        policy: RetryPolicy,
        store: ReplayStore | None,
        limits: Limits | None = None,
        transport: str = "auto",
        budget: Budget | None = None,
        connections: int = CONNECTIONS,
        structured: str = "auto",
        prices: Mapping[str, Price] | None = None,
    ) -> None:
        self.policy = policy
        self.connections = connections
        self.structured = structured
        self.prices = dict(prices or {})
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
                    structured=self.structured,
                    prices=self.prices,
                )
            return client

    def notes(self) -> list[str]:
        """What the run learnt about its endpoints (a structured-output dialect refused)."""
        with self._lock:
            return [note for client in self._clients.values() for note in client.output.notes]
