"""Eval files as pytest collectors, eval cases as pytest items, and the collection-time load.

``EvalItem`` is a ``pytest.Function`` so that fixtures (autouse ones, conftest overrides, the
``agentv_target`` fixture) apply to eval cases exactly as to Python tests. The case runs during
setup: a case that cannot be graded is then an *error*, a case that needs a judge nobody
configured is a *skip*, and only a graded case reaches the call phase, where its verdict becomes
passed, xfailed or failed.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from functools import cached_property
from pathlib import Path
from typing import Any

import pytest

from .cases import CaseSpec
from .dependencies import ordered
from .errors import AgentvError, ConfigError
from .evaluators import ScopedRegistry
from .evaluators.base import Evaluator
from .loader import LoadedFile, load_eval_file
from .outcomes import apply_verdict, settle_ungraded
from .paths import display_path
from .plan import CasePlan, CaseWork
from .projectfiles import ProjectFiles
from .redaction import printable, shown
from .reports.junit import record_properties, result_key
from .results import ResultRow
from .runner import AgentvRun
from .schema.base import reported_metric
from .targets import Target, TargetDefinition
from .targets.fixture import FixtureTarget, target_fixture_defined
from .trials import policy_for
from .verdicts import apply_threshold
from .yamlfile import Loc

#: Why a case was failed without running: a dependency failed (``on_dependency_failure: fail``).
_held_key = pytest.StashKey[str]()


#: Markers that change how a test runs: a tag of one of these names is not made a marker.
_BEHAVIOUR_MARKERS = frozenset(
    {"skip", "skipif", "xfail", "parametrize", "usefixtures", "filterwarnings", "xdist_group"}
)


def tag_marker(config: pytest.Config, tag: str) -> pytest.MarkDecorator | None:
    """An eval file's tag (AgentV v4's ``tags``) as a pytest marker, for ``-m``; registered, so
    that ``--strict-markers`` accepts it. None for a tag that names a marker changing how a test
    runs (``skip``, ``xfail``...), or that pytest refuses as a marker name."""
    if tag in _BEHAVIOUR_MARKERS or tag.startswith("_"):
        return None
    if not any(line.split(":")[0].strip() == tag for line in config.getini("markers")):
        config.addinivalue_line("markers", f"{tag}: an AgentV eval file's tag")
    marker: pytest.MarkDecorator = getattr(pytest.mark, tag)
    return marker


class EvalFailed(AssertionError):
    """A graded case whose verdict is fail; its message is the evaluator report."""


def _run_case(agentv_target: Any) -> None:
    """Declares the fixtures an eval item requests; the work happens in ``EvalItem``."""


def _run_case_without_target_fixture() -> None:
    """For folders where no conftest defines ``agentv_target``: one fixture less per case."""


_UNSAFE = re.compile(r"::|[/\\\[\]\s]+")


def test_names(ids: Sequence[str]) -> list[str]:
    """pytest names for case ids: an id AgentV accepts may hold ``/``, ``[``, ``]``, ``::`` or
    spaces, which pytest reads as path, parameter or node separators (or which make ``-k`` and
    node ids awkward); those become ``_``, as does the backslash of an invisible or reordering
    character made visible (U+202E is ``_u202e``), and a name already taken gets ``-2``,
    ``-3``... The results row keeps the id as written."""
    visible = [printable(case_id) for case_id in ids]
    taken = {case_id for case_id in visible if not _UNSAFE.search(case_id)}
    names: list[str] = []
    for case_id in visible:
        if not _UNSAFE.search(case_id):
            names.append(case_id)
            continue
        base = _UNSAFE.sub("_", case_id)
        name, n = base, 1
        while name in taken:
            n += 1
            name = f"{base}-{n}"
        taken.add(name)
        names.append(name)
    return names


def load_specs(
    path: Path,
    display: str,
    rootdir: Path,
    registry: ScopedRegistry,
    files: ProjectFiles | None = None,
    trials: int | None = None,
    matrix: bool = True,
) -> tuple[LoadedFile, list[tuple[CaseSpec, dict[str, Evaluator]]]]:
    """Everything collection does with an eval file, without pytest: raises ``AgentvError``.

    The nearest ``.agentv/config.yaml`` (from ``files``) gives the file its guideline
    patterns; its warnings come with the first eval file that uses it. ``trials`` is
    ``--agentv-trials``, with which every case's trials must still be able to settle;
    ``matrix`` off (``--agentv-target``) runs each case once rather than once per target.
    """
    loaded = load_eval_file(path, display, registry, rootdir)
    if files is not None and (config := files.config_for(path.parent)) is not None:
        loaded = replace(
            loaded,
            guideline_patterns=tuple(config.model.guideline_patterns),
            warnings=(*files.new_warnings(config), *loaded.warnings),
        )
    specs = CaseSpec.all_of(loaded, matrix=matrix)
    _check_trials(loaded, specs, trials)
    return loaded, [(spec, registry.evaluators_for(spec.evaluators)) for spec in specs]


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


class EvalFile(pytest.File):
    def __init__(self, *, run: AgentvRun, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.run = run

    def collect(self) -> Iterable[pytest.Item]:
        run = self.run
        hook = self.ihook
        registry = run.registry.scoped(
            lambda kind: hook.pytest_agentv_make_evaluator(config=self.config, kind=kind)
        )

        try:
            loaded, cases = load_specs(
                self.path,
                display_path(self.path, run.rootdir),
                run.rootdir,
                registry,
                run.files,
                run.settings.trials,
                matrix=run.settings.target is None,
            )
        except AgentvError as exc:
            raise self.CollectError(shown(str(exc))) from None
        try:
            run.planner.targets.know(self.path.parent, run.files.targets_for(self.path.parent))
        except AgentvError as exc:  # its cases are not graded, for this reason
            run.planner.targets.know(self.path.parent, exc)
        for warning in loaded.warnings:
            file = str(warning.path or self.path)
            warnings.warn_explicit(shown(warning.message), warning.category, file, warning.line)
        defined = target_fixture_defined(self.config, self.path)
        callobj = _run_case if defined else _run_case_without_target_fixture
        names = test_names([case.id for case in loaded.suite.evalcases])
        for spec, evaluators in cases:
            name = names[spec.index]
            if spec.matrix_target is not None:
                name += f"[{_UNSAFE.sub('_', printable(spec.matrix_target))}]"
            run.collected.add((spec.loaded.display, spec.dataset, spec.case.id))
            if not defined:
                for file, warning in run.planner.targets.setting_notes(spec):
                    warnings.warn_explicit(warning.message, warning.category, file, warning.line)
            item = EvalItem.from_parent(
                self, name=name, callobj=callobj, run=run, spec=spec, evaluators=evaluators
            )
            item.add_marker("agentv")
            for tag in loaded.suite.tags or []:
                if (marker := tag_marker(self.config, tag)) is not None:
                    item.add_marker(marker)
            yield item


class EvalItem(pytest.Function):
    def __init__(
        self,
        *,
        run: AgentvRun,
        spec: CaseSpec,
        evaluators: Mapping[str, Evaluator],
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.run = run
        self.spec = spec
        self.evaluators = evaluators

    @cached_property
    def plan(self) -> CasePlan:
        """The case's target (built by ``pytest_agentv_make_target``), judge and workspace,
        resolved when the selected items are planned or estimated: a case that ``-k`` or
        ``--deselect`` left out builds no target."""
        return self.run.planner.plan_case(self.spec, self.evaluators, self._make_target)

    def _make_target(self, target: TargetDefinition) -> Target | None:
        built: Target | None = self.ihook.pytest_agentv_make_target(
            config=self.config, target=target
        )
        return built

    def setup(self) -> None:
        super().setup()
        if setup_only(self.config):  # no case runs
            return
        run = self.run
        value = self.funcargs.get("agentv_target")
        if value is not None and not callable(value):
            pytest.fail(
                f"the agentv_target fixture must return a callable (or None), "
                f"got {type(value).__name__}",
                pytrace=False,
            )
        answered = run.settings.answers is not None  # recorded answers replace every target
        fixture = FixtureTarget(value) if value is not None and not answered else None
        if self._held_back():
            return
        if fixture is None and run.scheduler.planned(self.nodeid):
            result = run.scheduler.result(self.nodeid)
        else:
            result = run.run_now(self.plan, fixture)
        run.compare(result, self.spec)
        row = self.stash[result_key] = result.row()
        apply_threshold(row, self.spec.threshold(run.settings.threshold))
        run.dependencies.record(self.spec, failed=row["status"] == "error")
        if self.spec.budget_usd is not None:
            reported = reported_metric((row.get("trace_summary") or {}).get("cost_usd")) or 0.0
            run.suite_budgets.charge(self.spec.loaded.display, row["usage"]["cost_usd"] + reported)
        record_properties(self, row)
        settle_ungraded(
            row,
            subject=f"eval '{self.spec.label}'",
            where=f"{self.spec.where}: ",
            require_judge=run.settings.require_judge,
            fail_on_error=run.settings.fail_on_error,
            skip=pytest.skip,
        )

    def _held_back(self) -> bool:
        """A failed dependency (``on_dependency_failure``): skip the case, or fail it without
        running it (in ``runtest``); ``run`` runs it anyway."""
        failed = self.run.dependencies.failed(self.spec)
        policy = self.spec.case.on_dependency_failure or "skip"
        if not failed or policy == "run":
            return False
        self.run.dependencies.record(self.spec, failed=True)
        reason = f"eval '{self.spec.label}': dependency failed ({', '.join(failed)})"
        if policy == "skip":
            pytest.skip(f"{reason}; skipped (on_dependency_failure: skip)")
        self.stash[_held_key] = f"{self.spec.where}: {reason} (on_dependency_failure: fail)"
        return True

    def runtest(self) -> None:
        if (held := self.stash.get(_held_key, None)) is not None:
            raise EvalFailed(held)
        row: ResultRow = self.stash[result_key]
        apply_verdict(
            row,
            borderline=self.run.settings.borderline,
            headline=f"{self.spec.where}: eval '{self.spec.label}' failed",
            failure=EvalFailed,
            max_regression=self.run.settings.max_regression,
        )

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException]) -> Any:  # type: ignore[override]
        # pytest also asks for a repr of an imperative xfail (borderline) before it rewrites the
        # outcome; our own exceptions carry their whole report, and neither needs a traceback
        # (rendering one parses source, which is not worth doing for a known outcome).
        if isinstance(excinfo.value, (EvalFailed, AgentvError, pytest.xfail.Exception)):
            return shown(str(excinfo.value))
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        written = self.spec.loaded.case_file(self.spec.index)[1]
        return written, self.spec.line, f"eval: {printable(self.spec.label)}"


def setup_only(config: pytest.Config) -> bool:
    """``--setup-only`` or ``--setup-plan``: pytest runs no test."""
    return bool(config.getoption("setuponly", False))


def runs_tests(session: pytest.Session) -> bool:
    """Whether pytest will run the collected items' tests: not after a collection error that
    stops the session, nor under ``--collect-only``, ``--setup-only`` or ``--setup-plan``."""
    option = session.config.option
    stopped = session.testsfailed and not option.continue_on_collection_errors
    return not (stopped or option.collectonly or setup_only(session.config))


def planned_work(items: Sequence[pytest.Item]) -> tuple[list[CaseWork], list[CaseWork]]:
    """The eval items' cases: those the scheduler may start before their items run, and those
    that run when their items do, because an ``agentv_target`` fixture may answer them (its
    value is only known at item setup; under ``--agentv-answers`` recorded answers replace the
    fixture too). A fixture that returns None passes its case on to the file's target."""
    early: list[CaseWork] = []
    later: list[CaseWork] = []
    for item in items:
        if isinstance(item, EvalItem):
            fixture = "agentv_target" in item.fixturenames and item.run.settings.answers is None
            # A case that depends on others waits for their outcome, and one of a file with a
            # budget for what the file spent: it runs when its item does.
            spec = item.spec
            waits = fixture or bool(spec.case.depends_on) or spec.budget_usd is not None
            (later if waits else early).append((item.nodeid, item.plan))
    return early, later


def spec_of(item: pytest.Item) -> CaseSpec | None:
    """An eval item's case; None for any other test."""
    return item.spec if isinstance(item, EvalItem) else None


def in_dependency_order(items: Sequence[pytest.Item]) -> list[pytest.Item]:
    """The items, each eval case after the cases it depends on."""
    return ordered(items, spec_of)


def place_skip(item: pytest.Item, report: pytest.TestReport) -> None:
    """Point a skipped eval item's report at the case's line in its eval file, so that ``-rs``
    shows where the case is rather than where pytest-agentv skipped it."""
    if (
        isinstance(item, EvalItem)
        and report.skipped
        and isinstance(report.longrepr, tuple)
        and len(report.longrepr) == 3
    ):
        report.longrepr = (str(item.path), item.spec.line + 1, report.longrepr[2])
