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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import pytest

from .errors import AgentvError, JudgeNotConfiguredError

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from .evaluators.base import CaseEvaluation, EvaluationContext, EvaluationScore
    from .judge import Usage
    from .models import EvaluatorConfig, RubricItem
    from .results import ResultRow
    from .runner import AgentvRun

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


class JudgedAssertionError(AssertionError):
    """``assert_judged`` failed: the message is the evaluator and rubric table."""

    def __init__(self, message: str, result: ResultRow) -> None:
        super().__init__(message)
        self.result = result


def _entries(evaluators: Entries | None, rubrics: Rubrics | None) -> tuple[EvaluatorConfig, ...]:
    from pydantic import ValidationError

    from .models import EvaluatorConfig, rubric_items

    entries: list[EvaluatorConfig] = []
    for index, entry in enumerate(evaluators or ()):
        if isinstance(entry, EvaluatorConfig):
            entries.append(entry)
            continue
        try:
            entries.append(EvaluatorConfig.model_validate(dict(entry)))
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'entry'}: {e['msg']}" for e in exc.errors()
            )
            raise ValueError(f"evaluators[{index}] is invalid: {problems}") from None
    if rubrics:
        rubric = EvaluatorConfig(name="rubric", type="llm_judge", rubrics=rubric_items(rubrics))
        entries.insert(0, rubric)
    if not entries:
        entries.append(EvaluatorConfig(name="llm_judge", type="llm_judge"))
    return tuple(entries)


def _trace(
    answered: dict[str, Any] | None, given: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """The answer's own trace summary, with what the test passed as ``trace`` winning."""
    if given is None:
        return answered
    if not isinstance(given, Mapping):
        raise TypeError(f"trace must be a mapping like AgentV's trace_summary, not {given!r}")
    return {**(answered or {}), **given}


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
        candidate: Any,
        question: str | None,
        expected_outcome: str | None,
        reference_answer: str | Mapping[str, Any] | None,
        model: str | None,
        trace: Mapping[str, Any] | None,
    ) -> EvaluationContext:
        from .cases import PreparedCase
        from .evaluators.base import EvaluationContext
        from .models import render_content
        from .targets import response_from

        response = response_from(candidate, "assert_judged candidate")
        folder = self.item.path.parent if self.item is not None else Path.cwd()
        case = PreparedCase(
            id=self.item.name if self.item is not None else "assert_judged",
            question=question or "",
            input_messages=({"role": "user", "content": question or ""},),
            expected_outcome=expected_outcome or "",
            reference_answer=render_content(reference_answer) if reference_answer else "",
            expected_messages=(
                ({"role": "assistant", "content": reference_answer},) if reference_answer else ()
            ),
            authored_input=({"role": "user", "content": question or ""},),
            folder=folder,
            rootdir=self.run.rootdir,
        )
        return EvaluationContext(
            eval_case=case,
            candidate=response.text,
            target="assert_judged",
            output_messages=response.output_messages,
            judge_model=model,
            trace_summary=_trace(response.trace_summary(), trace),
        )

    async def _evaluate(
        self, candidate: Any, usage: Usage, options: JudgeOptions
    ) -> CaseEvaluation:
        from .evaluators.base import run_evaluators_for_case
        from .judge import current_usage

        unknown = sorted(set(options) - set(JudgeOptions.__annotations__))
        if unknown:
            raise TypeError(f"unexpected keyword argument(s): {', '.join(unknown)}")
        entries = _entries(options.get("evaluators"), options.get("rubrics"))
        context = self._context(
            candidate,
            options.get("question"),
            options.get("expected_outcome"),
            options.get("reference_answer"),
            options.get("model"),
            options.get("trace"),
        )
        hook = self.item.ihook if self.item is not None else self.run.config.hook
        registry = self.run.registry.scoped(
            lambda kind: hook.pytest_agentv_make_evaluator(config=self.run.config, kind=kind)
        )
        evaluators = registry.evaluators_for(entries)
        token = current_usage.set(usage)
        try:
            return await run_evaluators_for_case(context, entries, evaluators)
        finally:
            current_usage.reset(token)

    def evaluate(self, candidate: Any, **options: Unpack[JudgeOptions]) -> CaseEvaluation:
        """Grade ``candidate`` without asserting; raises ``JudgeNotConfiguredError`` if no judge."""
        from .judge import Usage

        return self.run.scheduler.run(self._evaluate(candidate, Usage(), options))

    async def aevaluate(self, candidate: Any, **options: Unpack[JudgeOptions]) -> CaseEvaluation:
        """The awaitable ``evaluate``; calls from ``asyncio.gather`` overlap."""
        from .judge import Usage

        future = self.run.scheduler.submit(self._evaluate(candidate, Usage(), options))
        return await asyncio.wrap_future(future)

    def assert_judged(self, candidate: Any, **options: Unpack[JudgeOptions]) -> EvaluationScore:
        __tracebackhide__ = True
        from .judge import Usage

        usage = Usage()
        listed = bool(options.get("evaluators") or options.get("rubrics"))
        try:
            evaluation = self.run.scheduler.run(self._evaluate(candidate, usage, options))
        except AgentvError as exc:
            return self._conclude(None, usage, exc, listed)
        return self._conclude(evaluation, usage, None, listed)

    async def assert_judged_async(
        self, candidate: Any, **options: Unpack[JudgeOptions]
    ) -> EvaluationScore:
        __tracebackhide__ = True
        from .judge import Usage

        usage = Usage()
        listed = bool(options.get("evaluators") or options.get("rubrics"))
        try:
            future = self.run.scheduler.submit(self._evaluate(candidate, usage, options))
            evaluation = await asyncio.wrap_future(future)
        except AgentvError as exc:
            return self._conclude(None, usage, exc, listed)
        return self._conclude(evaluation, usage, None, listed)

    def _conclude(
        self,
        evaluation: CaseEvaluation | None,
        usage: Usage,
        error: AgentvError | None,
        listed: bool,
    ) -> EvaluationScore:
        """Record the result on the calling test, then pass, xfail, skip or fail."""
        __tracebackhide__ = True
        from .reporting import judged_key, record_properties
        from .results import CaseResult
        from .verdicts import apply_verdict, settle_ungraded

        grade = evaluation.grade() if evaluation is not None else None
        message = str(error) if error is not None else (grade.error if grade else None)
        result = CaseResult(
            status="graded" if message is None else "error",
            eval_id=self.item.nodeid if self.item is not None else "assert_judged",
            grade=grade,
            evaluators_listed=listed,
            error=message,
            usage=usage.row(),
        )
        if isinstance(error, JudgeNotConfiguredError):
            result.status = "skipped"
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
        assert evaluation is not None
        apply_verdict(
            row,
            borderline=settings.borderline,
            headline="assert_judged failed",
            failure=lambda report: JudgedAssertionError(report, row),
        )
        return evaluation.score


def _judge() -> AgentvJudge:
    test = current_test.get()
    if test is None:
        raise RuntimeError(
            "assert_judged needs a running pytest session with pytest-agentv (call it from a test)"
        )
    return AgentvJudge(test.run(), test.item)


def assert_judged(candidate: Any, **options: Unpack[JudgeOptions]) -> EvaluationScore:
    """Grade ``candidate`` with the session's judge and assert on the verdict.

    Keywords: ``expected_outcome``, ``question``, ``reference_answer`` (text, or an object for
    ``field_accuracy``), ``rubrics`` (strings, dicts or ``RubricItem``s), ``evaluators`` (the
    same entries as YAML: code judges, tool trajectories, composites...), ``model`` and
    ``trace`` (AgentV's trace summary: ``tool_calls_by_name``, ``duration_ms``, ``cost_usd``,
    ``token_usage``; it adds to what ``candidate`` reports). ``candidate`` is text, a list of
    messages (with ``tool_calls``), or ``{"output_messages": [...], "duration_ms": ...}``. Pass
    returns the ``EvaluationScore``; borderline calls ``pytest.xfail``; fail raises
    ``JudgedAssertionError`` with the evaluator table.
    """
    __tracebackhide__ = True
    return _judge().assert_judged(candidate, **options)


async def assert_judged_async(candidate: Any, **options: Unpack[JudgeOptions]) -> EvaluationScore:
    """The awaitable ``assert_judged``: several can run at once with ``asyncio.gather``."""
    __tracebackhide__ = True
    return await _judge().assert_judged_async(candidate, **options)
