"""JUnit properties, the results file and the terminal summary.

Per-case data travels on the report as ``report.agentv`` (plain builtins, so pytest-xdist can
carry it to the controller). ``AgentvReporter`` is created on the controller only, like pytest's
own junitxml plugin: it writes the results file and the summary from the reports it receives.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import pytest

from .verdicts import fmt

if TYPE_CHECKING:
    from .settings import Settings

#: An eval item's result, as the plain dict that goes on its report.
result_key: pytest.StashKey[dict[str, Any]] = pytest.StashKey()
#: Results of ``assert_judged`` calls made by a test, and the model usage they caused.
judged_key = pytest.StashKey[list[dict[str, Any]]]()

_SUMMARY_FIELDS = ("status", "eval_id", "file", "score", "verdict", "error", "usage")
_JSON = {"ensure_ascii": False, "separators": (",", ":")}


def properties_for(data: Mapping[str, Any], prefix: str = "agentv") -> list[tuple[str, str]]:
    """JUnit ``<property>`` pairs for one graded (or ungraded) evaluation."""
    props: list[tuple[str, str]] = [
        (f"{prefix}.status", str(data.get("status", "graded"))),
        (f"{prefix}.score", f"{float(data.get('score') or 0):.4f}"),
        (f"{prefix}.verdict", str(data.get("verdict"))),
    ]
    for entry in data.get("evaluator_results") or ():
        props.append((f"{prefix}.evaluator.{entry['name']}.score", f"{float(entry['score']):.4f}"))
        props.append((f"{prefix}.evaluator.{entry['name']}.verdict", str(entry["verdict"])))
    props.append((f"{prefix}.hits", json.dumps(data.get("hits") or [], **_JSON)))  # type: ignore[arg-type]
    props.append((f"{prefix}.misses", json.dumps(data.get("misses") or [], **_JSON)))  # type: ignore[arg-type]
    usage = data.get("usage") or {}
    if usage.get("calls") or usage.get("reused"):
        props.append((f"{prefix}.tokens", str(usage.get("tokens", 0))))
        props.append((f"{prefix}.cost_usd", f"{float(usage.get('cost_usd') or 0):.6f}"))
    if data.get("error"):
        props.append((f"{prefix}.error", str(data["error"])))
    return props


def record_properties(item: pytest.Item, data: Mapping[str, Any], prefix: str = "agentv") -> None:
    # Appended to the item, not the report: junitxml writes them from the teardown report.
    item.user_properties.extend(properties_for(data, prefix))


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


def results_row(result: Mapping[str, Any]) -> dict[str, Any]:
    """A results-file line with AgentV's field names, from a ``CaseResult.to_dict()``."""
    evaluators = result.get("evaluator_results") or []
    row = {
        key: result.get(key)
        for key in (
            "timestamp",
            "eval_id",
            "dataset",
            "conversation_id",
            "score",
            "verdict",
            "hits",
            "misses",
            "candidate_answer",
            "target",
            "reasoning",
        )
    }
    if len(evaluators) == 1:
        row["evaluator_provider_request"] = evaluators[0].get("evaluator_provider_request")
    elif evaluators:
        row["evaluator_results"] = evaluators
    row["error"] = result.get("error")
    row["trace_summary"] = result.get("trace_summary")
    row["status"] = result.get("status")
    return row


class AgentvReporter:
    """Controller-side plugin object: results file and terminal summary."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.cases: list[dict[str, Any]] = []
        self.usage = {"calls": 0, "reused": 0, "tokens": 0, "cost_usd": 0.0}
        self._results: IO[str] | None = None
        if settings.results is not None:
            path = Path(settings.results)
            path.parent.mkdir(parents=True, exist_ok=True)
            self._results = path.open("w", encoding="utf-8")

    def _add_usage(self, usage: Mapping[str, Any] | None) -> None:
        for key in self.usage:
            self.usage[key] += (usage or {}).get(key) or 0

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        data = getattr(report, "agentv", None)
        if not isinstance(data, dict):
            return
        rows = [data["case"]] if isinstance(data.get("case"), dict) else []
        rows += [row for row in data.get("judged") or () if isinstance(row, dict)]
        for row in rows:
            self.cases.append({key: row.get(key) for key in _SUMMARY_FIELDS})
            self._add_usage(row.get("usage"))
            if self._results is not None:
                self._results.write(json.dumps(results_row(row), **_JSON) + "\n")  # type: ignore[arg-type]
        if rows and self._results is not None:
            self._results.flush()
        # pytest keeps every report until the session ends: keep only what the summary needs,
        # not the prompts and answers (10,000 LLM-judged cases would hold hundreds of MB).
        report.agentv = {"summary": self.cases[-len(rows) :] if rows else []}  # type: ignore[attr-defined]

    @pytest.hookimpl
    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.cases and not (self.usage["calls"] or self.usage["reused"]):
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
                    terminalreporter.write_line(f"  not graded: {where}: {case['error']}")
        u = self.usage
        terminalreporter.write_line(
            f"agentv: {u['calls']} model calls made, {u['reused']} replies reused from the store, "
            f"{u['tokens']:,} tokens, ${u['cost_usd']:.4f}"
        )

    def close(self) -> None:
        if self._results is not None:
            self._results.close()
            self._results = None
