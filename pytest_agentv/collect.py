"""Eval files as pytest collectors, eval cases as pytest items.

``EvalItem`` is a ``pytest.Function`` so that fixtures (autouse ones, conftest overrides, the
``agentv_target`` fixture) apply to eval cases exactly as to Python tests. The case runs during
setup: a case that cannot be graded is then an *error*, a case that needs a judge nobody
configured is a *skip*, and only a graded case reaches the call phase, where its verdict becomes
passed, xfailed or failed.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NoReturn

import pytest

from .errors import AgentvError, ConfigError, EvalFileError
from .evaluators.base import EVALUATOR_KINDS, Evaluator
from .evaluators.llm_judge import load_prompt_file
from .loader import LoadedFile, display_path, evaluator_locs, load_eval_file
from .models import KIND_ALIASES
from .redaction import redact
from .reporting import record_properties, result_key
from .runner import CaseSpec, effective_evaluators, get_run
from .targets import FixtureTarget
from .verdicts import borderline_reason, outcome_for, report_text, settle_ungraded, summary_line


def _defines_target_fixture(plugin: object) -> bool:
    if getattr(plugin, "agentv_target", None) is not None:
        return True
    try:
        values = vars(plugin).values()
    except TypeError:
        return False
    # @pytest.fixture(name="agentv_target") on a function with another name
    return any(
        type(value).__name__ == "FixtureFunctionDefinition"
        and getattr(value, "name", None) == "agentv_target"
        for value in values
    )


def target_fixture_defined(config: pytest.Config, path: Path) -> bool:
    """Whether a conftest.py above ``path`` (or a plugin) defines its own ``agentv_target``.

    Only then do eval items request that fixture; the plugin's default returns None anyway.
    """
    for plugin in config.pluginmanager.get_plugins():
        if getattr(plugin, "__name__", "") == "pytest_agentv.plugin":
            continue
        if not _defines_target_fixture(plugin):
            continue
        file = getattr(plugin, "__file__", None)
        if not (file and Path(file).name == "conftest.py"):
            return True
        if path.is_relative_to(Path(file).parent):
            return True
    return False


class EvalFailed(AssertionError):
    """A graded case whose verdict is fail; its message is the evaluator report."""


def _run_case(agentv_target: Any) -> None:
    """Declares the fixtures an eval item requests; the work happens in ``EvalItem``."""


def _run_case_without_target_fixture() -> None:
    """For folders where no conftest defines ``agentv_target``: one fixture less per case."""


def load_specs(
    path: Path, display: str, rootdir: Path, evaluator_for: Callable[[str], Evaluator | None]
) -> tuple[LoadedFile, list[CaseSpec]]:
    """Everything collection does with an eval file, without pytest: raises ``AgentvError``."""
    loaded = load_eval_file(
        path,
        display,
        lambda kind: evaluator_for(kind) is not None,
        lambda: sorted({*EVALUATOR_KINDS, *KIND_ALIASES}),
    )
    _check_prompt_files(loaded, rootdir)
    specs: list[CaseSpec] = []
    for index, case in enumerate(loaded.suite.evalcases):
        entries = effective_evaluators(case, loaded.suite)
        registry = {entry.type: evaluator_for(entry.type) for entry in entries}
        specs.append(
            CaseSpec(
                loaded=loaded,
                index=index,
                evaluators=entries,
                registry={kind: e for kind, e in registry.items() if e is not None},
            )
        )
    return loaded, specs


def _check_prompt_files(loaded: LoadedFile, rootdir: Path) -> None:
    """Custom judge prompts that are files must exist, stay in the rootdir and use a candidate
    variable: a load error here, rather than a surprise at run time."""
    for loc, entry in evaluator_locs(loaded.suite):
        if entry.kind != "llm_judge" or not isinstance(entry.prompt, str):
            continue
        try:
            load_prompt_file(entry.prompt, start=loaded.path.parent, rootdir=rootdir)
        except ConfigError as exc:
            line, col = loaded.positions.get((*loc, "prompt"), (1, 1))
            dotted = ".".join(map(str, (*loc, "prompt")))
            raise EvalFileError(loaded.display, line, col, f"{dotted}: {exc}") from None


class EvalFile(pytest.File):
    def collect(self) -> Iterable[pytest.Item]:
        run = get_run(self.config)
        try:
            loaded, specs = load_specs(
                self.path,
                display_path(self.path, run.rootdir),
                run.rootdir,
                run.evaluator_lookup(self.ihook),
            )
        except AgentvError as exc:
            raise self.CollectError(str(exc)) from None
        for warning in loaded.warnings:
            warnings.warn_explicit(warning.message, warning.category, str(self.path), warning.line)
        defined = target_fixture_defined(self.config, self.path)
        callobj = _run_case if defined else _run_case_without_target_fixture
        for spec in specs:
            item = EvalItem.from_parent(self, name=spec.case.id, callobj=callobj, spec=spec)
            item.add_marker("agentv")
            yield item


class EvalItem(pytest.Function):
    def __init__(self, *, spec: CaseSpec, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spec = spec

    def setup(self) -> None:
        super().setup()
        run = get_run(self.config)
        value = self.funcargs.get("agentv_target")
        if value is not None and not callable(value):
            pytest.fail(
                f"the agentv_target fixture must return a callable (or None), "
                f"got {type(value).__name__}",
                pytrace=False,
            )
        fixture = FixtureTarget(value) if value is not None else None
        if fixture is None and run.scheduler.planned(self.nodeid):
            result = run.scheduler.result(self.nodeid)
        else:
            result = run.run_now(self.spec, fixture)
        data = self.stash[result_key] = result.to_dict()
        record_properties(self, data)
        settle_ungraded(
            data,
            subject=f"eval '{self.name}'",
            where=f"{self.spec.loaded.display}:{self.spec.line + 1}: ",
            require_judge=run.settings.require_judge,
            fail_on_error=run.settings.fail_on_error,
            skip=self._skip,
        )

    def _skip(self, reason: str) -> NoReturn:
        """Skip so that ``-rs`` shows the case's line in its eval file, not our source."""
        raiser = compile("\n" * self.spec.line + "raise skipped", str(self.path), "exec")
        try:
            pytest.skip(reason)
        except pytest.skip.Exception as skipped:
            exec(raiser, {"skipped": skipped.with_traceback(None)})
        raise AssertionError("unreachable: the compiled code raises")

    def runtest(self) -> None:
        data = self.stash[result_key]
        outcome = outcome_for(str(data["verdict"]), get_run(self.config).settings.borderline)
        if outcome == "xfailed":
            # Last statement of its branch: with --runxfail, pytest.xfail does nothing.
            pytest.xfail(borderline_reason(data))
        elif outcome == "failed":
            where = f"{self.spec.loaded.display}:{self.spec.line + 1}"
            raise EvalFailed(
                report_text(data, f"{where}: eval '{self.name}' failed: {summary_line(data)}")
            )

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException]) -> Any:  # type: ignore[override]
        # pytest also asks for a repr of an imperative xfail (borderline) before it rewrites the
        # outcome; our own exceptions carry their whole report, and neither needs a traceback
        # (rendering one parses source, which is not worth doing for a known outcome).
        if isinstance(excinfo.value, (EvalFailed, AgentvError, pytest.xfail.Exception)):
            return redact(str(excinfo.value))
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, self.spec.line, f"eval: {self.name}"
