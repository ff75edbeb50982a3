"""The reaper every code judge, prompt script and CLI target runs under (Linux), so that no
process they start outlives them — not even one that left their process group.

``python -I -S -c RUN ARGV...`` (``RUN`` imports this file from its cached bytecode) makes itself
a child subreaper (every orphaned descendant is re-parented to it, whatever it did to escape:
``setsid``, ``setpgid(0, 0)``, a double fork), asks to be sent SIGTERM when pytest dies (also by
SIGKILL), and runs ARGV as its child with the same stdin, stdout and stderr. When the child exits,
every descendant left behind is killed; on SIGTERM, SIGINT or SIGHUP (a timeout, a cancelled
case, Ctrl-C or the death of pytest) every descendant gets SIGTERM, then SIGKILL after a short
grace. It then exits as the child did, so the caller sees the child's exit code or signal; when
the child exited leaving descendants running, the last line of stderr says how many
(``LEFT_BEHIND``), which ``processes.py`` takes off again.

It runs in a process of its own for every child, so its start is kept small: the standard
library's ``signal`` module (and the ``enum`` it imports) would double it. Signals are blocked for
the reaper's whole life and read from a signalfd instead of handled, SIGCHLD among them, so that
waiting for the child and for a request to stop is one blocking read.
"""

from __future__ import annotations

import ctypes
import os
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


def _die_as(libc: ctypes.CDLL, sig: int) -> None:
    """End this process by ``sig`` (Python ignores some, and ours are blocked)."""
    libc.signal(sig, None)  # SIG_DFL
    libc.pthread_sigmask(SIG_SETMASK, ctypes.byref(_SigSet()), None)
    os.kill(os.getpid(), sig)


def main(argv: list[str]) -> int:
    parent = os.getppid()
    libc = ctypes.CDLL(None, use_errno=True)
    inherited = _SigSet()
    waited = _SigSet(*STOPPING, SIGCHLD)
    libc.pthread_sigmask(SIG_BLOCK, ctypes.byref(waited), ctypes.byref(inherited))
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    libc.prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0)
    signals = libc.signalfd(-1, ctypes.byref(waited), SFD_CLOEXEC)
    if signals < 0:
        os.write(2, f"agentv-reaper: signalfd: {os.strerror(ctypes.get_errno())}\n".encode())
        return EXEC_FAILED
    status = EXEC_FAILED << 8
    try:
        if os.getppid() != parent:  # pytest died before the death signal was armed
            raise _Terminate
        child = os.fork()
        if child == 0:
            libc.prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0)
            # As a child started by pytest directly would be (Python ignores these two).
            libc.signal(SIGPIPE, None)  # SIG_DFL
            libc.signal(SIGXFSZ, None)
            libc.pthread_sigmask(SIG_SETMASK, ctypes.byref(inherited), None)
            try:
                os.execvp(argv[0], argv)
            except OSError as exc:
                os.write(2, f"cannot run {argv[0]!r}: {exc.strerror}\n".encode())
            os._exit(EXEC_FAILED)
        # The child holds the pipes now; they close when it and what it started are done.
        report = os.dup(2)  # not inherited: the child is already running
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        status = _wait_for(child, signals)
        left = len(_children()) if _reap() else 0
        _kill_all(SIGKILL)
        if left:
            os.write(report, f"\n{LEFT_BEHIND}{left}\n".encode())
    except _Terminate:
        _signal_all(SIGTERM)
        deadline = time.monotonic() + GRACE_SECONDS
        while time.monotonic() < deadline and _reap() and _children():
            time.sleep(0.01)
        _kill_all(SIGKILL)
        status = SIGTERM  # as a wait status: killed by SIGTERM
    if os.WIFSIGNALED(status):
        _die_as(libc, os.WTERMSIG(status))
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else EXEC_FAILED


def run() -> None:
    """The entry point: ``sys.argv`` is ``["-c", *ARGV]``."""
    sys.exit(main(sys.argv[1:]))
