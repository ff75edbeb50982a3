"""A case's trials and their aggregate: AgentV's strategies, and adaptive stopping.

Agents and judges are stochastic, so a case may run several times (``execution.trials``). This
module holds the statistics and the bookkeeping, without pytest: a ``TrialRun`` says which trial
runs next (or that none does), takes each trial's grade, and concludes with the case's grade and
the rows that reports show. The runner (eval cases) and ``assert_judged`` drive it one trial at a
time, so a case's trials never overlap each other.

AgentV's strategies: ``pass_at_k`` (``pass_any``) scores the best trial and stops at the first
that passes; ``pass_all`` scores the weakest and stops at the first that fails; ``mean``;
``confidence_interval`` scores the lower bound of a t-interval of the mean (AgentV's t-table).
``adaptive`` (ours) stops once an interval for the case's pass probability lies wholly above or
below ``threshold``, or at ``max`` trials, unsettled (the borderline verdict).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from statistics import NormalDist, fmean
from typing import Any, Literal

from pydantic import ValidationError

from .errors import ConfigError
from .options import MAX_TRIALS
from .results import AggregationRow, Grade, TrialRow, Verdict
from .schema.base import problem_text
from .schema.trials import TrialsConfig
from .verdicts import score_to_verdict

Strategy = Literal["pass_at_k", "pass_all", "mean", "confidence_interval", "adaptive"]
Interval = Literal["wilson", "exact"]

DEFAULT_THRESHOLD = 0.5
DEFAULT_CONFIDENCE = 0.95
DEFAULT_MIN = 2
DEFAULT_MAX = 10

#: AgentV's two-sided 95% critical values of Student's t for 1 to 29 degrees of freedom; from 30
#: on it uses 1.96.
T_TABLE_95 = tuple(
    float(value)
    for value in (
        "12.706 4.303 3.182 2.776 2.571 2.447 2.365 2.306 2.262 2.228 2.201 2.179 2.16 2.145 "
        "2.131 2.12 2.11 2.101 2.093 2.086 2.08 2.074 2.069 2.064 2.06 2.056 2.052 2.048 2.045"
    ).split()
)


def t_critical(df: int) -> float:
    """AgentV's ``getTCritical``: the table up to 29 degrees of freedom, then 1.96."""
    if df < 1:
        return T_TABLE_95[0]
    if df >= 30:
        return 1.96
    return T_TABLE_95[df - 1]


def _clamp(value: float) -> float:
    return max(0.0, min(1.0, value))


def mean_interval(scores: list[float]) -> tuple[float, float, float, float]:
    """``(mean, stddev, low, high)``: mean ± t·s/√n, clamped to [0, 1] (AgentV's
    ``confidence_interval``; one score has no spread, so its interval is the score)."""
    n = len(scores)
    mean = fmean(scores)
    if n < 2:
        return mean, 0.0, _clamp(mean), _clamp(mean)
    stddev = math.sqrt(sum((s - mean) ** 2 for s in scores) / (n - 1))
    margin = t_critical(n - 1) * stddev / math.sqrt(n)
    return mean, stddev, _clamp(mean - margin), _clamp(mean + margin)


def wilson_interval(passed: int, n: int, confidence: float) -> tuple[float, float]:
    """The Wilson score interval of a pass probability after ``passed`` passes in ``n``."""
    z = NormalDist().inv_cdf((1 + confidence) / 2)
    rate = passed / n
    denominator = 1 + z * z / n
    centre = (rate + z * z / (2 * n)) / denominator
    margin = z / denominator * math.sqrt(rate * (1 - rate) / n + z * z / (4 * n * n))
    low = 0.0 if passed == 0 else max(0.0, centre - margin)
    high = 1.0 if passed == n else min(1.0, centre + margin)
    return low, high


def _at_most(k: int, n: int, p: float) -> float:
    """P(X ≤ k) for X ~ Binomial(n, p), 0 < p < 1, summed in log space (n up to 1000)."""
    log_p, log_q = math.log(p), math.log1p(-p)
    top = math.lgamma(n + 1)
    return math.fsum(
        math.exp(top - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * log_p + (n - i) * log_q)
        for i in range(k + 1)
    )


def _bisect(too_low: Callable[[float], bool]) -> float:
    """The point in (0, 1) where ``too_low`` turns false (it is true below, false above)."""
    low, high = 0.0, 1.0
    for _ in range(60):
        middle = (low + high) / 2
        if too_low(middle):
            low = middle
        else:
            high = middle
    return (low + high) / 2


def exact_interval(passed: int, n: int, confidence: float) -> tuple[float, float]:
    """The Clopper–Pearson ("exact") interval: never narrower than its confidence promises."""
    alpha = (1 - confidence) / 2
    if passed == 0:
        return 0.0, 1 - alpha ** (1 / n)
    if passed == n:
        return alpha ** (1 / n), 1.0
    low = _bisect(lambda p: 1 - _at_most(passed - 1, n, p) < alpha)
    high = _bisect(lambda p: _at_most(passed, n, p) > alpha)
    return low, high


@dataclass(frozen=True)
class TrialPolicy:
    """How many trials a case runs and how they are aggregated (resolved, with defaults)."""

    strategy: Strategy = "pass_at_k"
    #: Trials to run; for ``adaptive`` the most it may run (``max``).
    count: int = 1
    cost_limit_usd: float | None = None
    threshold: float = DEFAULT_THRESHOLD
    confidence: float = DEFAULT_CONFIDENCE
    min: int = DEFAULT_MIN
    interval: Interval = "wilson"

    def pass_interval(self, passed: int, n: int) -> tuple[float, float]:
        if self.interval == "exact":
            return exact_interval(passed, n, self.confidence)
        return wilson_interval(passed, n, self.confidence)

    def settled(self, passed: int, n: int) -> Verdict | None:
        """The adaptive rule: pass when the interval lies above the threshold, fail when below."""
        low, high = self.pass_interval(passed, n)
        if low > self.threshold:
            return "pass"
        if high < self.threshold:
            return "fail"
        return None

    def fewest(self, passed_all: bool) -> int | None:
        """The fewest trials that settle when every trial passes (or every one fails)."""
        for n in range(1, MAX_TRIALS + 1):
            if self.settled(n if passed_all else 0, n) is not None:
                return n
        return None

    def check(self) -> None:
        """An adaptive rule must be able to settle both ways within ``max`` trials: a bar that
        ``max`` passes in a row cannot clear would leave every case borderline."""
        if self.strategy != "adaptive":
            return
        for passed_all, side in ((True, "above"), (False, "below")):
            passed = self.count if passed_all else 0
            if self.settled(passed, self.count) is not None:
                continue
            low, high = self.pass_interval(passed, self.count)
            bound = f"a lower bound of {low:.2f}" if passed_all else f"an upper bound of {high:.2f}"
            needed = self.fewest(passed_all)
            fix = (
                f"raise 'max' to at least {needed}"
                if needed is not None
                else "move the threshold or lower the confidence"
            )
            raise ConfigError(
                f"strategy 'adaptive' can never settle {side} threshold {self.threshold:g} "
                f"within max {self.count} trials at confidence {self.confidence:g}: "
                f"{passed} passes of {self.count} give {bound} ({self.interval}); {fix}"
            )


def policy_for(config: TrialsConfig | None, override: int | None = None) -> TrialPolicy | None:
    """The trials a case runs: its ``execution.trials`` (the case's, else the file's) and
    ``--agentv-trials`` (the count; an adaptive case's ``max``). None runs the case once, as
    without trials: no block and no option, a count of 1, or ``--agentv-trials 1``.

    Raises ``ConfigError`` for an adaptive rule that cannot settle within its ``max``.
    """
    if override == 1:
        return None
    if config is None:
        return TrialPolicy(count=override) if override else None
    if config.strategy == "adaptive":
        most = override or config.max or DEFAULT_MAX
        least = config.min or DEFAULT_MIN
        if least > most and not override:
            raise ConfigError(
                f"strategy 'adaptive': min {least} is more than max {most}"
                f"{'' if config.max else ' (the default)'}; raise 'max' to at least {least}"
            )
        policy = TrialPolicy(
            strategy="adaptive",
            count=most,
            cost_limit_usd=config.cost_limit_usd,
            threshold=config.threshold if config.threshold is not None else DEFAULT_THRESHOLD,
            confidence=config.confidence if config.confidence is not None else DEFAULT_CONFIDENCE,
            min=min(least, most),  # --agentv-trials may cap it
            interval=config.interval or "wilson",
        )
        policy.check()
        return policy
    count = override or config.count or 1
    if count == 1:
        return None
    strategy: Strategy = "pass_at_k" if config.strategy == "pass_any" else config.strategy
    return TrialPolicy(strategy=strategy, count=count, cost_limit_usd=config.cost_limit_usd)


def policy_from_argument(trials: object) -> TrialPolicy | None:
    """The trials ``assert_judged(..., trials=...)`` runs (see ``trials_from_argument``)."""
    return policy_for(trials_from_argument(trials))


def trials_from_argument(trials: object) -> TrialsConfig:
    """``assert_judged(..., trials=...)``: a count (with the default strategy) or a mapping like
    an ``execution.trials`` block. Raises ``ValueError`` naming the problem."""
    if isinstance(trials, int) and not isinstance(trials, bool):
        block: dict[str, Any] = {"count": trials}
    elif isinstance(trials, Mapping):
        block = dict(trials)
    else:
        raise ValueError(
            f"trials must be a count or a mapping like execution.trials, not "
            f"{type(trials).__name__}"
        )
    try:
        config = TrialsConfig.model_validate(block)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(map(str, ("trials", *first["loc"])))
        raise ValueError(f"{where}: {problem_text(first)}") from None
    try:
        policy_for(config)
    except ConfigError as exc:
        raise ValueError(f"trials: {exc}") from None
    return config


@dataclass(frozen=True)
class TrialResult:
    """One graded trial, with what the case's row shows if it is the trial shown."""

    attempt: int
    grade: Grade
    cost_usd: float
    candidate: str = ""
    trace_summary: dict[str, Any] | None = None

    @property
    def passed(self) -> bool:
        return self.grade.verdict == "pass"

    def row(self) -> TrialRow:
        return TrialRow(
            attempt=self.attempt,
            score=self.grade.score,
            verdict=self.grade.verdict,
            gate_failed=self.grade.gate_failed,
            cost_usd=round(self.cost_usd, 8),
        )


@dataclass(frozen=True)
class TrialsOutcome:
    """The case as its trials concluded: the aggregate grade (with the shown trial's details)
    and the rows reports read."""

    grade: Grade
    trials: tuple[TrialRow, ...]
    aggregation: AggregationRow
    candidate: str
    trace_summary: dict[str, Any] | None


def _rank(result: TrialResult) -> tuple[bool, float]:
    """Better trials first: a met gate, then the score."""
    return (not result.grade.gate_failed, result.grade.score)


@dataclass
class TrialRun:
    """A case's trials in progress: which runs next, when to stop, and the aggregate."""

    policy: TrialPolicy
    results: list[TrialResult] = field(default_factory=list)
    #: What the trials cost so far (model calls and target-reported costs).
    spent: float = 0.0
    #: Why no more trials run (see ``AggregationRow.stopped``); None while they do.
    stopped: str | None = None

    def next_attempt(self) -> int | None:
        return None if self.stopped is not None else len(self.results)

    def add(self, result: TrialResult) -> None:
        self.results.append(result)
        self.spent += result.cost_usd
        self.stopped = self._stop(result)

    def _stop(self, last: TrialResult) -> str | None:
        policy, n = self.policy, len(self.results)
        if policy.strategy == "pass_at_k" and last.passed:
            return "passed"
        if policy.strategy == "pass_all" and last.grade.verdict == "fail":
            return "failed"
        if policy.strategy == "adaptive" and n >= policy.min:
            if policy.settled(self.passed, n) is not None:
                return "settled"
        if n >= policy.count:
            return "max" if policy.strategy == "adaptive" else "count"
        if policy.cost_limit_usd is not None and self.spent >= policy.cost_limit_usd:
            return "cost_limit"
        return None

    @property
    def passed(self) -> int:
        return sum(1 for result in self.results if result.passed)

    def conclude(self) -> TrialsOutcome:
        """The case's grade from its trials (at least one), by the policy's strategy."""
        policy, results = self.policy, self.results
        n, passed = len(results), self.passed
        low, high = policy.pass_interval(passed, n)
        aggregation = AggregationRow(
            strategy=policy.strategy,
            trials=n,
            planned=policy.count,
            passed=passed,
            pass_rate=passed / n,
            ci_low=low,
            ci_high=high,
            confidence=policy.confidence,
            interval=policy.interval,
            stopped=self.stopped or "count",
            cost_usd=round(self.spent, 8),
            shown_attempt=0,
        )
        best, worst = max(results, key=_rank), min(results, key=_rank)
        # Where the score is a mean, a trial that failed a gate counts as 0 (as AgentV's later
        # "required" gate makes it); the case's gate fails only if every trial's did.
        scores = [0.0 if r.grade.gate_failed else r.grade.score for r in results]
        gates = [r.grade.gate_failed for r in results]
        shown: TrialResult | None = None
        verdict: Verdict | None = None
        if policy.strategy == "pass_at_k":
            score, gate_failed, shown = best.grade.score, best.grade.gate_failed, best
        elif policy.strategy == "pass_all":
            score, gate_failed, shown = min(r.grade.score for r in results), any(gates), worst
            aggregation["min"] = score
        elif policy.strategy == "mean":
            score, gate_failed = fmean(scores), all(gates)
            aggregation["mean"] = score
            aggregation["min"], aggregation["max"] = min(scores), max(scores)
        elif policy.strategy == "confidence_interval":
            mean, stddev, score_low, score_high = mean_interval(scores)
            score, gate_failed = score_low, all(gates)
            aggregation["mean"], aggregation["stddev"] = mean, stddev
            aggregation["score_ci_low"], aggregation["score_ci_high"] = score_low, score_high
        else:
            # The pass rate is the score; the verdict is the rule's, unsettled is borderline.
            score, gate_failed = passed / n, False
            settled = policy.settled(passed, n) if n >= policy.min else None
            verdict = settled or "borderline"
            aggregation["threshold"], aggregation["min_trials"] = policy.threshold, policy.min
            aggregation["settled"] = settled is not None
        if verdict is None:
            verdict = score_to_verdict(score, gate_failed=gate_failed)
        if shown is None:
            shown = best if verdict == "pass" else worst
        aggregation["shown_attempt"] = shown.attempt
        grade = replace(shown.grade, score=score, verdict=verdict, gate_failed=gate_failed)
        return TrialsOutcome(
            grade=grade,
            trials=tuple(result.row() for result in results),
            aggregation=aggregation,
            candidate=shown.candidate,
            trace_summary=shown.trace_summary,
        )
