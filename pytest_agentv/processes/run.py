"""Running one child: its output collected as it arrives and capped, its time bounded, and
everything it started stopped at the end."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from . import reaped as reaper_server
from .env import child_env, python_argv
from .reaper import LEFT_BEHIND

MAX_STDOUT_BYTES = 1024 * 1024
#: What a child may write to stderr (only its tail is kept): past it, a flood is stopped as one
#: on stdout is, rather than read until the deadline, which made it a timeout on a busy machine
#: and a success on an idle one.
MAX_STDERR_BYTES = 16 * 1024 * 1024
STDERR_TAIL_BYTES = 8 * 1024
KILL_GRACE_SECONDS = 0.25


@dataclass(frozen=True)
class ProcessResult:
    pid: int
    returncode: int | None
    stdout: bytes
    stderr_tail: bytes
    timed_out: bool = False
    #: The stream that went over its limit ("stdout", "stderr"), the child then stopped.
    overflow: str | None = None
    duration: float = 0.0
    #: Descendants the child left running when it exited normally (killed since; counted on
    #: Linux only, where the reaper sees them).
    left_behind: int = 0

    @property
    def signal_name(self) -> str | None:
        if self.returncode is not None and self.returncode < 0:
            with contextlib.suppress(ValueError):
                return signal.Signals(-self.returncode).name
            return f"signal {-self.returncode}"
        return None

    def stderr_text(self, limit: int = 2000) -> str:
        text = self.stderr_tail.decode("utf-8", "replace").strip()
        return text[-limit:]

    @property
    def broke(self) -> bool:
        """Whether the process was stopped before it could end by itself (its time limit, an
        output flood) or was killed by a signal: what it printed is not what it meant to say."""
        return self.timed_out or self.overflow is not None or self.signal_name is not None

    def failure(self, what: str, timeout: float) -> str | None:
        """Why the process did not succeed, in one sentence, or None when it exited 0."""
        if self.timed_out:
            return f"{what} timed out after {timeout:g}s and was killed"
        if self.overflow == "stdout":
            return (
                f"{what} wrote more than {MAX_STDOUT_BYTES // 1024} KiB to stdout "
                "and was stopped; its output was discarded"
            )
        if self.overflow == "stderr":
            return (
                f"{what} wrote more than {MAX_STDERR_BYTES // 2**20} MiB to stderr and was stopped"
            )
        if self.signal_name:
            return f"{what} was killed by {self.signal_name}"
        if self.returncode:
            tail = self.stderr_text()
            return f"{what} exited with code {self.returncode}" + (f": {tail}" if tail else "")
        return None


def _left_behind(stderr: bytes) -> tuple[bytes, int]:
    """The reaper's count of descendants left running, taken off the end of stderr."""
    head, marker, count = stderr.rpartition(f"\n{LEFT_BEHIND}".encode())
    if marker and count.endswith(b"\n") and count.strip().isdigit():
        return head, int(count)
    return stderr, 0


#: Where the reaper can run: it needs Linux's child subreapers and parent-death signals.
USE_REAPER = sys.platform.startswith("linux")
#: How long a reaper may take to stop what its child started before it is killed itself.
REAPER_GRACE_SECONDS = 5.0


def _kill_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


class _Collector(asyncio.SubprocessProtocol):
    """Collects a child's output as it arrives: stdout up to a cap, then discarded to the end
    (a pipe left full would keep the child's writers blocked), and the tail of stderr; the
    first stream over its cap is the flood (``flooded``'s result). With ``reader``, stdout goes
    to it as it arrives instead of being kept (a stream read event by event); the cap counts it
    all the same."""

    def __init__(self, max_stdout: int, reader: Callable[[bytes], None] | None = None) -> None:
        loop = asyncio.get_running_loop()
        self.max_stdout = max_stdout
        self.reader = reader
        self.received = 0
        self.out = bytearray()
        self.err = bytearray()
        self.err_written = 0
        self.exited = loop.create_future()
        self.flooded = loop.create_future()
        self.pipes_closed = loop.create_future()
        self._open = {1, 2}

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        if fd == 2:
            self.err.extend(data)
            del self.err[:-STDERR_TAIL_BYTES]
            self.err_written += len(data)
            if self.err_written > MAX_STDERR_BYTES and not self.flooded.done():
                self.flooded.set_result("stderr")
        elif not self.flooded.done():
            self.received += len(data)
            if self.received > self.max_stdout:
                self.out.clear()
                self.flooded.set_result("stdout")
            elif self.reader is not None:
                self.reader(data)
            else:
                self.out.extend(data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self._open.discard(fd)
        if not self._open and not self.pipes_closed.done():
            self.pipes_closed.set_result(None)

    def process_exited(self) -> None:
        # Called when the child itself is reaped, even while a process it left behind still
        # holds the pipes open.
        if not self.exited.done():
            self.exited.set_result(None)


async def _terminate(
    transport: asyncio.SubprocessTransport, collector: _Collector, reaped: bool
) -> None:
    """SIGTERM to the whole group, SIGKILL after a grace period; then wait for the child.

    Under the reaper the grace is the reaper's: it stops every descendant, then exits.
    """
    pid = transport.get_pid()
    _kill_group(pid, signal.SIGTERM)
    grace = KILL_GRACE_SECONDS + (REAPER_GRACE_SECONDS if USE_REAPER and reaped else 0.0)
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(asyncio.shield(collector.exited), grace)
    _kill_group(pid, signal.SIGKILL)
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(asyncio.shield(collector.exited), 5)


#: Child processes this process runs at once (``--agentv-concurrency``, set for the run), None
#: for no limit; per event loop, since a semaphore belongs to one. The scheduler starts cases
#: ahead of this limit, so that the next child is ready to start when one ends.
_at_once: int | None = None
_slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
    weakref.WeakKeyDictionary()
)


def limit_children(count: int | None) -> None:
    global _at_once
    _at_once = count
    _slots.clear()


async def run_process(
    argv: Sequence[str] | str,
    *,
    stdin: bytes = b"",
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float,
    max_stdout: int = MAX_STDOUT_BYTES,
    reader: Callable[[bytes], None] | None = None,
    reaped: bool = True,
) -> ProcessResult:
    """Run a command (argv list, or a string for ``/bin/sh -c``) and collect its output (or
    hand stdout to ``reader`` as it arrives); the ``timeout`` starts once a slot is free
    (``limit_children``). ``reaped=False`` is for our own short commands that start nothing
    which could leave their process group (the reaper's start costs a Python process): they
    run in a group of their own all the same, killed whole at the end."""
    async with _child_slot():
        return await _run_process(argv, stdin, cwd, env, timeout, max_stdout, reader, reaped)


def _child_slot() -> contextlib.AbstractAsyncContextManager[object]:
    if _at_once is None:
        return contextlib.nullcontext()
    loop = asyncio.get_running_loop()
    slots = _slots.get(loop)
    if slots is None:
        slots = _slots[loop] = asyncio.Semaphore(_at_once)
    return slots


async def _run_process(
    argv: Sequence[str] | str,
    stdin: bytes,
    cwd: Path | None,
    env: Mapping[str, str] | None,
    timeout: float,
    max_stdout: int,
    reader: Callable[[bytes], None] | None,
    reaped: bool,
) -> ProcessResult:
    args = ["/bin/sh", "-c", argv] if isinstance(argv, str) else python_argv(argv)
    environ = child_env(env)
    started = time.monotonic()
    loop = asyncio.get_running_loop()
    spawn: asyncio.Future[tuple[asyncio.SubprocessTransport, _Collector]]
    if USE_REAPER and reaped:
        spawn = asyncio.ensure_future(
            reaper_server.start(lambda: _Collector(max_stdout, reader), args, environ, cwd)
        )
    else:
        spawn = asyncio.ensure_future(
            loop.subprocess_exec(
                lambda: _Collector(max_stdout, reader),
                *args,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=str(cwd) if cwd else None,
                env=environ,
                start_new_session=True,
            )
        )
    try:
        transport, collector = await asyncio.shield(spawn)
    except asyncio.CancelledError:
        # The child may be running already, its own children too: asyncio would kill only
        # the child (the reaper) if cancelled while connecting its pipes. Let the spawn end,
        # then the whole group goes.
        with contextlib.suppress(Exception):
            transport, collector = await spawn
            _kill_group(transport.get_pid(), signal.SIGKILL)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(collector.exited), 5)
            transport.close()
        raise
    pid = transport.get_pid()
    timed_out = False
    try:
        feed = transport.get_pipe_transport(0)
        if isinstance(feed, asyncio.WriteTransport):
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                feed.write(stdin)
                feed.close()
        done, _ = await asyncio.wait(
            {collector.exited, collector.flooded}, timeout=timeout, return_when="FIRST_COMPLETED"
        )
        timed_out = not done
        if not collector.exited.done():
            await _terminate(transport, collector, reaped)
        else:
            # Anything the child left behind in its group goes with it.
            _kill_group(pid, signal.SIGKILL)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(collector.pipes_closed), 1.0)
    finally:
        if transport.get_returncode() is None:
            await asyncio.shield(_terminate(transport, collector, reaped))
        # A process that left our group (setsid) may still hold the pipes; let them go.
        transport.close()
    stderr, left = _left_behind(bytes(collector.err))
    return ProcessResult(
        pid=pid,
        returncode=transport.get_returncode(),
        stdout=bytes(collector.out),
        stderr_tail=stderr[-STDERR_TAIL_BYTES:],
        left_behind=left,
        timed_out=timed_out,
        overflow=collector.flooded.result() if collector.flooded.done() else None,
        duration=time.monotonic() - started,
    )
