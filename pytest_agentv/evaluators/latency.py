"""``latency``: the case's duration, as its target reported or measured it, within a threshold.

Binary, as in AgentV: a duration at the threshold passes. A target that reports no duration gets
score 0 with "No duration data available in trace" as the miss.
"""

from __future__ import annotations

from ..schema.checks import LatencySpec
from .base import (
    EvaluationContext,
    EvaluationScore,
    entry_settings,
    no_trace_data,
    trace_number,
    within_limit,
)
from .text import js_number


class LatencyEvaluator:
    kind = "latency"

    def evaluate(self, context: EvaluationContext) -> EvaluationScore:
        threshold = entry_settings(context, LatencySpec).threshold
        duration = trace_number(context, "duration_ms")
        details = {"threshold_ms": threshold, "duration_ms": duration}
        if duration is None:
            reasoning = "Execution duration not reported by the target"
            return no_trace_data("duration", reasoning, details)
        took, limit = js_number(duration), js_number(threshold)
        return within_limit(
            duration <= threshold,
            f"Duration {took}ms",
            f"{limit}ms threshold",
            f"Execution took {took}ms (threshold: {limit}ms)",
            details,
        )
