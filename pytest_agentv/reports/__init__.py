"""The reports of a run: JUnit properties (``junit``), the results file (``jsonl``), the
terminal summary (``terminal``), the HTML page (``html``) and the Markdown summary
(``markdown``, also appended to GitHub's job summary).

``AgentvReporter`` is the controller's plugin object (created there only, like pytest's own
junitxml plugin): it reads the rows that reports carry (``report.agentv``, plain builtins, also
from pytest-xdist workers) and writes the results file and the summary; the HTML and Markdown
reports are written at the end of the run from the rows a spool kept on disk.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest

from .jsonl import ResultsFile
from .spool import RowSpool
from .terminal import Summary, budget_line
from .view import RunFacts

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
        self.started = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self._clock = time.monotonic()
        summary = os.environ.get("GITHUB_STEP_SUMMARY")
        self.step_summary = Path(summary) if summary and settings.step_summary == "on" else None
        wanted = settings.html or settings.markdown or self.step_summary
        #: The rows of the run, kept on disk for the HTML and Markdown reports.
        self.spool = RowSpool() if wanted else None
        #: The reports written (what they are and where), and those that could not be.
        self.written: list[str] = []
        self.errors: list[str] = []

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
        if self.spool is not None:
            for row in rows:
                self.spool.add(row)
        # pytest keeps every report until the session ends: keep only what the summary needs,
        # not the prompts and answers (10,000 LLM-judged cases would hold hundreds of MB).
        report.agentv = {"summary": kept}  # type: ignore[attr-defined]

    @pytest.hookimpl
    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        self.summary.write(terminalreporter)
        for line in self.written:
            terminalreporter.write_line(line)
        for error in self.failures():
            terminalreporter.write_line(f"ERROR: {error}", red=True, bold=True)

    def failures(self) -> list[str]:
        """The reports that could not be written: the run then fails (see ``plugin``)."""
        results = [self.results.error] if self.results.error is not None else []
        return results + self.errors

    def close(self) -> None:
        self.results.close()
        spool, self.spool = self.spool, None
        if spool is not None:
            try:
                self._write_reports(spool)
            finally:
                spool.close()

    def facts(self) -> RunFacts:
        """What the HTML and Markdown reports say about the run as a whole."""
        settings = self.summary.settings
        spend = self.summary.spend
        return RunFacts(
            title="agentv report",
            started=self.started,
            duration_s=time.monotonic() - self._clock,
            judge=settings.judge_model,
            usage=dict(self.summary.usage),
            budget=budget_line(settings.budget_usd, spend())
            if spend is not None and settings.budget_usd is not None
            else None,
            calibration=self.summary.calibration_lines(),
            comparison=self.summary.comparison_lines(),
            pacing=self.summary.pacing_lines(),
        )

    def _write_reports(self, spool: RowSpool) -> None:
        from .html import write_html
        from .markdown import markdown, write_markdown

        settings = self.summary.settings
        facts = self.facts()
        text = markdown(facts, spool.tally, spool.error)
        wanted: list[tuple[str, str, Path | None, Callable[[Path], None]]] = [
            (
                "--agentv-html",
                "HTML report written to",
                settings.html,
                lambda path: write_html(path, facts, spool),
            ),
            (
                "--agentv-markdown",
                "Markdown summary written to",
                settings.markdown,
                lambda path: write_markdown(path, text),
            ),
        ]
        if len(spool):
            step = partial(write_markdown, text=text, append=True)
            done = "job summary appended to"
            wanted.append(("GITHUB_STEP_SUMMARY", done, self.step_summary, step))
        for what, done, path, write in wanted:
            if path is None:
                continue
            try:
                write(path)
            except OSError as exc:
                self.errors.append(f"{what}={path} could not be written: {exc}")
            else:
                self.written.append(f"agentv: {done} {path}")
