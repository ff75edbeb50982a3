"""One counter of model calls, tokens and cost: for a case, an ``assert_judged`` call, a trial, and
for the estimate of calls a run would make (``--agentv-estimate``).

Every request sent is a call: one answered counts its reply's tokens and cost, one refused (an
error status) costs nothing, one that got no answer in time has an unknown cost unless its model
is free. A reply reused from the store counts as reused, with what its recording cost; a planned
call (the estimate) counts the prompt tokens of its request as it would be sent (about four
characters a token, plus a few per message) and ``REPLY_TOKENS`` for its reply, at its model's
price, or as reused when the store holds its reply already. A call whose cost is unknown (a
model without a known price, or a reply whose usage is not counts of tokens) makes the total
cost unknown: never zero, never negative.
"""

from __future__ import annotations

import contextvars
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..results import UNKNOWN_COST, UsageRow, usd

if TYPE_CHECKING:
    from .prices import Price
    from .reply import Reply

#: The estimate's allowance for each reply (a call's ``max_tokens`` when that is lower).
REPLY_TOKENS = 256
CHARS_PER_TOKEN = 4
#: What a chat message costs beyond its text (role and separators).
MESSAGE_TOKENS = 4


def prompt_tokens(messages: Iterable[Mapping[str, object]]) -> int:
    """The estimated prompt tokens of a chat request."""
    return sum(
        math.ceil(len(str(message.get("content") or "")) / CHARS_PER_TOKEN) + MESSAGE_TOKENS
        for message in messages
    )


def unknown_answer() -> str:
    """Stands in for an answer the estimate cannot know (a CLI agent's, a model's): one reply
    allowance of text."""
    return "x" * (REPLY_TOKENS * CHARS_PER_TOKEN)


@dataclass(frozen=True)
class PlannedCall:
    """One model call the estimate expects a run to ask for."""

    model: str
    prompt_tokens: int
    #: Its reply is in the store: the run would reuse it, for free.
    stored: bool
    max_tokens: int | None = None
    #: The model's price at its endpoint (``LlmClient.price``); None: unknown.
    price: Price | None = None

    @property
    def reply_tokens(self) -> int:
        return min(REPLY_TOKENS, self.max_tokens) if self.max_tokens else REPLY_TOKENS


@dataclass
class Usage:
    """Model calls made (or planned), replies reused, their tokens and cost."""

    calls: int = 0
    reused: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    #: The cost of the calls whose price is known.
    cost_usd: float = 0.0
    #: What the replies reused from the store cost when they were recorded: trials count it
    #: against ``cost_limit_usd``, so a replayed run stops where the recording stopped.
    replayed_cost_usd: float = 0.0
    #: Calls whose cost is unknown (a model without a known price, usage that is not counts of
    #: tokens): while there is one, the total cost is unknown.
    unpriced_calls: int = 0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def spent_usd(self) -> float:
        """Model spend as recorded: this run's calls plus what reused replies cost."""
        return self.cost_usd + self.replayed_cost_usd

    def _call(self, prompt: int | None, completion: int | None, cost_usd: float | None) -> None:
        self.calls += 1
        self.prompt_tokens += prompt or 0
        self.completion_tokens += completion or 0
        if cost_usd is None:
            self.unpriced_calls += 1
        else:
            self.cost_usd += cost_usd

    def charge(self, reply: Reply) -> None:
        """Count one call that was made (not a reply reused from the store)."""
        self._call(reply.prompt_tokens, reply.completion_tokens, reply.cost_usd)

    def unanswered(self, cost_usd: float | None) -> None:
        """Count one request sent that got no reply (refused, or not in time)."""
        self._call(0, 0, cost_usd)

    def reuse(self, reply: Reply) -> None:
        """Count a reply reused from the store, at what it cost when it was recorded."""
        self.reused += 1
        self.replayed_cost_usd += reply.cost_usd or 0.0

    def plan(self, calls: Iterable[PlannedCall]) -> None:
        """Count calls a run would make (``--agentv-estimate``): a stored reply is reused."""
        for call in calls:
            if call.stored:
                self.reused += 1
                continue
            price = call.price
            cost = price.cost(call.prompt_tokens, call.reply_tokens) if price else None
            self._call(call.prompt_tokens, call.reply_tokens, cost)

    def merge(self, other: Usage) -> None:
        self.calls += other.calls
        self.reused += other.reused
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cost_usd += other.cost_usd
        self.replayed_cost_usd += other.replayed_cost_usd
        self.unpriced_calls += other.unpriced_calls

    @property
    def cost(self) -> str:
        """The cost as reports show it; unknown while a call's cost is unknown."""
        if self.unpriced_calls:
            return f"unknown ({self.unpriced_calls} calls {UNKNOWN_COST})"
        return usd(self.cost_usd)

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


#: The usage record of the case whose work is running; set per case task.
current_usage: contextvars.ContextVar[Usage | None] = contextvars.ContextVar(
    "agentv_usage", default=None
)
