"""The ``agentv summary`` section at the end of the terminal report: totals by verdict, what
was not graded and why, calibration, trials, model calls (every request sent) and cost, what
the run learnt about its endpoints, the budget, and the comparison with a baseline.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import pytest

from ..redaction import printable
from ..results import fmt, js_fixed

if TYPE_CHECKING:
    from ..baseline import PreviousResults
    from ..results import ResultRow, Spend
    from ..settings import Settings

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


def _ok(canary: Mapping[str, Any]) -> bool:
    return bool(canary["verdict"] == canary["expected"])


def budget_line(limit: float, spend: Spend) -> str:
    """Spent against ``--agentv-budget-usd``; a run that reached it, or made a call whose cost
    is unknown, fails."""
    from ..results import UNKNOWN_COST, usd

    line = f"agentv budget: {usd(spend.usd)} spent of {usd(limit)} (--agentv-budget-usd)"
    if spend.unknown:
        line += f", and {spend.unknown} model calls {UNKNOWN_COST}"
    if spend.refused:
        return f"{line}; {spend.refused} model calls were not started: the run fails"
    if spend.usd >= limit or spend.unknown:
        return f"{line}; the budget was reached: the run fails"
    return line


class Summary:
    """What the summary needs of each case (not its prompts and answers: pytest keeps every
    report until the session ends), and what each process's run knew at its end."""

    def __init__(self, settings: Settings, baseline: PreviousResults | None) -> None:
        self.settings = settings
        self.baseline = baseline
        self.cases: list[dict[str, Any]] = []
        self.collected: set[tuple[str, str, str]] = set()
        self.calibrations: list[dict[str, Any]] = []
        #: What the run's processes learnt about model endpoints, each said once.
        self.endpoint_notes: dict[str, None] = {}
        #: Where each process left its workspaces (``--agentv-keep-workspaces``).
        self.workspaces_kept: list[str] = []
        #: The run's spend and refused calls so far (``--agentv-budget-usd``).
        self.spend: Callable[[], Spend] | None = None
        self.usage = {"calls": 0, "reused": 0, "tokens": 0, "cost_usd": 0.0, "unpriced_calls": 0}
        #: Cases that ran several times, their trials, and a fixed count's equivalent.
        self.trials = {"cases": 0, "run": 0, "planned": 0}
        #: How the calls met the rate limits: the controller's report, or each process's.
        self.pacing: list[dict[str, Any]] = []

    def add(self, row: ResultRow) -> dict[str, Any]:
        """Count one case's row; return what the summary keeps of it."""
        summary = {key: row.get(key) for key in _SUMMARY_FIELDS}
        summary["compared"] = "baseline_score" in row
        self.cases.append(summary)
        self._add_usage(row["usage"])
        aggregation = row.get("aggregation")
        if isinstance(aggregation, dict):
            self.trials["cases"] += 1
            self.trials["run"] += aggregation["trials"]
            self.trials["planned"] += aggregation["planned"]
        return summary

    def _add_usage(self, usage: Mapping[str, Any]) -> None:
        for key in self.usage:
            self.usage[key] += usage.get(key) or 0

    def add_facts(self, facts: Mapping[str, Any]) -> None:
        """What one process's run knew at its end (see ``AgentvRun.facts``)."""
        for file, dataset, case_id in facts.get("collected") or ():
            self.collected.add((file, dataset, case_id))
        self.endpoint_notes.update(dict.fromkeys(facts.get("endpoint_notes") or ()))
        kept = facts.get("workspaces_kept")
        if isinstance(kept, str):
            self.workspaces_kept.append(kept)
        calibration = facts.get("calibration")
        if isinstance(calibration, dict):
            self.calibrations.append(calibration)
            self._add_usage(calibration.get("usage") or {})
        pacing = facts.get("pacing")
        if isinstance(pacing, dict):
            self.pacing.append(pacing)

    def pacing_lines(self) -> list[str]:
        from .pacing import merge, pacing_lines

        return pacing_lines(merge(self.pacing))

    def write(self, terminalreporter: pytest.TerminalReporter) -> None:
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
        for line in self.calibration_lines():
            terminalreporter.write_line(printable(line))
        t = self.trials
        if t["cases"]:
            cases = f"{t['cases']} case{'s' if t['cases'] != 1 else ''}"
            terminalreporter.write_line(
                f"agentv trials: {t['run']} run for {cases}; a fixed count would run "
                f"{t['planned']} ({t['planned'] - t['run']} saved)"
            )
        from ..results import UNKNOWN_COST

        u = self.usage
        cost = (
            f"cost unknown ({u['unpriced_calls']} of {u['calls']} calls {UNKNOWN_COST})"
            if u["unpriced_calls"]
            else f"${js_fixed(u['cost_usd'], 4)}"
        )
        terminalreporter.write_line(
            f"agentv: {u['calls']} model calls made, {u['reused']} replies reused from the store, "
            f"{u['tokens']:,} tokens, {cost}"
        )
        for line in self.pacing_lines():
            terminalreporter.write_line(printable(line))
        for note in self.endpoint_notes:
            terminalreporter.write_line(printable(f"agentv: {note}"))
        for folder in sorted(self.workspaces_kept):
            terminalreporter.write_line(
                printable(f"agentv: workspaces kept in {folder} (--agentv-keep-workspaces)")
            )
        if self.spend is not None and self.settings.budget_usd is not None:
            terminalreporter.write_line(budget_line(self.settings.budget_usd, self.spend()))
        for line in self.comparison_lines():
            terminalreporter.write_line(printable(line))

    def comparison_lines(self) -> list[str]:
        """The comparison with ``--agentv-baseline`` (nothing without one)."""
        if self.baseline is None:
            return []
        from ..baseline import comparison_lines

        compared = [case for case in self.cases if case["compared"]]
        return comparison_lines(
            self.baseline, compared, self.collected, self.settings.max_regression
        )

    def calibration_lines(self) -> list[str]:
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
        spend = self.spend()
        return spend.usd >= self.settings.budget_usd or spend.refused > 0 or spend.unknown > 0
