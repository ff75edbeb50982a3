"""``cost``: the case's cost in USD, as its target reported it, within a budget.

Binary, as in AgentV: a cost equal to the budget passes. A target that reports no cost gets score
0 with "No cost data available in trace" as the miss.
"""

from __future__ import annotations

from ..models import CostSpec
from .base import EvaluationContext, EvaluationScore, entry_settings, trace_number


def _usd(value: float) -> str:
    return f"${value:.4f}"


class CostEvaluator:
    kind = "cost"

    def evaluate(self, context: EvaluationContext) -> EvaluationScore:
        budget = entry_settings(context, CostSpec).budget
        cost = trace_number(context, "cost_usd")
        details = {"budget_usd": budget, "cost_usd": cost}
        if cost is None:
            return EvaluationScore.graded(
                0.0,
                misses=("No cost data available in trace",),
                expected_aspect_count=1,
                reasoning="Execution cost not reported by the target",
                details=details,
            )
        passed = cost <= budget
        return EvaluationScore.graded(
            1.0 if passed else 0.0,
            hits=(f"Cost {_usd(cost)} <= {_usd(budget)} budget",) if passed else (),
            misses=() if passed else (f"Cost {_usd(cost)} > {_usd(budget)} budget",),
            expected_aspect_count=1,
            reasoning=f"Execution cost {_usd(cost)} (budget: {_usd(budget)})",
            details=details,
        )
