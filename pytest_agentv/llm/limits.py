"""One set of limits on model calls for the whole run: calls in flight (``--agentv-concurrency``,
halved after a 429 and grown back one by one as calls succeed) and, per model, requests and
tokens per minute (``--agentv-rpm``, ``--agentv-tpm``), so a suite stays under a provider's
published limits instead of learning them from 429s.

Every call takes a slot before it is sent and gives it back when it ends (each retry is a call
of its own). Under pytest-xdist the limits are the controller's: it serves them on a Unix socket
(``LimitServer``), and each worker asks it for slots (``RemoteLimits``) — one connection per
worker, so a worker that dies gives its slots back with its connection. The token count of a
call is its estimate (prompt and reply allowance) until it ends, then what the model reported.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import shutil
import tempfile
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Protocol

from ..settings import Settings

#: The window ``--agentv-rpm`` and ``--agentv-tpm`` count in, unless ``--agentv-rate-window``.
MINUTE = 60.0
#: Calls in flight for a client used on its own (outside a run, which passes its limits).
UNLIMITED = 1_000_000


@dataclass
class Grant:
    """A slot taken for one call; ``used`` is set to the call's real token count when known."""

    model: str
    estimate: int
    used: int | None = None


class Limits(Protocol):
    """What a model client needs of the run's limits."""

    def slot(self, model: str, estimate: int) -> contextlib.AbstractAsyncContextManager[Grant]: ...

    def rate_limited(self) -> None: ...

    def succeeded(self) -> None: ...


@dataclass
class _Window:
    """The calls of one model in the last window: when each ended (``inf`` while it is in
    flight), and its tokens."""

    calls: deque[list[float]] = field(default_factory=deque)

    def trim(self, now: float, window: float) -> None:
        self.calls = deque(call for call in self.calls if call[0] > now - window)

    def tokens(self) -> float:
        return sum(tokens for _, tokens in self.calls)


class CallLimits:
    """The limits themselves, on one event loop (the plugin's, in the process that holds them)."""

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
        self.maximum = concurrency
        self.current = concurrency
        self.rpm = rpm
        self.tpm = tpm
        self.window = window
        self.cooldown = cooldown
        self.clock = clock
        self.in_flight = 0
        self._windows: dict[str, _Window] = {}
        self._changed: asyncio.Condition | None = None
        self._successes = 0
        self._last_decrease = -math.inf

    @property
    def windowed(self) -> bool:
        """Whether calls are counted per model and minute (``rpm``, ``tpm``); otherwise only
        the calls in flight are, and every waiter wants the same thing: a free slot."""
        return self.rpm is not None or self.tpm is not None

    def _wait_for(self, model: str, estimate: int) -> float:
        """Seconds until a call of ``model`` may start (0: now; ``inf``: when a call ends)."""
        if self.in_flight >= self.current:
            return math.inf
        if not self.windowed:
            return 0.0
        now = self.clock()
        window = self._windows.setdefault(model, _Window())
        window.trim(now, self.window)
        oldest = min((call[0] for call in window.calls), default=now)
        if self.rpm is not None and len(window.calls) >= self.rpm:
            return oldest + self.window - now
        # A call larger than the whole allowance still goes, alone in its window.
        if self.tpm is not None and window.calls and window.tokens() + estimate > self.tpm:
            return oldest + self.window - now
        return 0.0

    async def acquire(self, model: str, estimate: int) -> list[float]:
        """Wait for a slot; the returned record's token count can be corrected at release."""
        if self._changed is None:
            self._changed = asyncio.Condition()
        async with self._changed:
            while (delay := self._wait_for(model, estimate)) > 0:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(
                        self._changed.wait(), None if delay == math.inf else delay
                    )
            self.in_flight += 1
            # In flight, a call counts until it ends (see ``release``).
            record = [math.inf, float(estimate)]
            if self.windowed:
                self._windows[model].calls.append(record)
            return record

    async def release(self, record: list[float], used: int | None) -> None:
        """End a call: it counts in its model's window from now (the provider may have received
        it as late as now), with the tokens it really used when known."""
        record[0] = self.clock()
        if used is not None:
            record[1] = float(used)
        assert self._changed is not None
        async with self._changed:
            self.in_flight -= 1
            if self.windowed:
                self._changed.notify_all()
            else:  # one per free slot, not all (hundreds of cases may wait at the limit)
                self._changed.notify(max(1, self.current - self.in_flight))

    @contextlib.asynccontextmanager
    async def slot(self, model: str, estimate: int) -> AsyncIterator[Grant]:
        grant = Grant(model, estimate)
        record = await self.acquire(model, estimate)
        try:
            yield grant
        finally:
            await self.release(record, grant.used)

    def rate_limited(self) -> None:
        """A 429: halve the calls in flight (at most once per cooldown)."""
        now = self.clock()
        if now - self._last_decrease >= self.cooldown:
            self.current = max(1, self.current // 2)
            self._last_decrease = now
            self._successes = 0

    def succeeded(self) -> None:
        """Grow back by one after as many successes as the current limit (AIMD); the calls
        waiting see it when the call that succeeded gives its slot back."""
        if self.current >= self.maximum:
            return
        self._successes += 1
        if self._successes >= self.current:
            self.current += 1
            self._successes = 0


class LimitServer:
    """The controller's limits, served to pytest-xdist workers over a Unix socket: one JSON
    line per message (``acquire`` → ``granted``; ``release``; ``rate_limited``; ``succeeded``)."""

    def __init__(self, limits: CallLimits, path: Path) -> None:
        self.limits = limits
        self.path = path
        self._server: asyncio.AbstractServer | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_unix_server(self._serve, path=str(self.path))

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)
        self.path.unlink(missing_ok=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held: dict[int, list[float]] = {}
        pending: dict[int, asyncio.Task[None]] = {}

        async def grant(request: int, model: str, estimate: int) -> None:
            held[request] = await self.limits.acquire(model, estimate)
            writer.write(json.dumps({"granted": request}).encode() + b"\n")
            await writer.drain()

        try:
            while line := await reader.readline():
                message: dict[str, Any] = json.loads(line)
                op = message.get("op")
                request = int(message.get("id", 0))
                if op == "acquire":
                    task = asyncio.ensure_future(
                        grant(request, str(message["model"]), int(message["tokens"]))
                    )
                    pending[request] = task
                    task.add_done_callback(partial(_forget, pending, request))
                elif op == "release" and request in held:
                    used = message.get("used")
                    record = held.pop(request)
                    await self.limits.release(record, used if isinstance(used, int) else None)
                elif op == "release" and request in pending:  # given up while it waited
                    pending.pop(request).cancel()
                elif op == "rate_limited":
                    self.limits.rate_limited()
                elif op == "succeeded":
                    self.limits.succeeded()
        except (ConnectionError, ValueError, KeyError, TypeError):
            pass
        finally:
            # A worker that is gone (ended, crashed) gives back what it held or waited for.
            for task in pending.values():
                task.cancel()
            for record in held.values():
                await self.limits.release(record, None)
            writer.close()


def _forget(pending: dict[int, asyncio.Task[None]], request: int, _: object) -> None:
    pending.pop(request, None)


class RemoteLimits:
    """A pytest-xdist worker's view of the controller's limits (see ``LimitServer``)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._writer: asyncio.StreamWriter | None = None
        self._granted: dict[int, asyncio.Future[None]] = {}
        self._next = 0
        self._lock: asyncio.Lock | None = None
        #: What runs on its own: the reader of the controller's replies, messages being sent.
        self._tasks: set[asyncio.Task[None]] = set()

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _connection(self) -> asyncio.StreamWriter:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._writer is None:
                reader, self._writer = await asyncio.open_unix_connection(str(self.path))
                self._spawn(self._read(reader))
            return self._writer

    async def _read(self, reader: asyncio.StreamReader) -> None:
        while line := await reader.readline():
            future = self._granted.pop(int(json.loads(line)["granted"]), None)
            if future is not None and not future.done():
                future.set_result(None)
        for future in self._granted.values():  # the controller is gone: nothing is limited
            if not future.done():
                future.set_result(None)

    async def _send(self, message: dict[str, Any]) -> None:
        writer = await self._connection()
        writer.write(json.dumps(message).encode() + b"\n")
        await writer.drain()

    def _tell(self, op: str) -> None:
        self._spawn(self._send({"op": op}))

    @contextlib.asynccontextmanager
    async def slot(self, model: str, estimate: int) -> AsyncIterator[Grant]:
        self._next += 1
        request = self._next
        granted = self._granted[request] = asyncio.get_running_loop().create_future()
        grant = Grant(model, estimate)
        await self._send({"op": "acquire", "id": request, "model": model, "tokens": estimate})
        try:
            await granted
            yield grant
        finally:
            self._granted.pop(request, None)
            # Released also when cancelled while waiting: the controller then frees the slot
            # it grants (or never granted) for this request.
            await asyncio.shield(self._send({"op": "release", "id": request, "used": grant.used}))

    def rate_limited(self) -> None:
        self._tell("rate_limited")

    def succeeded(self) -> None:
        self._tell("succeeded")


#: A Unix socket's path is at most 107 bytes on Linux (103 on macOS).
_SOCKET_PATH_MAX = 100


def serve_limits(limits: CallLimits, loop: asyncio.AbstractEventLoop) -> LimitServer:
    """``limits`` served to pytest-xdist workers from ``loop`` (the plugin's). Raises
    ``OSError`` when no socket can be made (the caller falls back to each worker's own)."""
    folder = Path(tempfile.mkdtemp(prefix="agentv-"))
    if len(str(folder / "limits.sock")) > _SOCKET_PATH_MAX:  # a deep TMPDIR
        folder.rmdir()
        folder = Path(tempfile.mkdtemp(prefix="agentv-", dir="/tmp"))
    server = LimitServer(limits, folder / "limits.sock")
    try:
        asyncio.run_coroutine_threadsafe(server.start(), loop).result(timeout=30)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return server


def stop_limits(server: LimitServer, loop: asyncio.AbstractEventLoop) -> None:
    with contextlib.suppress(Exception):
        asyncio.run_coroutine_threadsafe(server.close(), loop).result(timeout=30)
    shutil.rmtree(server.path.parent, ignore_errors=True)
