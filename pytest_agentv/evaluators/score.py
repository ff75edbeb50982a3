"""What an evaluator concludes: ``EvaluationScore`` (a score, its checks as hits and misses and
as AgentV v4's ``assertions``, gates), each evaluator's ``EvaluatorResult``, AgentV v4's gates on
an entry (``negate``, ``required``, ``min_score``), and the weighted mean that makes a case's
score."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..results import AssertionRow, EvaluatorRow, Verdict
from ..schema.base import finite_number, weighted_average
from ..schema.evaluators import EvaluatorConfig
from ..verdicts import PASS_THRESHOLD, score_to_verdict


def assertion_line(check: AssertionRow) -> str:
    """A v4 assertion as a hit or miss line: its text, and its evidence when it has one."""
    evidence = check.get("evidence")
    return f"{check['text']}: {evidence}" if evidence else check["text"]


@dataclass(frozen=True, init=False)
class EvaluationScore:
    """One evaluator's grade (REQ-EVAL-005). ``score`` is clamped to [0, 1]; NaN becomes 0.

    The verdict comes from the score (the one verdict function) unless the evaluator gives one.
    ``gate_failed`` says that a required criterion or check was not met: it travels with the
    score, and fails the case whatever the other evaluators score. An explicit ``fail`` verdict
    on a passing score is such a gate. ``error`` is set when the evaluator could not grade at
    all: the case is then reported as not graded.
    """

    score: float
    hits: tuple[str, ...]
    misses: tuple[str, ...]
    expected_aspect_count: int
    reasoning: str | None
    raw_aspects: tuple[str, ...]
    evaluator_raw_request: dict[str, Any] | None
    verdict: Verdict
    details: dict[str, Any] | None
    error: str | None
    gate_failed: bool
    #: A composite's members, each with its own result (nested composites nest further).
    evaluator_results: tuple[EvaluatorResult, ...]
    #: Each check with its outcome, in order (AgentV v4's ``assertions``); made from ``hits``
    #: and ``misses`` when the evaluator gives none, and the other way round.
    assertions: tuple[AssertionRow, ...]

    def __init__(
        self,
        score: float,
        hits: Iterable[str] = (),
        misses: Iterable[str] = (),
        expected_aspect_count: int = 0,
        reasoning: str | None = None,
        raw_aspects: Iterable[str] = (),
        evaluator_raw_request: dict[str, Any] | None = None,
        verdict: Verdict | None = None,
        details: dict[str, Any] | None = None,
        error: str | None = None,
        gate_failed: bool = False,
        evaluator_results: Iterable[EvaluatorResult] = (),
        assertions: Iterable[AssertionRow] = (),
    ) -> None:
        number = finite_number(score)
        clean = min(1.0, max(0.0, number)) if number is not None else 0.0
        if verdict == "fail" and score_to_verdict(clean) != "fail":
            gate_failed = True
        checks = tuple(assertions)
        hits, misses = tuple(hits), tuple(misses)
        if checks and not hits and not misses:
            hits = tuple(assertion_line(check) for check in checks if check["passed"])
            misses = tuple(assertion_line(check) for check in checks if not check["passed"])
        elif not checks:
            checks = tuple(
                [AssertionRow(text=h, passed=True) for h in hits]
                + [AssertionRow(text=m, passed=False) for m in misses]
            )
        values = {
            "score": clean,
            "hits": hits,
            "misses": misses,
            "expected_aspect_count": expected_aspect_count,
            "reasoning": reasoning,
            "raw_aspects": tuple(raw_aspects),
            "evaluator_raw_request": evaluator_raw_request,
            "verdict": verdict or score_to_verdict(clean, gate_failed=gate_failed),
            "details": details,
            "error": error,
            "gate_failed": gate_failed,
            "evaluator_results": tuple(evaluator_results),
            "assertions": checks,
        }
        for name, value in values.items():
            object.__setattr__(self, name, value)

    @classmethod
    def graded(cls, score: float, *, gate_failed: bool = False, **kwargs: Any) -> EvaluationScore:
        """A score whose verdict comes from the one verdict function."""
        return cls(score, gate_failed=gate_failed, **kwargs)


@dataclass(frozen=True)
class EvaluatorResult:
    """One evaluator's result within a case, as written to results and reports."""

    name: str
    type: str
    weight: float
    score: EvaluationScore
    #: A ``required`` entry scored below its minimum: the case scores 0 (AgentV v4).
    required_failed: bool = False

    def row(self) -> EvaluatorRow:
        s = self.score
        row = EvaluatorRow(
            name=self.name,
            type=self.type,
            score=s.score,
            weight=self.weight,
            verdict=s.verdict,
            hits=list(s.hits),
            misses=list(s.misses),
            reasoning=s.reasoning,
            evaluator_provider_request=s.evaluator_raw_request,
            gate_failed=s.gate_failed,
            assertions=[AssertionRow(**check) for check in s.assertions],
        )
        if s.details is not None:
            row["details"] = s.details
        if s.error is not None:
            row["error"] = s.error
        if s.evaluator_results:
            row["evaluator_results"] = [member.row() for member in s.evaluator_results]
        return row


def weighted_mean(results: Sequence[EvaluatorResult]) -> tuple[float, bool]:
    """The weighted mean of the results' scores (0 when every weight is 0), and whether a
    result with weight failed its gate — which fails the whole, whatever the mean. A
    ``required`` entry below its minimum makes the mean 0, as AgentV v4 does."""
    if any(r.required_failed for r in results):
        return 0.0, True
    score = weighted_average((r.score.score, r.weight) for r in results)
    return score, any(r.score.gate_failed and r.weight > 0 for r in results)


def aggregate(results: Sequence[EvaluatorResult]) -> EvaluationScore:
    """A case's score from its evaluators' results (``weighted_mean``)."""
    score, gate_failed = weighted_mean(results)
    errors = [f"{r.name}: {r.score.error}" for r in results if r.score.error]
    reasoning = " | ".join(f"{r.name}: {r.score.reasoning}" for r in results if r.score.reasoning)
    return EvaluationScore.graded(
        score,
        gate_failed=gate_failed,
        hits=tuple(h for r in results for h in r.score.hits),
        misses=tuple(m for r in results for m in r.score.misses),
        expected_aspect_count=sum(r.score.expected_aspect_count for r in results),
        reasoning=reasoning or None,
        evaluator_raw_request=results[0].score.evaluator_raw_request if len(results) == 1 else None,
        error="; ".join(errors) or None,
    )


def negated(score: EvaluationScore) -> EvaluationScore:
    """``negate: true`` (AgentV v4 ``negateScore``): the score becomes 1 - score, each check's
    outcome flips (its evidence marked ``[Negated]``), and hits and misses follow them."""
    checks = tuple(
        AssertionRow(text=c["text"], passed=not c["passed"])
        | ({"evidence": f"[Negated] {c['evidence']}"} if c.get("evidence") else {})
        for c in score.assertions
    )
    return replace(
        score,
        score=1.0 - score.score,
        hits=(),  # made again from the flipped checks
        misses=(),
        verdict=score_to_verdict(1.0 - score.score),
        gate_failed=False,
        assertions=checks,
    )


def required_min(entry: EvaluatorConfig) -> float | None:
    """The score a ``required`` entry must reach (its ``min_score``, a number given as
    ``required``, else the pass threshold); None when the entry is not required. ``min_score``
    alone gates nothing, as in AgentV v4.42.4."""
    if entry.required is False:
        return None
    if entry.min_score is not None:
        return entry.min_score
    return PASS_THRESHOLD if entry.required is True else float(entry.required)


def gated(entry: EvaluatorConfig, score: EvaluationScore) -> EvaluatorResult:
    """An entry's result with its gates applied, in AgentV v4's order: ``negate`` first, then
    ``required`` (a required entry below its minimum makes the case's score 0 and fails it)."""
    if entry.negate and score.error is None:
        score = negated(score)
    minimum = required_min(entry)
    below = minimum is not None and score.error is None and score.score < minimum
    if below:
        shown = f"{score.score:.3g}"
        score = replace(
            score,
            misses=(*score.misses, f"required: score {shown} is below its minimum {minimum:g}"),
            verdict="fail",
            gate_failed=True,
        )
    return EvaluatorResult(entry.name, entry.kind, entry.weight, score, required_failed=below)
