"""The run's spend ledger, consulted before every model call.

``--agentv-budget-usd X``: before a model call is made (a reply reused from the store is free
and never asks), ``Budget.check`` refuses it once the run has spent X, or when the model has no
known price at its endpoint (its calls could not be counted against X). Every request sent is
added when it ends, at its cost (``usage.py``: a refused one costs nothing, one abandoned at its
timeout is of unknown cost unless the model is free). Calls already in flight when X is reached
finish and are counted, so a run ends above X by at most the cost of the calls that were in
flight. A call whose reply does not report its usage as counts of tokens has an unknown cost,
which cannot be counted against X either: once there is one, no more calls are started, and the
run fails (never a negative or zero spend).

Every process of a run shares one ledger: a file the controller creates, of one line per paid
call (its cost), call of unknown cost (``unknown``) or refused call (``refused``). Each line is
one ``O_APPEND`` write, so lines from pytest-xdist workers never interleave, and each process
reads only what was appended since it last looked.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import NotGradedError
from ..results import UNKNOWN_COST, Spend, usd

if TYPE_CHECKING:
    from .prices import Price

_REFUSED = b"refused"
_UNKNOWN = b"unknown"


class Ledger:
    """The run's spend, shared by its processes through an append-only file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._spent = 0.0
        self._unknown = 0
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
            elif line == _UNKNOWN:
                self._unknown += 1
            elif line:
                self._spent += float(line)
        self._offset += end

    def add(self, cost_usd: float | None) -> None:
        """Count a call that was made, at its cost (None: unknown)."""
        with self._lock:
            self._append(_UNKNOWN if cost_usd is None else repr(float(cost_usd)).encode())

    def refuse(self) -> None:
        with self._lock:
            self._append(_REFUSED)

    def totals(self) -> Spend:
        """What the run has spent so far, its calls of unknown cost, and the calls it refused."""
        with self._lock:
            self._catch_up()
            return Spend(self._spent, self._unknown, self._refused)


class Budget:
    """``--agentv-budget-usd``: the most the run may spend on model calls."""

    def __init__(self, limit_usd: float, ledger: Ledger) -> None:
        self.limit_usd = limit_usd
        self.ledger = ledger

    def check(self, model: str, price: Price | None) -> None:
        """Raise ``NotGradedError`` (the case is not graded) instead of starting this call of
        ``model`` at ``price``."""
        if price is None:
            self.ledger.refuse()
            raise NotGradedError(
                f"model '{model}' has no known price at its endpoint, so its calls cannot be "
                f"counted against the run's budget of {usd(self.limit_usd)} "
                "(--agentv-budget-usd): not called; give its price with --agentv-model-prices "
                "or its target's input_cost_per_million and output_cost_per_million (0 for a "
                "local model)"
            )
        spend = self.ledger.totals()
        if spend.unknown:
            self.ledger.refuse()
            raise NotGradedError(
                f"{spend.unknown} model calls were made {UNKNOWN_COST} (their replies did not "
                "report their usage as counts of tokens), so the run's spend cannot be counted "
                f"against its budget of {usd(self.limit_usd)} (--agentv-budget-usd): no more "
                "model calls are started"
            )
        spent = spend.usd
        if spent >= self.limit_usd:
            self.ledger.refuse()
            raise NotGradedError(
                f"the run's budget is spent: {usd(spent)} of {usd(self.limit_usd)} "
                "(--agentv-budget-usd); no more model calls are started"
            )

    def charge(self, cost_usd: float | None) -> None:
        """Count a request that was sent, at its cost (None: unknown)."""
        self.ledger.add(cost_usd)


class SuiteBudgets:
    """AgentV v4's ``execution.budget_usd``: what an eval file's cases may spend together. A case
    starts only while its file has spent less; what it cost (its judges' calls and what its
    target reports) is counted when it ends. Counted per process: under pytest-xdist, each worker
    counts its share of the file (``--dist loadfile`` keeps a file in one worker)."""

    def __init__(self) -> None:
        self._spent: dict[str, float] = {}
        self._lock = threading.Lock()

    def check(self, file: str, limit_usd: float) -> None:
        """Raise ``NotGradedError`` (the case is not graded) once ``file`` spent its budget."""
        with self._lock:
            spent = self._spent.get(file, 0.0)
        if spent >= limit_usd:
            raise NotGradedError(
                f"the suite's budget is spent: {usd(spent)} of {usd(limit_usd)} "
                f"(execution.budget_usd of {file}); the case was not started"
            )

    def charge(self, file: str, cost_usd: float) -> None:
        with self._lock:
            self._spent[file] = self._spent.get(file, 0.0) + cost_usd
