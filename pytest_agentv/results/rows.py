"""The shape of a result row and of its parts (usage, checks, evaluators, trials, turns): plain
builtins, as rows travel on pytest reports and are written to results files."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, TypedDict

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
    #: The case's metadata (its file's merged in: AgentV v4's governance tags...).
    metadata: NotRequired[dict[str, Any]]
