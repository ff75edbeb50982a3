"""Children started under a reaper (Linux), through one reaper server per pytest process.

The server (``reaper.py``) is started once, on the first child, and forks a reaper for each
child after that: starting a Python process for every code judge took some 15 ms of CPU each,
a fork takes about one. A child is asked for with its socket and pipes on the server's control
socket; the reaper's pid, then its wait status, come back on the child's own socket. To the
caller it is an ``asyncio.SubprocessTransport``, as a child started by asyncio is.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from .reaper import MESSAGE_SIZE, NO_FOLDER, PID, STARTED, STATUS, WORD

#: Starts the server from its cached bytecode: as a script it would be compiled at every start.
SERVE_RUN = (
    f"import sys; sys.path.append({str(Path(__file__).parent)!r}); import reaper; reaper.run()"
)


class _Server:
    """The reaper server of this process: forks the reapers, and ends when this process does
    (its end of the control socket closes then)."""

    def __init__(self) -> None:
        self.owner = os.getpid()
        self.control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with theirs:
            self.process = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", SERVE_RUN, str(theirs.fileno())],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),),
                start_new_session=True,
            )

    def ask(self, fds: Sequence[int]) -> None:
        socket.send_fds(self.control, [b"r"], fds)

    def close(self) -> None:
        """Its reapers get SIGTERM as it ends: nothing a child started outlives this."""
        self.control.close()
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


_P = TypeVar("_P", bound=asyncio.SubprocessProtocol)
_server: _Server | None = None
_server_lock = threading.Lock()


@atexit.register
def _stop_server() -> None:
    with _server_lock:
        if _server is not None and _server.owner == os.getpid():
            _server.close()


def _ask(fds: Sequence[int]) -> None:
    """Hand a request to the server, starting it (again, if it died or this is a fork)."""
    global _server
    with _server_lock:
        for attempt in (1, 2):
            if _server is None or _server.owner != os.getpid():
                _server = _Server()
            try:
                _server.ask(fds)
                return
            except OSError:
                _server.close()
                _server = None
                if attempt == 2:
                    raise


class _Pipe(asyncio.Protocol):
    """One of the child's output pipes, passed on as a subprocess protocol expects it."""

    def __init__(self, protocol: asyncio.SubprocessProtocol, fd: int) -> None:
        self.protocol = protocol
        self.fd = fd

    def data_received(self, data: bytes) -> None:
        self.protocol.pipe_data_received(self.fd, data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.protocol.pipe_connection_lost(self.fd, exc)


class Reaped(asyncio.SubprocessTransport):
    """A child under its reaper; the pid is the reaper's, whose process group is the child's."""

    def __init__(self, request: socket.socket, protocol: asyncio.SubprocessProtocol) -> None:
        super().__init__()
        self.request = request
        self.protocol = protocol
        self.pid = 0
        self.returncode: int | None = None
        self.pipes: dict[int, asyncio.BaseTransport] = {}
        self.waiting: asyncio.Task[None] | None = None

    def get_pid(self) -> int:
        return self.pid

    def get_returncode(self) -> int | None:
        return self.returncode

    def get_pipe_transport(self, fd: int) -> Any:
        return self.pipes.get(fd)

    def send_signal(self, signal: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(self.pid, signal)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def is_closing(self) -> bool:
        return self.request.fileno() < 0

    def close(self) -> None:
        if self.returncode is None and self.pid:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)
        for pipe in self.pipes.values():
            pipe.close()
        if self.waiting is not None:
            self.waiting.cancel()
        self.request.close()

    async def started(
        self, loop: asyncio.AbstractEventLoop, argv: list[str], env: Mapping[str, str], folder: str
    ) -> None:
        """Send the command; raises OSError as ``subprocess`` does when it cannot be run, naming
        the folder or the program."""
        _, self.pid = await _receive(loop, self.request, PID)
        command = json.dumps({"argv": argv, "env": dict(env), "cwd": folder}).encode()
        await loop.sock_sendall(self.request, len(command).to_bytes(WORD, sys.byteorder) + command)
        kind, value = await _receive(loop, self.request, STARTED, NO_FOLDER, STATUS)
        if kind == STATUS:  # stopped before its child started
            self._exited(value)
        elif value:
            raise OSError(value, os.strerror(value), folder if kind == NO_FOLDER else argv[0])

    async def wait_for_exit(self) -> None:
        loop = asyncio.get_running_loop()
        if self.returncode is None:
            try:
                _, status = await _receive(loop, self.request, STATUS)
            except EOFError:  # the server died, and the reaper with it
                self.returncode = -signal.SIGTERM
            else:
                self._exited(status)
        self.protocol.process_exited()

    def _exited(self, status: int) -> None:
        self.returncode = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


async def _receive(
    loop: asyncio.AbstractEventLoop, sock: socket.socket, *kinds: bytes
) -> tuple[bytes, int]:
    """The next message from the reaper or the server, of one of ``kinds``."""
    data = b""
    while len(data) < MESSAGE_SIZE:
        chunk = await loop.sock_recv(sock, MESSAGE_SIZE - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    kind = data[:1]
    if kind not in kinds:
        raise EOFError(f"agentv-reaper: {kind!r} where {kinds!r} was due")
    return kind, int.from_bytes(data[1:], sys.byteorder)


async def start(
    protocol_factory: Callable[[], _P],
    args: Sequence[str],
    env: Mapping[str, str],
    cwd: Path | None,
) -> tuple[Reaped, _P]:
    """Start ``args`` under a reaper, as ``loop.subprocess_exec`` would with three pipes and a
    session of its own."""
    loop = asyncio.get_running_loop()
    request, theirs = socket.socketpair()
    stdin_r, stdin_w = os.pipe()
    stdout_r, stdout_w = os.pipe()
    stderr_r, stderr_w = os.pipe()
    ours = [stdin_w, stdout_r, stderr_r]
    try:
        _ask([theirs.fileno(), stdin_r, stdout_w, stderr_w])
    except BaseException:
        request.close()
        for fd in ours:
            os.close(fd)
        raise
    finally:
        theirs.close()
        for fd in (stdin_r, stdout_w, stderr_w):
            os.close(fd)
    protocol = protocol_factory()
    reaped = Reaped(request, protocol)
    try:
        request.setblocking(False)
        # In this process's folder by default, not in the server's (where the first child ran).
        folder = str(cwd) if cwd is not None else os.getcwd()
        try:
            await reaped.started(loop, list(args), env, folder)
        except EOFError:
            raise ChildProcessError("the reaper server stopped before the child started") from None
        modes = ("wb", "rb", "rb")
        files = [open(fd, mode, buffering=0) for fd, mode in zip(ours, modes, strict=True)]
        ours = []
        reaped.pipes[0], _ = await loop.connect_write_pipe(asyncio.Protocol, files[0])
        for fd in (1, 2):
            reaped.pipes[fd], _ = await loop.connect_read_pipe(
                functools.partial(_Pipe, protocol, fd), files[fd]
            )
        reaped.waiting = asyncio.ensure_future(reaped.wait_for_exit())
    except BaseException:
        for fd in ours:
            os.close(fd)
        reaped.close()
        raise
    return reaped, protocol
