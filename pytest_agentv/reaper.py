"""The reaper every code judge, prompt script and CLI target runs under (Linux), so that no
process they start outlives them — not even one that left their process group.

``python -I -S reaper.py ARGV...`` makes itself a child subreaper (every orphaned descendant is
re-parented to it, whatever it did to escape: ``setsid``, ``setpgid(0, 0)``, a double fork),
asks to be sent SIGTERM when pytest dies (also by SIGKILL), and runs ARGV as its child with the
same stdin, stdout and stderr. When the child exits, every descendant left behind is killed;
on SIGTERM (a timeout, a cancelled case, Ctrl-C or the death of pytest) every descendant gets
SIGTERM, then SIGKILL after a short grace. It then exits as the child did, so the caller sees
the child's exit code or signal; when the child exited leaving descendants running, the last line
of stderr says how many (``LEFT_BEHIND``), which ``processes.py`` takes off again.

It is a standalone script (standard library only, started with ``-S`` for speed), not a module
of the package: it runs in a process of its own.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
GRACE_SECONDS = 0.25
EXEC_FAILED = 127
#: The stderr line that counts the descendants a child left running when it exited.
LEFT_BEHIND = "agentv-reaper: descendants left running: "
HANDLED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class _Terminate(Exception):
    """SIGTERM, SIGINT or SIGHUP arrived: stop the child and everything it started."""


def _stop(signum: int, frame: object) -> None:
    raise _Terminate


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
        for pid in _children():
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        time.sleep(0.005)


def _signal_all(sig: int) -> None:
    for pid in _children():
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def main(argv: list[str]) -> int:
    parent = os.getppid()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    for sig in HANDLED:
        signal.signal(sig, _stop)
    status = EXEC_FAILED << 8
    try:
        if os.getppid() != parent:  # pytest died before the death signal was armed
            raise _Terminate
        # Block our signals across the fork, so that the child never runs our handler.
        signal.pthread_sigmask(signal.SIG_BLOCK, HANDLED)
        child = os.fork()
        if child == 0:
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            for sig in HANDLED:
                signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, HANDLED)
            try:
                os.execvp(argv[0], argv)
            except OSError as exc:
                os.write(2, f"cannot run {argv[0]!r}: {exc.strerror}\n".encode())
            os._exit(EXEC_FAILED)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, HANDLED)
        # The child holds the pipes now; they close when it and what it started are done.
        report = os.dup(2)  # not inherited: the child is already running
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        while True:
            pid, found = os.waitpid(-1, 0)
            if pid == child:
                status = found
                break
        for sig in HANDLED:
            signal.signal(sig, signal.SIG_IGN)
        left = len(_children()) if _reap() else 0
        _kill_all(signal.SIGKILL)
        if left:
            os.write(report, f"\n{LEFT_BEHIND}{left}\n".encode())
    except _Terminate:
        for sig in HANDLED:
            signal.signal(sig, signal.SIG_IGN)
        _signal_all(signal.SIGTERM)
        deadline = time.monotonic() + GRACE_SECONDS
        while time.monotonic() < deadline and _reap() and _children():
            time.sleep(0.01)
        _kill_all(signal.SIGKILL)
        status = int(signal.SIGTERM)  # as a wait status: killed by SIGTERM
    if os.WIFSIGNALED(status):
        killed_by = os.WTERMSIG(status)
        try:
            signal.signal(killed_by, signal.SIG_DFL)
        except (OSError, ValueError):  # SIGKILL and SIGSTOP have no handler to reset
            pass
        os.kill(os.getpid(), killed_by)
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else EXEC_FAILED


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
