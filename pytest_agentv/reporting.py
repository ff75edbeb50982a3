"""JUnit properties, the results file and the terminal summary.

Per-case data travels on the report as ``report.agentv`` (plain builtins, so pytest-xdist can
carry it to the controller). ``AgentvReporter`` is created on the controller only, like pytest's
own junitxml plugin: it writes the results file and the summary from the reports it receives.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, cast

import pytest

from .redaction import printable
from .verdicts import fmt

if TYPE_CHECKING:
    from .baseline import PreviousResults
    from .results import EvaluatorRow, ResultRow
    from .settings import Settings

#: An eval item's result row, which goes on its report.
result_key: pytest.StashKey[ResultRow] = pytest.StashKey()
#: Rows of the ``assert_judged`` calls a test made.
judged_key: pytest.StashKey[list[ResultRow]] = pytest.StashKey()

_SUMMARY_FIELDS = (
    "status",
    "eval_id",
    "dataset",
    "file",
    "score",
    "verdict",
    "error",
    "usage",
    "baseline_score",
    "delta",
)


def _holds_results(path: Path) -> bool:
    """Whether a file is empty or starts like a results file (rows with an ``eval_id``, or a
    later AgentV's ``test_id``): never empty an eval file (JSONL rows have an ``id``), a targets
    file or anything else given by mistake. A file that cannot be read is left to ``open``."""
    limit = 64 * 1024
    try:
        with path.open("rb") as stream:
            head = stream.read(limit).lstrip()
    except OSError:
        return True
    first = head.split(b"\n", 1)[0].strip()
    if not first:
        return True
    if not first.startswith(b"{"):
        return False
    try:
        row = json.loads(first)
    except ValueError:  # a first row longer than what was read
        return b'"eval_id"' in first or b'"test_id"' in first
    return isinstance(row, dict) and ("eval_id" in row or "test_id" in row)


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and a.samefile(b))
    except OSError:
        return False


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _evaluator_properties(
    entries: Sequence[EvaluatorRow], prefix: str
) -> Iterator[tuple[str, str]]:
    """Each evaluator's score and verdict; a composite's members under its name."""
    for entry in entries:
        name = f"{prefix}.{entry['name']}"
        yield f"{name}.score", f"{entry['score']:.4f}"
        yield f"{name}.verdict", entry["verdict"]
        yield from _evaluator_properties(entry.get("evaluator_results", ()), name)


def properties_for(row: ResultRow, prefix: str = "agentv") -> list[tuple[str, str]]:
    """JUnit ``<property>`` pairs for one graded (or ungraded) evaluation."""
    props: list[tuple[str, str]] = [
        (f"{prefix}.status", row["status"]),
        (f"{prefix}.score", f"{row['score']:.4f}"),
        (f"{prefix}.verdict", str(row["verdict"])),
    ]
    props.extend(_evaluator_properties(row["evaluator_results"], f"{prefix}.evaluator"))
    trials, aggregation = row["trials"], row["aggregation"]
    if trials is not None:
        props.append((f"{prefix}.trials", str(len(trials))))
    if aggregation is not None:
        props.append((f"{prefix}.pass_rate", f"{aggregation['pass_rate']:.4f}"))
        props.append((f"{prefix}.ci_low", f"{aggregation['ci_low']:.4f}"))
        props.append((f"{prefix}.ci_high", f"{aggregation['ci_high']:.4f}"))
    props.append((f"{prefix}.hits", _json(row["hits"])))
    props.append((f"{prefix}.misses", _json(row["misses"])))
    if row.get("baseline_score") is not None:
        props.append((f"{prefix}.baseline_score", f"{row['baseline_score']:.4f}"))
    delta = row.get("delta")
    if delta is not None:
        props.append((f"{prefix}.delta", f"{delta:+.4f}"))
    usage = row["usage"]
    if usage["calls"] or usage["reused"]:
        props.append((f"{prefix}.tokens", str(usage["tokens"])))
        cost = usage["cost_usd"]
        props.append((f"{prefix}.cost_usd", "unknown" if cost is None else f"{cost:.6f}"))
    if row["error"]:
        props.append((f"{prefix}.error", row["error"]))
    return props


def record_properties(item: pytest.Item, row: ResultRow, prefix: str = "agentv") -> None:
    # Appended to the item, not the report: junitxml writes them from the teardown report.
    item.user_properties.extend(properties_for(row, prefix))


def attach(item: pytest.Item, report: pytest.TestReport) -> None:
    """Put the case result (or a test's ``assert_judged`` results) on the report that ends it."""
    result = item.stash.get(result_key, None)
    if result is not None:
        if report.when == ("call" if result["status"] == "graded" else "setup"):
            report.agentv = {"case": result}  # type: ignore[attr-defined]
            del item.stash[result_key]
        return
    judged = item.stash.get(judged_key, None)
    if judged and report.when == "call":
        report.agentv = {"judged": list(judged)}  # type: ignore[attr-defined]


def _ok(canary: Mapping[str, Any]) -> bool:
    return bool(canary["verdict"] == canary["expected"])


def budget_line(limit: float, spent: float, refused: int) -> str:
    """Spent against ``--agentv-budget-usd``; a run that reached it fails."""
    from .results import usd

    line = f"agentv budget: {usd(spent)} spent of {usd(limit)} (--agentv-budget-usd)"
    if refused:
        return f"{line}; {refused} model calls were not started: the run fails"
    if spent >= limit:
        return f"{line}; the budget was reached: the run fails"
    return line


class AgentvReporter:
    """Controller-side plugin object: results file and terminal summary.

    Besides the rows on reports, the summary reads what each process's run knows at its end
    (``add_facts``: the cases it collected, its calibration; pytest-xdist workers send theirs as
    ``workeroutput``) and the run's spend (``spend``, set when there is a budget).
    """

    def __init__(self, settings: Settings, rootdir: Path | None = None) -> None:
        self.settings = settings
        self.cases: list[dict[str, Any]] = []
        self.collected: set[tuple[str, str, str]] = set()
        self.calibrations: list[dict[str, Any]] = []
        #: The run's spend and refused calls so far (``--agentv-budget-usd``).
        self.spend: Callable[[], tuple[float, int]] | None = None
        self.baseline: PreviousResults | None = None
        if settings.baseline is not None:
            from .baseline import PreviousResults
            from .errors import ConfigError
            from .paths import display_path

            shown = display_path(settings.baseline, rootdir) if rootdir else str(settings.baseline)
            self.baseline = PreviousResults(
                settings.baseline, shown, "--agentv-baseline", scored=True, rootdir=rootdir
            )
            try:
                self.baseline.rows()
            except ConfigError as exc:
                raise pytest.UsageError(str(exc)) from None
        self.usage = {"calls": 0, "reused": 0, "tokens": 0, "cost_usd": 0.0, "unpriced_calls": 0}
        #: Cases that ran several times, their trials, and a fixed count's equivalent.
        self.trials = {"cases": 0, "run": 0, "planned": 0}
        self._results: IO[str] | None = None
        #: Why the results file could not be written to the end (see ``results_failed``).
        self.results_error: str | None = None
        if settings.results is not None:
            path = Path(settings.results)
            try:
                self._results = self._open_results(path)
            except OSError as exc:
                raise pytest.UsageError(
                    f"--agentv-results={path} cannot be written: {exc.strerror or exc}; "
                    "give the path of a file in a folder that exists or can be created"
                ) from None

    def _open_results(self, path: Path) -> IO[str]:
        """Opening the results file empties it, so it must not be a file this run reads (the
        answers or baseline: pytest-xdist workers read them after the controller opened this
        file) nor anything else a mistyped path can name (an eval file, a targets file)."""
        for flag, given in (
            ("--agentv-answers", self.settings.answers),
            ("--agentv-baseline", self.settings.baseline),
        ):
            if given is not None and _same_file(path, given):
                raise pytest.UsageError(
                    f"--agentv-results={path} is also the {flag} file, which the run reads while "
                    "it writes its results; write them to another path (and replace the old file "
                    "with it afterwards)"
                )
        if path.is_file() and not _holds_results(path):
            raise pytest.UsageError(
                f"--agentv-results={path} is a file that does not hold results (its first line "
                "is not a results row with an eval_id) and would be emptied; give another path"
            )
        path.parent.mkdir(parents=True, exist_ok=True)
        return path.open("w", encoding="utf-8")

    def _add_usage(self, usage: Mapping[str, Any]) -> None:
        for key in self.usage:
            self.usage[key] += usage.get(key) or 0

    def add_facts(self, facts: Mapping[str, Any]) -> None:
        """What one process's run knew at its end (see ``AgentvRun.facts``)."""
        for file, dataset, case_id in facts.get("collected") or ():
            self.collected.add((file, dataset, case_id))
        calibration = facts.get("calibration")
        if isinstance(calibration, dict):
            self.calibrations.append(calibration)
            self._add_usage(calibration.get("usage") or {})

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """pytest-xdist: a worker finished, with its run's facts in its ``workeroutput``."""
        facts = (getattr(node, "workeroutput", None) or {}).get("agentv")
        if isinstance(facts, dict):
            self.add_facts(facts)

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        data = getattr(report, "agentv", None)
        if not isinstance(data, dict):
            return
        # Rows arrive as plain dicts (through pytest-xdist from a worker); their shape is ResultRow.
        found = [data.get("case"), *(data.get("judged") or ())]
        rows = [cast("ResultRow", row) for row in found if isinstance(row, dict)]
        for row in rows:
            summary = {key: row.get(key) for key in _SUMMARY_FIELDS}
            summary["compared"] = "baseline_score" in row
            self.cases.append(summary)
            self._add_usage(row["usage"])
            aggregation = row.get("aggregation")
            if isinstance(aggregation, dict):
                self.trials["cases"] += 1
                self.trials["run"] += aggregation["trials"]
                self.trials["planned"] += aggregation["planned"]
        if rows and self._results is not None:
            from .results import results_line

            try:
                for row in rows:
                    self._results.write(_json(results_line(row)) + "\n")
                self._results.flush()
            except OSError as exc:
                self.results_failed(exc)
        # pytest keeps every report until the session ends: keep only what the summary needs,
        # not the prompts and answers (10,000 LLM-judged cases would hold hundreds of MB).
        report.agentv = {"summary": self.cases[-len(rows) :] if rows else []}  # type: ignore[attr-defined]

    @pytest.hookimpl
    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        self._summary(terminalreporter)
        if self.results_error is not None:
            terminalreporter.write_line(f"ERROR: {self.results_error}", red=True, bold=True)

    def _summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.cases and not (self.usage["calls"] or self.usage["reused"] or self.spend):
            return
        terminalreporter.section("agentv summary")
        if self.cases:
            counts: dict[str, int] = {}
            for case in self.cases:
                key = case["verdict"] if case["status"] == "graded" else case["status"]
                counts[key] = counts.get(key, 0) + 1
            graded = [c["score"] for c in self.cases if c["status"] == "graded"]
            parts = [
                f"{counts.get('pass', 0)} pass",
                f"{counts.get('borderline', 0)} borderline",
                f"{counts.get('fail', 0)} fail",
                f"{counts.get('error', 0)} not graded",
                f"{counts.get('skipped', 0)} skipped (no judge)",
            ]
            mean = f"; mean score {fmt(sum(graded) / len(graded))}" if graded else ""
            count = f"{len(self.cases)} evaluation{'s' if len(self.cases) != 1 else ''}"
            terminalreporter.write_line(f"{count}: {', '.join(parts)}{mean}")
            if counts.get("skipped"):
                terminalreporter.write_line(
                    "  skipped cases need an LLM judge: set AGENTV_JUDGE_MODEL and the "
                    "provider's API key (--agentv-require-judge turns these skips into errors)"
                )
            for case in self.cases:
                if case["status"] == "error":
                    where = (
                        f"{case['file']}::{case['eval_id']}"
                        if case.get("file")
                        else case["eval_id"]
                    )
                    line = f"  not graded: {where}: {case['error']}"
                    terminalreporter.write_line(printable(line))
        for line in self._calibration_lines():
            terminalreporter.write_line(printable(line))
        t = self.trials
        if t["cases"]:
            cases = f"{t['cases']} case{'s' if t['cases'] != 1 else ''}"
            terminalreporter.write_line(
                f"agentv trials: {t['run']} run for {cases}; a fixed count would run "
                f"{t['planned']} ({t['planned'] - t['run']} saved)"
            )
        u = self.usage
        cost = (
            f"cost unknown ({u['unpriced_calls']} of {u['calls']} calls to models without a "
            "known price)"
            if u["unpriced_calls"]
            else f"${u['cost_usd']:.4f}"
        )
        terminalreporter.write_line(
            f"agentv: {u['calls']} model calls made, {u['reused']} replies reused from the store, "
            f"{u['tokens']:,} tokens, {cost}"
        )
        if self.spend is not None and self.settings.budget_usd is not None:
            terminalreporter.write_line(budget_line(self.settings.budget_usd, *self.spend()))
        if self.baseline is not None:
            from .baseline import comparison_lines

            compared = [case for case in self.cases if case["compared"]]
            lines = comparison_lines(
                self.baseline, compared, self.collected, self.settings.max_regression
            )
            for line in lines:
                terminalreporter.write_line(printable(line))

    def _calibration_lines(self) -> list[str]:
        """How the judge did on the canaries (the worst process's, under pytest-xdist)."""
        if not self.calibrations:
            return []
        worst = max(
            self.calibrations,
            key=lambda c: (bool(c["error"]), sum(1 for r in c["canaries"] if not _ok(r))),
        )
        where = f"agentv calibration ({worst['file']})"
        if worst["error"]:
            return [f"{where}: the calibration file cannot be used: {worst['error']}"]
        canaries = worst["canaries"]
        failed = [r for r in canaries if not _ok(r)]
        if not failed:
            return [f"{where}: judge {worst['judge']} graded {len(canaries)} canaries as expected"]
        effect = (
            "its cases were not graded"
            if worst["mode"] == "enforce"
            else "its verdicts were used anyway (warn)"
        )
        lines = [
            f"{where}: judge {worst['judge']} failed {len(failed)} of {len(canaries)} canaries; "
            f"{effect}"
        ]
        for r in failed:
            got = (
                f"got {r['verdict']} (score {fmt(r['score'])})"
                if r["verdict"] is not None
                else f"not graded ({r['error']})"
            )
            lines.append(f"  {r['id']}: expected {r['expected']}, {got}")
        return lines

    def over_budget(self) -> bool:
        """Whether the run reached its budget or refused a call for it."""
        if self.spend is None or self.settings.budget_usd is None:
            return False
        spent, refused = self.spend()
        return spent >= self.settings.budget_usd or refused > 0

    def results_failed(self, exc: OSError) -> None:
        """The results file could not be written (a full disk, ``/dev/full``): it stops being
        written, and the run goes on, so the JUnit XML, the summary and the other reports are
        still written. As for an unwritable ``--agentv-results`` path found at start, a run
        that would have passed then ends as a usage error (exit code 4; a run whose tests
        failed keeps its 1, see ``plugin.pytest_sessionfinish``), and the summary's last line
        names the option and the OS error, once, instead of pytest's INTERNALERROR."""
        if self.results_error is None:
            self.results_error = (
                f"--agentv-results={self.settings.results} could not be written: {exc}; "
                "the results file is incomplete"
            )
        results, self._results = self._results, None
        if results is not None:
            with contextlib.suppress(OSError):  # the same error, flushing what is left
                results.close()

    def close(self) -> None:
        if self._results is not None:
            try:
                self._results.close()
            except OSError as exc:
                self.results_failed(exc)
            self._results = None
