"""The run's limits shared by pytest-xdist workers: the controller serves its ``CallLimits`` on
a Unix socket (``LimitServer``), and each worker asks it for slots (``RemoteLimits``), one
connection per worker, one JSON line per message. A worker's calls tell the controller what
their replies' rate-limit headers said, so one model's pacing learns from every worker.

A worker that dies gives back what it waited for at once, but what it held only when each of
those calls' attempts would have timed out: its requests may still be open at the provider,
and counting them gone would let another worker go over the concurrency.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import shutil
import tempfile
from collections.abc import AsyncIterator, Coroutine
from functools import partial
from pathlib import Path
from typing import Any

from .local import CallLimits, Grant, Held


class LimitServer:
    """The controller's limits, served to pytest-xdist workers over a Unix socket: one JSON
    line per message (``acquire`` → ``granted``; ``release``, with the call's tokens and what
    its reply's headers said; ``rate_limited``, with the model and its ``retry-after``;
    ``succeeded``)."""

    def __init__(self, limits: CallLimits, path: Path) -> None:
        self.limits = limits
        self.path = path
        self._server: asyncio.AbstractServer | None = None
        #: Slots of workers that are gone, each given back when its call's attempt would end.
        self._orphans: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_unix_server(self._serve, path=str(self.path))

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)
        orphans = list(self._orphans)
        for orphan in orphans:
            orphan.cancel()
        await asyncio.gather(*orphans, return_exceptions=True)
        self.path.unlink(missing_ok=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held: dict[int, tuple[Held, float]] = {}
        pending: dict[int, asyncio.Task[None]] = {}

        async def grant(request: int, model: str, estimate: int, hold: float, retry: bool) -> None:
            held[request] = (await self.limits.acquire(model, estimate, retry), hold)
            writer.write(json.dumps({"granted": request}).encode() + b"\n")
            await writer.drain()

        try:
            while line := await reader.readline():
                message: dict[str, Any] = json.loads(line)
                op = message.get("op")
                request = int(message.get("id", 0))
                if op == "acquire":
                    hold = float(message.get("hold") or math.inf)
                    work = grant(
                        request,
                        str(message["model"]),
                        int(message["tokens"]),
                        hold if hold > 0 else math.inf,
                        message.get("retry") is True,
                    )
                    task = pending[request] = asyncio.ensure_future(work)
                    task.add_done_callback(partial(_forget, pending, request))
                elif op == "release" and request in held:
                    used = message.get("used")
                    await self.limits.release(
                        held.pop(request)[0],
                        used if isinstance(used, int) else None,
                        _observed(message.get("observed")),
                    )
                elif op == "release" and request in pending:  # given up while it waited
                    pending.pop(request).cancel()
                elif op == "rate_limited":
                    after = message.get("retry_after")
                    self.limits.rate_limited(
                        str(message.get("model") or ""),
                        float(after) if isinstance(after, (int, float)) else None,
                    )
                elif op == "succeeded":
                    self.limits.succeeded()
        except (ConnectionError, ValueError, KeyError, TypeError):
            pass
        finally:
            # A worker that is gone (ended, crashed) gives back what it waited for now, and
            # what it held when those calls' attempts would have timed out.
            for task in pending.values():
                task.cancel()
            for slot, hold in held.values():
                orphan = asyncio.ensure_future(self._release_after(slot, hold))
                self._orphans.add(orphan)
                orphan.add_done_callback(self._orphans.discard)
            writer.close()

    async def _release_after(self, slot: Held, hold: float) -> None:
        try:
            if hold != math.inf:
                await asyncio.sleep(max(0.0, slot.granted + hold - self.limits.clock()))
        finally:
            await self.limits.release(slot, None)


def _observed(value: Any) -> dict[str, Any] | None:
    """What a worker's call said its reply's headers told, if it has the shape they read into."""
    if not isinstance(value, dict):
        return None
    return {
        str(name): {
            str(key): float(number)
            for key, number in seen.items()
            if isinstance(number, (int, float))
        }
        for name, seen in value.items()
        if isinstance(seen, dict)
    } or None


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

    def _tell(self, message: dict[str, Any]) -> None:
        self._spawn(self._send(message))

    @contextlib.asynccontextmanager
    async def slot(
        self, model: str, estimate: int, *, hold: float = math.inf, retry: bool = False
    ) -> AsyncIterator[Grant]:
        self._next += 1
        request = self._next
        granted = self._granted[request] = asyncio.get_running_loop().create_future()
        grant = Grant(model, estimate)
        asked = {"op": "acquire", "id": request, "model": model, "tokens": estimate}
        asked.update(hold=hold if hold != math.inf else None, retry=retry)
        await self._send(asked)
        try:
            await granted
            yield grant
        finally:
            self._granted.pop(request, None)
            # Released also when cancelled while waiting: the controller then frees the slot
            # it grants (or never granted) for this request.
            told = {"op": "release", "id": request, "used": grant.used, "observed": grant.observed}
            await asyncio.shield(self._send(told))

    def rate_limited(self, model: str = "", retry_after: float | None = None) -> None:
        self._tell({"op": "rate_limited", "model": model, "retry_after": retry_after})

    def succeeded(self) -> None:
        self._tell({"op": "succeeded"})


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
