"""The run's spend ledger, consulted before every model call, and the pre-run estimate.

``--agentv-budget-usd X``: before a model call is made (a reply reused from the store is free and
never asks), ``Budget.check`` refuses it once the run has spent X, or when the model has no known
price (its calls could not be counted against X). A call's cost is known when it returns, and is
then added. Calls already in flight when X is reached finish and are counted, so a run ends above
X by at most the cost of the calls that were in flight.

Every process of a run shares one ledger: a file the controller creates, of one line per paid
call (its cost) or refused call (``refused``). Each line is one ``O_APPEND`` write, so lines from
pytest-xdist workers never interleave, and each process reads only what was appended since it
last looked.

The estimate (``--agentv-estimate``) counts the calls a run would make and their tokens: the
prompt tokens of each request as it would be sent (about four characters a token, plus a few per
message), and ``REPLY_TOKENS`` for each reply. A request whose reply is in the store is counted as
free, as the run would reuse it.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from . import prices
from .errors import NotGradedError
from .results import usd

#: The estimate's allowance for each reply (a call's ``max_tokens`` when that is lower).
REPLY_TOKENS = 256
CHARS_PER_TOKEN = 4
#: What a chat message costs beyond its text (role and separators).
MESSAGE_TOKENS = 4
_REFUSED = b"refused"


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


class Ledger:
    """The run's spend, shared by its processes through an append-only file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._spent = 0.0
        self._refused = 0
        self._lock = threading.Lock()

    def _append(self, line: bytes) -> None:
        handle = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(handle, line + b"\n")
        finally:
            os.close(handle)

    def _catch_up(self) -> None:
        try:
            with self.path.open("rb") as stream:
                stream.seek(self._offset)
                data = stream.read()
        except FileNotFoundError:
            return
        end = data.rfind(b"\n") + 1
        for line in data[:end].splitlines():
            if line == _REFUSED:
                self._refused += 1
            elif line:
                self._spent += float(line)
        self._offset += end

    def add(self, cost_usd: float) -> None:
        with self._lock:
            self._append(repr(float(cost_usd)).encode())

    def refuse(self) -> None:
        with self._lock:
            self._append(_REFUSED)

    def totals(self) -> tuple[float, int]:
        """What the run has spent so far, and how many calls it refused."""
        with self._lock:
            self._catch_up()
            return self._spent, self._refused


class Budget:
    """``--agentv-budget-usd``: the most the run may spend on model calls."""

    def __init__(self, limit_usd: float, ledger: Ledger) -> None:
        self.limit_usd = limit_usd
        self.ledger = ledger

    def check(self, model: str) -> None:
        """Raise ``NotGradedError`` (the case is not graded) instead of starting this call."""
        if prices.price_for(model) is None:
            self.ledger.refuse()
            raise NotGradedError(
                f"model '{model}' has no known price, so its calls cannot be counted against "
                f"the run's budget of {usd(self.limit_usd)} (--agentv-budget-usd): not called"
            )
        spent, _ = self.ledger.totals()
        if spent >= self.limit_usd:
            self.ledger.refuse()
            raise NotGradedError(
                f"the run's budget is spent: {usd(spent)} of {usd(self.limit_usd)} "
                "(--agentv-budget-usd); no more model calls are started"
            )

    def charge(
        self, model: str, cost_usd: float | None, prompt_tokens: int, completion_tokens: int
    ) -> None:
        """Count a call that was made; its cost from the reply, else from the price table."""
        if cost_usd is None:
            price = prices.price_for(model)
            cost_usd = price.cost(prompt_tokens, completion_tokens) if price else 0.0
        self.ledger.add(cost_usd)


@dataclass(frozen=True)
class PlannedCall:
    """One model call the estimate expects a run to ask for."""

    model: str
    prompt_tokens: int
    #: Its reply is in the store: the run would reuse it, for free.
    stored: bool
    max_tokens: int | None = None

    @property
    def reply_tokens(self) -> int:
        return min(REPLY_TOKENS, self.max_tokens) if self.max_tokens else REPLY_TOKENS


@dataclass
class Estimate:
    """What a set of cases would ask of models: calls made, replies reused, tokens, cost."""

    calls: int = 0
    stored: int = 0
    prompt_tokens: int = 0
    reply_tokens: int = 0
    cost_usd: float = 0.0
    #: Calls to models without a known price: their cost is unknown.
    unpriced: int = 0

    def add(self, calls: Iterable[PlannedCall]) -> None:
        for call in calls:
            if call.stored:
                self.stored += 1
                continue
            self.calls += 1
            self.prompt_tokens += call.prompt_tokens
            self.reply_tokens += call.reply_tokens
            price = prices.price_for(call.model)
            if price is None:
                self.unpriced += 1
            else:
                self.cost_usd += price.cost(call.prompt_tokens, call.reply_tokens)

    def merge(self, other: Estimate) -> None:
        self.calls += other.calls
        self.stored += other.stored
        self.prompt_tokens += other.prompt_tokens
        self.reply_tokens += other.reply_tokens
        self.cost_usd += other.cost_usd
        self.unpriced += other.unpriced

    @property
    def cost(self) -> str:
        if self.unpriced:
            return f"unknown ({self.unpriced} calls to models without a known price)"
        return usd(self.cost_usd)


def estimate_lines(
    by_file: Mapping[str, Estimate], notes: Sequence[str], budget_usd: float | None
) -> list[str]:
    """The estimate as the terminal shows it: one row per file that would ask a model, the
    total, then notes."""
    total = Estimate()
    for estimate in by_file.values():
        total.merge(estimate)
    asking = {name: e for name, e in by_file.items() if e.calls or e.stored}
    header = ("", "calls", "from store", "prompt tokens", "reply tokens", "cost")
    rows = [header]
    for name, estimate in [*asking.items(), ("total", total)]:
        rows.append(
            (
                name,
                str(estimate.calls),
                str(estimate.stored),
                f"{estimate.prompt_tokens:,}",
                f"{estimate.reply_tokens:,}",
                estimate.cost,
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = [
        "  ".join(
            cell.ljust(widths[i]) if i in (0, 5) else cell.rjust(widths[i])
            for i, cell in enumerate(row)
        ).rstrip()
        for row in rows
    ]
    quiet = len(by_file) - len(asking)
    if quiet:
        lines.append(f"{quiet} more eval file(s) ask no model (code judges and checks only)")
    lines.append(
        f"no model was called; replies are counted as {REPLY_TOKENS} tokens each (or the call's "
        "max_tokens),"
    )
    lines.append("prompts as about 4 characters a token; replies already in the store are free")
    if budget_usd is not None and not total.unpriced:
        fits = "within" if total.cost_usd < budget_usd else "over"
        lines.append(f"budget: {usd(budget_usd)} (--agentv-budget-usd): the estimate is {fits} it")
    lines.extend(notes)
    return lines
