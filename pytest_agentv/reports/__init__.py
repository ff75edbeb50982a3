"""The reports of a run: JUnit properties (``junit``), the results file (``jsonl``) and the
terminal summary (``terminal``).

``AgentvReporter`` is the controller's plugin object (created there only, like pytest's own
junitxml plugin): it reads the rows that reports carry (``report.agentv``, plain builtins, also
from pytest-xdist workers) and writes the results file and the summary.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest

from .jsonl import ResultsFile
from .terminal import Summary

if TYPE_CHECKING:
    from ..baseline import PreviousResults
    from ..results import ResultRow
    from ..settings import Settings


class AgentvReporter:
    """Controller-side plugin object: results file and terminal summary."""

    def __init__(self, settings: Settings, rootdir: Path | None = None) -> None:
        self.settings = settings
        self.baseline: PreviousResults | None = None
        if settings.baseline is not None:
            from ..baseline import PreviousResults
            from ..errors import ConfigError
            from ..paths import display_path

            shown = display_path(settings.baseline, rootdir) if rootdir else str(settings.baseline)
            self.baseline = PreviousResults(
                settings.baseline, shown, "--agentv-baseline", scored=True
            )
            try:
                self.baseline.rows()
            except ConfigError as exc:
                raise pytest.UsageError(str(exc)) from None
        self.summary = Summary(settings, self.baseline)
        self.results = ResultsFile(settings)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """pytest-xdist: a worker finished, with its run's facts in its ``workeroutput``."""
        facts = (getattr(node, "workeroutput", None) or {}).get("agentv")
        if isinstance(facts, dict):
            self.summary.add_facts(facts)

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        data = getattr(report, "agentv", None)
        if not isinstance(data, dict):
            return
        # Rows arrive as plain dicts (through pytest-xdist from a worker); their shape is ResultRow.
        found = [data.get("case"), *(data.get("judged") or ())]
        rows = [cast("ResultRow", row) for row in found if isinstance(row, dict)]
        kept = [self.summary.add(row) for row in rows]
        self.results.write(rows)
        # pytest keeps every report until the session ends: keep only what the summary needs,
        # not the prompts and answers (10,000 LLM-judged cases would hold hundreds of MB).
        report.agentv = {"summary": kept}  # type: ignore[attr-defined]

    @pytest.hookimpl
    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        self.summary.write(terminalreporter)
        if self.results.error is not None:
            terminalreporter.write_line(f"ERROR: {self.results.error}", red=True, bold=True)

    def close(self) -> None:
        self.results.close()
