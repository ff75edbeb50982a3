"""``execution-metrics`` (AgentV v2.10): what the agent spent against limits — tool calls, model
calls (assistant messages), tokens (input + output), cost, duration — and how much of its tool
use was exploration, as AgentV v4.42.4 scores it: the share of checks that pass, a number the
trace does not report counting as a failed check.
"""

from __future__ import annotations

from typing import Any

from ..answers import metric, metric_table, tool_calls
from ..results import AssertionRow, js_number
from ..schema.base import reported_metric
from ..schema.checks import ExecutionMetricsSpec
from .base import NEEDS_SETTINGS, EvaluationContext, EvaluationScore, entry_settings
from .limits import TRACE, trace_number

#: Tools AgentV counts as exploration (``DEFAULT_EXPLORATION_TOOLS``).
EXPLORATION_TOOLS = (
    *("read", "grep", "glob", "search", "list"),
    *("Read", "Grep", "Glob", "WebSearch", "WebFetch"),
)


def _limit(text: str, value: float, most: float, unit: str = "") -> AssertionRow:
    ok = value <= most
    shown, bound = f"{js_number(value)}{unit}", f"{js_number(most)}{unit}"
    return AssertionRow(text=f"{text} {shown} {'<=' if ok else '>'} {bound} max", passed=ok)


class ExecutionMetricsEvaluator:
    kind = "execution_metrics"
    entry_needs = NEEDS_SETTINGS

    def evaluate(self, context: EvaluationContext) -> EvaluationScore:
        spec = entry_settings(context, ExecutionMetricsSpec)
        summary = context.trace_summary
        thresholds = spec.model_dump(exclude_none=True)
        if spec.target_exploration_ratio is not None:
            thresholds.setdefault("exploration_tolerance", 0.2)
        needs_trace = (spec.max_tool_calls, spec.max_llm_calls, spec.target_exploration_ratio)
        if summary is None and any(n is not None for n in needs_trace):
            return EvaluationScore.graded(
                0.0,
                assertions=(AssertionRow(text="No trace summary available", passed=False),),
                expected_aspect_count=1,
                evaluator_raw_request={"type": "execution-metrics", "config": thresholds},
            )
        trace = summary or {}
        checks: list[AssertionRow] = []
        actual: dict[str, Any] = {}
        calls = trace_number(context, "event_count") or 0.0
        if spec.max_tool_calls is not None:
            actual["tool_calls"] = calls
            checks.append(_limit("Tool calls", calls, spec.max_tool_calls))
        if spec.max_llm_calls is not None:
            messages = context.output_messages or ()
            llm = trace.get("llm_call_count")
            if llm is None and messages:
                llm = sum(1 for m in messages if m.get("role") == "assistant")
            count = metric(llm, "llm_call_count", TRACE)
            if count is None:
                checks.append(AssertionRow(text="LLM call count data not available", passed=False))
            else:
                actual["llm_calls"] = count
                checks.append(_limit("LLM calls", count, spec.max_llm_calls))
        if spec.max_tokens is not None:
            usage = metric_table(trace.get("token_usage"), "token_usage", TRACE)
            if usage is None:
                checks.append(AssertionRow(text="Token usage data not available", passed=False))
            else:
                total = (usage.get("input") or 0) + (usage.get("output") or 0)
                actual["tokens"] = total
                checks.append(_limit("Total tokens", total, spec.max_tokens))
        for key, most, what in (
            ("cost_usd", spec.max_cost_usd, "Cost"),
            ("duration_ms", spec.max_duration_ms, "Duration"),
        ):
            if most is None:
                continue
            value = trace_number(context, key)
            if value is None:
                checks.append(AssertionRow(text=f"{what} data not available", passed=False))
                continue
            actual[key] = value
            if key == "duration_ms":
                checks.append(_limit(what, value, most, "ms"))
            else:
                ok = value <= most
                said = f"Cost ${value:.4f} {'<=' if ok else '>'} ${most:.4f} max"
                checks.append(AssertionRow(text=said, passed=ok))
        if spec.target_exploration_ratio is not None:
            checks.append(self._exploration(context, spec, calls, actual))
        passed = sum(1 for check in checks if check["passed"])
        return EvaluationScore.graded(
            passed / len(checks) if checks else 0.0,
            assertions=checks,
            expected_aspect_count=len(checks) or 1,
            evaluator_raw_request={
                "type": "execution-metrics",
                "config": thresholds,
                "actual": actual or None,
            },
        )

    @staticmethod
    def _exploration(
        context: EvaluationContext,
        spec: ExecutionMetricsSpec,
        calls: float,
        actual: dict[str, Any],
    ) -> AssertionRow:
        target = spec.target_exploration_ratio or 0.0
        tolerance = 0.2 if spec.exploration_tolerance is None else spec.exploration_tolerance
        if not calls:
            return AssertionRow(
                text="Exploration ratio not available (no tool calls)", passed=False
            )
        by_name = (
            metric_table(
                (context.trace_summary or {}).get("tool_calls_by_name"), "tool_calls_by_name", TRACE
            )
            or {}
        )
        if not by_name:
            for call in tool_calls(context.output_messages or ()):
                by_name[call.name] = by_name.get(call.name, 0) + 1
        explored = sum(reported_metric(by_name.get(tool)) or 0 for tool in EXPLORATION_TOOLS)
        ratio = explored / calls
        actual["exploration_ratio"] = ratio
        diff = abs(ratio - target)
        if diff <= tolerance:
            text = f"Exploration ratio {ratio:.2f} within tolerance of target {js_number(target)}"
            return AssertionRow(text=text, passed=True)
        text = (
            f"Exploration ratio {ratio:.2f} outside tolerance of target {js_number(target)} "
            f"(diff: {diff:.2f}, tolerance: {js_number(tolerance)})"
        )
        return AssertionRow(text=text, passed=False)
