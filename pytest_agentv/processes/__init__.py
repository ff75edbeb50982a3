"""Child processes for code judges and CLI targets: bounded in time, output and environment.

No process a child starts outlives its call. On Linux each child runs under a reaper
(``reaper.py``, forked by one reaper server per pytest process: ``reaped.py``), a child
subreaper that every escaped descendant (``setsid``, a double fork) is re-parented to: when the
child exits, or the call ends early (timeout, cancellation, an output flood, Ctrl-C, SIGTERM),
the reaper stops every descendant — SIGTERM, then SIGKILL after a short grace — and it is told of
pytest's death, even by SIGKILL (the server's control socket closes, and the server's death is
sent to each reaper by ``PR_SET_PDEATHSIG``). Elsewhere the child's process group is killed the
same way (a grandchild that leaves the group is then out of reach). Pipes are drained as data
arrives, so a chatty child cannot deadlock, and only the last bytes of stderr are kept
(``run.py``). What a child is given, its command line and environment, is ``env.py``.
"""

from .env import ENV_ALLOWLIST, check_runnable, child_env, python_argv, scrubbed_env
from .run import (
    KILL_GRACE_SECONDS,
    MAX_STDERR_BYTES,
    MAX_STDOUT_BYTES,
    REAPER_GRACE_SECONDS,
    STDERR_TAIL_BYTES,
    USE_REAPER,
    ProcessResult,
    limit_children,
    run_process,
)

__all__ = [
    "ENV_ALLOWLIST",
    "KILL_GRACE_SECONDS",
    "MAX_STDERR_BYTES",
    "MAX_STDOUT_BYTES",
    "REAPER_GRACE_SECONDS",
    "STDERR_TAIL_BYTES",
    "USE_REAPER",
    "ProcessResult",
    "check_runnable",
    "child_env",
    "limit_children",
    "python_argv",
    "run_process",
    "scrubbed_env",
]
