"""``latency``: the case's duration, as its target reported or measured it, within a threshold.

Binary, as in AgentV: a duration at the threshold passes. A target that reports no duration gets
score 0 with "No duration data available in trace" as the miss.
"""

from __future__ import annotations

from ..models import LatencySpec
from .base import EvaluationContext, EvaluationScore, entry_settings, js_number, trace_number


class LatencyEvaluator:
    kind = "latency"

    def evaluate(self, context: EvaluationContext) -> EvaluationScore:
        threshold = entry_settings(context, LatencySpec).threshold
        duration = trace_number(context, "duration_ms")
        details = {"threshold_ms": threshold, "duration_ms": duration}
        if duration is None:
            return EvaluationScore.graded(
                0.0,
                misses=("No duration data available in trace",),
                expected_aspect_count=1,
                reasoning="Execution duration not reported by the target",
                details=details,
            )
        passed = duration <= threshold
        shown = f"Duration {js_number(duration)}ms"
        limit = f"{js_number(threshold)}ms threshold"
        return EvaluationScore.graded(
            1.0 if passed else 0.0,
            hits=(f"{shown} <= {limit}",) if passed else (),
            misses=() if passed else (f"{shown} > {limit}",),
            expected_aspect_count=1,
            reasoning=f"Execution took {js_number(duration)}ms "
            f"(threshold: {js_number(threshold)}ms)",
            details=details,
        )
