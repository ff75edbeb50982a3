"""The evaluator protocol, the data it works on, and the engine that runs a case's evaluators.

Names follow AgentV's evaluation API (seed 001) in snake_case. Evaluators may be sync or async:
the engine is async and runs a sync ``evaluate`` in a worker thread so judge calls overlap.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ValidationError

from ..answers import TargetResponse
from ..cases import PreparedCase
from ..errors import AgentvError, ConfigError
from ..llm.client import JudgeClient
from ..llm.usage import PlannedCall
from ..results import Grade
from ..schema.base import problems
from ..schema.evaluators import EvaluatorConfig
from ..spellings import canonical_kind
from .score import EvaluationScore as EvaluationScore  # re-exported: where evaluators look
from .score import EvaluatorResult as EvaluatorResult
from .score import aggregate, gated
from .score import weighted_mean as weighted_mean


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
    #: The case's judge, as its plan resolved it at collection: its target's ``judge_target``,
    #: else the session's (None: not configured); the error when the target names one that
    #: cannot judge, raised only if an entry needs a judge.
    judge: JudgeClient | AgentvError | None = None
    trace_summary: dict[str, Any] | None = None
    now: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    #: The evaluators by kind this case runs with, so a composite can run its members.
    registry: Mapping[str, Evaluator] | None = None
    #: AgentV v4: the workspace the answer was made in, and the diff of what changed there.
    workspace_path: str | None = None
    file_changes: str | None = None

    @classmethod
    def for_answer(
        cls,
        case: PreparedCase,
        response: TargetResponse | None,
        attempt: int = 0,
        *,
        target: str = "",
        judge: JudgeClient | AgentvError | None = None,
    ) -> EvaluationContext:
        """What a case's evaluators see of one attempt's answer (none yet: to find judges)."""
        return cls(
            eval_case=replace(case, attempt=attempt),
            candidate=response.text if response else "",
            target=target,
            attempt=attempt,
            output_messages=response.output_messages if response else None,
            judge=judge,
            trace_summary=response.trace_summary() if response else None,
            workspace_path=response.workspace_path if response else None,
            file_changes=response.file_changes if response else None,
        )

    @property
    def prompt_inputs(self) -> dict[str, str]:
        case = self.eval_case
        return {
            "question": case.question,
            "expected_outcome": case.expected_outcome,
            "reference_answer": case.reference_answer,
            "candidate_answer": self.candidate,
        }


@runtime_checkable
class Evaluator(Protocol):
    """Anything with a ``kind`` and an ``evaluate(context)``, sync or async (REQ-EVAL-001).

    An evaluator that calls a model judge may also have ``judge_for(context)``: the judge it
    will call for the entry in ``context`` (None if none), raising ``JudgeNotConfiguredError``
    when it needs one nobody configured, so that a case skips before any work is done.
    """

    kind: str

    def evaluate(
        self, context: EvaluationContext
    ) -> EvaluationScore | Awaitable[EvaluationScore]: ...


#: What a kind with settings (a trajectory, fields, a threshold, members) needs, so that it can
#: never be a file's default kind: only an entry of its own gives them (``entry_needs``).
NEEDS_SETTINGS = "its settings: list it under 'evaluators' with them"

ResolveJudge = Callable[[EvaluationContext], JudgeClient | None]


def judge_for(evaluator: Evaluator, context: EvaluationContext) -> JudgeClient | None:
    """The judge ``evaluator`` will call for the entry in ``context``, if it says (see
    ``Evaluator``)."""
    ask = getattr(evaluator, "judge_for", None)
    judge: JudgeClient | None = ask(context) if callable(ask) else None
    return judge


def walk_entries(entries: Iterable[EvaluatorConfig]) -> Iterator[EvaluatorConfig]:
    """Every entry and, depth first, the members of composites."""
    for entry in entries:
        yield entry
        yield from walk_entries(entry.members)


def entry_judges(
    entries: Sequence[EvaluatorConfig],
    evaluators: Mapping[str, Evaluator],
    context: EvaluationContext,
) -> list[JudgeClient]:
    """The judges these entries will call (composite members and LLM aggregators included);
    raises ``JudgeNotConfiguredError`` before any work when one is needed and nobody set it."""
    found: list[JudgeClient] = []
    for entry in walk_entries(entries):
        evaluator = evaluators.get(entry.type)
        judge = judge_for(evaluator, replace(context, evaluator=entry)) if evaluator else None
        found += [judge] if judge is not None else []
    return found


def lookup_evaluator(registry: Mapping[str, Evaluator], kind: str) -> Evaluator:
    """The evaluator for ``kind``, falling back to ``llm_judge``, else a clear error (seed 001,
    REQ-EVAL-006). The plugin resolves every kind before a case runs, so inside pytest the
    fallback is never reached: an unknown kind is a collection error."""
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

    def grade(self) -> Grade:
        """The evaluation as the plain data a ``CaseResult`` carries."""
        s = self.score
        return Grade(
            score=s.score,
            verdict=s.verdict,
            hits=s.hits,
            misses=s.misses,
            reasoning=s.reasoning,
            evaluator_results=tuple(r.row() for r in self.evaluator_results),
            error=s.error,
            gate_failed=s.gate_failed,
        )


async def evaluate_entries(
    context: EvaluationContext,
    entries: Sequence[EvaluatorConfig],
    registry: Mapping[str, Evaluator],
) -> tuple[EvaluatorResult, ...]:
    """Run evaluator entries concurrently, each with its own result, in the entries' order.

    An evaluator that raises an ``AgentvError`` (judge unavailable, replay miss, no judge) stops
    the case: it cannot be graded. Any other exception is a bug in that evaluator: it is recorded
    as AgentV does (score 0, the exception in its misses) and marked as an ``error``, so the case
    is reported as not graded rather than as a failed answer.
    """
    scoped = replace(context, registry=registry)

    async def one(entry: EvaluatorConfig) -> EvaluationScore:
        evaluator = lookup_evaluator(registry, entry.type)
        try:
            return await call_evaluator(evaluator, replace(scoped, evaluator=entry))
        except AgentvError:
            raise
        except (Exception, SystemExit) as exc:  # sys.exit in a script-minded evaluator
            problem = f"Evaluator '{entry.name}' failed: {type(exc).__name__}: {exc}"
            return EvaluationScore.graded(0.0, misses=(problem,), error=problem)

    if len(entries) == 1:  # the common case: no tasks to create
        outcomes: list[EvaluationScore | BaseException] = [await one(entries[0])]
    else:
        outcomes = await asyncio.gather(*(one(e) for e in entries), return_exceptions=True)
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
    scores: list[EvaluationScore] = [o for o in outcomes if isinstance(o, EvaluationScore)]
    return tuple(gated(entry, score) for entry, score in zip(entries, scores, strict=True))


@runtime_checkable
class PlansCalls(Protocol):
    """An evaluator that can say which model calls it would make, without making them (for
    ``--agentv-estimate``). Evaluators without this method are counted as making none."""

    async def planned_calls(self, context: EvaluationContext) -> list[PlannedCall]: ...


async def plan_entries(
    context: EvaluationContext,
    entries: Sequence[EvaluatorConfig],
    registry: Mapping[str, Evaluator],
) -> list[PlannedCall]:
    """The model calls these entries would make for ``context``, in the entries' order."""
    scoped = replace(context, registry=registry)
    calls: list[PlannedCall] = []
    for entry in entries:
        evaluator = lookup_evaluator(registry, entry.type)
        if isinstance(evaluator, PlansCalls):
            calls += await evaluator.planned_calls(replace(scoped, evaluator=entry))
    return calls


async def run_evaluators_for_case(
    context: EvaluationContext,
    evaluators: Sequence[EvaluatorConfig],
    registry: Mapping[str, Evaluator],
) -> CaseEvaluation:
    """Run every configured evaluator (concurrently) and aggregate by weighted mean."""
    results = await evaluate_entries(context, evaluators, registry)
    return CaseEvaluation(aggregate(results), results)


S = TypeVar("S", bound=BaseModel)


def entry_settings(context: EvaluationContext, model: type[S]) -> S:
    """The validated settings of the entry being evaluated. Eval files and ``assert_judged``
    validate them when they load; an evaluator a hook registers under another kind name gets
    them validated here, with the same messages."""
    entry = context.evaluator
    if entry is None:
        raise ConfigError(f"{model.__name__} needs an evaluator entry with its settings")
    if isinstance(entry.spec, model):
        return entry.spec
    try:
        return model.model_validate(entry.options)
    except ValidationError as exc:
        raise ConfigError(f"evaluator '{entry.name}' ({entry.type}): {problems(exc)}") from None
