"""``code_judge``: any script that reads the case as JSON on stdin and prints a grade as JSON.

The wire format is AgentV's: snake_case envelope keys on stdin (user data passed as is), and
``{score, hits, misses, reasoning, details}`` on stdout (``{pass, score, reason, checks}`` and
``assertions`` are accepted too). A script that exits non-zero scores 0 with the cause in
``misses``, as AgentV scores it. A script that broke (a timeout, a signal, an output flood) or
replied outside the contract (not one JSON object, a key given twice, a score out of range) is
not graded: what it said about the answer is unknown, and no gate turns it into a pass.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import ConfigError, DuplicateKeyError
from ..jsonlines import read_program_json
from ..results import AssertionRow
from ..schema.base import finite_number, shown_number
from .base import EvaluationContext, EvaluationScore
from .score import assertion_line
from .scripts import DEFAULT_SCRIPT_TIMEOUT, ScriptRun, Scripts, script_payload


def _strings(value: Any, key: str) -> tuple[list[str], str | None]:
    if value is None:
        return [], None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return [], f"code judge '{key}' must be a list of strings"
    return [v for v in value if v.strip()], None


def _checks(value: Any, key: str) -> tuple[list[AssertionRow], str | None]:
    """``checks`` (``{pass, text|id, reason}``) or AgentV v4's ``assertions`` (``{text,
    passed, evidence}``), as v4 assertions."""
    if value is None:
        return [], None
    if not isinstance(value, list):
        return [], f"code judge '{key}' must be a list of objects"
    checks: list[AssertionRow] = []
    for item in value:
        if not isinstance(item, dict):
            return [], f"code judge '{key}' must be a list of objects"
        passed = item.get("pass", item.get("passed"))
        if not isinstance(passed, bool):
            return [], f"each of the code judge's '{key}' needs a boolean 'pass'"
        check = AssertionRow(text=str(item.get("text") or item.get("id") or "check"), passed=passed)
        reason = item.get("reason") or item.get("evidence")
        checks.append(check | {"evidence": str(reason)} if reason else check)
    return checks, None


#: Output that holds a JSON object (a line that starts one, or ``{"`` anywhere) is a reply
#: under the JSON contract, not plain text, even when it cannot be read.
_HOLDS_OBJECT = re.compile(r'^\s*\{|\{\s*"', re.MULTILINE)


def _plain_text(text: str) -> EvaluationScore:
    """AgentV v4's exit-code convention: a script that exits 0 without printing a JSON object
    passes, its output the assertion's text (``code-grader.ts``)."""
    check = AssertionRow(text=text or "exit 0", passed=True)
    return EvaluationScore.graded(1.0, assertions=(check,), expected_aspect_count=1)


def _outside(problem: str) -> EvaluationScore:
    """A reply outside the contract says nothing about the answer: not graded, so that no gate
    (``negate``) turns it into a pass."""
    return EvaluationScore.graded(0.0, misses=(problem,), error=problem)


def parse_judge_output(stdout: bytes, *, v4: bool = False) -> EvaluationScore:
    """Turn a code judge's stdout into a score; output outside the contract is not graded. The
    reply is the whole output, without the spaces and byte order mark around it (JavaScript's
    ``trim``, as AgentV v4 reads it). In a file written with AgentV v4's names, output that
    holds no JSON object passes (v4's exit-code convention; the script exited 0 to get here)."""
    try:
        text = stdout.decode("utf-8").strip().strip("\ufeff").strip()
    except UnicodeDecodeError:
        return _outside("code judge output is not UTF-8 text")
    try:
        data = read_program_json(text)
    except DuplicateKeyError as exc:
        # Which of the two values is the grade is unknown: no grade at all, not a zero.
        return _outside(f"code judge output is outside its contract: {exc}")
    except ValueError as exc:
        if v4 and not _HOLDS_OBJECT.search(text):
            return _plain_text(text)
        if not text:
            return _outside(
                'code judge printed nothing on stdout; expected a JSON object like {"score": 1}'
            )
        preview = " ".join(text.split())[:120]
        return _outside(
            "code judge output must be one JSON object and nothing else; "
            f"it is not valid JSON ({exc}): {preview}"
        )
    if not isinstance(data, dict):
        if v4:
            return _plain_text(text)
        kind = "an array" if isinstance(data, list) else type(data).__name__
        return _outside(f"code judge output must be a JSON object, got {kind}")

    hits, problem = _strings(data.get("hits"), "hits")
    misses, problem2 = _strings(data.get("misses"), "misses")
    checks, problem3 = _checks(data.get("checks"), "checks")
    assertions, problem4 = _checks(data.get("assertions"), "assertions")
    for found in (problem, problem2, problem3, problem4):
        if found:
            return _outside(found)
    checks += assertions
    hits += [assertion_line(check) for check in checks if check["passed"]]
    misses += [assertion_line(check) for check in checks if not check["passed"]]

    passed = data.get("pass")
    if passed is not None and not isinstance(passed, bool):
        return _outside("code judge 'pass' must be true or false")
    score = data.get("score")
    if score is None:
        if checks:
            score = sum(1 for check in checks if check["passed"]) / len(checks)
        elif passed is not None:
            score = 1.0 if passed else 0.0
        else:
            return _outside("code judge output needs a 'score' (0 to 1), 'pass' or 'checks'")
    got = f"(got {shown_number(score)})"
    if isinstance(score, bool) or not isinstance(score, (int, float)):
        return _outside(f"code judge 'score' must be a number between 0 and 1 {got}")
    number = finite_number(score)
    if number is None or not 0 <= number <= 1:
        return _outside(f"code judge 'score' must be between 0 and 1 {got}")

    reasoning = data.get("reasoning", data.get("reason"))
    if reasoning is not None and not isinstance(reasoning, str):
        return _outside("code judge 'reasoning' must be a string")
    details = data.get("details")
    if details is not None and not isinstance(details, dict):
        return _outside("code judge 'details' must be an object")
    return EvaluationScore(
        score=number,
        hits=tuple(hits),
        misses=tuple(misses),
        expected_aspect_count=len(hits) + len(misses),
        reasoning=reasoning,
        # `"pass": false` or `"verdict": "fail"` fail the case whatever the score.
        gate_failed=passed is False or data.get("verdict") == "fail",
        details=details,
        assertions=checks if not data.get("hits") and not data.get("misses") else (),
    )


def script_score(run: ScriptRun, *, v4: bool = False) -> EvaluationScore:
    """A code judge's or code aggregator's grade. A script that ran and exited non-zero said
    "fail" (AgentV's convention): score 0 with the cause. One that broke (timed out, killed,
    flooded its output) said nothing: not graded."""
    if run.failure is None:
        return parse_judge_output(run.stdout, v4=v4)
    if run.broke:
        return _outside(run.failure)
    return EvaluationScore.graded(0.0, misses=(run.failure,))


class CodeEvaluator:
    """Run a script judge (REQ-EVAL-003). Options given here are defaults for YAML entries."""

    kind = "code_judge"
    #: A default kind needs this, which only an entry of its own gives.
    entry_needs = "a script: list the code judge under 'evaluators' with its 'script'"

    def __init__(
        self,
        script: Sequence[str] | str | None = None,
        cwd: str | Path | None = None,
        timeout_seconds: float | None = None,
        *,
        default_timeout: float = DEFAULT_SCRIPT_TIMEOUT,
        env_passthrough: Sequence[str] = (),
    ) -> None:
        self.script = script
        self.cwd = cwd
        self.timeout_seconds = timeout_seconds
        self.scripts = Scripts(default_timeout, tuple(env_passthrough))

    async def evaluate(self, context: EvaluationContext) -> EvaluationScore:
        entry = context.evaluator
        script = entry.script if entry is not None and entry.script is not None else self.script
        if script is None:
            raise ConfigError("code judge has no 'script' to run")
        cwd = entry.cwd if entry is not None and entry.cwd is not None else self.cwd
        argv: list[str] | str = script if isinstance(script, str) else list(script)
        request = {"script": argv, "cwd": str(cwd) if cwd is not None else "."}
        run = await self.scripts.run(
            argv,
            script_payload(context),
            case=context.eval_case,
            what="code judge",
            cwd=str(cwd) if cwd is not None else None,
            timeout=(entry.timeout_seconds if entry is not None else None) or self.timeout_seconds,
            workspace=context.workspace_path,
        )
        return replace(script_score(run, v4=context.eval_case.v4), evaluator_raw_request=request)
