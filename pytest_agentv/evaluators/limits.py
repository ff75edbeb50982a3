"""What the kinds that hold an answer's cost to a limit share (latency, cost, token usage: the
numbers of the trace summary): how they read the trace, and how a result is worded, as AgentV
words it. A trace that does not report the number scores 0, never a pass; one that reports a
number that is not a metric (negative, not a number, NaN or infinite) leaves the case not graded;
a whole number too large for a float is over any limit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..answers import metric
from .base import EvaluationContext, EvaluationScore

#: Who reported a number an evaluator finds in the trace summary, as ``metric`` names it.
TRACE = "the trace summary"


@dataclass(frozen=True)
class TraceLimit:
    """A binary check of one number the trace reports (a duration, a cost) against a limit,
    worded as AgentV words it: ``<shown> <= <bound>`` or ``... > ...``; at the limit passes."""

    key: str
    what: str
    #: The limit's key in the result's details.
    limit_key: str
    #: The reasoning when the trace does not report the number.
    unreported: str
    shown: Callable[[float], str]
    bound: Callable[[float], str]
    reasoning: Callable[[float, float], str]

    def check(self, context: EvaluationContext, limit: float) -> EvaluationScore:
        value = trace_number(context, self.key)
        details = {self.limit_key: limit, self.key: (context.trace_summary or {}).get(self.key)}
        if value is None:
            return no_trace_data(self.what, self.unreported, details)
        passed = value <= limit
        comparison = f"{self.shown(value)} {'<=' if passed else '>'} {self.bound(limit)}"
        return EvaluationScore.graded(
            1.0 if passed else 0.0,
            hits=(comparison,) if passed else (),
            misses=() if passed else (comparison,),
            expected_aspect_count=1,
            reasoning=self.reasoning(value, limit),
            details=details,
        )


def trace_number(context: EvaluationContext, key: str) -> float | None:
    """A number of the case's trace summary (``duration_ms``, ``cost_usd``), if reported; one
    that is not a metric leaves the case not graded (``metric``)."""
    return metric((context.trace_summary or {}).get(key), key, TRACE)


def no_trace_data(
    what: str, reasoning: str, details: dict[str, Any], aspects: int = 1
) -> EvaluationScore:
    """AgentV's result for a trace that does not report what a threshold kind checks: score 0."""
    return EvaluationScore.graded(
        0.0,
        misses=(f"No {what} data available in trace",),
        expected_aspect_count=aspects,
        reasoning=reasoning,
        details=details,
    )
