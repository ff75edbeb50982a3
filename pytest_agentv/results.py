"""``CaseResult`` and its row: the one result contract that JUnit properties, the results file,
the terminal summary, failure reports and ``assert_judged`` all read.

A row is plain builtins (it travels on pytest reports, across pytest-xdist) and is redacted
once, when it is made.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from .redaction import redact_obj

if TYPE_CHECKING:
    from typing_extensions import NotRequired

Verdict = Literal["pass", "borderline", "fail"]
#: graded: the evaluators concluded; error: not graded (target or judge unavailable, or a
#: judge reply outside its contract); skipped: an LLM judge was needed and none is configured.
Status = Literal["graded", "error", "skipped"]


class UsageRow(TypedDict):
    calls: int
    reused: int
    prompt_tokens: int
    completion_tokens: int
    tokens: int
    #: None when a call went to a model without a known price: the cost is then unknown.
    cost_usd: float | None
    unpriced_calls: int


def usd(amount: float) -> str:
    """A dollar amount as reports show it: cents to four places, small sums to six."""
    return f"${amount:.4f}" if amount == 0 or abs(amount) >= 0.01 else f"${amount:.6f}"


def no_usage() -> UsageRow:
    return UsageRow(
        calls=0,
        reused=0,
        prompt_tokens=0,
        completion_tokens=0,
        tokens=0,
        cost_usd=0.0,
        unpriced_calls=0,
    )


class _AssertionRow(TypedDict):
    text: str
    passed: bool


class AssertionRow(_AssertionRow, total=False):
    """One check an evaluator made, as AgentV v4 reports it (``{text, passed, evidence}``)."""

    evidence: str


class _EvaluatorRow(TypedDict):
    name: str
    type: str
    score: float
    weight: float
    verdict: Verdict
    hits: list[str]
    misses: list[str]
    reasoning: str | None
    evaluator_provider_request: dict[str, Any] | None
    #: A required criterion or check was not met: the case fails whatever the scores.
    gate_failed: bool


class EvaluatorRow(_EvaluatorRow, total=False):
    """One evaluator's result within a case (AgentV's ``evaluator_results`` entries); a
    composite's members are nested under its own ``evaluator_results``."""

    details: dict[str, Any]
    error: str
    evaluator_results: list[EvaluatorRow]
    #: Each check with its outcome, in the order made (AgentV v4's ``assertions``).
    assertions: list[AssertionRow]


class TrialRow(TypedDict):
    """One trial of a case run several times (``execution.trials``)."""

    attempt: int
    score: float
    verdict: Verdict
    gate_failed: bool
    #: What the trial spent: model calls (judge, LLM target) and the cost a target reported.
    cost_usd: float


class _AggregationRow(TypedDict):
    strategy: str
    #: Trials run, and the fixed-count equivalent (the count, or the adaptive cap ``max``).
    trials: int
    planned: int
    passed: int
    pass_rate: float
    #: An interval for the pass probability (Wilson unless ``interval: exact``).
    ci_low: float
    ci_high: float
    confidence: float
    interval: str
    #: Why no more trials ran: count, passed, failed, settled, max or cost_limit.
    stopped: str
    cost_usd: float
    #: The trial whose evaluator results, answer and trace the case's row shows.
    shown_attempt: int


class AggregationRow(_AggregationRow, total=False):
    """How a case's trials were aggregated; the keys after the common ones depend on the
    strategy (``min``, ``max``, ``mean``, ``stddev``, the score interval, or the adaptive
    ``threshold``, ``min_trials`` and ``settled``)."""

    min: float
    max: float
    mean: float
    stddev: float
    score_ci_low: float
    score_ci_high: float
    threshold: float
    min_trials: int
    settled: bool


class ResultRow(TypedDict):
    """A case (or an ``assert_judged`` call) as every report sees it."""

    status: Status
    timestamp: str
    eval_id: str
    dataset: str
    conversation_id: str | None
    file: str | None
    line: int | None
    target: str | None
    score: float
    verdict: Verdict | None
    gate_failed: bool
    hits: list[str]
    misses: list[str]
    reasoning: str | None
    candidate_answer: str
    evaluator_results: list[EvaluatorRow]
    #: The evaluators were listed (in the file, or given to ``assert_judged``), not the default.
    evaluators_listed: bool
    error: str | None
    trace_summary: dict[str, Any] | None
    usage: UsageRow
    #: Each trial, and their aggregate, when the case ran several times; else None.
    trials: list[TrialRow] | None
    aggregation: AggregationRow | None
    #: With ``--agentv-baseline``: the case's score in the baseline (None: no graded row there),
    #: and this score minus it (None unless both were graded).
    baseline_score: NotRequired[float | None]
    delta: NotRequired[float | None]


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

    def row(self) -> ResultRow:
        """Plain builtins, redacted: what reports, JUnit XML and results files are made of."""
        # A case that was not graded has no verdict, whatever its evaluators said.
        grade = self.grade
        verdict = grade.verdict if grade and self.status == "graded" else None
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
            score=grade.score if grade else 0.0,
            verdict=verdict,
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
                round(row["score"] - baseline, 6)
                if baseline is not None and self.status == "graded"
                else None
            )
        redacted: ResultRow = redact_obj(row)
        return redacted
