"""The run's limits kept in the coordinator's Redis (``coordinator.py``), for every process of
every shard: the same pacing (``pacing.py``) and concurrency as one event loop's
``CallLimits``, its state one JSON value that each change reads and writes in one transaction,
at the server's time.

A slot is a lease that ends when its call does, or when its attempt would have timed out: a
process that dies (a shard killed) gives its slots back then, as the xdist controller gives back
a dead worker's. A Redis that lost the run's state (restarted without persistence) no longer
knows the calls in flight: the process that finds it gone, having seen it before, grants nothing
until those calls' attempts would have ended. In one process, the calls of one model wait in
line and only the first asks Redis, so a process asks no more often with more calls waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import secrets
from collections import deque
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, TypeVar

from .coordinator import KEPT, Coordinator
from .local import Grant
from .pacing import Bucket, Concurrency, Dimension, Pace, Stats, Ticket

if TYPE_CHECKING:
    from redis.asyncio.client import Pipeline

    from ...settings import Settings
    from .headers import Observed

T = TypeVar("T")

#: Seconds between two asks of a process whose calls wait for a free slot (one ends elsewhere).
POLL = 0.05
#: A lease's length when its call names no attempt timeout.
LONGEST_LEASE = 600.0
#: Seconds a lease outlives its attempt's timeout: its release on the way.
MARGIN = 1.0


def _dump_pace(pace: Pace) -> dict[str, Any]:
    data = asdict(pace)
    data["recent"] = [list(call) for call in pace.recent]
    return data


def _bucket(data: dict[str, Any] | None) -> Bucket | None:
    return Bucket(**data) if data is not None else None


def _load_pace(data: dict[str, Any]) -> Pace:
    pace = Pace(data["window"], data["rpm"], data["tpm"])
    for name, kept in data["dimensions"].items():
        kept.update(pace=_bucket(kept["pace"]), left=_bucket(kept["left"]))
        pace.dimensions[name] = Dimension(**kept)
    pace.paused_until = data["paused_until"]
    pace.recent = deque(data["recent"])
    pace.calls = data["calls"]
    pace.stats = Stats(**data["stats"])
    return pace


class _State:
    """The run's limits as Redis holds them, read into the pacing's own objects."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.epoch: str = data["epoch"]
        self.blocked_until: float = data["blocked_until"]
        self.concurrency = Concurrency(**data["concurrency"])
        self.leases: dict[str, dict[str, Any]] = data["leases"]
        self.paces = {model: _load_pace(kept) for model, kept in data["paces"].items()}

    def dump(self) -> bytes:
        return json.dumps(
            {
                "epoch": self.epoch,
                "blocked_until": self.blocked_until,
                "concurrency": asdict(self.concurrency),
                "leases": self.leases,
                "paces": {model: _dump_pace(pace) for model, pace in self.paces.items()},
            },
            separators=(",", ":"),
        ).encode()

    def end(
        self, lease: dict[str, Any], now: float, used: int | None, seen: Observed | None
    ) -> None:
        """A call ended: its model's pacing counts it from ``now``."""
        pace = self.paces.get(lease["model"])
        if pace is None:
            return
        call = lease["call"]
        recent = next((entry for entry in pace.recent if entry[2] == call), None)
        ticket = Ticket(call, lease["estimate"], lease["through"], recent)
        pace.end(now, ticket, used, seen)

    def expire(self, now: float) -> None:
        """Leases whose attempts would have timed out: their calls ended then."""
        for name, lease in list(self.leases.items()):
            if lease["expires"] <= now:
                del self.leases[name]
                self.end(lease, lease["expires"], None, None)


class RedisLimits:
    """``Limits`` held in the coordinator's Redis, for every process of every shard of a run."""

    @classmethod
    def for_run(cls, settings: Settings, coordinator: Coordinator) -> RedisLimits:
        return cls(
            coordinator, settings.concurrency, settings.rpm, settings.tpm, settings.rate_window
        )

    def __init__(
        self,
        coordinator: Coordinator,
        concurrency: int,
        rpm: int | None = None,
        tpm: int | None = None,
        window: float = 60.0,
    ) -> None:
        self.coordinator = coordinator
        self.concurrency = concurrency
        self.rpm = rpm
        self.tpm = tpm
        self.window = window
        self.key = coordinator.key("limits")
        #: The state this process saw last (None: none yet), to tell a Redis that lost it.
        self._epoch: str | None = None
        #: Successes not yet told (told with this process's next change).
        self._successes = 0
        #: The longest lease this process took: how long calls may be in flight unknown.
        self._longest = 0.0
        self._lines: dict[tuple[asyncio.AbstractEventLoop, str], asyncio.Lock] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def _fresh(self, now: float) -> _State:
        lost = self._epoch is not None  # Redis forgot the calls in flight: wait them out
        return _State(
            {
                "epoch": secrets.token_hex(8),
                "blocked_until": now + self._longest + MARGIN if lost else -math.inf,
                "concurrency": asdict(Concurrency(self.concurrency)),
                "leases": {},
                "paces": {},
            }
        )

    async def _transact(self, change: Callable[[_State, float], T]) -> T:
        """``change(state, now)`` applied to the run's state in one transaction, with the
        successes this process has not told yet; its value."""
        told = 0

        async def changed(pipe: Pipeline, now: float) -> T:
            nonlocal told
            raw = await pipe.get(self.key)
            state = _State(json.loads(raw)) if raw is not None else self._fresh(now)
            self._epoch = state.epoch
            state.expire(now)
            told = self._successes
            for _ in range(told):
                state.concurrency.succeeded()
            value = change(state, now)
            pipe.multi()  # type: ignore[no-untyped-call]
            pipe.set(self.key, state.dump(), ex=KEPT)
            return value

        value = await self.coordinator.transact((self.key,), changed)
        self._successes -= told
        return value

    def _pace(self, state: _State, model: str) -> Pace:
        pace = state.paces.get(model)
        if pace is None:
            pace = state.paces[model] = Pace(self.window, self.rpm, self.tpm)
        return pace

    async def _try(self, model: str, estimate: int, hold: float, retry: bool) -> str | float:
        """A lease for one call (its name), or the seconds to wait before asking again."""

        def take(state: _State, now: float) -> str | float:
            if len(state.leases) >= state.concurrency.current:
                return POLL
            pace = self._pace(state, model)
            delay = max(state.blocked_until - now, pace.wait(now, estimate))
            if delay > 0:
                return delay
            ticket = pace.take(now, estimate, retry)
            name = secrets.token_hex(8)
            lease = {"model": model, "call": ticket.call, "estimate": estimate}
            lease.update(through=ticket.through, expires=now + hold + MARGIN)
            state.leases[name] = lease
            return name

        return await self._transact(take)

    async def _release(self, name: str, used: int | None, seen: Observed | None) -> None:
        def end(state: _State, now: float) -> None:
            lease = state.leases.pop(name, None)
            if lease is not None:
                state.end(lease, now, used, seen)

        await self._transact(end)

    def _line(self, model: str) -> asyncio.Lock:
        """The line this process's calls of ``model`` wait in."""
        key = (asyncio.get_running_loop(), model)
        line = self._lines.get(key)
        if line is None:
            line = self._lines[key] = asyncio.Lock()
        return line

    @contextlib.asynccontextmanager
    async def slot(
        self, model: str, estimate: int, *, hold: float = math.inf, retry: bool = False
    ) -> AsyncIterator[Grant]:
        hold = hold if hold != math.inf else LONGEST_LEASE
        self._longest = max(self._longest, hold)
        async with self._line(model):
            while not isinstance(name := await self._try(model, estimate, hold, retry), str):
                await asyncio.sleep(name)
        grant = Grant(model, estimate)
        try:
            yield grant
        finally:
            # Unreachable now: the lease ends when the attempt would have timed out.
            with contextlib.suppress(Exception):
                await asyncio.shield(self._release(name, grant.used, grant.observed))

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled():
            task.exception()  # a lost coordinator's 429 is lost with it

    def rate_limited(self, model: str = "", retry_after: float | None = None) -> None:
        """A 429: every process's calls of ``model`` pause as the provider asked, and the calls
        in flight halve, run-wide."""

        def refused(state: _State, now: float) -> None:
            if model:
                self._pace(state, model).refused(now, retry_after)
            state.concurrency.halve(now)

        self._spawn(self._transact(refused))

    def succeeded(self) -> None:
        self._successes += 1
