"""When a call to a model may go: the pacing logic, apart from where its state lives (one
event loop's ``CallLimits`` today) and how calls wait for it. Every decision is a function of
plain numbers and the time it is asked at, so the same state can be kept elsewhere (Redis,
across machines) and the same answers come out.

Per model, and per dimension (requests, tokens), a call waits for:

* **the limit's pace**: a limit per minute (``--agentv-rpm``/``--agentv-tpm``, or the one the
  provider's headers name, whichever is lower) is spent at most a sixtieth at a time, refilled
  continuously — as OpenAI and Anthropic enforce a minute's limit over shorter intervals
  ("60 RPM may be enforced as 1 request per second"), so a minute's allowance sent at once is
  refused;
* **what the provider has left**: its last reply that told (``headers.observed``) says what
  remained then and when the limit is whole again; both vendors refill continuously (OpenAI's
  reset after one request at 5,000 RPM is 12 ms), so what remains grows from there at the
  limit's rate, less what calls started since have spent. Only a newer call's reply replaces
  it: a reply that took longer than a later call's says less;
* **a pause the provider asked for** (``retry-after`` on a 429), for every call of the model;
* with ``--agentv-rpm``/``--agentv-tpm``, the **calls of the last window** too: at most N in any
  window, each counted from when it starts until a window after it ends (the provider may
  receive it as late as that).

A cost is counted as estimated (the prompt and the reply allowance) when the call starts, and
corrected to what the model reported when it ends. A call larger than a whole allowance still
goes, once the allowance is whole.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from .headers import DIMENSIONS, Observed, Seen

#: A limit per minute is enforced a sixtieth at a time (a second's worth of the minute).
QUANTA = 60
#: The share of a limit's rate calls are paced at: the network's jitter (a call that reached
#: the provider later than the next one) then never tips a call over.
HEADROOM = 0.97


@dataclass
class Bucket:
    """Units that refill at ``rate`` a second up to ``capacity``; ``level`` at ``stamp``."""

    rate: float
    capacity: float
    level: float
    stamp: float

    def at(self, now: float) -> float:
        return min(self.capacity, self.level + self.rate * max(0.0, now - self.stamp))

    def wait(self, now: float, cost: float) -> float:
        """Seconds until ``cost`` units are there (a cost over the capacity: until it is full)."""
        short = min(cost, self.capacity) - self.at(now)
        if short <= 0:
            return 0.0
        return short / self.rate if self.rate > 0 else math.inf

    def take(self, now: float, cost: float) -> None:
        self.level, self.stamp = self.at(now) - cost, now

    def give(self, now: float, units: float) -> None:
        self.level, self.stamp = min(self.capacity, self.at(now) + units), now


def paced(per_minute: float, window: float, now: float) -> Bucket:
    """A limit of ``per_minute`` a ``window``, spent a ``QUANTA``th at a time, at
    ``HEADROOM`` of its rate. It starts half full (at least a call): calls that reach the
    provider closer together than they left (the first ones open connections) then still fit."""
    capacity = max(1.0, per_minute / QUANTA)
    return Bucket(per_minute / window * HEADROOM, capacity, max(1.0, capacity / 2), now)


def provider(seen: Seen, window: float, now: float, spent: float) -> Bucket | None:
    """What the provider has left, from one reply's ``seen``, less ``spent`` since that call
    started. Without a limit only an empty allowance says anything: nothing until its reset."""
    remaining = seen.get("remaining")
    if remaining is None:
        return None
    reset = seen.get("reset")
    limit = seen.get("limit")
    if limit is None:
        if remaining >= 1 or reset is None:
            return None
        # Empty, and whole again after ``reset``: a step, drawn as a slope that never lets a
        # call go before it.
        return Bucket(1.0 / max(reset, 1e-3), 1.0, remaining - spent, now)
    rate = limit / window
    if reset is not None and reset > 0 and remaining < limit:
        rate = min(rate, (limit - remaining) / reset)
    capacity = min(limit, remaining + rate * reset) if reset is not None else limit
    return Bucket(rate, max(capacity, 1.0), remaining - spent, now)


@dataclass
class Dimension:
    """Requests or tokens of one model."""

    #: ``--agentv-rpm`` or ``--agentv-tpm``, if given.
    option: float | None = None
    #: The limit the provider's headers named last.
    learned: float | None = None
    pace: Bucket | None = None
    left: Bucket | None = None
    #: Units every call so far took when it started, in all (what the provider's count lags).
    taken: float = 0.0
    #: The call whose reply ``left`` comes from.
    seen_call: int = 0

    def limit(self) -> float | None:
        known = [value for value in (self.option, self.learned) if value is not None]
        return min(known) if known else None

    def wait(self, now: float, cost: float) -> float:
        return max(
            (bucket.wait(now, cost) for bucket in (self.pace, self.left) if bucket is not None),
            default=0.0,
        )

    def take(self, now: float, cost: float) -> float:
        for bucket in (self.pace, self.left):
            if bucket is not None:
                bucket.take(now, cost)
        self.taken += cost
        return self.taken

    def learn(self, now: float, window: float, call: int, through: float, seen: Seen) -> None:
        """A reply to ``call`` (which brought ``taken`` to ``through``) told ``seen``."""
        limit = seen.get("limit")
        if limit is not None and limit != self.learned:
            self.learned = limit
            self.repace(now, window)
        if call <= self.seen_call:
            return
        self.seen_call = call
        left = provider(seen, window, now, self.taken - through)
        if left is not None:
            self.left = left

    def repace(self, now: float, window: float) -> None:
        limit = self.limit()
        if limit is None:
            self.pace = None
        elif self.pace is None or self.pace.rate != limit / window * HEADROOM:
            old = self.pace
            self.pace = paced(limit, window, now)
            if old is not None:  # what was spent stays spent
                self.pace.level = min(self.pace.capacity, old.at(now))


@dataclass
class Concurrency:
    """Calls in flight at most: ``maximum`` (``--agentv-concurrency``), halved after a 429 (at
    most once per ``cooldown`` seconds) and grown back by one after as many successes as the
    current limit (AIMD)."""

    maximum: int
    cooldown: float = 2.0
    current: int = 0
    successes: int = 0
    last_decrease: float = -math.inf

    def __post_init__(self) -> None:
        self.current = self.current or self.maximum

    def halve(self, now: float) -> None:
        if now - self.last_decrease >= self.cooldown:
            self.current = max(1, self.current // 2)
            self.last_decrease = now
            self.successes = 0

    def succeeded(self) -> None:
        if self.current >= self.maximum:
            return
        self.successes += 1
        if self.successes >= self.current:
            self.current += 1
            self.successes = 0


@dataclass
class Ticket:
    """One call's start, as its model's pacing counted it."""

    call: int
    estimate: int
    #: Per dimension, what all calls had taken once this one started.
    through: dict[str, float]
    #: This call in the option window (when it ended, inf while in flight; its tokens; its
    #: number, by which state kept elsewhere finds it again).
    recent: list[float] | None = None


@dataclass
class Stats:
    """What a model's calls met, for the summary (plain numbers)."""

    calls: int = 0
    retries: int = 0
    refused: int = 0
    first: float | None = None
    last: float | None = None


@dataclass
class Pace:
    """One model's pacing."""

    window: float
    rpm: float | None = None
    tpm: float | None = None
    dimensions: dict[str, Dimension] = field(default_factory=dict)
    #: No call before this (a ``retry-after``).
    paused_until: float = -math.inf
    #: The calls of the last window, for ``--agentv-rpm``/``--agentv-tpm`` (``Ticket.recent``).
    recent: deque[list[float]] = field(default_factory=deque)
    calls: int = 0
    stats: Stats = field(default_factory=Stats)

    def __post_init__(self) -> None:
        for name, option in zip(DIMENSIONS, (self.rpm, self.tpm), strict=True):
            self.dimensions[name] = Dimension(option=option)

    @property
    def windowed(self) -> bool:
        return self.rpm is not None or self.tpm is not None

    def wait(self, now: float, estimate: int) -> float:
        """Seconds until a call of ``estimate`` tokens may start (0: now)."""
        for dimension in self.dimensions.values():
            if dimension.pace is None and dimension.limit() is not None:
                dimension.repace(now, self.window)
        waits = [self.paused_until - now, self._recent_wait(now, estimate)]
        waits += [dimension.wait(now, cost) for dimension, cost in self._costs(estimate)]
        return max(0.0, *waits)

    def _costs(self, estimate: int) -> list[tuple[Dimension, float]]:
        return [(self.dimensions["requests"], 1.0), (self.dimensions["tokens"], float(estimate))]

    def _recent_wait(self, now: float, estimate: int) -> float:
        if not self.windowed:
            return 0.0
        self.recent = deque(call for call in self.recent if call[0] > now - self.window)
        oldest = min((call[0] for call in self.recent), default=now)
        if self.rpm is not None and len(self.recent) >= self.rpm:
            return oldest + self.window - now
        tokens = sum(call[1] for call in self.recent)
        if self.tpm is not None and self.recent and tokens + estimate > self.tpm:
            return oldest + self.window - now
        return 0.0

    def take(self, now: float, estimate: int, retry: bool = False) -> Ticket:
        """A call starts now."""
        self.calls += 1
        through = {
            name: dimension.take(now, cost)
            for (dimension, cost), name in zip(self._costs(estimate), DIMENSIONS, strict=True)
        }
        ticket = Ticket(self.calls, estimate, through)
        if self.windowed:
            ticket.recent = [math.inf, float(estimate), float(self.calls)]
            self.recent.append(ticket.recent)
        stats = self.stats
        stats.calls += 1
        stats.retries += retry
        stats.first = now if stats.first is None else stats.first
        stats.last = now
        return ticket

    def end(self, now: float, ticket: Ticket, used: int | None, seen: Observed | None) -> None:
        """A call ended, having used ``used`` tokens (None: unknown), its reply telling
        ``seen``."""
        if ticket.recent is not None:
            ticket.recent[0] = now
            if used is not None:
                ticket.recent[1] = float(used)
        tokens = self.dimensions["tokens"]
        if used is not None and used < ticket.estimate and tokens.pace is not None:
            tokens.pace.give(now, ticket.estimate - used)
        for name, told in (seen or {}).items():
            dimension = self.dimensions.get(name)
            if dimension is not None:
                dimension.learn(now, self.window, ticket.call, ticket.through[name], told)

    def refused(self, now: float, retry_after: float | None) -> None:
        """A 429; the provider asked for a pause of ``retry_after`` seconds, if it said."""
        self.stats.refused += 1
        if retry_after is not None:
            self.paused_until = max(self.paused_until, now + retry_after)

    def report(self) -> dict[str, float | int | None]:
        """What the summary says of this model (plain numbers, per minute of the window)."""
        stats = self.stats
        span = (stats.last or 0.0) - (stats.first or 0.0)
        rate = (stats.calls - 1) / span * self.window if stats.calls > 1 and span > 0 else None
        requests, tokens = self.dimensions["requests"], self.dimensions["tokens"]
        return {
            "calls": stats.calls,
            "retries": stats.retries,
            "refused": stats.refused,
            "rate": rate,
            "learned_rpm": requests.learned,
            "learned_tpm": tokens.learned,
            "rpm": self.rpm,
            "tpm": self.tpm,
        }
