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

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from ..baseline import PreviousResults, comparison_lines, graded_score, regressed_by
from ..errors import ConfigError
from ..resultrows import ReadRow, read_rows
from ..resultrows.shapes import score_of
from ..results import no_usage
from ..verdicts import outcome_for, score_to_verdict
from .jsonl import compact_json
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


@dataclass
class Merged:
    """What reading several results files as one run found: the cases that failed their gate
    (a fail verdict, not graded, or a drop from the baseline beyond ``max_regression``)."""

    failed: list[str] = field(default_factory=list)
    not_graded: list[str] = field(default_factory=list)
    regressed: list[str] = field(default_factory=list)


def read_results(
    paths: Sequence[Path],
    baseline: Path | None = None,
    *,
    threshold: float | None = None,
    max_regression: float | None = None,
    borderline: str = "xfail",
    merged: IO[str] | None = None,
) -> tuple[RowSpool, RunFacts, Merged]:
    """The rows of one results file, or of the files of a run's shards as one run, and what can
    be said of the run; each row as read is also written to ``merged``. Raises ``ConfigError``
    or ``EvalFileError`` naming the file and line of a row that cannot be read, and
    ``ConfigError`` for a case that two files hold or for a shard whose file is missing:
    shards' results are never merged silently."""
    previous = None
    if baseline is not None:
        previous = PreviousResults(baseline, str(baseline), "--baseline", scored=True)
        previous.rows()
    spool = RowSpool()
    gate = Merged()
    compared: list[dict[str, Any]] = []
    collected: set[tuple[str, str, str]] = set()
    seen: dict[tuple[str, str, str, str], tuple[int, str]] = {}
    twice: list[str] = []
    shards: dict[int, set[int]] = {}
    try:
        for index, path in enumerate(paths):
            for read in read_rows(path, str(path), scored=True):
                where = f"{path}:{read.line}"
                case = (read.file or "", read.dataset or "", read.case_id, read.target or "")
                first, at = seen.setdefault(case, (index, where))
                if first != index:
                    twice.append(f"'{read.case_id}' at {at} and {where}")
                shard = _shard(read.data.get("shard"))
                if shard is not None:
                    shards.setdefault(shard[1], set()).add(shard[0])
                row = as_row(read)
                if previous is not None:
                    _compare(row, previous)
                    compared.append(_brief(row))
                    collected.add((case[0], str(row.get("dataset")), read.case_id))
                _gate(row, where, gate, threshold, max_regression, borderline)
                spool.add(row)
                if merged is not None:
                    merged.write(compact_json(read.data) + "\n")
        _whole(twice, shards, len(paths))
    except BaseException:
        spool.close()  # the rows read before the bad one
        raise
    facts = RunFacts(
        title="agentv report",
        started=spool.tally.first,
        judge="not recorded in the results file",
        source=", ".join(map(str, paths)),
        comparison=comparison_lines(previous, compared, collected) if previous else [],
    )
    return spool, facts, gate


def _shard(value: Any) -> tuple[int, int] | None:
    """A row's ``shard`` (``"K/N"``, written by a run with ``--agentv-shard``)."""
    if not isinstance(value, str):
        return None
    index, _, count = value.partition("/")
    return (int(index), int(count)) if index.isdigit() and count.isdigit() else None


def _whole(twice: list[str], shards: dict[int, set[int]], files: int) -> None:
    """Refuse a merge that would hide a case run twice or a shard never read."""
    problems = [f"a case is in two files: {where}" for where in twice[:10]]
    if len(twice) > 10:
        problems.append(f"... and {len(twice) - 10} more cases in two files")
    if len(shards) > 1:
        counts = " and ".join(f"N={n}" for n in sorted(shards))
        problems.append(f"the rows come from runs of different shard counts ({counts})")
    for count, present in shards.items():
        missing = [f"{k}/{count}" for k in range(1, count + 1) if k not in present]
        if missing and files > 1:
            problems.append(
                f"no rows of shard {', '.join(missing)}: give every shard's results file"
            )
    if problems:
        raise ConfigError("; ".join(problems))


def _gate(
    row: dict[str, Any],
    where: str,
    gate: Merged,
    threshold: float | None,
    max_regression: float | None,
    borderline: str,
) -> None:
    """The row's verdict at the run's pass bar, and which gate it fails, as a run decides
    (``outcome_for``: a borderline verdict fails only under ``--borderline fail``)."""
    name = f"{where} ({row['eval_id']})"
    score = row["score"]
    if row["status"] == "error":
        gate.not_graded.append(name)
        return
    if row["status"] == "skipped":  # as pytest: a skipped case fails no gate
        return
    if threshold is not None and score is not None:
        row["verdict"] = score_to_verdict(
            score, gate_failed=bool(row.get("gate_failed")), pass_at=threshold
        )
    if outcome_for(str(row["verdict"]), borderline) == "failed":
        gate.failed.append(name)
    elif regressed_by(row, max_regression) is not None:
        gate.regressed.append(name)


def _brief(row: Mapping[str, Any]) -> dict[str, Any]:
    keys: Iterable[str] = ("eval_id", "dataset", "file", "score", "baseline_score", "delta")
    return {key: row.get(key) for key in keys}
