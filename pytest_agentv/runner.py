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
from pathlib import Path
from typing import Any

import pytest

from .baseline import CaseKey, PreviousResults, graded_score
from .budget import Budget, Estimate, Ledger, PlannedCall, unknown_answer
from .calibration import Calibration
from .cases import CaseSpec, PreparedCase, prepare_case
from .errors import AgentvError, ConfigError, JudgeNotConfiguredError, NotGradedError
from .evaluators import EvaluatorRegistry, ScopedRegistry, build_evaluator_registry
from .evaluators.base import (
    EvaluationContext,
    Evaluator,
    judge_for,
    plan_entries,
    run_evaluators_for_case,
)
from .evaluators.composite import aggregator_prompt
from .evaluators.prompts import load_prompt_file
from .judge import LlmClient, ModelClients, ModelSpec, RetryPolicy, Usage, current_usage
from .loader import LoadedFile, ProjectConfigs, evaluator_locs, load_eval_file
from .models import CompositeSpec, EvaluatorConfig, walk_entries
from .paths import display_path
from .redaction import redact, refresh_secrets, shown
from .replay import ReplayStore
from .results import CaseResult, Grade, Status
from .scheduler import Scheduler
from .settings import Settings
from .targets import (
    FixtureTarget,
    RecordedTarget,
    Target,
    TargetCatalog,
    TargetResponse,
    planned_answer,
    response_from,
)
from .trials import TrialPolicy, TrialResult, TrialRun, policy_for
from .yamlfile import Loc


def load_specs(
    path: Path,
    display: str,
    rootdir: Path,
    registry: ScopedRegistry,
    configs: ProjectConfigs | None = None,
    trials: int | None = None,
) -> tuple[LoadedFile, list[tuple[CaseSpec, dict[str, Evaluator]]]]:
    """Everything collection does with an eval file, without pytest: raises ``AgentvError``.

    The nearest ``.agentv/config.yaml`` (from ``configs``) gives the file its guideline
    patterns; its warnings come with the first eval file that uses it. ``trials`` is
    ``--agentv-trials``, with which every case's trials must still be able to settle.
    """
    loaded = load_eval_file(path, display, registry.problem)
    if configs is not None and (config := configs.for_folder(path.parent)) is not None:
        loaded = replace(
            loaded,
            guideline_patterns=tuple(config.model.guideline_patterns),
            warnings=(*configs.new_warnings(config), *loaded.warnings),
        )
    _check_prompt_files(loaded, rootdir)
    specs = CaseSpec.all_of(loaded)
    _check_trials(loaded, specs, trials)
    return loaded, [(spec, registry.evaluators_for(spec.evaluators)) for spec in specs]


def _check_prompt_files(loaded: LoadedFile, rootdir: Path) -> None:
    """Custom judge prompts that are files must exist, stay in the rootdir and use a candidate
    variable: a load error here, rather than a surprise at run time. The same for a composite's
    LLM aggregator prompt (which reads the members' results instead)."""
    folder = loaded.path.parent
    for loc, entry in evaluator_locs(loaded.suite):
        try:
            if isinstance(entry.spec, CompositeSpec) and entry.spec.aggregator.prompt:
                where: Loc = (*loc, "aggregator", "prompt")
                aggregator_prompt(entry.spec.aggregator, start=folder, rootdir=rootdir)
            elif entry.kind == "llm_judge" and isinstance(entry.prompt, str):
                where = (*loc, "prompt")
                load_prompt_file(entry.prompt, start=folder, rootdir=rootdir)
        except ConfigError as exc:
            raise loaded.error_at(where, str(exc)) from None


def _check_trials(loaded: LoadedFile, specs: Sequence[CaseSpec], override: int | None) -> None:
    """An adaptive trials block whose verdict could never settle is a load error, at the block
    (checked once per block, as every case of the file shares the file's)."""
    checked: set[Loc] = set()
    for spec in specs:
        execution = spec.case.execution
        own = execution is not None and execution.trials is not None
        loc: Loc = (
            ("evalcases", spec.index, "execution", "trials") if own else ("execution", "trials")
        )
        if loc in checked:
            continue
        checked.add(loc)
        try:
            policy_for(spec.trials, override)
        except ConfigError as exc:
            note = f" (max is --agentv-trials {override})" if override else ""
            raise loaded.error_at(loc, f"{exc}{note}", spec.index) from None


#: An eval item's case as the scheduler gets it: its key, the case, and its evaluators by kind.
CaseWork = tuple[str, CaseSpec, Mapping[str, Evaluator]]


class AgentvRun:
    """Run-wide state, one per pytest process (each xdist worker has its own)."""

    def __init__(
        self,
        config: pytest.Config,
        settings: Settings,
        *,
        ledger: Ledger | None = None,
        baseline: PreviousResults | None = None,
    ) -> None:
        self.config = config
        self.settings = settings
        self.rootdir = config.rootpath
        refresh_secrets()
        self.scheduler = Scheduler(settings.concurrency)
        self._expected: set[str] = set()
        #: Every case collected, as ``(eval file, dataset, eval_id)``: a baseline's cases that
        #: are not here are gone.
        self.collected: set[CaseKey] = set()
        self.budget = (
            Budget(settings.budget_usd, ledger)
            if settings.budget_usd is not None and ledger is not None
            else None
        )
        if baseline is None and settings.baseline is not None:
            shown = display_path(settings.baseline, config.rootpath)
            baseline = PreviousResults(
                settings.baseline, shown, "--agentv-baseline", scored=True, rootdir=config.rootpath
            )
        self.baseline = baseline
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
            budget=self.budget,
        )
        answers = (
            RecordedTarget(
                settings.answers, display_path(settings.answers, config.rootpath), config.rootpath
            )
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
        judge = self.session_judge()
        self.calibration = (
            Calibration(
                settings.calibration,
                display_path(settings.calibration, config.rootpath),
                settings.calibration_mode,
                self.rootdir,
                judge,
                self.scheduler.submit,
            )
            if settings.calibration is not None
            and settings.calibration_mode != "off"
            and judge is not None
            else None
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
    ) -> bool:
        """Raise ``JudgeNotConfiguredError`` before any work if a needed LLM judge is absent
        (composite members and LLM aggregators included); return whether the session's judge
        grades any of it (calibration vouches for that judge)."""
        session = self.session_judge()
        judged = False
        for entry in walk_entries(entries):
            evaluator = evaluators.get(entry.type)
            if evaluator is not None:
                judge = judge_for(evaluator, replace(context, evaluator=entry))
                judged = judged or (judge is not None and judge is session)
        return judged

    def load(
        self, path: Path, registry: ScopedRegistry
    ) -> tuple[LoadedFile, list[tuple[CaseSpec, dict[str, Evaluator]]]]:
        """Load an eval file for collection (see ``load_specs``) with this run's settings."""
        return load_specs(
            path,
            display_path(path, self.rootdir),
            self.rootdir,
            registry,
            self.configs,
            self.settings.trials,
        )

    async def trusted(self) -> None:
        """Wait until the session's judge passed calibration (raise ``NotGradedError`` if it
        failed and calibration is enforced); at once without a calibration file."""
        if self.calibration is not None:
            await self.calibration.gate()

    def compare(self, result: CaseResult, spec: CaseSpec) -> None:
        """Give a case's result its baseline score (``--agentv-baseline``)."""
        if self.baseline is not None:
            result.compared = True
            row = self.baseline.find(spec.dataset, spec.case.id, spec.loaded.display)
            result.baseline_score = graded_score(row)

    # -- cases ------------------------------------------------------------------------------
    def plan(self, work: Sequence[CaseWork]) -> None:
        """Let the scheduler start these cases early, in the order their items will run, and
        tell batching targets which cases this run will send them."""
        new = [
            (key, spec, evaluators) for key, spec, evaluators in work if key not in self._expected
        ]
        for key, spec, _ in new:
            self._expected.add(key)
            # A case run several times is not batched: each trial is a call of its own.
            if self.trial_policy(spec) is None:
                self.targets.expect(spec)
        self.scheduler.plan(
            [(key, partial(self.run_case, spec, evaluators)) for key, spec, evaluators in new]
        )

    def trial_policy(self, spec: CaseSpec) -> TrialPolicy | None:
        """The case's trials (``execution.trials`` and ``--agentv-trials``); None: it runs once.
        Checked at collection, so this does not raise for a collected case."""
        return policy_for(spec.trials, self.settings.trials)

    def begin(
        self, spec: CaseSpec, evaluators: Mapping[str, Evaluator], fixture: FixtureTarget | None
    ) -> tuple[PreparedCase, Target, bool]:
        """The synchronous part of a case: files, target and judge checks (raises AgentvError);
        also whether the session's judge grades it (it then waits for calibration)."""
        prepared = prepare_case(spec, self.rootdir)
        target: Target = fixture if fixture is not None else self.targets.target_for(spec)
        judged = self.check_judges(spec.evaluators, evaluators, _context(prepared, target, None))
        return prepared, target, judged

    async def run_case(
        self,
        spec: CaseSpec,
        evaluators: Mapping[str, Evaluator],
        fixture: FixtureTarget | None = None,
    ) -> CaseResult:
        """Run the case to a ``CaseResult``, on the plugin's event loop."""
        try:
            prepared, target, judged = self.begin(spec, evaluators, fixture)
        except Exception as exc:
            return self._failure(spec, exc, fixture, Usage())
        if judged:
            try:
                await self.trusted()
            except AgentvError as exc:
                return self._failure(spec, exc, target, Usage())
        return await self.finish(spec, evaluators, prepared, target)

    def run_now(
        self, spec: CaseSpec, evaluators: Mapping[str, Evaluator], fixture: FixtureTarget | None
    ) -> CaseResult:
        """Run a case at item time, from pytest's thread: a sync ``agentv_target`` fixture is
        called right here, like any test code, and the rest runs on the plugin's loop."""
        if fixture is None or fixture.is_async:
            return self.scheduler.run(self.run_case(spec, evaluators, fixture))
        try:
            prepared, target, judged = self.begin(spec, evaluators, fixture)
            if judged:
                self.scheduler.run(self.trusted())
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
            trials.answered()
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
                trials.answered()
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

    async def estimate(
        self, work: Sequence[tuple[CaseSpec, Mapping[str, Evaluator], bool]]
    ) -> tuple[dict[str, Estimate], list[str]]:
        """What running these cases would ask of models, per eval file, without calling any
        (``--agentv-estimate``); ``work`` holds each case, its evaluators, and whether an
        ``agentv_target`` fixture answers it. Returns the estimates and notes on what they
        count."""
        by_file: dict[str, Estimate] = {}
        skipped = failing = early = 0
        first_failure = ""
        judged_any = False
        for spec, evaluators, fixture in work:
            estimate = by_file.setdefault(spec.loaded.display, Estimate())
            try:
                calls, judged = await self._planned_calls(spec, evaluators, fixture)
            except JudgeNotConfiguredError:
                skipped += 1
                continue
            except AgentvError as exc:
                failing += 1
                where = f"{spec.loaded.display}:{spec.line + 1}"
                first_failure = first_failure or shown(f"{where}: {exc}")
                continue
            estimate.add(calls)
            judged_any = judged_any or judged
            policy = self.trial_policy(spec)
            early += policy is not None and (
                policy.strategy in ("pass_at_k", "pass_all", "adaptive")
                or policy.cost_limit_usd is not None
            )
        notes: list[str] = []
        if early:
            notes.append(
                f"{early} case(s) with trials that may stop early (pass_at_k, pass_all, "
                "adaptive, or at cost_limit_usd) are counted at their most trials"
            )
        if skipped:
            notes.append(f"{skipped} case(s) need a judge that is not configured: they would skip")
        if failing:
            notes.append(
                f"{failing} case(s) could not be prepared: they would not be graded (the first: "
                f"{first_failure})"
            )
        if judged_any and self.calibration is not None:
            try:
                canaries = await self.calibration.planned_calls()
            except AgentvError as exc:
                notes.append(shown(f"calibration: {exc}"))
            else:
                by_file.setdefault(self.calibration.display, Estimate()).add(canaries)
        return by_file, notes

    async def _planned_calls(
        self, spec: CaseSpec, evaluators: Mapping[str, Evaluator], fixture: bool
    ) -> tuple[list[PlannedCall], bool]:
        """A case's model calls over all its trials: its target's, then its evaluators'."""
        prepared = prepare_case(spec, self.rootdir)
        target = None if fixture else self.targets.target_for(spec)
        judged = self.check_judges(spec.evaluators, evaluators, _context(prepared, target, None))
        policy = self.trial_policy(spec)
        calls: list[PlannedCall] = []
        for attempt in range(policy.count if policy is not None else 1):
            case = replace(prepared, attempt=attempt)
            asked: list[PlannedCall] = []
            if target is None:
                response = response_from(unknown_answer(), "")
            else:
                response, asked = planned_answer(target, case)
            context = _context(case, target, response)
            calls += asked
            calls += await plan_entries(context, spec.evaluators, evaluators)
        return calls, judged

    def facts(self) -> dict[str, Any]:
        """What this process knows that the controller's summary needs (sent from pytest-xdist
        workers as plain builtins): the cases it collected, and its calibration."""
        return {
            "collected": sorted(self.collected),
            "calibration": self.calibration.facts() if self.calibration is not None else None,
        }

    def close(self) -> None:
        self.scheduler.close(self.targets.aclose)


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
        self._spent_before = 0.0

    def next_case(self) -> PreparedCase | None:
        """The case as the next trial sees it (its ``attempt``), or None when no trial is due."""
        attempt = self.run.next_attempt() if self.failure is None else None
        if attempt is None:
            return None
        return replace(self.prepared, attempt=attempt)

    def answered(self) -> None:
        """Mark the end of a trial's answer: what the target spent is what it reports (a model
        target's call is in the usage too), and the grading's spend starts here."""
        self._spent_before = self.usage.spent_usd

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
        cost = self.usage.spent_usd - self._spent_before + (response.cost_usd or 0.0)
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
