"""AgentV v4's ``hooks.before_session`` (``.agentv/config.yaml``): a shell command run once when
the session starts, before any case, whose ``export NAME=value`` lines set environment variables
for the run (secrets fetched from a vault): what v4's ``hooks.ts`` does, under the child-process
rules of every command pytest-agentv runs (a deadline, its whole process tree killed, the
environment scrubbed to the allowlist and ``agentv_code_judge_env``).

Run in the controller before pytest-xdist starts its workers, so that they inherit the
variables; a variable the environment already has keeps its value, as in v4.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ..errors import AgentvError, ConfigError
from ..processes import run_process, scrubbed_env
from ..redaction import redact, refresh_secrets
from .hooks import SETUP_TIMEOUT

if TYPE_CHECKING:
    from ..projectfiles import ProjectFiles

#: v4's ``parseEnvOutput``: ``export NAME=value`` or ``NAME=value``, quotes around the value
#: taken off; any other line is passed over.
_ASSIGNMENT = re.compile(r"(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)")


def exported(stdout: str) -> dict[str, str]:
    """The variables a hook's output sets, the last assignment of a name winning."""
    found: dict[str, str] = {}
    for line in stdout.split("\n"):
        text = line.strip()
        match = _ASSIGNMENT.fullmatch(text) if not text.startswith("#") else None
        if match is None:
            continue
        value = match[2]
        if value[:1] in ("'", '"') and value.endswith(value[0]):  # v4: a lone quote is ""
            value = value[1:-1]
        found[match[1]] = value
    return found


def before_session(files: ProjectFiles, folder: Path, env_names: Iterable[str]) -> str | None:
    """Run the folder's config's hook, if it has one; what it did, for the header.
    ``pytest.UsageError`` when it fails: nothing runs without what it was to set. A config
    that cannot be read is the collection error of each eval file that uses it."""
    try:
        loaded = files.config_for(folder)
    except AgentvError:
        return None
    hooks = loaded.model.hooks if loaded is not None else None
    if loaded is None or hooks is None or hooks.before_session is None:
        return None
    root = loaded.path.parent.parent
    try:
        names = run_before_session(hooks.before_session, loaded.hook_at, root, env_names)
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None
    return f"agentv: {loaded.hook_at}: before_session set {', '.join(names) or 'no variable'}"


def run_before_session(command: str, where: str, root: Path, env_names: Iterable[str]) -> list[str]:
    """Run the command from the project's root (the folder holding ``.agentv``); return the
    names of the variables it set. ``ConfigError`` (naming ``where``, the setting's
    ``file:line``) when it cannot start, fails, times out or leaves processes running."""
    what = f"{where}: hooks.before_session ({command})"
    try:
        result = asyncio.run(
            run_process(command, cwd=root, env=scrubbed_env(env_names), timeout=SETUP_TIMEOUT)
        )
    except OSError as exc:
        raise ConfigError(redact(f"{what} cannot start: {exc.strerror}")) from None
    failure = result.failure(what, SETUP_TIMEOUT)
    if failure is None and result.left_behind:
        failure = f"{what} exited but left {result.left_behind} process(es) running; killed"
    if failure is not None:  # its stdout is not shown: it holds the secrets it fetched
        raise ConfigError(redact(failure))
    names = []
    for name, value in exported(result.stdout.decode("utf-8", errors="replace")).items():
        if name not in os.environ:
            os.environ[name] = value
            names.append(name)
    refresh_secrets()
    return names
