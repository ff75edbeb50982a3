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
reads only what was appended since it last looked. With ``--agentv-coordinator`` the ledger is
the coordinator's (``RedisLedger``), for every shard, and holds each call's greatest
cost while it is in flight: the run then ends above X by at most one call's cost.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import NotGradedError
from ..results import UNKNOWN_COST, Spend, usd

if TYPE_CHECKING:
    from redis.asyncio.client import Pipeline

    from .limits.coordinator import Coordinator
    from .prices import Price

_REFUSED = b"refused"
_UNKNOWN = b"unknown"


class RunLedger(Protocol):
    """Where the run's spend is counted."""

    async def admit(self, limit_usd: float, most_usd: float) -> Spend:
        """The run's spend; if it ``admits`` one more call, that call's ``most_usd`` is held
        for it until it is counted (``add``) or given up (``cancel``), else it is refused."""
        ...

    def add(self, cost_usd: float | None, held_usd: float = ...) -> None: ...

    def cancel(self, held_usd: float) -> None: ...

    def refuse(self) -> None: ...

    def totals(self) -> Spend: ...


def admits(spend: Spend, limit_usd: float) -> bool:
    """Whether a run that has spent ``spend`` may start one more call."""
    return not spend.unknown and spend.usd < limit_usd


class Ledger:
    """The run's spend, shared by one machine's processes through an append-only file (no call's
    cost is held while it is in flight: a run ends above its budget by the calls in flight)."""

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

    async def admit(self, limit_usd: float, most_usd: float) -> Spend:
        spend = self.totals()
        if not admits(spend, limit_usd):
            self.refuse()
        return spend

    def add(self, cost_usd: float | None, held_usd: float = 0.0) -> None:
        """Count a call that was made, at its cost (None: unknown)."""
        with self._lock:
            self._append(_UNKNOWN if cost_usd is None else repr(float(cost_usd)).encode())

    def cancel(self, held_usd: float) -> None:
        """Nothing is held here."""

    def refuse(self) -> None:
        with self._lock:
            self._append(_REFUSED)

    def totals(self) -> Spend:
        """What the run has spent so far, its calls of unknown cost, and the calls it refused."""
        with self._lock:
            self._catch_up()
            return Spend(self._spent, self._unknown, self._refused)


class RedisLedger:
    """The run's spend in the coordinator's Redis, for every process of every shard: one hash,
    a field per process with its own totals (spent, calls of unknown cost, refused, held by its
    calls in flight), each written whole, so a Redis that lost them has them again from each
    process's next write. A call is admitted in the same transaction that holds its greatest
    cost: every call admitted saw the run below its budget with all others counted at most."""

    def __init__(self, coordinator: Coordinator, loop: asyncio.AbstractEventLoop) -> None:
        self.coordinator = coordinator
        self.loop = loop
        self.key = coordinator.key("ledger")
        self.me = secrets.token_hex(8)
        self.own = {"usd": 0.0, "unknown": 0, "refused": 0, "held": 0.0}
        #: The run's totals as last read, for a summary written when Redis is gone.
        self.seen: dict[Any, Any] = {}
        self._line: asyncio.Lock | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def _spend(self, fields: dict[Any, Any]) -> Spend:
        books = [json.loads(value) for name, value in fields.items() if name != self.me.encode()]
        books.append(self.own)
        return Spend(
            sum(book["usd"] + book["held"] for book in books),
            sum(book["unknown"] for book in books),
            sum(book["refused"] for book in books),
        )

    async def _write(self, change: dict[str, float] | None = None, limit_usd: float = 0.0) -> Spend:
        """This process's totals written (one at a time, the newest last), with ``change``
        applied if the run ``admits`` a call (else a refusal); the run's spend before."""
        if self._line is None:
            self._line = asyncio.Lock()

        async def write(pipe: Pipeline, now: float) -> tuple[Spend, dict[str, float]]:
            self.seen = await pipe.hgetall(self.key)
            spend = self._spend(self.seen)
            delta = change or {}
            if change is not None and not admits(spend, limit_usd):
                delta = {"refused": 1}
            book = {name: value + delta.get(name, 0) for name, value in self.own.items()}
            pipe.multi()  # type: ignore[no-untyped-call]
            pipe.hset(self.key, self.me, json.dumps(book))
            pipe.expire(self.key, self.coordinator.kept)
            return spend, delta

        async with self._line:
            spend, delta = await self.coordinator.transact((self.key,), write)
        self._apply(delta)
        return spend

    def _apply(self, delta: dict[str, float]) -> None:
        for name, value in delta.items():
            self.own[name] += value

    def _told(self, delta: dict[str, float]) -> None:
        """Counted here now, in Redis soon (a lost coordinator: at this process's next write)."""
        self._apply(delta)
        task = asyncio.ensure_future(self._quietly(self._write()))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @staticmethod
    async def _quietly(work: Coroutine[Any, Any, Spend]) -> None:
        try:
            await work
        except NotGradedError:
            pass

    async def admit(self, limit_usd: float, most_usd: float) -> Spend:
        return await self._write({"held": most_usd}, limit_usd)

    def add(self, cost_usd: float | None, held_usd: float = 0.0) -> None:
        spent = {"unknown": 1} if cost_usd is None else {"usd": cost_usd}
        self._told({"held": -held_usd, **spent})

    def cancel(self, held_usd: float) -> None:
        self._told({"held": -held_usd})

    def refuse(self) -> None:
        self._told({"refused": 1})

    def totals(self) -> Spend:
        """The run's spend, read from Redis by a thread outside ``loop`` (this process's totals
        are written first); as last read when Redis cannot be reached."""
        try:
            return asyncio.run_coroutine_threadsafe(self._write(), self.loop).result(
                timeout=self.coordinator.patience + 10
            )
        except Exception:
            return self._spend(self.seen)


def run_ledger(
    coordinator: Coordinator | None,
    shared: str | None,
    loop: Callable[[], asyncio.AbstractEventLoop],
) -> RunLedger:
    """This process's ledger of the run: the coordinator's, else the file the controller
    ``shared`` with its workers, else a new file (this process is the controller)."""
    if coordinator is not None:
        return RedisLedger(coordinator, loop())
    if shared is not None:
        return Ledger(Path(shared))
    import tempfile

    handle, name = tempfile.mkstemp(prefix="agentv-budget-", suffix=".ledger")
    os.close(handle)
    return Ledger(Path(name))


class Budget:
    """``--agentv-budget-usd``: the most the run may spend on model calls."""

    def __init__(self, limit_usd: float, ledger: RunLedger) -> None:
        self.limit_usd = limit_usd
        self.ledger = ledger

    async def check(self, model: str, price: Price | None, tokens: int) -> float:
        """Raise ``NotGradedError`` (the case is not graded) instead of starting this call of
        ``model`` at ``price``, of at most ``tokens`` (prompt and reply); else the most it may
        cost, held for it until ``charge`` or ``cancel``."""
        if price is None:
            self.ledger.refuse()
            raise NotGradedError(
                f"model '{model}' has no known price at its endpoint, so its calls cannot be "
                f"counted against the run's budget of {usd(self.limit_usd)} "
                "(--agentv-budget-usd): not called; give its price with --agentv-model-prices "
                "or its target's input_cost_per_million and output_cost_per_million (0 for a "
                "local model)"
            )
        most = tokens * max(price.input_per_token, price.output_per_token)
        spend = await self.ledger.admit(self.limit_usd, most)
        if spend.unknown:
            raise NotGradedError(
                f"{spend.unknown} model calls were made {UNKNOWN_COST} (their replies did not "
                "report their usage as counts of tokens), so the run's spend cannot be counted "
                f"against its budget of {usd(self.limit_usd)} (--agentv-budget-usd): no more "
                "model calls are started"
            )
        if not admits(spend, self.limit_usd):
            raise NotGradedError(
                f"the run's budget is spent: {usd(spend.usd)} of {usd(self.limit_usd)} "
                "(--agentv-budget-usd); no more model calls are started"
            )
        return most

    def charge(self, cost_usd: float | None, held_usd: float = 0.0) -> None:
        """Count a request that was sent, at its cost (None: unknown), in place of the
        ``held_usd`` its ``check`` held."""
        self.ledger.add(cost_usd, held_usd)

    def cancel(self, held_usd: float) -> None:
        """A call that was checked and not sent."""
        self.ledger.cancel(held_usd)


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
