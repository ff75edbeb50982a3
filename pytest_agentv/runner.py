"""One case, start to end: read its files, pick its target, get the answer, run its evaluators.

``AgentvRun`` is the run-wide state (settings, model clients, targets, the evaluator registry, the
replay store and the scheduler). ``run_case`` never raises: every way a case can end becomes a
``CaseResult`` — graded, not graded (error) or skipped — which the pytest item turns into an
outcome.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

import pytest

from .cases import CaseSpec, PreparedCase, prepare_case
from .errors import AgentvError, JudgeNotConfiguredError, NotGradedError
from .evaluators import EvaluatorRegistry, build_evaluator_registry
from .evaluators.base import EvaluationContext, Evaluator, run_evaluators_for_case
from .evaluators.composite import CompositeEvaluator
from .evaluators.llm_judge import LlmJudgeEvaluator
from .judge import LlmClient, ModelClients, ModelSpec, RetryPolicy, Usage, current_usage
from .loader import ProjectConfigs
from .models import EvaluatorConfig, walk_entries
from .paths import display_path
from .redaction import redact, refresh_secrets
from .replay import ReplayStore
from .results import CaseResult, Grade, Status
from .scheduler import Scheduler
from .settings import Settings
from .targets import FixtureTarget, RecordedTarget, Target, TargetCatalog, TargetResponse
from .trials import TrialPolicy, TrialResult, TrialRun, policy_for

#: An eval item's case as the scheduler gets it: its key, the case, and its evaluators by kind.
CaseWork = tuple[str, CaseSpec, Mapping[str, Evaluator]]


class AgentvRun:
    """Run-wide state, one per pytest process (each xdist worker has its own)."""

    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config = config
        self.settings = settings
        self.rootdir = config.rootpath
        refresh_secrets()
        self.scheduler = Scheduler(settings.concurrency)
        self._expected: set[str] = set()
        self.store = (
            ReplayStore(
                settings.cache_dir,
                settings.cache_mode,
                display_path(settings.cache_dir, config.rootpath),
            )
            if settings.cache_mode != "off"
            else None
        )
        policy = RetryPolicy(
            retries=settings.judge_retries,
            deadline=settings.judge_timeout,
            attempt_timeout=settings.judge_attempt_timeout,
            backoff=settings.judge_backoff,
        )
        self.clients = ModelClients(
            policy,
            self.store,
            on_rate_limit=self.scheduler.limit.on_rate_limit,
            on_success=self.scheduler.limit.on_success,
            transport=settings.judge_transport,
        )
        answers = (
            RecordedTarget(settings.answers, display_path(settings.answers, config.rootpath))
            if settings.answers is not None
            else None
        )
        self.targets = TargetCatalog(
            self.rootdir,
            self.clients,
            targets_file=settings.targets,
            override=settings.target,
            answers=answers,
        )
        self.configs = ProjectConfigs(self.rootdir)
        self.registry = EvaluatorRegistry(
            build_evaluator_registry(
                resolve_judge_provider=self.resolve_judge,
                script_timeout=settings.code_judge_timeout,
                env_passthrough=settings.code_judge_env,
            )
        )

    # -- the judge --------------------------------------------------------------------------
    def session_judge(self) -> LlmClient | None:
        if not self.settings.judge_model:
            return None
        return self.clients(
            ModelSpec(model=self.settings.judge_model, api_base=self.settings.judge_api_base)
        )

    def resolve_judge(self, context: EvaluationContext) -> LlmClient | None:
        """Evaluator ``model:`` > the target's ``judge_target`` > the session's judge model."""
        entry = context.evaluator
        if entry is not None and entry.model:
            # Another model is called at its provider's endpoint unless the entry names one:
            # the session's API base (and the key sent with it) belongs to the session's model.
            base = entry.options.get("api_base")
            return self.clients(ModelSpec(model=entry.model, api_base=str(base) if base else None))
        if context.judge_model:
            return self.clients(ModelSpec(model=context.judge_model))
        if context.judge_target:
            folder = context.eval_case.folder
            return self.clients(self.targets.judge_target(context.judge_target, folder))
        return self.session_judge()

    def check_judges(
        self,
        entries: Sequence[EvaluatorConfig],
        evaluators: Mapping[str, Evaluator],
        context: EvaluationContext,
    ) -> None:
        """Raise ``JudgeNotConfiguredError`` before any work if a needed LLM judge is absent
        (composite members and LLM aggregators included)."""
        for entry in walk_entries(entries):
            evaluator = evaluators.get(entry.type)
            if isinstance(evaluator, LlmJudgeEvaluator):
                evaluator.judge_for(replace(context, evaluator=entry))
            elif isinstance(evaluator, CompositeEvaluator):
                evaluator.check_judge(replace(context, evaluator=entry))

    # -- cases ------------------------------------------------------------------------------
    def plan(self, work: Sequence[CaseWork]) -> None:
        """Let the scheduler start these cases early, in the order their items will run, and
        tell batching targets which cases this run will send them."""
        for key, spec, _ in work:
            if key not in self._expected:
                self._expected.add(key)
                # A case run several times is not batched: each trial is a call of its own.
                if self.trial_policy(spec) is None:
                    self.targets.expect(spec)
        self.scheduler.plan(
            [(key, partial(self.run_case, spec, evaluators)) for key, spec, evaluators in work]
        )

    def trial_policy(self, spec: CaseSpec) -> TrialPolicy | None:
        """The case's trials (``execution.trials`` and ``--agentv-trials``); None: it runs once.
        Checked at collection, so this does not raise for a collected case."""
        return policy_for(spec.trials, self.settings.trials)

    def begin(
        self, spec: CaseSpec, evaluators: Mapping[str, Evaluator], fixture: FixtureTarget | None
    ) -> tuple[PreparedCase, Target]:
        """The synchronous part of a case: files, target and judge checks (raises AgentvError)."""
        prepared = prepare_case(spec, self.rootdir)
        target: Target = fixture if fixture is not None else self.targets.target_for(spec)
        self.check_judges(spec.evaluators, evaluators, _context(prepared, target, None))
        return prepared, target

    async def run_case(
        self,
        spec: CaseSpec,
        evaluators: Mapping[str, Evaluator],
        fixture: FixtureTarget | None = None,
    ) -> CaseResult:
        """Run the case to a ``CaseResult``, on the plugin's event loop."""
        try:
            prepared, target = self.begin(spec, evaluators, fixture)
        except Exception as exc:
            return self._failure(spec, exc, fixture, Usage())
        return await self.finish(spec, evaluators, prepared, target)

    def run_now(
        self, spec: CaseSpec, evaluators: Mapping[str, Evaluator], fixture: FixtureTarget | None
    ) -> CaseResult:
        """Run a case at item time, from pytest's thread: a sync ``agentv_target`` fixture is
        called right here, like any test code, and the rest runs on the plugin's loop."""
        if fixture is None or fixture.is_async:
            return self.scheduler.run(self.run_case(spec, evaluators, fixture))
        try:
            prepared, target = self.begin(spec, evaluators, fixture)
            policy = self.trial_policy(spec)
            if policy is None:
                response = fixture.call_sync(prepared)
        except Exception as exc:
            return self._failure(spec, exc, fixture, Usage())
        if policy is None:
            return self.scheduler.run(self.finish(spec, evaluators, prepared, target, response))
        trials = _CaseTrials(self, spec, evaluators, prepared, target, policy)
        while (case := trials.next_case()) is not None:
            try:
                response = fixture.call_sync(case)
            except Exception as exc:
                trials.fail(exc)
                break
            self.scheduler.run(trials.grade(case, response))
        return trials.result()

    async def finish(
        self,
        spec: CaseSpec,
        evaluators: Mapping[str, Evaluator],
        prepared: PreparedCase,
        target: Target,
        response: TargetResponse | None = None,
    ) -> CaseResult:
        """Get the answer (unless it is given) and grade it; a case with trials runs them one
        after another."""
        policy = self.trial_policy(spec)
        if policy is not None:
            return await self._run_trials(spec, evaluators, prepared, target, policy)
        usage = Usage()
        token = current_usage.set(usage)
        try:
            if response is None:
                response = await self._answer(target, prepared)
            context = _context(prepared, target, response)
            evaluation = await run_evaluators_for_case(context, spec.evaluators, evaluators)
        except Exception as exc:
            return self._failure(spec, exc, target, usage, response)
        finally:
            current_usage.reset(token)
        grade = evaluation.grade()
        status: Status = "error" if grade.error else "graded"
        return _result(
            spec,
            status,
            target=target.name,
            candidate=response.text,
            grade=grade,
            error=grade.error,
            trace_summary=context.trace_summary,
            usage=usage.row(),
        )

    async def _run_trials(
        self,
        spec: CaseSpec,
        evaluators: Mapping[str, Evaluator],
        prepared: PreparedCase,
        target: Target,
        policy: TrialPolicy,
    ) -> CaseResult:
        trials = _CaseTrials(self, spec, evaluators, prepared, target, policy)
        token = current_usage.set(trials.usage)
        try:
            while (case := trials.next_case()) is not None:
                try:
                    response = await self._answer(target, case)
                except Exception as exc:
                    trials.fail(exc)
                    break
                await trials.grade(case, response)
        finally:
            current_usage.reset(token)
        return trials.result()

    async def _answer(self, target: Target, prepared: PreparedCase) -> TargetResponse:
        if target.timeout is not None:
            return await target.invoke(prepared, prepared.attempt)
        limit = self.settings.target_timeout
        try:
            return await asyncio.wait_for(target.invoke(prepared, prepared.attempt), limit)
        except asyncio.TimeoutError:
            raise NotGradedError(
                f"target '{target.name}' gave no answer within {limit:g}s (--agentv-target-timeout)"
            ) from None

    def _failure(
        self,
        spec: CaseSpec,
        exc: Exception,
        target: Target | None,
        usage: Usage,
        response: TargetResponse | None = None,
    ) -> CaseResult:
        name = target.name if target is not None else None
        if isinstance(exc, JudgeNotConfiguredError):
            return _result(spec, "skipped", error=str(exc), target=name, usage=usage.row())
        message = (
            str(exc)
            if isinstance(exc, AgentvError)
            else f"unexpected {type(exc).__name__} while running the case: {exc}"
        )
        return _result(
            spec,
            "error",
            error=redact(message),
            target=name,
            usage=usage.row(),
            candidate=response.text if response else "",
        )

    def close(self) -> None:
        self.scheduler.close()


class _CaseTrials:
    """One case's trials in progress: the usage they share, the trial run, and the first trial
    that could not be graded, which ends the case as not graded (never a made-up verdict)."""

    def __init__(
        self,
        runner: AgentvRun,
        spec: CaseSpec,
        evaluators: Mapping[str, Evaluator],
        prepared: PreparedCase,
        target: Target,
        policy: TrialPolicy,
    ) -> None:
        self.runner = runner
        self.spec = spec
        self.evaluators = evaluators
        self.prepared = prepared
        self.target = target
        self.usage = Usage()
        self.run = TrialRun(policy)
        self.failure: CaseResult | None = None
        self._calls_before = 0
        self._spent_before = 0.0

    def next_case(self) -> PreparedCase | None:
        """The case as the next trial sees it (its ``attempt``), or None when no trial is due."""
        attempt = self.run.next_attempt() if self.failure is None else None
        if attempt is None:
            return None
        self._calls_before = self.usage.calls + self.usage.reused
        self._spent_before = self.usage.spent_usd
        return replace(self.prepared, attempt=attempt)

    def fail(
        self,
        exc: Exception,
        response: TargetResponse | None = None,
        grade: Grade | None = None,
    ) -> None:
        failure = self.runner._failure(self.spec, exc, self.target, self.usage, response)
        failure.error = f"attempt {len(self.run.results)}: {failure.error}"
        failure.grade = grade
        failure.trials = tuple(result.row() for result in self.run.results)
        if response is not None:
            failure.trace_summary = response.trace_summary()
        self.failure = failure

    async def grade(self, case: PreparedCase, response: TargetResponse) -> None:
        """Grade one trial's answer and add it to the run (or record why it was not graded)."""
        token = current_usage.set(self.usage)
        try:
            # A model target's cost is in the usage already; another target's is what it said.
            reported = response.cost_usd or 0.0
            if self.usage.calls + self.usage.reused > self._calls_before:
                reported = 0.0
            context = _context(case, self.target, response)
            evaluation = await run_evaluators_for_case(
                context, self.spec.evaluators, self.evaluators
            )
        except Exception as exc:
            self.fail(exc, response)
            return
        finally:
            current_usage.reset(token)
        grade = evaluation.grade()
        if grade.error:
            self.fail(NotGradedError(grade.error), response, grade)
            return
        cost = self.usage.spent_usd - self._spent_before + reported
        self.run.add(TrialResult(case.attempt, grade, cost, response.text, context.trace_summary))

    def result(self) -> CaseResult:
        if self.failure is not None:
            self.failure.usage = self.usage.row()
            return self.failure
        outcome = self.run.conclude()
        return _result(
            self.spec,
            "graded",
            target=self.target.name,
            candidate=outcome.candidate,
            grade=outcome.grade,
            trace_summary=outcome.trace_summary,
            usage=self.usage.row(),
            trials=outcome.trials,
            aggregation=outcome.aggregation,
        )


def _context(
    prepared: PreparedCase, target: Target | None, response: TargetResponse | None
) -> EvaluationContext:
    return EvaluationContext(
        eval_case=prepared,
        candidate=response.text if response else "",
        target=target.name if target else "",
        attempt=prepared.attempt,
        output_messages=response.output_messages if response else None,
        judge_target=target.judge_target if target else None,
        trace_summary=response.trace_summary() if response else None,
    )


def _result(spec: CaseSpec, status: Status, **values: Any) -> CaseResult:
    return CaseResult(
        status=status,
        eval_id=spec.case.id,
        dataset=spec.dataset,
        file=spec.loaded.display,
        line=spec.line + 1,
        conversation_id=spec.case.conversation_id,
        evaluators_listed=spec.listed,
        **values,
    )
