"""What a child process is given: its command line, its environment and its folder."""

from __future__ import annotations

import errno
import os
import shutil
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from ..settings import environment

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
    # Where TLS trust is: a script that installs or fetches (uv, pip, npm, curl) behind a
    # company's certificate authority needs it, and a path to certificates is no secret.
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
)
_ENV_PREFIXES = ("LC_", "PYTHON")


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


def python_argv(argv: Sequence[str]) -> list[str]:
    """Run ``python``/``python3`` scripts with the interpreter that runs pytest."""
    args = list(argv)
    if args and args[0] in ("python", "python3"):
        args[0] = sys.executable
    return args


def child_env(env: Mapping[str, str] | None) -> dict[str, str]:
    """A child's environment (``env``, else this process's): ``python`` in a command means the
    interpreter running pytest, as in an active venv, so its folder comes first on ``PATH``."""
    child = environment() if env is None else dict(env)
    bindir = os.path.dirname(sys.executable)
    child["PATH"] = os.pathsep.join(p for p in (bindir, child.get("PATH")) if p)
    return child


def check_runnable(args: Sequence[str], path: str | None, cwd: Path | None) -> None:
    """Fail before a run as starting the program would: a name is looked up on ``path``, a
    relative path from the child's ``cwd``. Raises ``FileNotFoundError`` or ``PermissionError``
    (not executable)."""
    program = args[0]
    where = os.path.join(cwd, program) if cwd is not None and os.sep in program else program
    if shutil.which(where, path=path) is not None:
        return
    if os.sep in program and os.path.exists(where):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), program)
    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)
