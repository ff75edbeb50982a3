"""A workspace's lifecycle hooks (AgentV v4's ``before_all`` … ``after_each``, a matrix target's
own), the context v4 gives them, and the ``env`` checks that run before ``before_all``.

A hook that fails, times out or leaves processes running raises ``NotGradedError`` naming the
hook, its command and its exit status with its output (redacted): the cases it serves are not
graded.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..cases import PreparedCase
from ..errors import NotGradedError
from ..processes import child_env, run_process
from ..redaction import redact
from ..schema.suite import TargetHooks
from ..schema.workspace import HookConfig
from .plan import WorkspacePlan

#: v4's default deadlines: setup hooks, and the hooks after a case.
SETUP_TIMEOUT = 60.0
TEARDOWN_TIMEOUT = 30.0
_OUTPUT_SHOWN = 2000
_VARIABLE = re.compile(r"\{\{(\w+)\}\}")


@dataclass(frozen=True)
class MatrixHooks:
    """A matrix target's hooks, and the folder their commands run from (its eval file's)."""

    name: str
    hooks: TargetHooks
    folder: Path


def deadline(name: str, hook: HookConfig) -> float:
    """Seconds a hook may run: its ``timeout_ms``, else v4's default for its kind."""
    if hook.timeout_ms:
        return hook.timeout_ms / 1000
    return SETUP_TIMEOUT if name.startswith("before") else TEARDOWN_TIMEOUT


def hook_context(
    plan: WorkspacePlan, path: Path, test_id: str, run_id: str, case: PreparedCase | None
) -> dict[str, Any]:
    """v4's hook context (stdin JSON, and ``{{name}}`` in the command's words)."""
    return {
        "workspace_path": str(path),
        "test_id": test_id,
        "eval_run_id": run_id,
        "case_input": case.question if case is not None else None,
        "case_metadata": plan.metadata if case is not None else None,
    }


async def run_hook(
    name: str,
    hook: HookConfig | None,
    plan: WorkspacePlan,
    context: dict[str, Any],
    env: dict[str, str],
    target: MatrixHooks | None = None,
) -> None:
    """Run a hook's command with v4's context on stdin (``NotGradedError`` if it fails): the
    workspace's, or ``target``'s (from its eval file's folder, whatever ``hooks.enabled``)."""
    if hook is None or not hook.command or (target is None and not plan.hooks_enabled):
        return
    words = {key: "" if value is None else str(value) for key, value in context.items()}
    if context.get("case_metadata") is not None:
        words["case_metadata"] = json.dumps(context["case_metadata"])
    argv = [_VARIABLE.sub(lambda m: words.get(m.group(1), m.group(0)), w) for w in hook.command]
    timeout = deadline(name, hook)
    owner = "workspace" if target is None else f"target '{target.name}'"
    what = f"{owner} hook {name} ({shlex.join(argv)})"
    cwd = plan.hook_cwd(hook, name, None if target is None else target.folder)
    try:
        result = await run_process(
            argv, stdin=json.dumps(context).encode("utf-8"), cwd=cwd, env=env, timeout=timeout
        )
    except OSError as exc:
        raise NotGradedError(redact(f"{what} cannot start: {exc.strerror}")) from None
    failure = result.failure(what, timeout)
    if failure is None and result.left_behind:
        failure = (
            f"{what} exited but left {result.left_behind} process(es) running; they were killed"
        )
    if failure is not None:
        shown = result.stdout.decode("utf-8", errors="replace").strip()[-_OUTPUT_SHOWN:]
        raise NotGradedError(redact(failure + (f"\nits output: {shown}" if shown else "")))


async def preflight(plan: WorkspacePlan, cwd: Path, env: dict[str, str]) -> None:
    """v4's ``env`` checks, before ``before_all``: every command on ``PATH``, every Python
    module importable; all that is missing is named at once."""
    checks = plan.config.env
    if checks is None:
        return
    path = child_env(env)["PATH"]
    missing = [f"command: {c}" for c in checks.required_commands if not shutil.which(c, path=path)]
    for module in checks.required_python_modules:
        result = await run_process(
            ["python3", "-c", f"import {module}"], cwd=cwd, env=env, timeout=60
        )
        if result.returncode != 0:
            missing.append(f"python module: {module}")
    if missing:
        raise NotGradedError(
            f"workspace env check failed ({plan.where}): missing {', '.join(missing)}"
        )
