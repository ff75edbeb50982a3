"""``tool_trajectory``: which tools the agent called, in what order, with which arguments, and
how fast, with AgentV v2.5.8's scoring.

* ``any_order``: the fraction of ``minimums`` whose tool was called at least that often.
* ``in_order``: the expected steps as a subsequence of the calls, matched greedily; a call with
  the right tool but other arguments uses up that step.
* ``exact``: step *i* against call *i*; a different number of calls is a miss, not a penalty.

``args`` compares only the keys it lists (deep equality); ``args: any`` or no ``args`` matches
any call. A step's ``max_duration_ms`` (which AgentV's own parser drops) is one more check on a
matched call: at the limit passes, and a call that reports no duration skips the check. Calls come
from the answer's ``output_messages``; ``any_order`` falls back to the trace summary's counts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..answers import ToolCall, metric, metric_table, tool_calls
from ..results import js_number
from ..schema.checks import ToolTrajectorySpec, TrajectoryStep
from .base import NEEDS_SETTINGS, EvaluationContext, EvaluationScore, entry_settings
from .limits import TRACE
from .text import deep_equal

NO_TRACE = "No trace available for evaluation"


def args_match(expected: str | dict[str, Any] | None, actual: Any) -> bool:
    """Subset deep equality on the keys ``expected`` lists; ``any`` (the one string the settings
    accept) or nothing matches every call."""
    if expected is None or isinstance(expected, str):
        return True
    if actual is None:
        return False
    if not isinstance(actual, Mapping):
        return not expected
    return all(key in actual and deep_equal(value, actual[key]) for key, value in expected.items())


@dataclass
class _Tally:
    """Hits, misses and the checks they count, for the sequence modes."""

    hits: list[str] = field(default_factory=list)
    misses: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    matched: int = 0
    fast: int = 0
    steps: list[dict[str, Any]] = field(default_factory=list)

    def latency(self, step: TrajectoryStep, call: ToolCall, row: dict[str, Any]) -> None:
        """The step's latency check on the call that matched it."""
        limit = step.max_duration_ms
        if limit is None:
            return
        row["duration_ms"] = call.duration_ms
        if call.duration_ms is None:
            row["latency"] = "skipped"
            self.skipped.append(f"No duration data for {step.tool}; latency assertion skipped")
            return
        took, most = js_number(call.duration_ms), js_number(limit)
        if call.duration_ms <= limit:
            row["latency"] = "pass"
            self.fast += 1
            self.hits.append(f"{step.tool} completed in {took}ms (max: {most}ms)")
        else:
            row["latency"] = "fail"
            self.misses.append(f"{step.tool} took {took}ms (max: {most}ms)")

    def score(
        self, mode: str, expected: Sequence[TrajectoryStep], calls: Sequence[ToolCall]
    ) -> EvaluationScore:
        timed = sum(1 for step in expected if step.max_duration_ms is not None)
        total = len(expected) + timed - len(self.skipped)
        return EvaluationScore.graded(
            (self.matched + self.fast) / total if total > 0 else 1.0,
            hits=tuple(self.hits),
            misses=tuple(self.misses),
            expected_aspect_count=total,
            reasoning="; ".join(self.skipped) or None,
            details={"mode": mode, "tool_calls": [c.name for c in calls], "steps": self.steps},
        )


def _step_row(index: int, step: TrajectoryStep) -> dict[str, Any]:
    row: dict[str, Any] = {"step": index, "tool": step.tool, "matched": False, "position": None}
    if step.max_duration_ms is not None:
        row["max_duration_ms"] = step.max_duration_ms
    return row


def _in_order(expected: Sequence[TrajectoryStep], calls: Sequence[ToolCall]) -> _Tally:
    tally = _Tally()
    position = 0
    for index, step in enumerate(expected):
        row = _step_row(index, step)
        tally.steps.append(row)
        while position < len(calls):
            call = calls[position]
            if call.name != step.tool:
                position += 1
                continue
            row["position"] = position
            position += 1
            if args_match(step.args, call.args):
                row["matched"] = True
                tally.matched += 1
                tally.hits.append(f"Found {step.tool} at position {row['position']}")
                tally.latency(step, call, row)
            else:
                row["args"] = "mismatch"
                tally.misses.append(
                    f"Expected {step.tool} at position {index}: tool found at "
                    f"{row['position']} but args mismatch"
                )
            break
        else:
            tally.misses.append(
                f"Expected {step.tool} at position {index}, not found in remaining trace"
            )
    return tally


def _exact(expected: Sequence[TrajectoryStep], calls: Sequence[ToolCall]) -> _Tally:
    tally = _Tally()
    if len(calls) != len(expected):
        tally.misses.append(f"Expected {len(expected)} tool calls, got {len(calls)}")
    for index, step in enumerate(expected):
        row = _step_row(index, step)
        tally.steps.append(row)
        if index >= len(calls):
            tally.misses.append(f"Position {index}: expected {step.tool}, got nothing")
            continue
        call = calls[index]
        if call.name != step.tool:
            row["actual"] = call.name
            tally.misses.append(f"Position {index}: expected {step.tool}, got {call.name}")
        elif not args_match(step.args, call.args):
            row["position"], row["args"] = index, "mismatch"
            tally.misses.append(f"Position {index}: {step.tool} args mismatch")
        else:
            row["position"], row["matched"] = index, True
            tally.matched += 1
            tally.hits.append(f"Position {index}: {step.tool}")
            tally.latency(step, call, row)
    return tally


def _any_order(
    minimums: Mapping[str, float], counts: Mapping[str, Any], source: str
) -> EvaluationScore:
    if not minimums:
        return EvaluationScore.graded(
            1.0,
            hits=("No tool requirements specified",),
            details={"mode": "any_order", "source": source, "minimums": []},
        )
    hits: list[str] = []
    misses: list[str] = []
    rows: list[dict[str, Any]] = []
    for tool, required in minimums.items():
        actual = metric(counts.get(tool, 0), f"tool_calls_by_name.{tool}", TRACE) or 0
        met = actual >= required
        line = f"{tool}: called {js_number(actual)} times (required ≥{js_number(required)})"
        (hits if met else misses).append(line)
        rows.append({"tool": tool, "required": required, "calls": actual, "met": met})
    return EvaluationScore.graded(
        len(hits) / len(minimums),
        hits=tuple(hits),
        misses=tuple(misses),
        expected_aspect_count=len(minimums),
        details={"mode": "any_order", "source": source, "minimums": rows},
    )


class ToolTrajectoryEvaluator:
    kind = "tool_trajectory"
    entry_needs = NEEDS_SETTINGS

    def evaluate(self, context: EvaluationContext) -> EvaluationScore:
        spec = entry_settings(context, ToolTrajectorySpec)
        calls = tool_calls(context.output_messages or ())
        summary = context.trace_summary
        if not calls and summary is None:
            return EvaluationScore.graded(
                0.0,
                misses=(NO_TRACE,),
                expected_aspect_count=1,
                details={"mode": spec.mode, "tool_calls": None},
            )
        if spec.mode == "any_order":
            if calls:
                counts: dict[str, Any] = {}
                for call in calls:
                    counts[call.name] = counts.get(call.name, 0) + 1
                return _any_order(spec.minimums or {}, counts, "output_messages")
            by_name = (summary or {}).get("tool_calls_by_name")
            counted = metric_table(by_name, "tool_calls_by_name", TRACE) or {}
            return _any_order(spec.minimums or {}, counted, "trace_summary")
        expected = spec.expected or []
        if not expected:
            return EvaluationScore.graded(
                1.0,
                hits=("No tool sequence specified",),
                details={"mode": spec.mode, "tool_calls": [c.name for c in calls], "steps": []},
            )
        tally = _exact(expected, calls) if spec.mode == "exact" else _in_order(expected, calls)
        return tally.score(spec.mode, expected, calls)
