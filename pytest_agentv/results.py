"""``CaseResult`` and its row: the one result contract that JUnit properties, the results file,
the terminal summary, failure reports and ``assert_judged`` all read.

A row is plain builtins (it travels on pytest reports, across pytest-xdist) and is redacted,
and what people read of it made printable, once, when it is made.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from decimal import ROUND_HALF_UP, Decimal
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, TypedDict

from .redaction import printable, redact_obj

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
    #: None when a call's cost is unknown (``unpriced_calls``): the cost is then unknown.
    cost_usd: float | None
    #: Calls whose cost is unknown: to a model without a known price, or whose reply's usage was
    #: not counts of tokens.
    unpriced_calls: int


def js_number(value: float) -> str:
    """A number as JavaScript prints it, as AgentV's messages do: ``45``, not ``45.0``; ``1e+308``,
    not 309 digits (a limit or a number from hostile data); ``0.000001``, then ``1e-7``."""
    number = float(value)
    if not math.isfinite(number):
        return "NaN" if math.isnan(number) else ("Infinity" if number > 0 else "-Infinity")
    if number == 0:
        return "0"
    # The shortest digits that read back as the number, and where its decimal point goes.
    shortest = Decimal(repr(abs(number))).normalize().as_tuple()
    digits = "".join(map(str, shortest.digits))
    point = int(shortest.exponent) + len(digits)
    if len(digits) <= point <= 21:
        text = digits + "0" * (point - len(digits))
    elif 0 < point <= 21:
        text = f"{digits[:point]}.{digits[point:]}"
    elif -6 < point <= 0:
        text = f"0.{'0' * -point}{digits}"
    else:
        fraction = f".{digits[1:]}" if len(digits) > 1 else ""
        text = f"{digits[0]}{fraction}e{'+' if point > 0 else '-'}{abs(point - 1)}"
    return f"-{text}" if number < 0 else text


def js_fixed(value: float, places: int) -> str:
    """``value.toFixed(places)`` as JavaScript gives it: ties rounded away from zero, and from
    1e21 on the number as ``js_number`` prints it (``1e+308``), not hundreds of digits."""
    if abs(value) >= 1e21 or not math.isfinite(value):
        return js_number(value)
    return str(Decimal(value).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP))


#: Why a call's cost is unknown, as reports say it.
UNKNOWN_COST = "without a known price or token counts"


class Spend(NamedTuple):
    """The run's model spend so far (``--agentv-budget-usd``): dollars counted, calls whose cost
    is unknown (they cannot be counted against the budget), and calls refused for it."""

    usd: float
    unknown: int
    refused: int


def usd(amount: float) -> str:
    """A dollar amount as reports show it: cents to four places, small sums to six."""
    return f"${js_fixed(amount, 4 if amount == 0 or abs(amount) >= 0.01 else 6)}"


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


class _TurnRow(TypedDict):
    #: 1, 2...: the turn's place in the conversation.
    turn: int
    #: What the user said, and what the target replied (None: the turn was not sent).
    input: str
    answer: str | None
    #: None when nothing checks the turn (it takes no part in the case's score).
    score: float | None
    verdict: Verdict | None
    gate_failed: bool
    #: Every check of the turn's graders, in order (AgentV v4's ``assertions``).
    assertions: list[AssertionRow]


class TurnRow(_TurnRow, total=False):
    """One turn of a conversation case; its graders' rows are the case's ``turn-<n>`` entry."""

    reasoning: str
    #: Why the turn was not sent (``on_turn_failure: stop``) or could not be graded.
    error: str


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
    #: None, like the verdict, for a case that was not graded or was skipped: it has no score.
    score: float | None
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
    #: What the case asked and expected (eval cases; not ``assert_judged`` calls).
    question: NotRequired[str]
    #: The input messages as role and text, when they are more than one user message.
    input_messages: NotRequired[list[dict[str, str]]]
    expected_outcome: NotRequired[str]
    #: Milliseconds spent waiting for the target's answers, all attempts together.
    duration_ms: NotRequired[float]
    #: The tool calls of the answer the row shows: ``{tool, input, duration_ms, error}``.
    tool_calls: NotRequired[list[dict[str, Any]]]
    #: A conversation's turns, as far as they went.
    turns: NotRequired[list[TurnRow]]


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
    question: str = ""
    input_messages: tuple[dict[str, str], ...] = ()
    expected_outcome: str = ""
    duration_ms: float | None = None
    tool_calls: tuple[dict[str, Any], ...] = ()
    turns: tuple[TurnRow, ...] = ()

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
