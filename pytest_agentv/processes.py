"""Child processes for code judges and CLI targets: bounded in time, output and environment.

Each child runs in its own session (process group). On timeout, cancellation or an output flood
the whole group is sent SIGTERM, then SIGKILL after a short grace period; after a normal exit any
process the child left behind in its group is killed too, so nothing outlives the call. Pipes are
drained concurrently, so a chatty child cannot deadlock, and only the last bytes of stderr are
kept. (A grandchild that calls ``setsid()`` itself leaves the group and is out of reach.)
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

MAX_STDOUT_BYTES = 1024 * 1024
STDERR_TAIL_BYTES = 8 * 1024
KILL_GRACE_SECONDS = 0.25
_CHUNK = 64 * 1024

#: Environment variables a code judge always receives; everything else must be listed.
ENV_ALLOWLIST = (
    "PATH",
    "HOME",
    "LANG",
    "LANGUAGE",
    "TMPDIR",
    "TEMP",
    "TMP",
    "TZ",
    "TERM",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "CONDA_DEFAULT_ENV",
    "SYSTEMROOT",
    "COMSPEC",
    "PATHEXT",
)
_ENV_PREFIXES = ("LC_", "PYTHON")


def environment() -> dict[str, str]:
    """A copy of ``os.environ`` that is safe to take while another thread changes it
    (pytest's thread sets ``PYTEST_CURRENT_TEST`` around every test)."""
    for _ in range(10):
        try:
            return dict(os.environ.items())
        except (KeyError, RuntimeError):
            continue
    return dict(os.environ.items())


def scrubbed_env(
    extra_names: Iterable[str] = (), base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The allowlisted part of the environment plus the names a user asked to pass on."""
    source = environment() if base is None else base
    allowed = set(ENV_ALLOWLIST) | set(extra_names)
    return {
        name: value
        for name, value in source.items()
        if name in allowed or name.startswith(_ENV_PREFIXES)
    }


@dataclass(frozen=True)
class ProcessResult:
    pid: int
    returncode: int | None
    stdout: bytes
    stderr_tail: bytes
    timed_out: bool = False
    stdout_overflow: bool = False
    duration: float = 0.0

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

    def failure(self, what: str, timeout: float) -> str | None:
        """Why the process did not succeed, in one sentence, or None when it exited 0."""
        if self.timed_out:
            return f"{what} timed out after {timeout:g}s and was killed"
        if self.stdout_overflow:
            return (
                f"{what} wrote more than {MAX_STDOUT_BYTES // 1024} KiB to stdout "
                "and was stopped; its output was discarded"
            )
        if self.signal_name:
            return f"{what} was killed by {self.signal_name}"
        if self.returncode:
            tail = self.stderr_text()
            return f"{what} exited with code {self.returncode}" + (f": {tail}" if tail else "")
        return None


def python_argv(argv: Sequence[str]) -> list[str]:
    """Run ``python``/``python3`` scripts with the interpreter that runs pytest."""
    args = list(argv)
    if args and args[0] in ("python", "python3"):
        args[0] = sys.executable
    return args


def _kill_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


async def _exit(proc: asyncio.subprocess.Process) -> None:
    """Wait for the child itself to exit.

    ``Process.wait()`` also waits for its pipes to close, which never happens while a process
    the child left behind holds them; the return code is known as soon as the child is reaped.
    """
    pause = 0.002
    while proc.returncode is None:
        await asyncio.sleep(pause)
        pause = min(pause * 2, 0.05)


async def _terminate(proc: asyncio.subprocess.Process) -> None:
    _kill_group(proc.pid, signal.SIGTERM)
    try:
        await asyncio.wait_for(proc.wait(), KILL_GRACE_SECONDS)
    except asyncio.TimeoutError:
        pass
    _kill_group(proc.pid, signal.SIGKILL)
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(proc.wait(), 5)


async def run_process(
    argv: Sequence[str] | str,
    *,
    stdin: bytes = b"",
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float,
    max_stdout: int = MAX_STDOUT_BYTES,
) -> ProcessResult:
    """Run a command (argv list, or a string for ``/bin/sh -c``) and collect its output."""
    args = ["/bin/sh", "-c", argv] if isinstance(argv, str) else python_argv(argv)
    child_env = environment() if env is None else dict(env)
    # `python` in a shell command means the interpreter running pytest, as in an active venv.
    bindir = os.path.dirname(sys.executable)
    child_env["PATH"] = os.pathsep.join(p for p in (bindir, child_env.get("PATH")) if p)
    started = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=str(cwd) if cwd else None,
        env=child_env,
        start_new_session=True,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    out = bytearray()
    err = bytearray()
    overflow = asyncio.Event()

    async def feed() -> None:
        assert proc.stdin is not None
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            proc.stdin.write(stdin)
            await proc.stdin.drain()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            proc.stdin.close()

    async def read_out() -> None:
        # Past the cap, keep reading (and discarding) until EOF: a pipe left full would keep
        # the transport open after the child is killed.
        assert proc.stdout is not None
        while chunk := await proc.stdout.read(_CHUNK):
            if overflow.is_set():
                continue
            out.extend(chunk)
            if len(out) > max_stdout:
                out.clear()
                overflow.set()

    async def read_err() -> None:
        assert proc.stderr is not None
        while chunk := await proc.stderr.read(_CHUNK):
            err.extend(chunk)
            del err[:-STDERR_TAIL_BYTES]

    readers = [asyncio.ensure_future(c) for c in (feed(), read_out(), read_err())]
    exited = asyncio.ensure_future(_exit(proc))
    flood = asyncio.ensure_future(overflow.wait())
    timed_out = False
    try:
        done, _ = await asyncio.wait(
            {exited, flood}, timeout=timeout, return_when="FIRST_COMPLETED"
        )
        if not done:
            timed_out = True
        if not exited.done():
            await _terminate(proc)
        else:
            _kill_group(proc.pid, signal.SIGKILL)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.gather(*readers, return_exceptions=True), 1.0)
    finally:
        flood.cancel()
        for task in readers:
            task.cancel()
        if proc.returncode is None:
            await asyncio.shield(_terminate(proc))
        exited.cancel()
        # A process that left our group (setsid) may still hold the pipes; let them go.
        transport = getattr(proc, "_transport", None)
        if transport is not None:
            transport.close()
    return ProcessResult(
        pid=proc.pid,
        returncode=proc.returncode,
        stdout=bytes(out),
        stderr_tail=bytes(err[-STDERR_TAIL_BYTES:]),
        timed_out=timed_out,
        stdout_overflow=overflow.is_set(),
        duration=time.monotonic() - started,
    )
