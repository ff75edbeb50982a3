"""``cost``: the case's cost in USD, as its target reported it, within a budget.

Binary, as in AgentV: a cost equal to the budget passes. A target that reports no cost gets score
0 with "No cost data available in trace" as the miss.
"""

from __future__ import annotations

from ..results import js_fixed
from ..schema.checks import CostSpec
from .base import NEEDS_SETTINGS, EvaluationContext, EvaluationScore, entry_settings
from .limits import TraceLimit


def _usd(value: float) -> str:
    return f"${js_fixed(value, 4)}"


_COST = TraceLimit(
    key="cost_usd",
    what="cost",
    limit_key="budget_usd",
    unreported="Execution cost not reported by the target",
    shown=lambda cost: f"Cost {_usd(cost)}",
    bound=lambda budget: f"{_usd(budget)} budget",
    reasoning=lambda cost, budget: f"Execution cost {_usd(cost)} (budget: {_usd(budget)})",
)


class CostEvaluator:
    kind = "cost"
    entry_needs = NEEDS_SETTINGS

    def evaluate(self, context: EvaluationContext) -> EvaluationScore:
        return _COST.check(context, entry_settings(context, CostSpec).budget)
