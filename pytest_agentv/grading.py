"""The one path from an answer to a ``CaseResult``: evaluators, gates, trials, not-graded ends.

Eval cases (``runner``) and ``assert_judged`` (``assertions``) describe what grades an answer as a
``Judgement`` and hand ``grade_answers`` a way to get each attempt's answer; everything after that
is here, once: a case with trials runs them one after another and concludes by its strategy; the
first attempt that cannot be graded ends the case as not graded, never with a made-up verdict.
A conversation runs this path once per turn.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from .answers import TargetResponse, tool_calls
from .errors import AgentvError, JudgeNotConfiguredError, NotGradedError
from .evaluators.base import (
    CaseEvaluation,
    EvaluationContext,
    EvaluationScore,
    Evaluator,
    run_evaluators_for_case,
)
from .llm.usage import Usage, current_usage
from .redaction import redact
from .results import CaseResult, Status
from .schema.base import reported_metric
from .schema.evaluators import EvaluatorConfig
from .trials import TrialPolicy, TrialResult, TrialRun

T = TypeVar("T")

#: Runs a coroutine on the plugin's loop and waits for it, from where the answers are got.
OnLoop = Callable[[Coroutine[Any, Any, T]], Awaitable[T]]


class ResultOf(Protocol):
    """A ``CaseResult`` of the case being graded, with its identity (id, file, target) filled
    in: the grading gives the status and what it found."""

    def __call__(self, status: Status, **values: Any) -> CaseResult: ...


@dataclass(frozen=True)
class Judgement:
    """What grades a case's answers, and how an answer is seen by its evaluators."""

    entries: tuple[EvaluatorConfig, ...]
    evaluators: Mapping[str, Evaluator]
    #: The evaluators' view of one attempt's answer.
    context: Callable[[TargetResponse, int], EvaluationContext]
    result: ResultOf
    policy: TrialPolicy | None = None
    #: Awaited before the first answer when the session's judge grades (calibration).
    gate: Callable[[], Coroutine[Any, Any, None]] | None = None
    #: What ends the case as not graded when an answer or the grading raises it; anything else
    #: propagates (``assert_judged``: an agent's exception arrives as ``NotGradedError``).
    catches: tuple[type[BaseException], ...] = (Exception,)
    #: Grades an attempt in place of ``entries``: a conversation, graded turn by turn while it
    #: was answered (``conversation/``), concludes here.
    graded: Callable[[EvaluationContext], Awaitable[CaseEvaluation]] | None = None


def not_graded(
    result: ResultOf,
    exc: BaseException,
    usage: Usage | None = None,
    response: TargetResponse | None = None,
) -> CaseResult:
    """How a case ends when it cannot be graded: skipped when it needs a judge nobody
    configured, else not graded, with the reason (a bug is named as one, never a verdict)."""
    row = (usage or Usage()).row()
    if isinstance(exc, JudgeNotConfiguredError):
        return result("skipped", error=str(exc), usage=row)
    message = (
        str(exc)
        if isinstance(exc, AgentvError)
        else f"unexpected {type(exc).__name__} while running the case: {exc}"
    )
    return result(
        "error",
        error=redact(message),
        usage=row,
        candidate=response.text if response else "",
        trace_summary=response.trace_summary() if response else None,
        tool_calls=called(response),
    )


def called(response: TargetResponse | None) -> tuple[dict[str, Any], ...]:
    """The tool calls of an answer, as a row shows them."""
    if response is None:
        return ()
    return tuple(
        {"tool": c.name, "input": c.args, "duration_ms": c.duration_ms, "error": c.error}
        for c in tool_calls(response.output_messages)
    )


class Grading:
    """One case's grading in progress: its usage, its trials, and how it ends."""

    def __init__(self, judgement: Judgement) -> None:
        self.judgement = judgement
        self.usage = Usage()
        self.trials = TrialRun(judgement.policy) if judgement.policy is not None else None
        #: The last evaluation, and the single attempt's result when the case has no trials.
        self.evaluation: CaseEvaluation | None = None
        self._single: TrialResult | None = None
        self._failure: CaseResult | None = None
        self._started = False
        #: Each attempt's answer (the row shows one's tool calls), and the time spent on them.
        self.responses: dict[int, TargetResponse] = {}
        self.answer_seconds = 0.0

    def next_attempt(self) -> int | None:
        """The attempt to answer next, or None when the case is done."""
        if self._failure is not None:
            return None
        if self.trials is not None:
            attempt = self.trials.next_attempt()
        else:
            attempt = None if self._started else 0
        self._started = self._started or attempt is not None
        return attempt

    async def counted(self, answer: Awaitable[T]) -> T:
        """Await an answer with its model calls (a model target's) counted in this case."""
        token = current_usage.set(self.usage)
        try:
            return await answer
        finally:
            current_usage.reset(token)

    async def evaluate(self, response: TargetResponse, attempt: int) -> CaseEvaluation:
        """Run the evaluators on one attempt's answer, counting their model calls here."""
        return (await self._evaluate(response, attempt))[1]

    async def _evaluate(
        self, response: TargetResponse, attempt: int
    ) -> tuple[EvaluationContext, CaseEvaluation]:
        judgement = self.judgement
        context = judgement.context(response, attempt)
        evaluation = await self.counted(
            judgement.graded(context)
            if judgement.graded is not None
            else run_evaluators_for_case(context, judgement.entries, judgement.evaluators)
        )
        self.evaluation = evaluation
        return context, evaluation

    async def grade(self, response: TargetResponse, attempt: int) -> None:
        """Grade one attempt's answer (on the plugin's loop), or record why it could not be."""
        spent = self.usage.spent_usd
        try:
            context, evaluation = await self._evaluate(response, attempt)
        except self.judgement.catches as exc:
            self.fail(exc, response)
            return
        grade = evaluation.grade()
        cost = self.usage.spent_usd - spent + (reported_metric(response.cost_usd) or 0.0)
        trial = TrialResult(attempt, grade, cost, response.text, context.trace_summary)
        if self.trials is None:
            self._single = trial
        elif grade.error:
            self.fail(NotGradedError(grade.error), response, trial)
        else:
            self.trials.add(trial)

    def fail(
        self,
        exc: BaseException,
        response: TargetResponse | None = None,
        trial: TrialResult | None = None,
    ) -> None:
        """End the case as not graded; within trials, naming the attempt that could not be."""
        failure = not_graded(self.judgement.result, exc, self.usage, response)
        failure.duration_ms = self.duration_ms()
        if self.trials is not None and self._started and failure.status == "error":
            failure.error = f"attempt {len(self.trials.results)}: {failure.error}"
            failure.grade = trial.grade if trial is not None else None
            failure.trials = tuple(result.row() for result in self.trials.results)
        self._failure = failure

    def result(self) -> CaseResult:
        """How the case ended, with everything its attempts spent."""
        result, usage = self.judgement.result, self.usage.row()
        timing = {"duration_ms": self.duration_ms()}
        if self._failure is not None:
            self._failure.usage = usage
            return self._failure
        if self.trials is None:
            single = self._single
            assert single is not None, "result() before the case was graded"
            grade = single.grade
            return result(
                "error" if grade.error else "graded",
                candidate=single.candidate,
                grade=grade,
                error=grade.error,
                trace_summary=single.trace_summary,
                usage=usage,
                tool_calls=called(self.responses.get(single.attempt)),
                **timing,
            )
        outcome = self.trials.conclude()
        return result(
            "graded",
            candidate=outcome.candidate,
            grade=outcome.grade,
            trace_summary=outcome.trace_summary,
            usage=usage,
            trials=outcome.trials,
            aggregation=outcome.aggregation,
            tool_calls=called(self.responses.get(outcome.aggregation["shown_attempt"])),
            **timing,
        )

    def duration_ms(self) -> float | None:
        """Milliseconds spent waiting for answers; None before any answer was asked for."""
        return self.answer_seconds * 1000 if self._started else None

    def score(self) -> EvaluationScore:
        """What ``assert_judged`` returns: the evaluation's score, or the trials' aggregate
        with each trial and the aggregation in its details."""
        if self.trials is None:
            assert self.evaluation is not None
            return self.evaluation.score
        outcome = self.trials.conclude()
        grade = outcome.grade
        return EvaluationScore(
            grade.score,
            hits=grade.hits,
            misses=grade.misses,
            reasoning=grade.reasoning,
            verdict=grade.verdict,
            gate_failed=grade.gate_failed,
            details={"trials": list(outcome.trials), "aggregation": dict(outcome.aggregation)},
        )


async def grade_answers(
    grading: Grading, answer: Callable[[int], Awaitable[TargetResponse]], on_loop: OnLoop[None]
) -> CaseResult:
    """Get each attempt's answer (where ``answer`` runs) and grade it on the plugin's loop
    (``on_loop``), one attempt after another, then conclude."""
    judgement = grading.judgement
    try:
        if judgement.gate is not None:
            await on_loop(judgement.gate())
    except AgentvError as exc:
        grading.fail(exc)
    while (attempt := grading.next_attempt()) is not None:
        started = time.perf_counter()
        try:
            response = await answer(attempt)
        except judgement.catches as exc:
            grading.answer_seconds += time.perf_counter() - started
            grading.fail(exc)
            break
        grading.answer_seconds += time.perf_counter() - started
        grading.responses[attempt] = response
        await on_loop(grading.grade(response, attempt))
    return grading.result()
