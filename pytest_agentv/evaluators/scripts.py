"""The one runner of the scripts evaluators call — code judges, code aggregators, prompt scripts —
and the JSON payload they read on stdin (AgentV's wire format: snake_case envelope keys, user data
as it was written), so every script sees the same thing.

A script that cannot start — its program not found or not executable, or the script file its
command names (``python judge.py``) not there — is a setup problem: ``ConfigError``, the case is
not graded. A script that starts and fails (a non-zero exit) said "fail": score 0 with the
cause, as AgentV scores it; one that broke (timed out, killed, flooded its output) said nothing.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..cases import PreparedCase
from ..errors import ConfigError
from ..paths import display_path, resolve_reference
from ..processes import check_runnable, child_env, python_argv, run_process, scrubbed_env
from ..reports.agentv_v4.rows import trace_events
from .base import EvaluationContext

#: Seconds a script (code judge, prompt script) may run unless its entry or the run says more.
DEFAULT_SCRIPT_TIMEOUT = 60.0

#: How a command names the script file it runs (``python judge.py``, ``uv run check.py``,
#: ``node ../scripts/gate.js``): by its suffix.
SCRIPT_SUFFIXES = (
    ".py",
    ".js",
    ".mjs",
    ".cjs",
    ".ts",
    ".mts",
    ".cts",
    ".jsx",
    ".tsx",
    ".sh",
    ".bash",
    ".rb",
    ".pl",
    ".php",
    ".lua",
)
#: After one of these the command runs code it is given (``python -c``, ``node -e``) or a module.
_INLINE = frozenset({"-c", "-e", "-m", "--eval"})
#: The shell's own commands (POSIX ``sh``): not programs on ``PATH``.
_SHELL_BUILTINS = frozenset(
    ": . [ alias bg break cd command continue echo eval exec exit export false fc fg getopts "
    "hash jobs kill local printf pwd read readonly return set shift test times trap true type "
    "ulimit umask unalias unset wait".split()
)
#: Shell syntax beyond one simple command (operators, expansions, globs, an assignment first):
#: such a string's words are the shell's business.
_SHELL_SYNTAX = re.compile(r"[;&|<>()$`\\\n*?\[\]~]|^\s*[A-Za-z_][A-Za-z0-9_]*=")


def command_words(script: Sequence[str] | str) -> list[str] | None:
    """A command's words: an argv as given, a shell string's when it is one simple command of a
    program; None when it is more, or the shell's own command (``exit 1``)."""
    if not isinstance(script, str):
        return list(script)
    if _SHELL_SYNTAX.search(script):
        return None
    try:
        words = shlex.split(script)
    except ValueError:
        return None
    return None if words and words[0] in _SHELL_BUILTINS else words


def script_file(words: Sequence[str]) -> str | None:
    """The script file a command runs: the first argument after its program named like one,
    unless code is given inline before it (``python -c ...``)."""
    for word in words[1:]:
        if word in _INLINE:
            return None
        if not word.startswith("-") and word.lower().endswith(SCRIPT_SUFFIXES):
            return word
    return None


def check_startable(
    script: Sequence[str] | str, folder: Path, path: str, what: str, shown: str
) -> None:
    """``ConfigError`` naming the path when ``script`` cannot start from ``folder`` (``shown``
    as reports show it): its program is not found on ``path`` or not executable, or the script
    file it names is not there."""
    words = command_words(script)
    if not words:
        return
    try:
        check_runnable(python_argv(words), path, folder)
    except OSError as exc:
        problem = "is not executable" if isinstance(exc, PermissionError) else "was not found"
        raise ConfigError(
            f"{what} cannot start: program '{words[0]}' {problem} (run from {shown})"
        ) from None
    file = script_file(words)
    if file is not None and not (folder / file).exists():
        raise ConfigError(f"{what} cannot start: script file '{file}' does not exist (in {shown})")


def script_payload(context: EvaluationContext) -> dict[str, Any]:
    """The stdin object of a code judge and of an executable prompt template, in both AgentV
    generations' keys so that judge scripts written for either read what they expect: v2.5.8's
    (``question``, ``candidate_answer``, ``output_messages``...) and v4's (``output``,
    ``criteria``, ``input``, ``expected_output``, ``messages``...). AgentV's wire format:
    snake_case envelope keys, user data as it was written. A v4 file's scripts get no
    ``reference_answer``: v4's Python grader helper refuses a payload that has it (a key
    v4 retired), and v4 scripts read ``expected_output``."""
    case = context.eval_case
    entry = context.evaluator
    options = entry.options if entry is not None else {}
    messages = list(context.output_messages) if context.output_messages is not None else None
    summary = context.trace_summary
    v4_summary = summary
    if summary is not None and "tool_calls" not in summary:  # v4's name for the counts by tool
        v4_summary = {**summary, "tool_calls": summary.get("tool_calls_by_name", {})}
    payload = {
        "question": case.question,
        "expected_outcome": case.expected_outcome,
        "expected_messages": list(case.expected_messages),
        "reference_answer": case.reference_answer,
        "candidate_answer": context.candidate,
        "output_messages": messages,
        "input_messages": list(case.authored_input),
        "input_files": list(case.input_files),
        "guideline_files": list(case.guideline_files),
        "trace_summary": v4_summary,
        "config": options or None,
        # AgentV v4's names (``code-grader.ts``); ``trace_summary`` above has v4's ``tool_calls``.
        "criteria": case.expected_outcome,
        "expected_output": list(case.expected_messages),
        "output": context.candidate,
        "messages": messages or [],
        "input": list(case.authored_input),
        "metadata": case.metadata,
        "trace": _v4_trace(v4_summary, messages),
        "token_usage": (summary or {}).get("token_usage"),
        "cost_usd": (summary or {}).get("cost_usd"),
        "duration_ms": (summary or {}).get("duration_ms"),
        "start_time": None,
        "end_time": None,
        "file_changes": context.file_changes,
        "workspace_path": context.workspace_path,
    }
    if case.v4:
        del payload["reference_answer"]
    return payload


def _v4_trace(summary: dict[str, Any] | None, messages: list[Any] | None) -> Any:
    """AgentV v4's ``trace``: the trace summary in v4's names with the transcript, when the
    answer has one (v4 scripts test ``trace`` before reading the usage), and the transcript's
    events as v4 derives them from its messages."""
    if summary is None:
        return None
    keys = ("event_count", "tool_calls", "error_count", "tool_durations")
    trace = {key: summary[key] for key in keys if key in summary}
    assistant = [m for m in messages or () if isinstance(m, dict) and m.get("role") == "assistant"]
    trace["llm_call_count"] = summary.get("llm_call_count", len(assistant))
    trace["messages"] = messages or []
    trace["events"] = trace_events([m for m in messages or () if isinstance(m, dict)])
    return trace


@dataclass(frozen=True)
class ScriptRun:
    """What a script did: its stdout, why it failed (None when it exited 0), and whether it
    broke — stopped at its time limit or for flooding its output, or killed by a signal — rather
    than exiting by itself."""

    stdout: bytes
    failure: str | None
    broke: bool


@dataclass(frozen=True)
class Scripts:
    """How the run's scripts run — code judges, code aggregators, prompt scripts: their default
    timeout and the environment names passed on to them (``agentv_code_judge_env``)."""

    timeout: float = DEFAULT_SCRIPT_TIMEOUT
    env_passthrough: tuple[str, ...] = ()

    async def run(
        self,
        script: Sequence[str] | str,
        payload: Mapping[str, Any],
        *,
        case: PreparedCase,
        what: str,
        cwd: str | None = None,
        timeout: float | None = None,
        workspace: str | None = None,
    ) -> ScriptRun:
        """Run ``script`` with ``payload`` as JSON on its stdin, from ``cwd`` (looked up from the
        case's folder, inside the rootdir) or the case's folder, bounded like every child
        process and with a scrubbed environment."""
        folder = (
            resolve_reference(cwd, start=case.folder, rootdir=case.rootdir, what="cwd")
            if cwd is not None
            else case.folder
        )
        limit = timeout or self.timeout
        env = scrubbed_env(self.env_passthrough)
        if workspace is not None:  # AgentV v4 tells code graders where the workspace is
            env["AGENTV_WORKSPACE_PATH"] = workspace
        shown = display_path(folder, case.rootdir)
        check_startable(script, folder, child_env(env)["PATH"], what, shown)
        result = await run_process(
            script if isinstance(script, str) else list(script),
            stdin=json.dumps(payload, ensure_ascii=False).encode("utf-8"),
            cwd=folder,
            env=env,
            timeout=limit,
        )
        return ScriptRun(result.stdout, result.failure(what, limit), result.broke)
