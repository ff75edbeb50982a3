"""``CaseResult`` and its row: the one result contract that JUnit properties, the results file,
the terminal summary, failure reports and ``assert_judged`` all read.

A row is plain builtins (it travels on pytest reports, across pytest-xdist) and is redacted,
and what people read of it made printable, once, when it is made.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ..redaction import printable, redact_obj
from .numbers import UNKNOWN_COST, Spend, fmt, js_fixed, js_number, usd
from .rows import (
    AggregationRow,
    AssertionRow,
    EvaluatorRow,
    ResultRow,
    Status,
    TrialRow,
    TurnRow,
    UsageRow,
    Verdict,
    no_usage,
)

__all__ = [
    "UNKNOWN_COST",
    "AggregationRow",
    "AssertionRow",
    "CaseResult",
    "EvaluatorRow",
    "Grade",
    "ResultRow",
    "Spend",
    "Status",
    "TrialRow",
    "TurnRow",
    "UsageRow",
    "Verdict",
    "fmt",
    "js_fixed",
    "js_number",
    "metadata_tags",
    "no_usage",
    "usd",
]


@dataclass(frozen=True)
class Grade:
    """What a case's evaluators concluded, as plain data."""

    score: float
    verdict: Verdict
    hits: tuple[str, ...] = ()
    misses: tuple[str, ...] = ()
    reasoning: str | None = None
    evaluator_results: tuple[EvaluatorRow, ...] = ()
    #: Set when an evaluator could not grade at all: the case is then not graded.
    error: str | None = None
    gate_failed: bool = False


def metadata_tags(metadata: Any, path: str = "") -> list[str]:
    """A case's metadata as tags, ``path:value`` for each value in it
    (``governance.owasp_llm_top_10_2025:LLM01``): what reports filter cases by."""
    if isinstance(metadata, dict):
        return [
            tag
            for key, value in metadata.items()
            for tag in metadata_tags(value, f"{path}.{key}" if path else str(key))
        ]
    if isinstance(metadata, list):
        return [tag for item in metadata for tag in metadata_tags(item, path)]
    if metadata is None:
        return []
    return [f"{path}:{metadata if isinstance(metadata, str) else json.dumps(metadata)}"]


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass
class CaseResult:
    """How one case ended: graded (with its grade), not graded, or skipped."""

    status: Status
    eval_id: str
    dataset: str = ""
    file: str | None = None
    line: int | None = None
    conversation_id: str | None = None
    target: str | None = None
    candidate: str = ""
    grade: Grade | None = None
    evaluators_listed: bool = True
    error: str | None = None
    trace_summary: dict[str, Any] | None = None
    usage: UsageRow = field(default_factory=no_usage)
    trials: tuple[TrialRow, ...] | None = None
    aggregation: AggregationRow | None = None
    timestamp: str = field(default_factory=_now)
    #: Set when the run has a baseline: the row then carries ``baseline_score`` and ``delta``.
    compared: bool = False
    baseline_score: float | None = None
    question: str = ""
    input_messages: tuple[dict[str, str], ...] = ()
    expected_outcome: str = ""
    duration_ms: float | None = None
    tool_calls: tuple[dict[str, Any], ...] = ()
    turns: tuple[TurnRow, ...] = ()
    #: The case's metadata (AgentV v4's, governance tags included), as its file gives it.
    metadata: dict[str, Any] | None = None

    @property
    def passed(self) -> bool:
        grade = self.grade
        return self.status == "graded" and grade is not None and grade.verdict == "pass"

    def row(self) -> ResultRow:
        """Plain builtins, redacted: what reports, JUnit XML and results files are made of."""
        # A case that was not graded has no score nor verdict, whatever its evaluators said.
        grade = self.grade
        graded = grade if self.status == "graded" else None
        misses = list(grade.misses) if grade else ([f"Error: {self.error}"] if self.error else [])
        row = ResultRow(
            status=self.status,
            timestamp=self.timestamp,
            eval_id=self.eval_id,
            dataset=self.dataset,
            conversation_id=self.conversation_id,
            file=self.file,
            line=self.line,
            target=self.target,
            score=graded.score if graded else None,
            verdict=graded.verdict if graded else None,
            gate_failed=grade.gate_failed if grade else False,
            hits=list(grade.hits) if grade else [],
            misses=misses,
            reasoning=grade.reasoning if grade else None,
            candidate_answer=self.candidate,
            evaluator_results=list(grade.evaluator_results) if grade else [],
            evaluators_listed=self.evaluators_listed,
            error=self.error,
            trace_summary=self.trace_summary,
            usage=self.usage,
            trials=list(self.trials) if self.trials is not None else None,
            aggregation=self.aggregation,
        )
        if self.compared:
            baseline = self.baseline_score
            row["baseline_score"] = baseline
            row["delta"] = (
                round(graded.score - baseline, 6) if baseline is not None and graded else None
            )
        for key, value in (
            ("question", self.question),
            ("input_messages", list(self.input_messages)),
            ("expected_outcome", self.expected_outcome),
            ("duration_ms", None if self.duration_ms is None else round(self.duration_ms, 3)),
            ("tool_calls", list(self.tool_calls)),
            ("turns", list(self.turns)),
            ("metadata", self.metadata),
        ):
            if value not in (None, "", []):
                row[key] = value  # type: ignore[literal-required]
        redacted: ResultRow = redact_obj(row)
        _made_printable(redacted)
        return redacted


#: What people read of a row (and of its evaluators' rows): shown as ``printable`` makes it in
#: every report, the results file included. Ids and answers are data, kept as written.
_READ = ("hits", "misses", "reasoning", "error")


def _made_printable(row: Any) -> None:
    for key in _READ:
        value = row.get(key)
        if isinstance(value, str):
            row[key] = printable(value)
        elif isinstance(value, list):
            row[key] = [printable(item) if isinstance(item, str) else item for item in value]
    for check in row.get("assertions") or ():  # AgentV v4's checks: their text and evidence
        for key in ("text", "evidence"):
            if isinstance(check.get(key), str):
                check[key] = printable(check[key])
    for member in (*(row.get("evaluator_results") or ()), *(row.get("turns") or ())):
        _made_printable(member)
