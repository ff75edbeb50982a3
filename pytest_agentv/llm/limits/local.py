"""The run's limits on one event loop (the plugin's, in the process that holds them): calls in
flight (``--agentv-concurrency``, halved after a 429 and grown back one by one as calls
succeed), and each model's pacing (``pacing.py``), which calls wait for here."""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ...settings import Settings
from .headers import Observed
from .pacing import Concurrency, Pace, Ticket

#: The window ``--agentv-rpm``, ``--agentv-tpm`` and providers' per-minute limits count in,
#: unless ``--agentv-rate-window``.
MINUTE = 60.0
#: Calls in flight for a client used on its own (outside a run, which passes its limits).
UNLIMITED = 1_000_000


@dataclass
class Grant:
    """A slot taken for one call. The call sets ``used`` to its real token count when known,
    and ``observed`` to what its reply's rate-limit headers said."""

    model: str
    estimate: int
    used: int | None = None
    observed: Observed | None = None


class Limits(Protocol):
    """What a model client needs of the run's limits."""

    def slot(
        self, model: str, estimate: int, *, hold: float = ..., retry: bool = ...
    ) -> contextlib.AbstractAsyncContextManager[Grant]:
        """A slot for one call of ``estimate`` tokens, open at most ``hold`` seconds (its
        attempt's timeout); ``retry`` when an earlier attempt of the same call failed."""
        ...

    def rate_limited(self, model: str = ..., retry_after: float | None = ...) -> None: ...

    def succeeded(self) -> None: ...


@dataclass
class Held:
    """One call's slot: which model's pacing counted it, and how."""

    model: str
    ticket: Ticket
    granted: float = field(default_factory=time.monotonic)


class CallLimits:
    """Concurrency and every model's pacing, on one event loop."""

    @classmethod
    def for_run(cls, settings: Settings) -> CallLimits:
        """The run's limits, from its options."""
        return cls(settings.concurrency, settings.rpm, settings.tpm, settings.rate_window)

    def __init__(
        self,
        concurrency: int,
        rpm: int | None = None,
        tpm: int | None = None,
        window: float = MINUTE,
        cooldown: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.concurrency = Concurrency(concurrency, cooldown)
        self.rpm = rpm
        self.tpm = tpm
        self.window = window
        self.clock = clock
        self.in_flight = 0
        self.paces: dict[str, Pace] = {}
        self._changed: asyncio.Condition | None = None
        #: Calls waiting for their model's pacing (not for a free slot), and since when some
        #: have been: the run's time held by the limits.
        self._held = 0
        self._held_since = 0.0
        self.held_seconds = 0.0

    @property
    def current(self) -> int:
        """Calls in flight at most, now."""
        return self.concurrency.current

    def pace(self, model: str) -> Pace:
        pace = self.paces.get(model)
        if pace is None:
            pace = self.paces[model] = Pace(self.window, self.rpm, self.tpm)
        return pace

    @property
    def paced(self) -> bool:
        """Whether any call may wait for its model's pacing; otherwise every waiter wants the
        same thing, a free slot."""
        return (
            self.rpm is not None
            or self.tpm is not None
            or any(
                pace.paused_until > -math.inf or any(d.learned for d in pace.dimensions.values())
                for pace in self.paces.values()
            )
        )

    def _wait_for(self, model: str, estimate: int) -> float:
        """Seconds until a call of ``model`` may start (0: now; ``inf``: when a call ends)."""
        if self.in_flight >= self.current:
            return math.inf
        return self.pace(model).wait(self.clock(), estimate)

    def _holding(self, held: bool) -> None:
        now = self.clock()
        if held:
            if not self._held:
                self._held_since = now
            self._held += 1
        else:
            self._held -= 1
            if not self._held:
                self.held_seconds += now - self._held_since

    async def acquire(self, model: str, estimate: int, retry: bool = False) -> Held:
        """Wait for a slot; the call's reply is told at ``release``."""
        if self._changed is None:
            self._changed = asyncio.Condition()
        async with self._changed:
            held = False
            try:
                while (delay := self._wait_for(model, estimate)) > 0:
                    if held != (delay != math.inf):
                        held = not held
                        self._holding(held)
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(
                            self._changed.wait(), None if delay == math.inf else delay
                        )
            finally:
                if held:
                    self._holding(False)
            self.in_flight += 1
            return Held(model, self.pace(model).take(self.clock(), estimate, retry))

    async def release(self, held: Held, used: int | None, observed: Observed | None = None) -> None:
        """End a call: its model's pacing counts it from now, with the tokens it really used
        when known, and learns what its reply's headers said."""
        self.pace(held.model).end(self.clock(), held.ticket, used, observed)
        assert self._changed is not None
        async with self._changed:
            self.in_flight -= 1
            if self.paced:
                self._changed.notify_all()
            else:  # one per free slot, not all (hundreds of cases may wait at the limit)
                self._changed.notify(max(1, self.current - self.in_flight))

    @contextlib.asynccontextmanager
    async def slot(
        self, model: str, estimate: int, *, hold: float = math.inf, retry: bool = False
    ) -> AsyncIterator[Grant]:
        grant = Grant(model, estimate)
        held = await self.acquire(model, estimate, retry)
        try:
            yield grant
        finally:
            await self.release(held, grant.used, grant.observed)

    def rate_limited(self, model: str = "", retry_after: float | None = None) -> None:
        """A 429: halve the calls in flight (at most once per cooldown), and hold the model's
        calls for the pause the provider asked for."""
        now = self.clock()
        if model:
            self.pace(model).refused(now, retry_after)
        self.concurrency.halve(now)

    def succeeded(self) -> None:
        """Grow back by one after as many successes as the current limit (AIMD); the calls
        waiting see it when the call that succeeded gives its slot back."""
        self.concurrency.succeeded()

    def report(self) -> dict[str, Any]:
        """How the run's calls met the limits (plain builtins, for the summary)."""
        held = self.held_seconds + (self.clock() - self._held_since if self._held else 0.0)
        return {
            "window": self.window,
            "scaled": self.window != MINUTE,
            "held_seconds": held,
            "models": {model: pace.report() for model, pace in self.paces.items()},
        }
