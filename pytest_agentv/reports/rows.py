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

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..baseline import PreviousResults, comparison_lines, graded_score
from ..resultrows import ReadRow, read_rows
from ..resultrows.shapes import score_of
from ..results import no_usage
from ..verdicts import score_to_verdict
from .spool import RowSpool
from .view import RunFacts

_VERDICTS = ("pass", "borderline", "fail")


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
    score = score_of(entry.get("score"))
    members = entry.get("evaluator_results", entry.get("scores")) or []
    verdict = entry.get("verdict")
    if not isinstance(verdict, str):
        verdict = None if score is None else score_to_verdict(score)
    return {
        **entry,
        "score": score,
        "verdict": verdict,
        "hits": list(entry.get("hits") or []),
        "misses": list(entry.get("misses") or []),
        "evaluator_results": [_evaluator(m) for m in members if isinstance(m, dict)],
    }


def _check_line(check: Mapping[str, Any]) -> str:
    """A v4 check as a hit or a miss: its text, and its evidence when it has one."""
    evidence = check.get("evidence")
    return f"{check.get('text')}: {evidence}" if evidence else str(check.get("text"))


def _later_agentv(data: Mapping[str, Any]) -> dict[str, Any]:
    """A v4 row in our shape."""
    trace: dict[str, Any] = data.get("trace") or {}
    calls = [
        {"tool": call.get("tool", call.get("name")), **call}
        for message in trace.get("messages") or ()
        if isinstance(message, dict)
        for call in message.get("tool_calls") or ()
        if isinstance(call, dict)
    ]
    output = data.get("output")
    checks = [a for a in data.get("assertions") or () if isinstance(a, dict)]
    asked = data.get("input") or ()
    question = (
        asked
        if isinstance(asked, str)
        else "\n\n".join(_text(m.get("content")) for m in asked if m.get("role") == "user")
    )
    return {
        "timestamp": data.get("timestamp"),
        "eval_id": data["test_id"],
        "dataset": data.get("suite") or data.get("dataset") or "",
        "conversation_id": data.get("conversation_id"),
        "file": data.get("file"),
        "target": data.get("target_used") or data.get("target"),
        "assertions": checks,
        "hits": [_check_line(check) for check in checks if check.get("passed")],
        "misses": [_check_line(check) for check in checks if not check.get("passed")],
        "candidate_answer": output if isinstance(output, str) else _text(output),
        "evaluator_results": data.get("scores") or [],
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


def as_row(read: ReadRow) -> dict[str, Any]:
    """A results-file row (ours, AgentV v2.5.8's or v4's) in our row shape, with the status,
    score and reason ``resultrows`` read; a graded row without a verdict gets the one our
    thresholds give its score."""
    data = read.data
    row = dict(data) if "eval_id" in data else _later_agentv(data)
    row["status"] = read.status
    row["score"] = read.score
    if read.score is None:
        row["verdict"] = None
        row["error"] = data.get("error") if read.status == "skipped" else read.reason
    elif row.get("verdict") not in _VERDICTS:
        row["verdict"] = score_to_verdict(read.score, gate_failed=bool(row.get("gate_failed")))
    row["evaluator_results"] = [
        _evaluator(e) for e in row.get("evaluator_results") or () if isinstance(e, dict)
    ]
    row.setdefault("usage", no_usage())
    return row


def _compare(row: dict[str, Any], baseline: PreviousResults) -> None:
    found = baseline.find(str(row.get("dataset") or ""), str(row["eval_id"]), row.get("file"))
    before = graded_score(found)
    row["baseline_score"] = before
    score = row["score"]
    row["delta"] = round(score - before, 6) if before is not None and score is not None else None


def read_results(path: Path, baseline: Path | None = None) -> tuple[RowSpool, RunFacts]:
    """The rows of a results file, and what can be said of its run. Raises ``ConfigError`` or
    ``EvalFileError`` naming the file and line of a row that cannot be read."""
    previous = None
    if baseline is not None:
        previous = PreviousResults(baseline, str(baseline), "--baseline", scored=True)
        previous.rows()
    spool = RowSpool()
    compared: list[dict[str, Any]] = []
    collected: set[tuple[str, str, str]] = set()
    try:
        for read in read_rows(path, str(path), scored=True):
            row = as_row(read)
            if previous is not None:
                _compare(row, previous)
                compared.append(_brief(row))
                collected.add((str(row.get("file") or ""), str(row.get("dataset")), read.case_id))
            spool.add(row)
    except BaseException:
        spool.close()  # the rows read before the bad one
        raise
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
