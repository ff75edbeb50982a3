"""``python -m pytest_agentv report``: the rows of any results file as reports show them.

Three shapes are read: ours (``--agentv-results``), AgentV v2.5.8's (``eval_id``, ``hits``,
``misses``, ``evaluator_results``) and a later AgentV's (v4: ``test_id``, ``suite``,
``output``, graders under ``scores`` with ``assertions``, ``execution_status``,
``token_usage``, ``cost_usd``, ``duration_ms``, and the transcript under ``trace``). Each
becomes a row of our shape; a row without a verdict gets the one our thresholds give its score.
With a baseline, rows get ``baseline_score`` and ``delta`` as a run with ``--agentv-baseline``
gives them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..baseline import MAX_RESULTS_BYTES, PreviousResults, comparison_lines, graded_score
from ..jsonlines import json_lines
from ..results import no_usage
from ..verdicts import score_to_verdict
from ..yamlfile import read_text
from .agentv_v4.rows import JUDGE_NOT_CONFIGURED
from .spool import RowSpool
from .view import RunFacts

_STATUSES = ("graded", "error", "skipped")
_VERDICTS = ("pass", "borderline", "fail")


def _score(value: Any) -> float:
    number = value if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0
    return float(number) if math.isfinite(number) else 0.0


def _text(content: Any) -> str:
    """Message content as text: a string, or the text parts of a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [part.get("text") for part in content if isinstance(part, dict)]
        return "\n\n".join(part for part in parts if isinstance(part, str))
    return ""


def _evaluator(entry: Mapping[str, Any]) -> dict[str, Any]:
    """An evaluator's result, ours or AgentV's (a v4 grader's members are its ``scores``)."""
    score = _score(entry.get("score"))
    members = entry.get("evaluator_results", entry.get("scores")) or []
    verdict = entry.get("verdict")
    return {
        **entry,
        "score": score,
        "verdict": verdict if isinstance(verdict, str) else score_to_verdict(score),
        "hits": list(entry.get("hits") or []),
        "misses": list(entry.get("misses") or []),
        "evaluator_results": [_evaluator(m) for m in members if isinstance(m, dict)],
    }


def _check_line(check: Mapping[str, Any]) -> str:
    """A v4 check as a hit or a miss: its text, and its evidence when it has one."""
    evidence = check.get("evidence")
    return f"{check.get('text')}: {evidence}" if evidence else str(check.get("text"))


def _status(data: Mapping[str, Any], failed: bool) -> str:
    """A v4 row's status: a case skipped for want of a judge is one of v4's execution errors,
    which our v4 rows mark (``JUDGE_NOT_CONFIGURED``)."""
    if not failed:
        return "graded"
    return "skipped" if data.get("failure_reason_code") == JUDGE_NOT_CONFIGURED else "error"


def _later_agentv(data: Mapping[str, Any]) -> dict[str, Any]:
    """A v4 row in our shape."""
    found = data.get("trace")
    trace: dict[str, Any] = found if isinstance(found, dict) else {}
    execution = data.get("execution_error")
    failed = data.get("execution_status") == "execution_error" or bool(data.get("error"))
    error = data.get("error") or (execution.get("message") if isinstance(execution, dict) else "")
    calls = [
        {"tool": call.get("tool", call.get("name")), **call}
        for message in trace.get("messages") or ()
        if isinstance(message, dict)
        for call in message.get("tool_calls") or ()
        if isinstance(call, dict)
    ]
    output = data.get("output")
    checks = [a for a in data.get("assertions") or () if isinstance(a, dict)]
    question = "\n\n".join(
        _text(m.get("content"))
        for m in data.get("input") or ()
        if isinstance(m, dict) and m.get("role") == "user"
    )
    return {
        "status": _status(data, failed),
        "timestamp": data.get("timestamp"),
        "eval_id": data["test_id"],
        "dataset": data.get("suite") or data.get("dataset") or "",
        "conversation_id": data.get("conversation_id"),
        "file": data.get("file"),
        "target": data.get("target_used") or data.get("target"),
        "score": _score(data.get("score")),
        "assertions": checks,
        "hits": [_check_line(check) for check in checks if check.get("passed")],
        "misses": [_check_line(check) for check in checks if not check.get("passed")],
        "candidate_answer": output if isinstance(output, str) else _text(output),
        "evaluator_results": data.get("scores") or [],
        "error": (error or "execution error") if failed else None,
        "trace_summary": {
            "tool_calls_by_name": trace.get("tool_calls") or {},
            "token_usage": data.get("token_usage") or trace.get("token_usage") or {},
            "cost_usd": data.get("cost_usd", trace.get("cost_usd")),
        },
        "duration_ms": data.get("duration_ms"),
        "question": question,
        "tool_calls": calls,
        "trials": data.get("trials"),
        "aggregation": data.get("aggregation"),
        "turns": data.get("turns"),
    }


def as_row(data: Mapping[str, Any]) -> dict[str, Any]:
    """A results-file row (ours, AgentV v2.5.8's or v4's) in our row shape."""
    row = dict(data) if "eval_id" in data else _later_agentv(data)
    status = row.get("status")
    if status not in _STATUSES:
        status = "error" if row.get("error") else "graded"
    row["status"] = status
    row["score"] = score = _score(row.get("score"))
    if status != "graded":
        row["verdict"] = None
    elif row.get("verdict") not in _VERDICTS:
        row["verdict"] = score_to_verdict(score, gate_failed=bool(row.get("gate_failed")))
    row["evaluator_results"] = [
        _evaluator(e) for e in row.get("evaluator_results") or () if isinstance(e, dict)
    ]
    row.setdefault("usage", no_usage())
    return row


def _compare(row: dict[str, Any], baseline: PreviousResults) -> None:
    found = baseline.find(str(row.get("dataset") or ""), str(row["eval_id"]), row.get("file"))
    before = graded_score(found)
    row["baseline_score"] = before
    graded = row["status"] == "graded"
    row["delta"] = round(row["score"] - before, 6) if before is not None and graded else None


def read_results(path: Path, baseline: Path | None = None) -> tuple[RowSpool, RunFacts]:
    """The rows of a results file, and what can be said of its run. Raises ``ConfigError`` or
    ``EvalFileError`` naming the file and line of a row that cannot be read."""
    from ..errors import ConfigError

    previous = None
    if baseline is not None:
        previous = PreviousResults(baseline, str(baseline), "--baseline", scored=True)
        previous.rows()
    spool = RowSpool()
    compared: list[dict[str, Any]] = []
    collected: set[tuple[str, str, str]] = set()
    for line, data in json_lines(read_text(path, str(path), MAX_RESULTS_BYTES), str(path)):
        if not isinstance(data, dict) or not isinstance(
            data.get("eval_id", data.get("test_id")), str
        ):
            raise ConfigError(f"{path}:{line}: a results row needs a string 'eval_id' or 'test_id'")
        row = as_row(data)
        if previous is not None:
            _compare(row, previous)
            compared.append(_brief(row))
            collected.add((str(row.get("file") or ""), str(row.get("dataset")), row["eval_id"]))
        spool.add(row)
    facts = RunFacts(
        title="agentv report",
        started=spool.tally.first,
        judge="not recorded in the results file",
        source=str(path),
        comparison=comparison_lines(previous, compared, collected) if previous else [],
    )
    return spool, facts


def _brief(row: Mapping[str, Any]) -> dict[str, Any]:
    keys: Iterable[str] = ("eval_id", "dataset", "file", "score", "baseline_score", "delta")
    return {key: row.get(key) for key in keys}
