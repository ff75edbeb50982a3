"""``AgentvRun``: the run's lifetime (settings, model clients, targets, the evaluator registry,
the replay store, calibration and the scheduler), its plan, and each case from its files to a
``CaseResult``: each selected case is planned (``plan_case``: its target and judge resolved), and
``run_case`` reads its files, asks its target and hands the answers to the one grading path
(``grading.py``). It never raises: every way a case can end —
graded, not graded (error) or skipped — is a ``CaseResult``, which the pytest item turns into an
outcome.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Awaitable, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .answers import TargetResponse, response_from
from .baseline import CaseKey, PreviousResults, graded_score
from .casefiles import prepare_case
from .cases import CaseSpec, PreparedCase
from .conversation import Conversation
from .dependencies import Dependencies
from .errors import AgentvError, AgentvWarning, ConfigError, NotGradedError
from .evaluators import EvaluatorRegistry, build_evaluator_registry
from .evaluators.base import EvaluationContext, entry_judges
from .grading import Grading, Judgement, OnLoop, grade_answers, not_graded
from .llm.budget import RunLedger, SuiteBudgets
from .llm.client import LlmClient, ModelClients
from .llm.http import close_session
from .llm.limits import CallLimits, Limits, RemoteLimits
from .llm.retry import within
from .llm.transports import ModelSpec
from .paths import display_path
from .plan import CasePlan, CaseWork, Planner
from .processes import limit_children
from .projectfiles import ProjectFiles
from .redaction import refresh_secrets
from .results import CaseResult, Status
from .scheduler import Scheduler, awaited, run_sync, shared_loop
from .settings import Settings
from .targets import Target, TargetCatalog, TargetServices
from .targets.fixture import FixtureTarget
from .targets.recorded import RecordedTarget
from .trials import TrialPolicy, policy_for
from .workspace import Call, Workspaces

if TYPE_CHECKING:
    from .calibration import Calibration
    from .llm.limits.coordinator import Coordinator


class AgentvRun:
    """Run-wide state, one per pytest process (each xdist worker has its own)."""

    def __init__(
        self,
        config: pytest.Config,
        settings: Settings,
        *,
        ledger: RunLedger | None = None,
        baseline: PreviousResults | None = None,
        limits_socket: Path | None = None,
        files: ProjectFiles,
        coordinator: Coordinator | None = None,
    ) -> None:
        self.config = config
        self.settings = settings
        self.rootdir = config.rootpath
        refresh_secrets()
        self.scheduler = Scheduler(settings.concurrency)
        limit_children(settings.concurrency)
        self._expected: set[str] = set()
        #: Every case collected, as ``(eval file, dataset, eval_id)``: a baseline's cases that
        #: are not here are gone.
        self.collected: set[CaseKey] = set()
        self.dependencies = Dependencies()
        self.suite_budgets = SuiteBudgets()
        self.baseline = baseline
        # Under pytest-xdist the limits are the controller's, for every worker at once; with a
        # coordinator, its Redis's, for every process of every shard.
        limits: Limits
        if coordinator is not None:
            from .llm.limits.coordinated import RedisLimits

            limits = RedisLimits.for_run(settings, coordinator)
        elif limits_socket is not None:
            limits = RemoteLimits(limits_socket)
        else:
            limits = CallLimits.for_run(settings)
        self.clients = ModelClients.for_run(settings, self.rootdir, ledger, limits)
        self.services = TargetServices(self.clients)
        answers = (
            RecordedTarget(
                settings.answers, display_path(settings.answers, config.rootpath), self.collected
            )
            if settings.answers is not None
            else None
        )
        targets = TargetCatalog(self.rootdir, override=settings.target, answers=answers)
        self.planner = Planner(targets, self.services, self.session_judge())
        self.files = files
        self.workspaces = Workspaces(
            self.rootdir, settings.code_judge_env, keep=self._keep_workspaces()
        )
        self.registry = EvaluatorRegistry(
            build_evaluator_registry(
                resolve_judge_provider=self.resolve_judge,
                script_timeout=settings.code_judge_timeout,
                env_passthrough=settings.code_judge_env,
            )
        )
        judge = self.session_judge()
        self.calibration: Calibration | None = None
        canaries = settings.calibration if settings.calibration_mode != "off" else None
        if canaries is not None and judge is not None:
            from .calibration import Calibration  # its judge contract: only a calibrated run

            self.calibration = Calibration(
                canaries,
                display_path(canaries, config.rootpath),
                settings.calibration_mode,
                self.rootdir,
                judge,
                self.scheduler.submit,
            )

    # -- the judge --------------------------------------------------------------------------
    def session_judge(self) -> LlmClient | None:
        if not self.settings.judge_model:
            return None
        return self.clients(
            ModelSpec(model=self.settings.judge_model, api_base=self.settings.judge_api_base)
        )

    def resolve_judge(self, context: EvaluationContext) -> LlmClient | None:
        """Evaluator ``model:`` > ``assert_judged(model=...)`` > the case's judge (its target's
        ``judge_target``, else the session's judge model)."""
        entry = context.evaluator
        if entry is not None and entry.model:
            # Another model is called at its provider's endpoint unless the entry names one:
            # the session's API base (and the key sent with it) belongs to the session's model.
            base = entry.options.get("api_base")
            return self.clients(ModelSpec(model=entry.model, api_base=str(base) if base else None))
        if context.judge_model:
            return self.clients(ModelSpec(model=context.judge_model))
        if isinstance(context.judge, AgentvError):
            raise ConfigError(str(context.judge))
        return context.judge if isinstance(context.judge, LlmClient) else None

    async def trusted(self) -> None:
        """Wait until the session's judge passed calibration (raise ``NotGradedError`` if it
        failed and calibration is enforced); at once without a calibration file."""
        if self.calibration is not None:
            await self.calibration.gate()

    def compare(self, result: CaseResult, spec: CaseSpec) -> None:
        """Give a case's result its baseline score (``--agentv-baseline``)."""
        if self.baseline is not None:
            result.compared = True
            row = self.baseline.find(
                spec.dataset, spec.case.id, spec.loaded.display, self.collected, spec.matrix_target
            )
            result.baseline_score = graded_score(row)

    # -- cases ------------------------------------------------------------------------------
    def plan(self, work: Sequence[CaseWork], later: Sequence[CaseWork] = ()) -> None:
        """Let the scheduler start ``work``'s cases early, in the order their items will run,
        and tell batching targets which cases this run may send them: those, and the ``later``
        ones, which run when their items do (an ``agentv_target`` fixture that returns None
        passes its case on to the file's target, which batches it with the others)."""
        new = [(key, plan) for key, plan in work if key not in self._expected]
        for key, plan in [*new, *(case for case in later if case[0] not in self._expected)]:
            self._expected.add(key)
            # A case run several times is not batched: each trial is a call of its own; nor is
            # a conversation, whose every turn waits for the reply before it.
            spec = plan.spec
            expect = getattr(plan.target, "expect", None)
            if callable(expect) and self.trial_policy(spec) is None and spec.conversation is None:
                expect(spec)
        self.scheduler.plan(
            [(key, partial(self.run_case, plan), plan.spec.workers) for key, plan in new]
        )

    def trial_policy(self, spec: CaseSpec) -> TrialPolicy | None:
        """The case's trials (``execution.trials`` and ``--agentv-trials``); None: it runs once.
        Checked at collection, so this does not raise for a collected case."""
        return policy_for(spec.trials, self.settings.trials)

    def start(
        self, plan: CasePlan, fixture: Target | None = None, *, answered: bool = True
    ) -> tuple[Judgement, PreparedCase, Target | None]:
        """The synchronous start of a case (raises ``AgentvError``), before any answer: its
        target (the fixture's, else its plan's; none when it is not ``answered`` by one yet:
        an estimate), its judges (``JudgeNotConfiguredError`` when one is missing), its files
        read, and its trials (checked at collection)."""
        spec = plan.spec
        if (limit := spec.budget_usd) is not None:
            self.suite_budgets.check(spec.loaded.display, limit)
        target = fixture
        if target is None and answered:
            if isinstance(plan.target, AgentvError):
                raise ConfigError(str(plan.target))
            target = plan.target
        # A matrix pair answers under its entry's name, whichever target its use_target names.
        name = (spec.matrix_target or target.name) if target else ""
        judge = plan.judge if fixture is None else self.session_judge()
        seen_by = partial(EvaluationContext.for_answer, target=name, judge=judge)
        # Judges are found before the case's files are read: a case that needs one nobody
        # configured is skipped.
        unread = PreparedCase(spec.case.id, "", (), folder=spec.loaded.path.parent)
        judges = entry_judges(spec.evaluators, plan.evaluators, seen_by(unread, None))
        session = self.session_judge()
        prepared = prepare_case(spec, self.rootdir)
        judgement = Judgement(
            entries=spec.evaluators,
            evaluators=plan.evaluators,
            context=partial(seen_by, prepared),
            result=partial(case_result, spec, target=name or None),
            policy=policy_for(spec.trials, self.settings.trials),
            # Calibration vouches for the session's judge: its cases wait for it.
            gate=self.trusted if session is not None and session in judges else None,
        )
        return judgement, prepared, target

    async def run_case(self, plan: CasePlan, fixture: FixtureTarget | None = None) -> CaseResult:
        """Run the case to a ``CaseResult``, on the plugin's event loop."""
        return await self._run(plan, fixture, awaited)

    def run_now(self, plan: CasePlan, fixture: FixtureTarget | None) -> CaseResult:
        """Run a case at item time, from pytest's thread: a sync ``agentv_target`` fixture is
        called right here, like any test code, and the rest runs on the plugin's loop."""
        if fixture is None or fixture.is_async:
            return self.scheduler.run(self.run_case(plan, fixture))
        return run_sync(self._run(plan, fixture, self.scheduler.blocking))

    async def _run(
        self, plan: CasePlan, fixture: FixtureTarget | None, on_loop: OnLoop[Any]
    ) -> CaseResult:
        """The one path of a case, driven on the plugin's loop (``on_loop`` awaits), or in
        pytest's thread for a sync fixture (``on_loop`` runs loop work there and waits)."""
        spec, workspace = plan.spec, plan.workspace
        try:
            judgement, prepared, target = self.start(plan, fixture)
        except Exception as exc:  # it cannot even start
            named = spec.matrix_target or (fixture and fixture.name)
            return not_graded(partial(case_result, spec, target=named), exc)
        assert target is not None
        if fixture is not None and not fixture.is_async:
            ask: Call = partial(_called, fixture)
        else:
            ask = partial(self._answer, target)
        if spec.conversation is not None:
            return await Conversation(judgement, spec.conversation, prepared, ask, on_loop).run()
        grading = Grading(judgement)

        def answer(attempt: int) -> Awaitable[TargetResponse]:
            attempted = replace(prepared, attempt=attempt)
            if isinstance(target, RecordedTarget):  # the answer was made in an earlier run
                return grading.counted(ask(attempted))
            if isinstance(workspace, AgentvError):
                return grading.counted(_raise(workspace))
            around = self.workspaces.around(workspace, spec, attempted, ask, on_loop)
            return grading.counted(around)

        result = await grade_answers(grading, answer, on_loop=on_loop)
        await on_loop(self.workspaces.settle(spec, result.passed))
        return result

    async def _answer(self, target: Target, prepared: PreparedCase) -> TargetResponse:
        """The target's answer within its deadline (its own, else ``--agentv-target-timeout``);
        a plugin's target may answer as a fixture may (text, a mapping, messages)."""
        asked = target.invoke(prepared, prepared.attempt)
        limit = self.settings.target_timeout
        try:
            answer: Any = await (asked if target.timeout is not None else within(asked, limit))
        except asyncio.TimeoutError:
            raise NotGradedError(
                f"target '{target.name}' gave no answer within {limit:g}s (--agentv-target-timeout)"
            ) from None
        if isinstance(answer, TargetResponse):
            return answer
        return response_from(answer, f"target '{target.name}'")

    async def _aclose(self) -> None:
        """What the run's cases shared: what its targets hold (a CLI target's healthcheck), and
        the loop's HTTP session."""
        for check in list(self.services.healthchecks.values()):
            await check.aclose()
        await close_session()

    def _keep_workspaces(self) -> str:
        """``--agentv-keep-workspaces``, else ``all`` when the ``.agentv/config.yaml`` nearest
        the folder pytest runs from says ``execution.keep_workspaces: true`` (as AgentV v4
        reads it: its ``--keep-workspaces``), else ``none``."""
        if self.settings.keep_workspaces is not None:
            return self.settings.keep_workspaces
        start = self.config.invocation_params.dir
        folder = start if start == self.rootdir or self.rootdir in start.parents else self.rootdir
        try:
            found = self.files.config_for(folder)
        except AgentvError:  # reported where the config is used
            return "none"
        execution = found.model.execution if found is not None else None
        return "all" if execution is not None and execution.keep_workspaces else "none"

    def facts(self) -> dict[str, Any]:
        """What this process knows that the controller's summary needs (sent from pytest-xdist
        workers as plain builtins): the cases it collected, its calibration, what it learnt
        about its model endpoints, how its calls met the rate limits when it kept its own, and
        where its workspaces are kept (``--agentv-keep-workspaces``)."""
        limits = self.clients.limits
        return {
            "collected": sorted(self.collected),
            "calibration": self.calibration.facts() if self.calibration is not None else None,
            "endpoint_notes": self.clients.notes(),
            # Under pytest-xdist the controller's limits report (see ``plugin``).
            "pacing": limits.report() if isinstance(limits, CallLimits) else None,
            "workspaces_kept": self.workspaces.kept(),
        }

    def close(self) -> None:
        self.scheduler.close(self._aclose)
        if self.workspaces.used:  # after the cases: ``after_all`` runs with its own deadline
            done = asyncio.run_coroutine_threadsafe(self.workspaces.finish(), shared_loop())
            try:
                done.result(timeout=self.workspaces.finish_within())
            except Exception:
                done.cancel()
        for problem in self.workspaces.problems:
            warnings.warn(AgentvWarning(problem), stacklevel=1)
        limit_children(None)


async def _raise(error: AgentvError) -> TargetResponse:
    """A problem found at collection, raised where the case needs what it spoils."""
    raise ConfigError(str(error))


async def _called(fixture: FixtureTarget, case: PreparedCase) -> TargetResponse:
    """A sync ``agentv_target`` fixture's answer, called in pytest's thread."""
    return fixture.call_sync(case)


def case_result(spec: CaseSpec, status: Status, **values: Any) -> CaseResult:
    """A ``CaseResult`` of an eval case."""
    return CaseResult(status=status, **spec.result_fields, **values)
