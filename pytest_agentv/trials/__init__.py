"""A case's trials and their aggregate: AgentV's strategies, and adaptive stopping.

Agents and judges are stochastic, so a case may run several times (``execution.trials``). This
package holds the statistics (``intervals.py``), the policy (``policy.py``) and the
bookkeeping, without pytest: a ``TrialRun`` says which trial
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

from dataclasses import dataclass, field, replace
from statistics import fmean
from typing import Any

from ..results import AggregationRow, Grade, TrialRow, Verdict
from ..verdicts import score_to_verdict
from .intervals import exact_interval, mean_interval, t_critical, wilson_interval
from .policy import (
    DEFAULT_MAX,
    TrialPolicy,
    policy_for,
    trials_from_argument,
)

__all__ = [
    "DEFAULT_MAX",
    "TrialPolicy",
    "TrialResult",
    "TrialRun",
    "TrialsOutcome",
    "exact_interval",
    "mean_interval",
    "policy_for",
    "t_critical",
    "trials_from_argument",
    "wilson_interval",
]


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
