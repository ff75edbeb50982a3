"""``assert_judged`` for plain unit tests, its async twin, and the ``agentv_judge`` object.

They enter the pipeline at "evaluators" with an answer in hand and leave through the same
``CaseResult``, the same verdict function and the same failure text as YAML cases: pass returns
the score, borderline xfails (per ``--agentv-borderline``), fail raises an ``AssertionError``
carrying the evaluator table. Without a configured judge an LLM-judged assertion skips, like an
LLM-judged YAML case.

The plugin sets ``current_test`` around every test, so this module is imported for every test:
what grading needs (pydantic, the evaluators) is imported when a judgement is first asked for.
"""

from __future__ import annotations

import contextvars
import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..errors import AgentvError
from ..keywords import JudgeOptions, check_options
from ..scheduler import awaited, run_sync

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ..answers import TargetResponse
    from ..cases import PreparedCase
    from ..evaluators.base import CaseEvaluation, EvaluationContext, EvaluationScore
    from ..grading import Judgement, OnLoop, ResultOf
    from ..results import CaseResult, ResultRow
    from ..runner import AgentvRun
    from ..schema.evaluators import EvaluatorConfig
    from ..schema.trials import TrialsConfig


@dataclass(frozen=True)
class CurrentTest:
    """The test pytest is running, and how to reach the run (created on first use)."""

    item: pytest.Item
    run: Callable[[], AgentvRun]


#: Set by the plugin around each test, so that module-level ``assert_judged`` finds its test.
current_test: contextvars.ContextVar[CurrentTest | None] = contextvars.ContextVar(
    "agentv_current_test", default=None
)


class JudgedAssertionError(AssertionError):
    """``assert_judged`` failed: the message is the evaluator and rubric table."""

    def __init__(self, message: str, result: ResultRow) -> None:
        super().__init__(message)
        self.result = result


class AgentvJudge:
    """The session's judge, bound to a test: evaluate answers, or assert on them.

    ``evaluate`` grades without asserting and returns the aggregate and per-evaluator results;
    ``assert_judged`` turns the verdict into a pytest outcome. Model calls go through the same
    retry policy and record/replay store as eval files. Each entry point is a thin wrapper over
    one async core: the sync ones call the agent in the test's thread and wait for the plugin's
    loop; the async ones await the agent in the test's own loop.
    """

    def __init__(self, run: AgentvRun, item: pytest.Item | None = None) -> None:
        self.run = run
        self.item = item

    @property
    def model(self) -> str | None:
        return self.run.settings.judge_model

    @property
    def eval_id(self) -> str:
        return self.item.nodeid if self.item is not None else "assert_judged"

    def evaluate(self, candidate: Any, **options: Unpack[JudgeOptions]) -> CaseEvaluation:
        """Grade ``candidate`` without asserting; raises ``JudgeNotConfiguredError`` if no judge."""
        __tracebackhide__ = True
        check_options("evaluate", options)
        scheduler = self.run.scheduler
        return run_sync(self._evaluate(_given(candidate), options, scheduler.blocking))

    async def aevaluate(self, candidate: Any, **options: Unpack[JudgeOptions]) -> CaseEvaluation:
        """The awaitable ``evaluate``; calls from ``asyncio.gather`` overlap."""
        __tracebackhide__ = True
        check_options("aevaluate", options)
        return await self._evaluate(_given(candidate), options, self.run.scheduler.waiting)

    def assert_judged(
        self,
        candidate: Any,
        *,
        trials: int | Mapping[str, Any] | None = None,
        **options: Unpack[JudgeOptions],
    ) -> EvaluationScore:
        __tracebackhide__ = True
        check_options("assert_judged", options)
        blocking = self.run.scheduler.blocking
        return run_sync(
            self._assert(partial(_answer_of, candidate, blocking), trials, options, blocking)
        )

    async def assert_judged_async(
        self,
        candidate: Any,
        *,
        trials: int | Mapping[str, Any] | None = None,
        **options: Unpack[JudgeOptions],
    ) -> EvaluationScore:
        __tracebackhide__ = True
        check_options("assert_judged_async", options)
        answer = partial(_answer_of, candidate)
        return await self._assert(answer, trials, options, self.run.scheduler.waiting)

    def _judgement(self, options: JudgeOptions, trials: TrialsConfig | None) -> Judgement:
        """What grades the answers, prepared in the test's own thread (``judgement_for``)."""
        from ..cases import PreparedCase
        from ..schema.grading import python_entries
        from ..schema.messages import render_content

        entries = python_entries(options.get("evaluators"), options.get("rubrics"))
        question = options.get("question") or ""
        reference = options.get("reference_answer")
        given = reference is not None and reference != ""  # {} is an answer
        case = PreparedCase(
            id=self.item.name if self.item is not None else "assert_judged",
            question=question,
            input_messages=({"role": "user", "content": question},),
            expected_outcome=options.get("expected_outcome") or "",
            reference_answer=render_content(reference) if given else "",
            expected_messages=({"role": "assistant", "content": reference},) if given else (),
            authored_input=({"role": "user", "content": question},),
            folder=self.item.path.parent if self.item is not None else Path.cwd(),
            rootdir=self.run.rootdir,
        )
        return self.judgement_for(entries, case, options, trials)

    def judgement_for(
        self,
        entries: tuple[EvaluatorConfig, ...],
        case: PreparedCase,
        options: JudgeOptions,
        trials: TrialsConfig | None,
    ) -> Judgement:
        """What grades ``case``'s answers with ``entries``: the ``trace``'s metrics checked,
        hooks asked for evaluator kinds, the needed judges looked for
        (``JudgeNotConfiguredError``); a mistake is raised in the test's frame."""
        from ..answers import TargetResponse, checked_trace
        from ..evaluators.base import EvaluationContext, entry_judges
        from ..grading import Judgement
        from ..trials import policy_for

        trace = checked_trace(options.get("trace"), "assert_judged(trace=...)")
        hook = self.item.ihook if self.item is not None else self.run.config.hook
        registry = self.run.registry.scoped(
            lambda kind: hook.pytest_agentv_make_evaluator(config=self.run.config, kind=kind)
        )
        evaluators = registry.evaluators_for(entries)

        def context(response: TargetResponse, attempt: int) -> EvaluationContext:
            answered = response.trace_summary()
            return EvaluationContext(
                eval_case=replace(case, attempt=attempt),
                candidate=response.text,
                target="assert_judged",
                attempt=attempt,
                output_messages=response.output_messages,
                judge_model=options.get("model"),
                judge=self.run.session_judge(),
                # The answer's own trace summary, with what the test passed winning.
                trace_summary={**(answered or {}), **trace} if trace is not None else answered,
            )

        session = self.run.session_judge()
        judges = entry_judges(entries, evaluators, context(TargetResponse(""), 0))
        return Judgement(
            entries=entries,
            evaluators=evaluators,
            context=context,
            result=self._result(options),
            policy=policy_for(trials),
            gate=self.run.trusted if session is not None and session in judges else None,
            catches=(AgentvError,),
        )

    async def _evaluate(
        self, answer: Callable[[], Awaitable[Any]], options: JudgeOptions, on_loop: OnLoop[Any]
    ) -> CaseEvaluation:
        __tracebackhide__ = True
        from ..answers import response_from
        from ..grading import Grading

        grading = Grading(self._judgement(options, None))
        if grading.judgement.gate is not None:
            await on_loop(grading.judgement.gate())
        response = response_from(await answer(), "assert_judged candidate")
        evaluation: CaseEvaluation = await on_loop(grading.evaluate(response, 0))
        return evaluation

    async def _assert(
        self,
        answer: Callable[[], Awaitable[Any]],
        trials: object,
        options: JudgeOptions,
        on_loop: OnLoop[None],
    ) -> EvaluationScore:
        """The one core: the answers graded on the plugin's loop, the result recorded on the
        test, then pass (the score), xfail, skip or fail."""
        __tracebackhide__ = True
        from ..answers import response_from
        from ..grading import Grading, grade_answers, not_graded
        from ..trials import trials_from_argument

        async def answer_at(attempt: int) -> TargetResponse:
            return response_from(await answer(), "assert_judged candidate")

        config = trials_from_argument(trials) if trials is not None else None
        grading: Grading | None = None
        try:
            grading = Grading(self._judgement(options, config))
        except AgentvError as exc:
            result = not_graded(self._result(options), exc)
        else:
            result = await grade_answers(grading, answer_at, on_loop)
        self.settle(result)  # a result that was not graded ends the test here
        assert grading is not None
        return grading.score()

    def _result(self, options: JudgeOptions) -> ResultOf:
        """A ``CaseResult`` of this test's judgement."""
        from ..results import CaseResult

        listed = bool(options.get("evaluators") or options.get("rubrics"))
        return partial(CaseResult, eval_id=self.eval_id, evaluators_listed=listed)

    def settle(self, result: CaseResult, caller: str = "assert_judged") -> None:
        """Put the result on the calling test, then return (pass), xfail, skip or fail."""
        __tracebackhide__ = True
        from ..outcomes import apply_verdict, settle_ungraded
        from ..reports.junit import record_judged

        row = result.row()
        if self.item is not None:
            record_judged(self.item, row)
        settings = self.run.settings
        settle_ungraded(
            row,
            subject=caller,
            where="",
            require_judge=settings.require_judge,
            fail_on_error=settings.fail_on_error,
            skip=pytest.skip,
        )
        apply_verdict(
            row,
            borderline=settings.borderline,
            headline=f"{caller} failed",
            failure=lambda report: JudgedAssertionError(report, row),
        )


async def _answer_of(candidate: Any, on_loop: OnLoop[Any] | None = None) -> Any:
    """A callable's answer (called once per trial); anything else is the answer itself. An async
    one is awaited in the caller's event loop, or with ``on_loop`` (the sync wrapper: on the
    plugin's loop, never suspending). What the agent raises leaves the test not graded, as an
    ``agentv_target`` fixture's exception leaves its case; the test's own code is not in here."""
    from ..targets.fixture import agent_call, callable_name

    with agent_call(f"assert_judged agent ({callable_name(candidate)})"):
        answer = candidate() if callable(candidate) else candidate
        if inspect.isawaitable(answer):
            answer = await (awaited(answer) if on_loop is None else on_loop(awaited(answer)))
    return answer


def _given(candidate: Any) -> Callable[[], Awaitable[Any]]:
    """An answer already in hand, as the core asks for answers."""

    async def answer() -> Any:
        return candidate

    return answer


def _judge() -> AgentvJudge:
    test = current_test.get()
    if test is None:
        raise RuntimeError(
            "assert_judged needs a running pytest session with pytest-agentv (call it from a test)"
        )
    return AgentvJudge(test.run(), test.item)


def assert_judged(
    candidate: Any,
    *,
    trials: int | Mapping[str, Any] | None = None,
    **options: Unpack[JudgeOptions],
) -> EvaluationScore:
    """Grade ``candidate`` with the session's judge and assert on the verdict.

    Keywords: ``expected_outcome``, ``question``, ``reference_answer`` (text, or an object for
    ``field_accuracy``), ``rubrics`` (strings, dicts or ``RubricItem``s), ``evaluators`` (the
    same entries as YAML: code judges, tool trajectories, composites...), ``model`` and
    ``trace`` (AgentV's trace summary: ``tool_calls_by_name``, ``duration_ms``, ``cost_usd``,
    ``token_usage``; it adds to what ``candidate`` reports). ``candidate`` is text, a list of
    messages (with ``tool_calls``), or ``{"output_messages": [...], "duration_ms": ...}``. Pass
    returns the ``EvaluationScore``; borderline calls ``pytest.xfail``; fail raises
    ``JudgedAssertionError`` with the evaluator table.

    ``candidate`` may be a callable (sync or async) that returns the answer: it is called once
    per trial. ``trials`` is a count (strategy ``pass_at_k``) or a mapping like an eval file's
    ``execution.trials``; the returned score is then the strategy's aggregate, with each trial
    in its ``details``.
    """
    __tracebackhide__ = True
    return _judge().assert_judged(candidate, trials=trials, **options)


async def assert_judged_async(
    candidate: Any,
    *,
    trials: int | Mapping[str, Any] | None = None,
    **options: Unpack[JudgeOptions],
) -> EvaluationScore:
    """The awaitable ``assert_judged``: several can run at once with ``asyncio.gather``; an
    async agent callable is awaited in the test's own event loop."""
    __tracebackhide__ = True
    return await _judge().assert_judged_async(candidate, trials=trials, **options)
