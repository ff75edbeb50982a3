"""``cost``: the case's cost in USD, as its target reported it, within a budget.

Binary, as in AgentV: a cost equal to the budget passes. A target that reports no cost gets score
0 with "No cost data available in trace" as the miss.
"""

from __future__ import annotations

from ..schema.checks import CostSpec
from .base import (
    EvaluationContext,
    EvaluationScore,
    entry_settings,
    no_trace_data,
    trace_number,
    within_limit,
)


def _usd(value: float) -> str:
    return f"${value:.4f}"


class CostEvaluator:
    kind = "cost"

    def evaluate(self, context: EvaluationContext) -> EvaluationScore:
        budget = entry_settings(context, CostSpec).budget
        cost = trace_number(context, "cost_usd")
        details = {"budget_usd": budget, "cost_usd": cost}
        if cost is None:
            return no_trace_data("cost", "Execution cost not reported by the target", details)
        return within_limit(
            cost <= budget,
            f"Cost {_usd(cost)}",
            f"{_usd(budget)} budget",
            f"Execution cost {_usd(cost)} (budget: {_usd(budget)})",
            details,
        )
