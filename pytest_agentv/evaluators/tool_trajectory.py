"""``tool_trajectory``: which tools the agent called, in what order, with which arguments, and
how fast, with AgentV v2.5.8's scoring.

* ``any_order``: the fraction of ``minimums`` whose tool was called at least that often.
* ``in_order``: the expected steps as a subsequence of the calls, matched greedily; a call with
  the right tool but other arguments uses up that step.
* ``exact``: step *i* against call *i*; a different number of calls is a miss, not a penalty.

``args`` compares only the keys it lists (deep equality); ``args: any`` or no ``args`` matches
any call. A step's ``input`` and ``output`` (which AgentV v4 drops; its examples write them)
list what the call must have been given and have returned: keys, and list items in order. A
step's ``max_duration_ms`` (which AgentV's own parser drops) is one more check on a matched
call: at the limit passes, and a call that reports no duration skips the check. Calls come from
the answer's ``output_messages``; ``any_order`` falls back to the trace summary's counts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..answers import ToolCall, metric, metric_table, tool_calls
from ..results import AssertionRow, js_number
from ..schema.checks import ToolTrajectorySpec, TrajectoryStep
from .base import NEEDS_SETTINGS, EvaluationContext, EvaluationScore, entry_settings
from .limits import TRACE
from .text import deep_equal

NO_TRACE = "No trace available for evaluation"


def _field(value: Any, path: str) -> Any:
    """A dotted path into nested mappings; ``_MISSING`` where it leads nowhere."""
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return _MISSING
        value = value[part]
    return value


_MISSING = object()


def args_match(
    expected: str | dict[str, Any] | None, actual: Any, mode: str | list[str] = "superset"
) -> bool:
    """AgentV's argument comparison (``argsMatch``): ``exact`` deep equality, ``superset``
    (the keys ``expected`` lists), ``subset`` (no key ``expected`` lacks), ``ignore``, or the
    listed field paths. ``any`` (the one string the settings accept) or nothing matches."""
    if expected is None or isinstance(expected, str) or mode == "ignore":
        return True
    if actual is None:
        return False
    if isinstance(mode, list):
        for path in mode:
            want = _field(expected, path)
            if want is _MISSING:
                continue
            got = _field(actual, path)
            if got is _MISSING or not deep_equal(want, got):
                return False
        return True
    if not isinstance(actual, Mapping):
        return mode == "superset" and not expected
    if mode == "exact":
        return deep_equal(expected, actual)
    if mode == "subset":
        return all(key in expected and deep_equal(actual[key], expected[key]) for key in actual)
    return all(key in actual and deep_equal(value, actual[key]) for key, value in expected.items())


def holds(expected: Any, actual: Any) -> bool:
    """Whether ``actual`` holds what ``expected`` lists: a mapping's keys, each holding its
    value; a list's items, in order, among the actual list's; any other value equal."""
    if isinstance(expected, Mapping):
        return isinstance(actual, Mapping) and all(
            key in actual and holds(value, actual[key]) for key, value in expected.items()
        )
    if isinstance(expected, list):
        if not isinstance(actual, list):
            return False
        rest = iter(actual)
        return all(any(holds(item, candidate) for candidate in rest) for item in expected)
    return deep_equal(expected, actual)


def call_fits(step: TrajectoryStep, call: ToolCall, mode: str | list[str]) -> bool:
    """Whether a call of the step's tool is the step: its ``args`` (compared by ``mode``), and
    what the call was given and returned holding the step's ``input`` and ``output``."""
    return (
        args_match(step.args, call.args, mode)
        and (step.input is None or holds(step.input, call.args))
        and (step.output is None or holds(step.output, call.output))
    )


def step_mode(step: TrajectoryStep, spec: ToolTrajectorySpec, v4: bool) -> str | list[str]:
    """A step's ``args_match``: its own, the evaluator's, else the file generation's default
    (``exact`` since AgentV v2.7.1, ``superset`` in v2.5.8)."""
    return step.args_match or spec.args_match or ("exact" if v4 else "superset")


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


Modes = Sequence[str | list[str]]


def _in_order(
    expected: Sequence[TrajectoryStep], calls: Sequence[ToolCall], modes: Modes
) -> _Tally:
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
            if call_fits(step, call, modes[index]):
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


def _exact(expected: Sequence[TrajectoryStep], calls: Sequence[ToolCall], modes: Modes) -> _Tally:
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
        elif not call_fits(step, call, modes[index]):
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


def _superset(
    expected: Sequence[TrajectoryStep], calls: Sequence[ToolCall], modes: Modes
) -> EvaluationScore:
    """``superset``: each expected step matches a call of its own, in any order; other calls
    are allowed."""
    used: set[int] = set()
    checks: list[AssertionRow] = []
    for step, mode in zip(expected, modes, strict=True):
        found = next(
            (
                index
                for index, call in enumerate(calls)
                if index not in used and call.name == step.tool and call_fits(step, call, mode)
            ),
            None,
        )
        if found is None:
            text = f"Expected {step.tool} not found in actual trajectory"
            checks.append(AssertionRow(text=text, passed=False))
        else:
            used.add(found)
            checks.append(AssertionRow(text=f"Found {step.tool} at position {found}", passed=True))
    return _counted(checks, len(expected), "superset", calls)


def _subset(
    expected: Sequence[TrajectoryStep], calls: Sequence[ToolCall], modes: Modes
) -> EvaluationScore:
    """``subset``: every call matches some expected step (steps may be reused)."""
    if not calls or not expected:
        ok = not calls
        text = (
            (
                "No tool calls and no expected tools"
                if not expected
                else "No actual tool calls (trivially a subset)"
            )
            if ok
            else f"{len(calls)} unexpected tool call(s) with empty allowed list"
        )
        return _counted(
            [AssertionRow(text=text, passed=ok)], 0 if ok else len(calls), "subset", calls
        )
    checks = []
    for index, call in enumerate(calls):
        allowed = any(
            call.name == step.tool and call_fits(step, call, mode)
            for step, mode in zip(expected, modes, strict=True)
        )
        verb = "is" if allowed else "is not"
        text = f"Position {index}: {call.name} {verb} in allowed set"
        checks.append(AssertionRow(text=text, passed=allowed))
    return _counted(checks, len(calls), "subset", calls)


def _counted(
    checks: list[AssertionRow], count: int, mode: str, calls: Sequence[ToolCall]
) -> EvaluationScore:
    passed = sum(1 for check in checks if check["passed"])
    return EvaluationScore.graded(
        passed / count if count else float(passed == len(checks)),
        assertions=checks,
        expected_aspect_count=count,
        details={"mode": mode, "tool_calls": [c.name for c in calls]},
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
        if not expected and spec.mode == "subset":
            return _subset(expected, calls, [])
        if not expected:
            said = "No expected tools specified" if spec.mode == "superset" else None
            return EvaluationScore.graded(
                1.0,
                hits=(said or "No tool sequence specified",),
                details={"mode": spec.mode, "tool_calls": [c.name for c in calls], "steps": []},
            )
        modes = [step_mode(step, spec, context.eval_case.v4) for step in expected]
        if spec.mode in ("superset", "subset"):
            check = _superset if spec.mode == "superset" else _subset
            return check(expected, calls, modes)
        sequence = _exact if spec.mode == "exact" else _in_order
        return sequence(expected, calls, modes).score(spec.mode, expected, calls)
