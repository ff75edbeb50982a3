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

import asyncio
import contextvars
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import pytest

from .errors import AgentvError, JudgeNotConfiguredError, NotGradedError

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from .evaluators.base import CaseEvaluation, EvaluationContext, EvaluationScore, Evaluator
    from .judge import Usage
    from .models import EvaluatorConfig, RubricItem
    from .results import CaseResult, Grade, ResultRow
    from .runner import AgentvRun
    from .targets import TargetResponse

    Rubrics = Sequence[str | Mapping[str, Any] | RubricItem]
    Entries = Sequence[Mapping[str, Any] | EvaluatorConfig]


@dataclass(frozen=True)
class CurrentTest:
    """The test pytest is running, and how to reach the run (created on first use)."""

    item: pytest.Item
    run: Callable[[], AgentvRun]


#: Set by the plugin around each test, so that module-level ``assert_judged`` finds its test.
current_test: contextvars.ContextVar[CurrentTest | None] = contextvars.ContextVar(
    "agentv_current_test", default=None
)


class JudgeOptions(TypedDict, total=False):
    """What to judge an answer against; every judging entry point takes these keywords."""

    expected_outcome: str | None
    question: str | None
    reference_answer: str | Mapping[str, Any] | None
    rubrics: Rubrics | None
    evaluators: Entries | None
    model: str | None
    trace: Mapping[str, Any] | None


@dataclass(frozen=True)
class _Judgement:
    """An answer ready to be graded: what grades it, against what, and whether the session's
    judge grades it (which then waits for calibration)."""

    entries: tuple[EvaluatorConfig, ...]
    evaluators: Mapping[str, Evaluator]
    context: EvaluationContext
    response: TargetResponse
    judged: bool


class JudgedAssertionError(AssertionError):
    """``assert_judged`` failed: the message is the evaluator and rubric table."""

    def __init__(self, message: str, result: ResultRow) -> None:
        super().__init__(message)
        self.result = result


def _entries(evaluators: Entries | None, rubrics: Rubrics | None) -> tuple[EvaluatorConfig, ...]:
    from pydantic import ValidationError

    from .models import EvaluatorConfig, evaluator_entries, problem_text, rubric_items

    entries: list[EvaluatorConfig] = []
    for index, entry in enumerate(evaluators or ()):
        if isinstance(entry, EvaluatorConfig):
            entries.append(entry)
            continue
        try:
            entries.append(EvaluatorConfig.model_validate(dict(entry)))
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'entry'}: {problem_text(e)}"
                for e in exc.errors(include_url=False)
            )
            raise ValueError(f"evaluators[{index}] is invalid: {problems}") from None
    items = [dict(item) if isinstance(item, Mapping) else item for item in rubrics or ()]
    return evaluator_entries(entries, rubric_items(items), "llm_judge")


def _trace(
    answered: dict[str, Any] | None, given: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """The answer's own trace summary, with what the test passed as ``trace`` winning."""
    if given is None:
        return answered
    return {**(answered or {}), **given}


#: What each text keyword is, for the message when it is given something else.
_TEXT_OPTIONS = {
    "question": "a string (the question the answer replies to)",
    "expected_outcome": "a string (what a good answer does)",
    "model": "a model string such as 'openai/gpt-4o-mini'",
}


def _check_options(caller: str, options: Mapping[str, object]) -> None:
    """Refuse keywords of the wrong kind before anything runs, naming the keyword: a string
    given as ``rubrics`` would otherwise be read letter by letter, one rubric item each."""
    __tracebackhide__ = True

    def kind(value: object) -> str:
        return type(value).__name__

    unknown = sorted(set(options) - set(JudgeOptions.__annotations__))
    if unknown:
        raise TypeError(f"unexpected keyword argument(s): {', '.join(unknown)}")
    for name, wanted in _TEXT_OPTIONS.items():
        value = options.get(name)
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{caller}(): {name} must be {wanted}, not {kind(value)}")
    reference = options.get("reference_answer")
    if reference is not None and not isinstance(reference, (str, Mapping)):
        raise TypeError(
            f"{caller}(): reference_answer must be a string or a mapping (an object for "
            f"field_accuracy), not {kind(reference)}"
        )
    trace = options.get("trace")
    if trace is not None and not isinstance(trace, Mapping):
        raise TypeError(
            f"{caller}(): trace must be a mapping like AgentV's trace_summary, not {kind(trace)}"
        )
    from .models import EvaluatorConfig, RubricItem

    _check_list(
        caller,
        "rubrics",
        options.get("rubrics"),
        (str, Mapping, RubricItem),
        "a list of rubric items (strings or mappings)",
        "a string, a mapping or a RubricItem",
    )
    _check_list(
        caller,
        "evaluators",
        options.get("evaluators"),
        (Mapping, EvaluatorConfig),
        "a list of mappings like the eval file's evaluators entries ([{'name': 'speed', "
        "'type': 'latency', 'threshold': 2000}])",
        "a mapping like an eval file's evaluators entry ({'name': 'speed', 'type': 'latency', "
        "...})",
    )


def _check_list(
    caller: str, name: str, value: object, items: tuple[type, ...], whole: str, each: str
) -> None:
    __tracebackhide__ = True
    if value is None:
        return
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"{caller}(): {name} must be {whole}, not {type(value).__name__}")
    for index, item in enumerate(value):
        if not isinstance(item, items):
            raise TypeError(
                f"{caller}(): {name}[{index}] must be {each}, not {type(item).__name__}"
            )


class AgentvJudge:
    """The session's judge, bound to a test: evaluate answers, or assert on them.

    ``evaluate`` grades without asserting and returns the aggregate and per-evaluator results;
    ``assert_judged`` turns the verdict into a pytest outcome. Model calls go through the same
    retry policy and record/replay store as eval files.
    """

    def __init__(self, run: AgentvRun, item: pytest.Item | None = None) -> None:
        self.run = run
        self.item = item

    @property
    def model(self) -> str | None:
        return self.run.settings.judge_model

    def _context(
        self,
        response: TargetResponse,
        question: str | None,
        expected_outcome: str | None,
        reference_answer: str | Mapping[str, Any] | None,
        model: str | None,
        trace: Mapping[str, Any] | None,
        attempt: int,
    ) -> EvaluationContext:
        from .cases import PreparedCase
        from .evaluators.base import EvaluationContext
        from .models import render_content

        folder = self.item.path.parent if self.item is not None else Path.cwd()
        given = reference_answer is not None and reference_answer != ""  # {} is an answer
        case = PreparedCase(
            id=self.item.name if self.item is not None else "assert_judged",
            question=question or "",
            input_messages=({"role": "user", "content": question or ""},),
            expected_outcome=expected_outcome or "",
            reference_answer=render_content(reference_answer) if given else "",
            expected_messages=({"role": "assistant", "content": reference_answer},)
            if given
            else (),
            authored_input=({"role": "user", "content": question or ""},),
            folder=folder,
            rootdir=self.run.rootdir,
            attempt=attempt,
        )
        return EvaluationContext(
            eval_case=case,
            candidate=response.text,
            target="assert_judged",
            attempt=attempt,
            output_messages=response.output_messages,
            judge_model=model,
            trace_summary=_trace(response.trace_summary(), trace),
        )

    def _prepare(self, candidate: Any, options: JudgeOptions, attempt: int = 0) -> _Judgement:
        """Everything before the grading, in the test's own thread: the entries are validated
        (a mistake is raised in the test's frame), hooks asked for evaluator kinds, and the
        needed judges looked for (``JudgeNotConfiguredError``). The entry points have already
        checked the options' kinds (``_check_options``)."""
        from .targets import response_from

        entries = _entries(options.get("evaluators"), options.get("rubrics"))
        response = response_from(candidate, "assert_judged candidate")
        context = self._context(
            response,
            options.get("question"),
            options.get("expected_outcome"),
            options.get("reference_answer"),
            options.get("model"),
            options.get("trace"),
            attempt,
        )
        hook = self.item.ihook if self.item is not None else self.run.config.hook
        registry = self.run.registry.scoped(
            lambda kind: hook.pytest_agentv_make_evaluator(config=self.run.config, kind=kind)
        )
        evaluators = registry.evaluators_for(entries)
        judged = self.run.check_judges(entries, evaluators, context)
        return _Judgement(entries, evaluators, context, response, judged)

    async def _grade(self, judgement: _Judgement, usage: Usage) -> CaseEvaluation:
        """The grading, on the plugin's loop (after calibration, when the session's judge
        grades)."""
        from .evaluators.base import run_evaluators_for_case
        from .judge import current_usage

        if judgement.judged:
            await self.run.trusted()
        token = current_usage.set(usage)
        try:
            return await run_evaluators_for_case(
                judgement.context, judgement.entries, judgement.evaluators
            )
        finally:
            current_usage.reset(token)

    def evaluate(self, candidate: Any, **options: Unpack[JudgeOptions]) -> CaseEvaluation:
        """Grade ``candidate`` without asserting; raises ``JudgeNotConfiguredError`` if no judge."""
        __tracebackhide__ = True
        from .judge import Usage

        _check_options("evaluate", options)
        return self.run.scheduler.run(self._grade(self._prepare(candidate, options), Usage()))

    async def aevaluate(self, candidate: Any, **options: Unpack[JudgeOptions]) -> CaseEvaluation:
        """The awaitable ``evaluate``; calls from ``asyncio.gather`` overlap."""
        __tracebackhide__ = True
        from .judge import Usage

        _check_options("aevaluate", options)
        judgement = self._prepare(candidate, options)
        future = self.run.scheduler.submit(self._grade(judgement, Usage()))
        return await asyncio.wrap_future(future)

    def assert_judged(
        self,
        candidate: Any,
        *,
        trials: int | Mapping[str, Any] | None = None,
        **options: Unpack[JudgeOptions],
    ) -> EvaluationScore:
        __tracebackhide__ = True
        _check_options("assert_judged", options)
        if callable(candidate) or trials is not None:
            return self._assert_trials(candidate, trials, options)
        return self._assert_once(candidate, options)

    async def assert_judged_async(
        self,
        candidate: Any,
        *,
        trials: int | Mapping[str, Any] | None = None,
        **options: Unpack[JudgeOptions],
    ) -> EvaluationScore:
        __tracebackhide__ = True
        _check_options("assert_judged_async", options)
        if callable(candidate) or trials is not None:
            return await self._assert_trials_async(candidate, trials, options)
        return await self._assert_once_async(candidate, options)

    def _assert_once(self, candidate: Any, options: JudgeOptions) -> EvaluationScore:
        __tracebackhide__ = True
        from .judge import Usage

        usage = Usage()
        listed = bool(options.get("evaluators") or options.get("rubrics"))
        try:
            judgement = self._prepare(candidate, options)
            evaluation = self.run.scheduler.run(self._grade(judgement, usage))
        except AgentvError as exc:
            return self._conclude(None, usage, exc, listed)
        return self._conclude(evaluation, usage, None, listed)

    async def _assert_once_async(self, candidate: Any, options: JudgeOptions) -> EvaluationScore:
        __tracebackhide__ = True
        from .judge import Usage

        usage = Usage()
        listed = bool(options.get("evaluators") or options.get("rubrics"))
        try:
            judgement = self._prepare(candidate, options)
            future = self.run.scheduler.submit(self._grade(judgement, usage))
            evaluation = await asyncio.wrap_future(future)
        except AgentvError as exc:
            return self._conclude(None, usage, exc, listed)
        return self._conclude(evaluation, usage, None, listed)

    def _answer(self, candidate: Any) -> Any:
        """A callable's answer, called in the test's thread (an async one is awaited on the
        plugin's loop); anything else is the answer itself."""
        answer = candidate() if callable(candidate) else candidate
        if inspect.isawaitable(answer):
            answer = self.run.scheduler.run(_awaited(answer))
        return answer

    def _assert_trials(
        self, candidate: Any, trials: object, options: JudgeOptions
    ) -> EvaluationScore:
        """One answer per trial, each graded on the plugin's loop, one trial after another."""
        __tracebackhide__ = True
        state = _JudgedTrials(self, trials, options)
        if state.run is None:
            return self._assert_once(self._answer(candidate), options)
        while (attempt := state.run.next_attempt()) is not None and state.error is None:
            judgement = state.prepare(self._answer(candidate), attempt)
            if judgement is not None:
                self.run.scheduler.run(state.grade(judgement))
        return state.conclude()

    async def _assert_trials_async(
        self, candidate: Any, trials: object, options: JudgeOptions
    ) -> EvaluationScore:
        """The agent is called (and awaited) in the test's own event loop, where its resources
        live; grading runs on the plugin's loop."""
        __tracebackhide__ = True
        state = _JudgedTrials(self, trials, options)
        if state.run is None:
            return await self._assert_once_async(await _answer_of(candidate), options)
        while (attempt := state.run.next_attempt()) is not None and state.error is None:
            judgement = state.prepare(await _answer_of(candidate), attempt)
            if judgement is not None:
                await asyncio.wrap_future(self.run.scheduler.submit(state.grade(judgement)))
        return state.conclude()

    def _conclude(
        self,
        evaluation: CaseEvaluation | None,
        usage: Usage,
        error: AgentvError | None,
        listed: bool,
    ) -> EvaluationScore:
        """Record the result on the calling test, then pass, xfail, skip or fail."""
        __tracebackhide__ = True
        from .results import CaseResult

        grade = evaluation.grade() if evaluation is not None else None
        message = str(error) if error is not None else (grade.error if grade else None)
        result = CaseResult(
            status="graded" if message is None else "error",
            eval_id=self.eval_id,
            grade=grade,
            evaluators_listed=listed,
            error=message,
            usage=usage.row(),
        )
        if isinstance(error, JudgeNotConfiguredError):
            result.status = "skipped"
        self.settle(result)
        assert evaluation is not None
        return evaluation.score

    @property
    def eval_id(self) -> str:
        return self.item.nodeid if self.item is not None else "assert_judged"

    def settle(self, result: CaseResult) -> None:
        """Put the result on the calling test, then return (pass), xfail, skip or fail."""
        __tracebackhide__ = True
        from .reporting import judged_key, record_properties
        from .verdicts import apply_verdict, settle_ungraded

        row = result.row()
        if self.item is not None:
            self.item.stash.setdefault(judged_key, []).append(row)
            record_properties(self.item, row)
        settings = self.run.settings
        settle_ungraded(
            row,
            subject="assert_judged",
            where="",
            require_judge=settings.require_judge,
            fail_on_error=settings.fail_on_error,
            skip=pytest.skip,
        )
        apply_verdict(
            row,
            borderline=settings.borderline,
            headline="assert_judged failed",
            failure=lambda report: JudgedAssertionError(report, row),
        )


async def _awaited(value: Awaitable[Any]) -> Any:
    return await value


async def _answer_of(candidate: Any) -> Any:
    """A callable's answer, awaited where it is async (in the caller's event loop)."""
    answer = candidate() if callable(candidate) else candidate
    return await answer if inspect.isawaitable(answer) else answer


class _JudgedTrials:
    """An ``assert_judged`` call's trials: the policy from ``trials=``, the usage they share,
    and the first trial that could not be graded (the call is then not graded)."""

    def __init__(self, judge: AgentvJudge, trials: object, options: JudgeOptions) -> None:
        from .judge import Usage
        from .trials import TrialRun, policy_from_argument

        policy = policy_from_argument(trials) if trials is not None else None
        self.judge = judge
        self.options = options
        self.listed = bool(options.get("evaluators") or options.get("rubrics"))
        self.usage = Usage()
        self.run = TrialRun(policy) if policy is not None else None
        self.error: AgentvError | None = None
        self.failed: Grade | None = None

    def prepare(self, answer: Any, attempt: int) -> _Judgement | None:
        """A trial's answer ready to grade (in the test's thread); None when it cannot be."""
        try:
            return self.judge._prepare(answer, self.options, attempt)
        except AgentvError as exc:
            self.error = exc
            return None

    async def grade(self, judgement: _Judgement) -> None:
        from .trials import TrialResult

        usage = self.usage
        spent = usage.spent_usd
        try:
            evaluation = await self.judge._grade(judgement, usage)
        except AgentvError as exc:
            self.error = exc
            return
        grade = evaluation.grade()
        if grade.error:
            self.error, self.failed = NotGradedError(grade.error), grade
            return
        context, response = judgement.context, judgement.response
        cost = usage.spent_usd - spent + (response.cost_usd or 0.0)
        assert self.run is not None
        self.run.add(
            TrialResult(context.attempt, grade, cost, response.text, context.trace_summary)
        )

    def conclude(self) -> EvaluationScore:
        """Record the result on the test and assert on it; return the aggregate score."""
        __tracebackhide__ = True
        from .evaluators.base import EvaluationScore
        from .results import CaseResult

        run = self.run
        assert run is not None
        rows = tuple(result.row() for result in run.results)
        if self.error is not None:
            skipped = isinstance(self.error, JudgeNotConfiguredError)
            result = CaseResult(
                status="skipped" if skipped else "error",
                eval_id=self.judge.eval_id,
                grade=self.failed,
                evaluators_listed=self.listed,
                error=str(self.error) if skipped else f"attempt {len(run.results)}: {self.error}",
                usage=self.usage.row(),
                trials=rows,
            )
            self.judge.settle(result)  # ends the test: an error, or a skip
        outcome = run.conclude()
        self.judge.settle(
            CaseResult(
                status="graded",
                eval_id=self.judge.eval_id,
                grade=outcome.grade,
                evaluators_listed=self.listed,
                usage=self.usage.row(),
                trials=outcome.trials,
                aggregation=outcome.aggregation,
            )
        )
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
