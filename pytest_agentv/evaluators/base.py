"""The evaluator protocol, the data it works on, and the engine that runs a case's evaluators.

Names follow AgentV's evaluation API (seed 001) in snake_case. Evaluators may be sync or async:
the engine is async and runs a sync ``evaluate`` in a worker thread so judge calls overlap.
"""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..errors import AgentvError, ConfigError
from ..models import EvaluatorConfig, canonical_kind
from ..verdicts import Verdict, score_to_verdict

if TYPE_CHECKING:
    from ..judge import JudgeClient

#: The evaluator kinds built into pytest-agentv (``code`` and ``rubric`` are accepted aliases).
EVALUATOR_KINDS: tuple[str, ...] = ("llm_judge", "code_judge")


def is_evaluator_kind(value: object) -> bool:
    return isinstance(value, str) and canonical_kind(value) in EVALUATOR_KINDS


@dataclass(frozen=True)
class PreparedCase:
    """An eval case with its file references read and its derived values computed.

    This is what targets (including an ``agentv_target`` fixture) and evaluators receive.
    """

    id: str
    question: str
    input_messages: tuple[dict[str, Any], ...]
    expected_outcome: str = ""
    reference_answer: str = ""
    expected_messages: tuple[dict[str, Any], ...] = ()
    authored_input: tuple[dict[str, Any], ...] = ()
    input_files: tuple[str, ...] = ()
    conversation_id: str | None = None
    dataset: str = ""
    folder: Path = field(default_factory=Path.cwd)
    rootdir: Path = field(default_factory=Path.cwd)


@dataclass(frozen=True)
class EvaluationContext:
    """Everything an evaluator may look at for one case (REQ-EVAL-004)."""

    eval_case: PreparedCase
    candidate: str
    target: str = ""
    output_messages: tuple[dict[str, Any], ...] | None = None
    attempt: int = 0
    evaluator: EvaluatorConfig | None = None
    judge_model: str | None = None
    judge_target: str | None = None
    trace_summary: dict[str, Any] | None = None
    now: datetime = field(default_factory=lambda: datetime.now(timezone.utc))

    @property
    def prompt_inputs(self) -> dict[str, str]:
        case = self.eval_case
        return {
            "question": case.question,
            "expected_outcome": case.expected_outcome,
            "reference_answer": case.reference_answer,
            "candidate_answer": self.candidate,
        }


@dataclass(frozen=True)
class EvaluationScore:
    """One evaluator's grade (REQ-EVAL-005). ``score`` is clamped to [0, 1]; NaN becomes 0.

    ``error`` is set when the evaluator could not grade at all (for instance the judge's reply
    could not be parsed): the score is then 0, and the case is reported as not graded.
    """

    score: float
    hits: tuple[str, ...] = ()
    misses: tuple[str, ...] = ()
    expected_aspect_count: int = 0
    reasoning: str | None = None
    raw_aspects: tuple[str, ...] = ()
    evaluator_raw_request: dict[str, Any] | None = None
    verdict: Verdict = "fail"
    details: dict[str, Any] | None = None
    error: str | None = None

    def __post_init__(self) -> None:
        raw = self.score
        score = float(raw) if isinstance(raw, (int, float)) and not isinstance(raw, bool) else 0.0
        score = 0.0 if math.isnan(score) else min(1.0, max(0.0, score))
        object.__setattr__(self, "score", score)
        object.__setattr__(self, "hits", tuple(self.hits))
        object.__setattr__(self, "misses", tuple(self.misses))
        object.__setattr__(self, "raw_aspects", tuple(self.raw_aspects))

    @classmethod
    def graded(cls, score: float, *, gate_failed: bool = False, **kwargs: Any) -> EvaluationScore:
        """A score whose verdict comes from the one verdict function."""
        clean = 0.0 if not math.isfinite(score) else min(1.0, max(0.0, score))
        return cls(score=clean, verdict=score_to_verdict(clean, gate_failed=gate_failed), **kwargs)

    @property
    def gate_failed(self) -> bool:
        return self.verdict == "fail" and score_to_verdict(self.score) != "fail"


@dataclass(frozen=True)
class EvaluatorResult:
    """One evaluator's result within a case, as written to results and reports."""

    name: str
    type: str
    weight: float
    score: EvaluationScore

    def to_dict(self) -> dict[str, Any]:
        s = self.score
        row: dict[str, Any] = {
            "name": self.name,
            "type": self.type,
            "score": s.score,
            "weight": self.weight,
            "verdict": s.verdict,
            "hits": list(s.hits),
            "misses": list(s.misses),
            "reasoning": s.reasoning,
            "evaluator_provider_request": s.evaluator_raw_request,
        }
        if s.details is not None:
            row["details"] = s.details
        if s.error is not None:
            row["error"] = s.error
        return row


@runtime_checkable
class Evaluator(Protocol):
    """Anything with a ``kind`` and an ``evaluate(context)``, sync or async (REQ-EVAL-001)."""

    kind: str

    def evaluate(
        self, context: EvaluationContext
    ) -> EvaluationScore | Awaitable[EvaluationScore]: ...


ResolveJudge = Callable[[EvaluationContext], "JudgeClient | None"]


def build_evaluator_registry(
    overrides: Mapping[str, Evaluator] | None = None,
    resolve_judge_provider: ResolveJudge | None = None,
) -> dict[str, Evaluator]:
    """Built-in evaluators by kind, with ``overrides`` replacing or adding kinds (REQ-EVAL-006)."""
    from .code_judge import CodeEvaluator
    from .llm_judge import LlmJudgeEvaluator

    registry: dict[str, Evaluator] = {
        "llm_judge": LlmJudgeEvaluator(resolve_judge_provider=resolve_judge_provider),
        "code_judge": CodeEvaluator(),
    }
    registry.update(overrides or {})
    return registry


def lookup_evaluator(registry: Mapping[str, Evaluator], kind: str) -> Evaluator:
    """The evaluator for ``kind``, falling back to ``llm_judge``, else a clear error."""
    evaluator = (
        registry.get(kind) or registry.get(canonical_kind(kind)) or registry.get("llm_judge")
    )
    if evaluator is None:
        raise ConfigError(
            f"no evaluator for kind '{kind}' and no llm_judge to fall back to; "
            f"registered kinds: {', '.join(sorted(registry)) or 'none'}"
        )
    return evaluator


async def call_evaluator(evaluator: Evaluator, context: EvaluationContext) -> EvaluationScore:
    """Await an async ``evaluate``; run a sync one in a thread so it cannot block other cases."""
    if inspect.iscoroutinefunction(evaluator.evaluate):
        outcome: Any = await evaluator.evaluate(context)
    else:
        outcome = await asyncio.to_thread(evaluator.evaluate, context)
        if inspect.isawaitable(outcome):
            outcome = await outcome
    if not isinstance(outcome, EvaluationScore):
        raise TypeError(
            f"{type(evaluator).__name__}.evaluate returned {type(outcome).__name__}, "
            "not an EvaluationScore"
        )
    return outcome


@dataclass(frozen=True)
class CaseEvaluation:
    """The aggregate score of a case and each evaluator's own result (REQ-EVAL-007)."""

    score: EvaluationScore
    evaluator_results: tuple[EvaluatorResult, ...]


async def run_evaluators_for_case(
    context: EvaluationContext,
    evaluators: Sequence[EvaluatorConfig],
    registry: Mapping[str, Evaluator],
) -> CaseEvaluation:
    """Run every configured evaluator (concurrently) and aggregate by weighted mean.

    An evaluator that raises an ``AgentvError`` (judge unavailable, replay miss, no judge) stops
    the case: it cannot be graded. Any other exception is a bug in that evaluator: it is recorded
    as AgentV does (score 0, the exception in its misses) and marked as an ``error``, so the case
    is reported as not graded rather than as a failed answer.
    """

    async def one(entry: EvaluatorConfig) -> EvaluationScore:
        evaluator = lookup_evaluator(registry, entry.type)
        try:
            return await call_evaluator(evaluator, replace(context, evaluator=entry))
        except AgentvError:
            raise
        except Exception as exc:
            problem = f"Evaluator '{entry.name}' failed: {type(exc).__name__}: {exc}"
            return EvaluationScore.graded(0.0, misses=(problem,), error=problem)

    if len(evaluators) == 1:  # the common case: no tasks to create
        outcomes: list[EvaluationScore | BaseException] = [await one(evaluators[0])]
    else:
        outcomes = await asyncio.gather(*(one(e) for e in evaluators), return_exceptions=True)
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
    scores: list[EvaluationScore] = [o for o in outcomes if isinstance(o, EvaluationScore)]
    results = tuple(
        EvaluatorResult(entry.name, entry.kind, entry.weight, score)
        for entry, score in zip(evaluators, scores, strict=True)
    )
    return CaseEvaluation(aggregate(results), results)


def aggregate(results: Sequence[EvaluatorResult]) -> EvaluationScore:
    """Weighted mean of the scores; a failed rubric gate on a weighted evaluator fails the case."""
    total = sum(r.weight for r in results)
    score = sum(r.score.score * r.weight for r in results) / total if total > 0 else 0.0
    gate_failed = any(r.score.gate_failed and r.weight > 0 for r in results)
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
