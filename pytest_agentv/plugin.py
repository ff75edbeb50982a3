"""pytest hooks and fixtures of pytest-agentv; each delegates to the module that owns the concern.

Importing this module must stay cheap: pytest loads it in every session of every project that
has pytest-agentv installed. Eval-file machinery (pydantic, YAML) is imported when the first eval
file is collected, litellm when the first model call is made.
"""

from __future__ import annotations

import signal
import threading
import warnings
from collections.abc import Callable, Generator
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .options import add_options
from .paths import is_eval_file
from .project import Project
from .redaction import shown
from .reports import AgentvReporter
from .reports.junit import attach
from .runwide import RunWide
from .settings import Settings, settings_key

if TYPE_CHECKING:
    from .assertions import AgentvJudge
    from .evaluators.base import Evaluator
    from .runner import AgentvRun
    from .targets import Target, TargetDefinition

reporter_key = pytest.StashKey[AgentvReporter]()
#: What this process shares with the run's others: the budget's ledger, the call limits.
_runwide_key = pytest.StashKey[RunWide]()
#: ``--agentv-estimate``: the lines printed instead of running the selected items.
_estimate_key = pytest.StashKey[list[str]]()
#: pytest-xdist: the controller's baseline rows (the file is read once per run).
_BASELINE_INPUT = "agentv_baseline"
_sigterm_key = pytest.StashKey[Callable[..., object] | int | None]()
#: The run-wide state, created when the first eval file or ``assert_judged`` needs it.
run_key: pytest.StashKey[AgentvRun] = pytest.StashKey()
#: The project's ``.agentv/config.yaml`` files, looked for from the first file collected.
_project_key = pytest.StashKey[Project]()


def _run(config: pytest.Config) -> AgentvRun:
    run = config.stash.get(run_key, None)
    if run is None:
        from .runner import AgentvRun

        reporter = config.stash.get(reporter_key, None)
        workerinput = getattr(config, "workerinput", {})
        runwide = config.stash[_runwide_key]
        baseline = reporter.baseline if reporter is not None else None
        if _BASELINE_INPUT in workerinput:
            from .baseline import PreviousResults

            baseline = PreviousResults.received(workerinput[_BASELINE_INPUT])
        run = config.stash[run_key] = AgentvRun(
            config,
            config.stash[settings_key],
            ledger=runwide.ledger,
            baseline=baseline,
            limits_socket=runwide.limits_socket,
            files=_project(config).files,
            coordinator=runwide.coordinator,
        )
    return run


def _project(config: pytest.Config) -> Project:
    project = config.stash.get(_project_key, None)
    if project is None:
        project = config.stash[_project_key] = Project(config.rootpath, config.stash[settings_key])
    return project


def _existing_run(config: pytest.Config) -> AgentvRun | None:
    return config.stash.get(run_key, None)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from . import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "agentv: an eval case collected from an AgentV eval file (added automatically)"
    )
    settings = config.stash[settings_key] = Settings.from_config(config)
    if settings.estimate and config.getoption("dist", "no") != "no":
        # The estimate runs nothing: one process counts every selected case.
        config.option.dist = "no"
    workerinput = getattr(config, "workerinput", None)
    runwide = config.stash[_runwide_key] = RunWide(settings, workerinput)
    if workerinput is None:
        reporter = config.stash[reporter_key] = AgentvReporter(settings, config.rootpath)
        config.pluginmanager.register(reporter, "agentv-reporter")
        if runwide.ledger is not None:
            reporter.summary.spend = runwide.ledger.totals
    if (
        threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    ):
        config.stash[_sigterm_key] = signal.signal(signal.SIGTERM, _terminated)


def _terminated(signum: int, frame: object) -> None:
    """SIGTERM (``timeout``, ``docker stop``, a cancelled CI job) ends the run as Ctrl-C does:
    reports are written and every judge and agent still running is stopped."""
    raise KeyboardInterrupt


def pytest_unconfigure(config: pytest.Config) -> None:
    previous = config.stash.get(_sigterm_key, None)
    if previous is not None:
        signal.signal(signal.SIGTERM, previous)
        del config.stash[_sigterm_key]
    reporter = config.stash.get(reporter_key, None)
    if reporter is not None:
        reporter.close()
        config.pluginmanager.unregister(reporter)
        del config.stash[reporter_key]
    runwide = config.stash.get(_runwide_key, None)
    if runwide is not None:
        runwide.close()
        del config.stash[_runwide_key]


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist: each worker shares the controller's budget ledger, model-call limits and
    baseline rows."""
    config = node.config
    baseline = config.stash[reporter_key].baseline
    if baseline is not None:
        node.workerinput[_BASELINE_INPUT] = baseline.shared()
    config.stash[_runwide_key].share_with(
        node.workerinput, lambda warning: config.issue_config_time_warning(warning, stacklevel=2)
    )


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """``hooks.before_session``: before pytest-xdist starts its workers (they inherit what it
    sets) and before the header is written."""
    _project(session.config).before_session(session.config)


def pytest_report_header(config: pytest.Config) -> list[str]:
    said = _project(config).session_said
    return [shown(line) for line in (config.stash[settings_key].header(), said) if line]


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    patterns = parent.config.stash[settings_key].eval_patterns
    named = parent.session.isinitpath(file_path)
    if not (
        is_eval_file(file_path, patterns, named) or _project(parent.config).collects(file_path)
    ):
        return None
    from .collect import EvalFile

    return EvalFile.from_parent(parent, path=file_path, run=_run(parent.config))


@pytest.hookimpl(trylast=True)
def pytest_agentv_make_evaluator(config: pytest.Config, kind: str) -> Evaluator | None:
    return _run(config).registry.builtin(kind)


@pytest.hookimpl(trylast=True)
def pytest_agentv_make_target(config: pytest.Config, target: TargetDefinition) -> Target | None:
    return _run(config).planner.make_target(target)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """Cases after the cases they depend on (``depends_on``); ``--agentv-estimate``: count
    what the selected cases would ask of models, then run nothing (the items are deselected;
    the session still exits 0)."""
    if _existing_run(config) is not None:
        from .collect import in_dependency_order

        items[:] = in_dependency_order(items)
    settings = config.stash[settings_key]
    if settings.shard is not None:
        from .shards import keep_shard

        keep_shard(config, items, settings, eval_items=_existing_run(config) is not None)
    if not settings.estimate:
        return
    run = _existing_run(config)
    if run is None:
        lines = ["no eval cases selected"]
    else:
        from .estimate import estimate_lines

        lines = estimate_lines(run, items)
    config.stash[_estimate_key] = lines
    if items:
        config.hook.pytest_deselected(items=list(items))
        items.clear()


@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session: pytest.Session) -> Generator[None, object, object]:
    """The selected cases are planned (their targets built, their early work started) once
    pytest is about to run their tests, and only then (``runs_tests``)."""
    run = _existing_run(session.config)
    if run is not None and not hasattr(session.config, "workerinput"):
        from .collect import planned_work, runs_tests

        if runs_tests(session):
            run.plan(*planned_work(session.items))
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, Any, Any]:
    run = _existing_run(item.config)
    if run is not None and hasattr(item.config, "workerinput"):
        from .collect import planned_work, setup_only
        from .scheduler import xdist_upcoming

        if not setup_only(item.config):
            # xdist has already taken the next item off its queue: it is `nextitem`.
            following = [nextitem] if nextitem is not None else []
            upcoming = xdist_upcoming(item.session, run.scheduler.lookahead)
            run.plan(*planned_work([item, *following, *upcoming]))
    from .assertions import CurrentTest, current_test

    token = current_test.set(CurrentTest(item, partial(_run, item.config)))
    try:
        return (yield)
    finally:
        current_test.reset(token)
        if run is not None and (item.session.shouldfail or item.session.shouldstop):
            run.scheduler.halt()


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    """Under ``--agentv-calibration-mode warn``, the canaries the judge got wrong, as a warning
    of the first test after they were graded: in a test phase, so ``-W error`` makes it an error
    of that test, not of the run (and last, so that pytest's own teardown has run)."""
    run = _existing_run(item.config)
    if run is not None and run.calibration is not None:
        warning = run.calibration.take_warning()
        if warning is not None:
            from .errors import AgentvCalibrationWarning

            warnings.warn_explicit(
                shown(warning), AgentvCalibrationWarning, str(run.calibration.path), 1
            )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    attach(item, report)
    if report.skipped and _existing_run(item.config) is not None:
        from .collect import place_skip

        place_skip(item, report)
    return report


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    run = _existing_run(config)
    reporter = config.stash.get(reporter_key, None)
    if run is not None:
        facts = run.facts()
        workeroutput = getattr(config, "workeroutput", None)
        if workeroutput is not None:
            workeroutput["agentv"] = facts
        elif reporter is not None:
            reporter.summary.add_facts(facts)
        run.close()
    served = config.stash[_runwide_key].finish()
    if served is not None and reporter is not None:  # the workers' limits, held here
        reporter.summary.pacing.append(served)
    # A run that reached its budget fails, even when its ungraded cases were reported as skips.
    if reporter is not None and reporter.summary.over_budget() and session.exitstatus in (0, 5):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    if reporter is not None:
        reporter.close()  # now, so that a failure to write a report still counts
        if reporter.failures() and session.exitstatus in (0, 5):
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
    if _estimate_key in config.stash and session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        session.exitstatus = pytest.ExitCode.OK


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    lines = terminalreporter.config.stash.get(_estimate_key, None)
    if lines is not None:
        terminalreporter.section("agentv estimate")
        for line in lines:
            terminalreporter.write_line(line)


@pytest.fixture
def agentv_judge(request: pytest.FixtureRequest) -> AgentvJudge:
    """The session's judge, bound to this test: ``evaluate`` grades an answer without asserting,
    ``assert_judged`` / ``assert_judged_async`` assert on it (results go on this test's report)."""
    from .assertions import AgentvJudge

    return AgentvJudge(_run(request.config), request.node)


@pytest.fixture
def agentv_target() -> Any:
    """Override in a conftest.py to answer eval cases from Python.

    Return a callable (sync or async) that takes the prepared case (``case.question``,
    ``case.input_messages``, ``case.id``...) and returns the answer: text, a list of messages,
    or ``{"text": ...}`` / ``{"output_messages": [...], ...}``. It wins over the targets file
    for the folders its conftest covers; returning None falls back to the targets file.
    """
    return None
