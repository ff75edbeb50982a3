"""What the HTML and Markdown reports show, made from result rows: the run's facts, a tally
kept as rows arrive (counts, the worst cases, the filters' choices), and each case as a page
shows it.

Rows come from this run (already redacted) or from any results file (``rows.py`` reads them):
every row is redacted again here, its text made safe to show (a lone surrogate becomes U+FFFD,
bidirectional and control characters are shown as escapes instead of reordering or hiding
text) and very long text is cut, so that no page grows without bound.
"""

from __future__ import annotations

import heapq
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..baseline import UNCHANGED
from ..outcomes import trials_summary
from ..redaction import redact_obj
from ..results import fmt, metadata_tags

#: How many of the worst cases each list of the Markdown summary names.
WORST = 20
#: The longest text a report shows of one value (an answer, a question, a reasoning).
MAX_TEXT = 64 * 1024
#: Bidirectional controls (they reorder the text around them) and control characters.
_HIDDEN = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
#: How each kind of case is named: its verdict, or why it has none.
LABELS = {
    "pass": "pass",
    "borderline": "borderline",
    "fail": "fail",
    "error": "not graded",
    "skipped": "skipped",
}


def _visible(text: str) -> str:
    shown = _HIDDEN.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    if len(shown) > MAX_TEXT:
        cut = len(shown) - MAX_TEXT
        shown = f"{shown[:MAX_TEXT]}… [{cut:,} more characters: see the results file]"
    return shown


def _safe(value: Any) -> Any:
    if isinstance(value, str):
        return _visible(value)
    if isinstance(value, dict):
        return {_visible(str(key)): _safe(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_safe(item) for item in value]
    return value


def shown_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row as reports may show it: redacted, every string safe to show and bounded."""
    safe: dict[str, Any] = _safe(redact_obj(dict(row)))
    return safe


def kind(row: Mapping[str, Any]) -> str:
    """pass, borderline or fail for a graded case; else its status (error, skipped)."""
    status = row.get("status") or "graded"
    return str(row.get("verdict") or "fail") if status == "graded" else str(status)


def where(row: Mapping[str, Any]) -> str:
    """``file::id``: the case's name in reports, and its link in the HTML page."""
    file, case_id = row.get("file"), str(row.get("eval_id", ""))
    return f"{file}::{case_id}" if file else case_id


def _number(value: Any) -> float | None:
    """A number of a row as a float (a whole number beyond a float's range: infinite)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def case_cost(row: Mapping[str, Any]) -> float | None:
    """What the case cost: its model calls (judges, LLM targets) and what its target reported;
    None when a call went to a model without a known price."""
    usage = row.get("usage") or {}
    if usage.get("unpriced_calls"):
        return None
    reported = _number((row.get("trace_summary") or {}).get("cost_usd")) or 0.0
    return (_number(usage.get("cost_usd")) or 0.0) + reported


def case_tokens(row: Mapping[str, Any]) -> int:
    """Tokens of the case's model calls and those its target reported."""
    usage = row.get("usage") or {}
    reported = (row.get("trace_summary") or {}).get("token_usage") or {}
    target = sum(
        int(value)
        for key, value in reported.items()
        if key in ("input", "output", "prompt_tokens", "completion_tokens")
        and _number(value) is not None
    )
    return int(_number(usage.get("tokens")) or 0) + target


def latency_ms(row: Mapping[str, Any]) -> float | None:
    """How long the target took: measured by the run, else as the target reported it."""
    measured = _number(row.get("duration_ms"))
    return (
        measured
        if measured is not None
        else _number((row.get("trace_summary") or {}).get("duration_ms"))
    )


def sank_by(row: Mapping[str, Any]) -> str:
    """The evaluator that sank a failed case: a failed gate first, else the lowest score; in a
    composite, the member that sank it too."""
    names: list[str] = []
    evaluators = list(row.get("evaluator_results") or [])
    while evaluators:
        worst = min(
            evaluators, key=lambda e: (not e.get("gate_failed"), _number(e.get("score")) or 0)
        )
        gate = ", a required check not met" if worst.get("gate_failed") else ""
        score = fmt(_number(worst.get("score")))
        names.append(f"{worst.get('name')} ({worst.get('type')}) {score}{gate}")
        evaluators = list(worst.get("evaluator_results") or [])
    return " › ".join(names)


def why(row: Mapping[str, Any]) -> str:
    """One line on why a case did not pass: its first miss, else the reasoning."""
    misses = [str(m) for m in row.get("misses") or ()]
    return misses[0] if misses else str(row.get("reasoning") or row.get("error") or "")


def _evaluator_views(entries: Iterable[Mapping[str, Any]], depth: int = 0) -> list[dict[str, Any]]:
    views: list[dict[str, Any]] = []
    for entry in entries:
        details = dict(entry.get("details") or {})
        rubric = details.pop("rubric", None) or []
        members = entry.get("evaluator_results") or ()
        # A composite's own checks repeat its members' when it averaged them or one failed.
        own = not members or not (
            entry.get("error") or details.get("aggregator") == "weighted_average"
        )
        views.append(
            {
                **entry,
                "own": own,
                "depth": depth,
                "score": _number(entry.get("score")),
                "rubric": [
                    {**item, "met": bool(item.get("satisfied", item.get("passed")))}
                    for item in rubric
                    if isinstance(item, dict)
                ],
                "other_details": json.dumps(details, indent=2, ensure_ascii=False)
                if details
                else "",
            }
        )
        views += _evaluator_views(members, depth + 1)
    return views


def _names(entries: Iterable[Mapping[str, Any]]) -> list[str]:
    found: list[str] = []
    for entry in entries:
        found.append(str(entry.get("name")))
        found += _names(entry.get("evaluator_results") or ())
    return found


def case_view(row: Mapping[str, Any], anchor: str) -> dict[str, Any]:
    """A case as the page shows it (``row`` made safe with ``shown_row``)."""
    aggregation = row.get("aggregation")
    trials_line = ""
    if isinstance(aggregation, dict) and "pass_rate" in aggregation:
        trials_line = trials_summary(aggregation)  # type: ignore[arg-type]
    trace = row.get("trace_summary") or {}
    evaluators = _evaluator_views(row.get("evaluator_results") or ())
    return {
        "row": row,
        "anchor": anchor,
        "where": where(row),
        "kind": kind(row),
        "label": LABELS.get(kind(row), kind(row)),
        "score": _number(row.get("score")) if kind(row) in ("pass", "borderline", "fail") else None,
        "baseline": _number(row.get("baseline_score")),
        "delta": _number(row.get("delta")),
        "compared": "baseline_score" in row,
        "cost": case_cost(row),
        "tokens": case_tokens(row),
        "latency": latency_ms(row),
        "evaluators": evaluators,
        # The case's own checks, unless its evaluators show them (AgentV v2.5.8 rows may have
        # them only at the top).
        "own_checks": not any(
            e["rubric"] or e.get("hits") or e.get("misses") or e.get("assertions")
            for e in evaluators
        ),
        "own_reasoning": not any(e.get("reasoning") for e in evaluators),
        "evaluator_names": sorted(set(_names(row.get("evaluator_results") or ()))),
        "tags": sorted(set(metadata_tags(row.get("metadata")))),
        "tools_by_name": trace.get("tool_calls_by_name") or trace.get("tool_calls") or {},
        "tool_calls": [
            {**call, "input_json": json.dumps(call.get("input"), indent=2, ensure_ascii=False)}
            for call in row.get("tool_calls") or ()
            if isinstance(call, dict)
        ],
        "aggregation_json": json.dumps(aggregation, ensure_ascii=False)
        if isinstance(aggregation, dict) and not trials_line
        else "",
        "trials_line": trials_line,
    }


@dataclass
class RunFacts:
    """What a report says about the run as a whole (what is not known is None or empty)."""

    title: str
    started: str | None = None
    duration_s: float | None = None
    judge: str | None = None
    #: Model calls of the run: calls, reused, tokens, cost_usd, unpriced_calls.
    usage: dict[str, Any] | None = None
    budget: str | None = None
    calibration: list[str] = field(default_factory=list)
    comparison: list[str] = field(default_factory=list)
    source: str | None = None
    #: How the run's calls met the rate limits (``reports.pacing``).
    pacing: list[str] = field(default_factory=list)


@dataclass
class Tally:
    """What the reports need of all the rows, kept as they arrive (memory stays small: counts,
    names, and the worst ``WORST`` cases of each list)."""

    counts: dict[str, int] = field(default_factory=dict)
    graded: int = 0
    score_sum: float = 0.0
    targets: set[str] = field(default_factory=set)
    files: set[str] = field(default_factory=set)
    evaluators: set[str] = field(default_factory=set)
    #: The cases' metadata tags (``governance.mitre_atlas:AML.T0051``...).
    tags: set[str] = field(default_factory=set)
    first: str | None = None
    cost: float = 0.0
    tokens: int = 0
    unpriced: int = 0
    regressions: list[tuple[float, int, dict[str, Any]]] = field(default_factory=list)
    regressed: int = 0
    failures: list[tuple[float, int, dict[str, Any]]] = field(default_factory=list)
    ungraded: list[dict[str, Any]] = field(default_factory=list)
    seen: int = 0

    def add(self, row: Mapping[str, Any]) -> None:
        self.seen += 1
        key = kind(row)
        self.counts[key] = self.counts.get(key, 0) + 1
        score = _number(row.get("score"))
        if key in ("pass", "borderline", "fail") and score is not None:
            self.graded += 1
            self.score_sum += score
        if row.get("target"):
            self.targets.add(str(row["target"]))
        if row.get("file"):
            self.files.add(str(row["file"]))
        self.evaluators.update(_names(row.get("evaluator_results") or ()))
        self.tags.update(metadata_tags(row.get("metadata")))
        stamp = row.get("timestamp")
        if isinstance(stamp, str) and (self.first is None or stamp < self.first):
            self.first = stamp
        cost = case_cost(row)
        self.unpriced += cost is None
        self.cost += cost or 0.0
        self.tokens += case_tokens(row)
        brief = {
            "where": where(row),
            "score": score,
            "baseline": _number(row.get("baseline_score")),
            "delta": _number(row.get("delta")),
            "sank_by": sank_by(row),
            "why": why(row),
            "error": row.get("error"),
        }
        delta = _number(row.get("delta"))
        if delta is not None and delta <= -UNCHANGED:
            self.regressed += 1
            self._keep(self.regressions, -delta, brief)
        if key == "fail":
            self._keep(self.failures, -(score or 0.0), brief)
        if key == "error" and len(self.ungraded) < WORST:
            self.ungraded.append(brief)

    def _keep(
        self, heap: list[tuple[float, int, dict[str, Any]]], badness: float, brief: Any
    ) -> None:
        """Keep the ``WORST`` worst (first come first, among equals)."""
        item = (badness, -self.seen, brief)
        if len(heap) < WORST:
            heapq.heappush(heap, item)
        else:
            heapq.heappushpop(heap, item)

    @staticmethod
    def worst(heap: list[tuple[float, int, dict[str, Any]]]) -> list[dict[str, Any]]:
        return [brief for _, _, brief in sorted(heap, key=lambda item: (-item[0], -item[1]))]

    def mean(self) -> float | None:
        return self.score_sum / self.graded if self.graded else None

    def total_line(self) -> str:
        """``28 evaluations: 18 pass, 1 borderline, ...; mean score 0.91``."""
        parts = [f"{self.counts.get(key, 0)} {label}" for key, label in LABELS.items()]
        mean = self.mean()
        tail = f"; mean score {fmt(mean)}" if mean is not None else ""
        noun = "evaluation" if self.seen == 1 else "evaluations"
        return f"{self.seen} {noun}: {', '.join(parts)}{tail}"
