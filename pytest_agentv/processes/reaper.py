"""The reaper every code judge, prompt script and CLI target runs under (Linux), so that no
process they start outlives them — not even one that left their process group.

One reaper server runs per pytest process (``reaped.py`` starts it: ``python -I -S -c SERVE``,
which imports this file from its cached bytecode). For each child it is asked for, it forks a
reaper: a copy of itself, so a child costs a fork rather than a Python start. A reaper makes
itself a session leader and a child subreaper (every orphaned descendant is re-parented to it,
whatever it did to escape: ``setsid``, ``setpgid(0, 0)``, a double fork), asks to be sent SIGTERM
when the server dies, and runs the child with the pipes it was handed as stdin, stdout and
stderr. When the child exits, every descendant left behind is killed; on SIGTERM, SIGINT or
SIGHUP (a timeout, a cancelled case, Ctrl-C, the death of pytest) every descendant gets SIGTERM,
then SIGKILL after a short grace. It then exits as the child did, and the server sends that wait
status to pytest; when the child exited leaving descendants running, the last line of stderr says
how many (``LEFT_BEHIND``), which ``run.py`` takes off again. The server ends when pytest does
(its end of the control socket closes), and its reapers with it.

Signals are blocked and read from a signalfd instead of handled (the standard library's
``signal`` module would import ``enum`` in every reaper), so that waiting for the child and for
a request to stop is one blocking read.
"""

from __future__ import annotations

import ctypes
import json
import os
import select
import socket
import sys
import time

# Linux's numbers (this runs on Linux only).
SIGHUP, SIGINT, SIGKILL, SIGPIPE, SIGTERM, SIGCHLD, SIGXFSZ = 1, 2, 9, 13, 15, 17, 25
SIG_BLOCK, SIG_SETMASK = 0, 2
SFD_CLOEXEC = 0o2000000
SIGINFO_SIZE = 128
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
GRACE_SECONDS = 0.25
EXEC_FAILED = 127
#: The stderr line that counts the descendants a child left running when it exited.
LEFT_BEHIND = "agentv-reaper: descendants left running: "
#: The requests to stop.
STOPPING = (SIGTERM, SIGINT, SIGHUP)
#: A request is four descriptors (its socket, then the child's stdin, stdout and stderr) with
#: one byte; its command follows on its socket (its size in a word, then JSON), and messages go
#: back: the reaper's pid, then whether the child started (0, else the errno of its exec) or the
#: errno of entering its folder, then the reaper's wait status.
REQUEST_FDS = 4
WORD = 4
PID, STARTED, NO_FOLDER, STATUS = b"p", b"x", b"c", b"s"
MESSAGE_SIZE = 1 + WORD


def message(kind: bytes, value: int) -> bytes:
    return kind + value.to_bytes(WORD, sys.byteorder)


class _Terminate(Exception):
    """SIGTERM, SIGINT or SIGHUP arrived: stop the child and everything it started."""


class _SigSet(ctypes.Structure):
    """glibc's ``sigset_t``: 1024 bits."""

    _fields_ = [("bits", ctypes.c_ulong * (1024 // (8 * ctypes.sizeof(ctypes.c_ulong))))]

    def __init__(self, *signals: int) -> None:
        super().__init__()
        width = 8 * ctypes.sizeof(ctypes.c_ulong)
        for sig in signals:
            self.bits[(sig - 1) // width] |= 1 << ((sig - 1) % width)


def _children() -> list[int]:
    pid = os.getpid()
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
        for task in tasks:
            with open(f"/proc/{pid}/task/{task}/children") as stream:
                found.extend(int(part) for part in stream.read().split())
        return found
    except OSError:
        pass
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stream:
                stat = stream.read()
        except OSError:
            continue
        # The command name may hold spaces and parentheses: fields follow its last ")".
        if int(stat[stat.rindex(")") + 2 :].split()[1]) == pid:
            found.append(int(entry))
    return found


def _reap() -> bool:
    """Collect exited children; False once there are none left."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True


def _kill_all(sig: int) -> None:
    """Signal every descendant until none is left: those whose parent dies come to us."""
    while _reap():
        _signal_all(sig)
        time.sleep(0.005)


def _signal_all(sig: int) -> None:
    for pid in _children():
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def _wait_for(child: int, signals: int) -> int:
    """The child's wait status, once it exits; descendants that exit before it are collected
    on the way. Raises ``_Terminate`` when asked to stop."""
    while True:
        signo = int.from_bytes(os.read(signals, SIGINFO_SIZE)[:4], sys.byteorder)
        if signo != SIGCHLD:
            raise _Terminate
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                pid = 0
            if pid == 0:
                break
            if pid == child:
                return status


def _read_exactly(fd: int, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = os.read(fd, size - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def _die_as(libc: ctypes.CDLL, sig: int) -> None:
    """End this process by ``sig`` (Python ignores some, and ours are blocked)."""
    libc.signal(sig, None)  # SIG_DFL
    libc.pthread_sigmask(SIG_SETMASK, ctypes.byref(_SigSet()), None)
    os.kill(os.getpid(), sig)


def _reaper(libc: ctypes.CDLL, request: int, inherited: _SigSet) -> int:
    """One reaper, forked by the server with the child's pipes as its 0, 1 and 2: sends its pid,
    reads the command, runs it, and returns its exit code (or dies by the child's signal)."""
    server = os.getppid()
    os.setsid()
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    libc.prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0)
    stopping = _SigSet(*STOPPING, SIGCHLD)
    libc.pthread_sigmask(SIG_BLOCK, ctypes.byref(stopping), None)
    signals = libc.signalfd(-1, ctypes.byref(stopping), SFD_CLOEXEC)
    if signals < 0:
        os.write(2, f"agentv-reaper: signalfd: {os.strerror(ctypes.get_errno())}\n".encode())
        return EXEC_FAILED
    status = EXEC_FAILED << 8
    try:
        if os.getppid() != server:  # the server died before the death signal was armed
            raise _Terminate
        os.write(request, message(PID, os.getpid()))
        size = int.from_bytes(_read_exactly(request, WORD), sys.byteorder)
        command = json.loads(_read_exactly(request, size))
        argv, env, cwd = command["argv"], command["env"], command["cwd"]
        failed, failing = os.pipe()  # closed by the child's exec, else it says why not
        child = os.fork()
        if child == 0:
            libc.prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0)
            # As a child started by pytest directly would be (Python ignores these two).
            libc.signal(SIGPIPE, None)  # SIG_DFL
            libc.signal(SIGXFSZ, None)
            libc.pthread_sigmask(SIG_SETMASK, ctypes.byref(inherited), None)
            step = NO_FOLDER
            try:
                os.chdir(cwd)
                step = STARTED
                os.execvpe(argv[0], argv, env)
            except OSError as exc:
                os.write(failing, message(step, exc.errno or 0))
            os._exit(EXEC_FAILED)
        os.close(failing)
        failure = os.read(failed, MESSAGE_SIZE)  # nothing once the exec closed it
        os.close(failed)
        os.write(request, failure or message(STARTED, 0))
        os.close(request)
        # The child holds the pipes now; they close when it and what it started are done.
        report = os.dup(2)
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        status = _wait_for(child, signals)
        left = len(_children()) if _reap() else 0
        _kill_all(SIGKILL)
        if left:
            os.write(report, f"\n{LEFT_BEHIND}{left}\n".encode())
    except (_Terminate, EOFError):
        _signal_all(SIGTERM)
        deadline = time.monotonic() + GRACE_SECONDS
        while time.monotonic() < deadline and _reap() and _children():
            time.sleep(0.01)
        _kill_all(SIGKILL)
        status = SIGTERM  # as a wait status: killed by SIGTERM
    if os.WIFSIGNALED(status):
        _die_as(libc, os.WTERMSIG(status))
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else EXEC_FAILED


def serve(control: socket.socket) -> None:
    """Fork a reaper for each request on ``control`` and send each its wait status when it
    exits, until pytest closes its end."""
    libc = ctypes.CDLL(None, use_errno=True)
    inherited = _SigSet()
    exits = _SigSet(SIGCHLD)
    libc.pthread_sigmask(SIG_BLOCK, ctypes.byref(exits), ctypes.byref(inherited))
    exited = libc.signalfd(-1, ctypes.byref(exits), SFD_CLOEXEC)
    reapers: dict[int, int] = {}  # a reaper's pid: its request's socket
    poll = select.poll()
    poll.register(control, select.POLLIN)
    poll.register(exited, select.POLLIN)
    while True:
        for fd, _ in poll.poll():
            if fd == exited:
                os.read(exited, SIGINFO_SIZE * 64)
                _report_exits(reapers)
                continue
            _, fds, _, _ = socket.recv_fds(control, 1, REQUEST_FDS, socket.MSG_CMSG_CLOEXEC)
            if not fds:
                return  # pytest is gone: the reapers get SIGTERM as this process ends
            if len(fds) != REQUEST_FDS:
                for stray in fds:
                    os.close(stray)
                continue
            request, stdin, stdout, stderr = fds
            try:
                pid = os.fork()
            except OSError as exc:
                os.write(stderr, f"agentv-reaper: fork: {exc.strerror}\n".encode())
                _send_status(request, EXEC_FAILED << 8)
                pid = -1
            if pid == 0:
                for fd in (control.fileno(), exited, *reapers.values()):
                    os.close(fd)
                for target, source in enumerate((stdin, stdout, stderr)):
                    os.dup2(source, target)
                for source in (stdin, stdout, stderr):
                    os.close(source)
                code = EXEC_FAILED
                try:
                    code = _reaper(libc, request, inherited)
                except BaseException as exc:  # a reaper never returns into the server's loop
                    os.write(2, f"agentv-reaper: {exc!r}\n".encode())
                finally:
                    os._exit(code)
            for fd in (stdin, stdout, stderr):
                os.close(fd)
            if pid > 0:
                reapers[pid] = request


def _report_exits(reapers: dict[int, int]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        request = reapers.pop(pid, None)
        if request is not None:
            _send_status(request, status)


def _send_status(request: int, status: int) -> None:
    try:
        os.write(request, message(STATUS, status))
    except OSError:
        pass  # pytest stopped waiting for it
    os.close(request)


def run() -> None:
    """The entry point: ``sys.argv`` is ``["-c", CONTROL_FD]``."""
    serve(socket.socket(fileno=int(sys.argv[1])))
