"""``token_usage``: the tokens the target reported, within ``max_input``, ``max_output`` and
``max_total`` (input + output + cached).

Binary, as in AgentV: every configured limit must hold, and a count at its limit passes. A target
that reports no token usage gets score 0 with "No token usage data available in trace".
"""

from __future__ import annotations

from ..answers import metric_table
from ..results import js_number
from ..schema.base import reported_metric
from ..schema.checks import TokenUsageSpec
from .base import NEEDS_SETTINGS, EvaluationContext, EvaluationScore, entry_settings
from .limits import TRACE, no_trace_data


class TokenUsageEvaluator:
    kind = "token_usage"
    entry_needs = NEEDS_SETTINGS

    def evaluate(self, context: EvaluationContext) -> EvaluationScore:
        spec = entry_settings(context, TokenUsageSpec)
        limits = {
            "max_input": spec.max_input,
            "max_output": spec.max_output,
            "max_total": spec.max_total,
        }
        aspects = max(sum(1 for limit in limits.values() if limit is not None), 1)
        reported = (context.trace_summary or {}).get("token_usage")
        usage = metric_table(reported, "token_usage", TRACE) or {}
        counts = {key: reported_metric(usage.get(key)) for key in ("input", "output", "cached")}
        if counts.get("input") is None and counts.get("output") is None:
            return no_trace_data(
                "token usage",
                "Token usage not reported by the target",
                {"limits": limits, "token_usage": None},
                aspects,
            )
        tokens = {key: value or 0.0 for key, value in counts.items()}
        tokens["total"] = tokens["input"] + tokens["output"] + tokens["cached"]
        hits: list[str] = []
        misses: list[str] = []
        for label, key, limit in (
            ("Input", "input", spec.max_input),
            ("Output", "output", spec.max_output),
            ("Total", "total", spec.max_total),
        ):
            if limit is None:
                continue
            shown = f"{label} tokens {js_number(tokens[key])}"
            if tokens[key] <= limit:
                hits.append(f"{shown} <= {js_number(limit)}")
            else:
                misses.append(f"{shown} > {js_number(limit)}")
        shown = ", ".join(f"{key}={js_number(value)}" for key, value in tokens.items())
        return EvaluationScore.graded(
            0.0 if misses else 1.0,
            hits=tuple(hits),
            misses=tuple(misses),
            expected_aspect_count=aspects,
            reasoning=f"token_usage {shown}",
            details={"limits": limits, "token_usage": tokens},
        )
