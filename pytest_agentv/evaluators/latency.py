"""``latency``: the case's duration, as its target reported or measured it, within a threshold.

Binary, as in AgentV: a duration at the threshold passes. A target that reports no duration gets
score 0 with "No duration data available in trace" as the miss.
"""

from __future__ import annotations

from ..results import js_number
from ..schema.checks import LatencySpec
from .base import NEEDS_SETTINGS, EvaluationContext, EvaluationScore, entry_settings
from .limits import TraceLimit

_LATENCY = TraceLimit(
    key="duration_ms",
    what="duration",
    limit_key="threshold_ms",
    unreported="Execution duration not reported by the target",
    shown=lambda took: f"Duration {js_number(took)}ms",
    bound=lambda limit: f"{js_number(limit)}ms threshold",
    reasoning=lambda took, limit: (
        f"Execution took {js_number(took)}ms (threshold: {js_number(limit)}ms)"
    ),
)


class LatencyEvaluator:
    kind = "latency"
    entry_needs = NEEDS_SETTINGS

    def evaluate(self, context: EvaluationContext) -> EvaluationScore:
        return _LATENCY.check(context, entry_settings(context, LatencySpec).threshold)
