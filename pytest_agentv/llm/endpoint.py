"""One model at one endpoint, as the run sends to it: the transport (chosen at the first call,
``uses_lean_transport``), the structured-output dialect it takes (``structured.py``), what it
costs there, the retry policy, and every request sent counted — answered, refused or timed out —
in the case's usage and the run's budget.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..errors import NotGradedError
from .budget import Budget
from .limits import Grant, Limits
from .prices import Price
from .prices import price_for as listed_price
from .reply import Reply
from .retry import Attempts, RetryPolicy, classify, with_retries
from .structured import StructuredOutput, refuses, request_fields
from .transports import (
    LeanTransport,
    LitellmTransport,
    ModelSpec,
    Transport,
    at_provider,
    uses_lean_transport,
)
from .usage import REPLY_TOKENS, current_usage, prompt_tokens

_UNSET: Any = object()


class _FormatRefused(NotGradedError):
    """The server refused the request's structured-output dialect: never retried as an outage."""

    def __init__(self, dialect: str, message: str) -> None:
        super().__init__(message)
        self.dialect = dialect
        self.message = message


class Endpoint:
    """Sends one model's requests where its spec says."""

    def __init__(
        self,
        spec: ModelSpec,
        policy: RetryPolicy,
        limits: Limits,
        budget: Budget | None,
        transport: str,
        connections: int,
        output: StructuredOutput,
        prices: Mapping[str, Price],
    ) -> None:
        self.spec = spec
        self.policy = policy
        self.limits = limits
        self.budget = budget
        self.transport_choice = transport
        self.connections = connections
        self.output = output
        self._prices = prices
        self._price: Price | None = _UNSET
        self._transport: Transport | None = None

    @property
    def price(self) -> Price | None:
        """What the model costs here: its entry's price (a target's), else the run's
        ``--agentv-model-prices``, else litellm's price table where the model is called at its
        provider's own endpoint (a hosted model's name at another API base says nothing about
        what it costs there); None: unknown. Read at the first call, never on a replayed run."""
        if self._price is _UNSET:
            spec = self.spec
            self._price = spec.price or self._prices.get(spec.model)
            if self._price is None and at_provider(spec):
                self._price = listed_price(spec.model)
        return self._price

    @property
    def transport(self) -> Transport:
        if self._transport is None:
            lean = uses_lean_transport(self.spec.model, self.transport_choice)
            self._transport = (
                LeanTransport(self.spec, self.connections) if lean else LitellmTransport(self.spec)
            )
        return self._transport

    @property
    def where(self) -> str:
        return self.spec.model + (f" at {self.spec.api_base}" if self.spec.api_base else "")

    async def send(
        self,
        messages: Sequence[dict[str, str]],
        temperature: float | None,
        max_tokens: int | None,
        structured: dict[str, Any] | None,
        label: str,
        attempts: Attempts,
    ) -> tuple[Reply, bool]:
        """The reply, and whether its request asked for ``structured`` (an OpenAI
        ``json_schema`` response format) in some dialect. A dialect the server refuses is not
        retried: under ``auto`` the next one is sent instead, else the call is not graded."""
        transport = self.transport
        who = label or f"call to {self.spec.model}"
        await transport.ready()
        while True:
            dialect = self.output.dialect if structured is not None else "off"
            try:
                reply = await with_retries(
                    self._attempt(messages, temperature, max_tokens, structured, dialect),
                    self.policy,
                    who,
                    limits=self.limits,
                    model=self.spec.model,
                    estimate=prompt_tokens(messages) + (max_tokens or REPLY_TOKENS),
                    attempts=attempts,
                )
            except _FormatRefused as refused:
                if self.output.fall_back(refused.dialect, refused.message, self.where):
                    continue
                raise NotGradedError(
                    f"{who}: the server refuses structured output as {refused.dialect} "
                    f"({refused.message}); choose another with --agentv-judge-structured (or "
                    "the judge target's structured): json_object, tools, off, or auto"
                ) from None
            return reply, dialect != "off"

    def _attempt(
        self,
        messages: Sequence[dict[str, str]],
        temperature: float | None,
        max_tokens: int | None,
        structured: dict[str, Any] | None,
        dialect: str,
    ) -> Any:
        """One request of ``dialect``, for ``with_retries``."""
        fields = request_fields(dialect, structured) if structured is not None else {}

        async def attempt(timeout: float, grant: Grant) -> Reply:
            held = 0.0
            if self.budget is not None:
                # Once the slot is held: a call that waited for one sees what those before spent.
                held = await self.budget.check(self.spec.model, self.price, grant.estimate)
            try:
                reply = await self.transport.send(
                    messages,
                    temperature=temperature,
                    max_tokens=max_tokens,
                    fields=fields,
                    timeout=timeout,
                )
            except NotGradedError:
                if self.budget is not None:
                    self.budget.cancel(held)
                raise
            except BaseException as exc:  # a timeout cancels the attempt: it was sent too
                status = getattr(exc, "status_code", None)
                self._count(None, held, answered=isinstance(status, int))
                if refuses(dialect, status, str(exc)):
                    raise _FormatRefused(dialect, classify(exc).message) from None
                raise
            grant.observed = reply.limits
            price = self.price
            prompt, completion = reply.prompt_tokens, reply.completion_tokens
            if prompt is not None and completion is not None:
                grant.used = prompt + completion
                if price is not None:
                    reply = replace(reply, cost_usd=price.cost(prompt, completion))
            self._count(reply, held)  # before the slot is free: the next call sees it
            return reply

        return attempt

    def _count(self, reply: Reply | None, held: float, *, answered: bool = True) -> None:
        """Count one request sent, in place of the ``held`` its budget check held: its reply, or
        none (an error status costs nothing; a request that got no answer in time may have been
        worked on: its cost is unknown unless the model is free)."""
        usage = current_usage.get()
        if reply is not None:
            cost = reply.cost_usd
            if usage is not None:
                usage.charge(reply)
        else:
            price = self.price
            cost = 0.0 if answered or (price is not None and price.free) else None
            if usage is not None:
                usage.unanswered(cost)
        if self.budget is not None:
            self.budget.charge(cost, held)
