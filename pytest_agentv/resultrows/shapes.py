"""What each field of a results row that a reader uses must be, and a score.

A field of the wrong type (an answer that is an object, ``hits`` that are not a list of
strings, an incomplete trials aggregate) is named with where it is and what it must be, so that
``resultrows`` can refuse its row at ``file:line`` instead of a report failing further on. Null
is the same as absent.
"""

from __future__ import annotations

import json
import math
from typing import Any, get_type_hints

from ..results import AggregationRow


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def score_of(value: Any) -> float | None:
    """A score as rows hold it: a number from 0 to 1, else None (a bool is no number; an
    integer beyond a float's range is not finite)."""
    if not _number(value):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) and 0 <= number <= 1 else None


#: A shape: a type (``float``: any number), ``[shape]`` (a list of such), ``{field: shape}``
#: (an object whose fields have those shapes) or a tuple of shapes (any of them).
Shape = Any
_TEXTS = [str]
_MESSAGES = [{"tool_calls": [dict]}]
_CHECKS = [{"text": str, "evidence": str}]
#: An evaluator's result: ours and v2.5.8's (members in ``evaluator_results``), v4's (``scores``).
_ENTRY: dict[str, Shape] = {
    **dict.fromkeys(("name", "type", "verdict", "reasoning", "error"), str),
    "score": float,
    "weight": float,
    "hits": _TEXTS,
    "misses": _TEXTS,
    "assertions": _CHECKS,
    "details": {"rubric": [dict]},
}
_ENTRY["evaluator_results"] = _ENTRY["scores"] = [_ENTRY]
_COUNTS = {"token_usage": dict, "cost_usd": float, "duration_ms": float}
_ROW: dict[str, Shape] = {
    **dict.fromkeys(
        (
            "dataset suite file target target_used conversation_id timestamp status verdict "
            "execution_status failure_reason_code error reasoning candidate_answer question "
            "expected_outcome"
        ).split(),
        str,
    ),
    **_COUNTS,
    "line": int,
    "hits": _TEXTS,
    "misses": _TEXTS,
    "assertions": _CHECKS,
    "evaluator_results": [_ENTRY],
    "scores": [_ENTRY],
    **{key: [dict] for key in ("tool_calls", "trials", "input_messages")},
    "turns": [{"assertions": _CHECKS, "input": str, "answer": str}],
    "output_messages": _MESSAGES,
    "output": (str, _MESSAGES),
    "input": (str, [dict]),
    "execution_error": dict,
    "aggregation": get_type_hints(AggregationRow),
    "usage": {"tokens": float, "cost_usd": float, "unpriced_calls": float},
    "trace_summary": {**_COUNTS, "tool_calls_by_name": dict},
    "trace": {**_COUNTS, "tool_calls": dict, "messages": _MESSAGES},
}
_NAMES = {
    str: "a string",
    float: "a number",
    int: "a whole number",
    bool: "true or false",
    dict: "an object",
}


def _name(shape: Shape) -> str:
    if isinstance(shape, tuple):
        return " or ".join(map(_name, shape))
    if isinstance(shape, list):
        return f"a list of {_name(shape[0]).split(' ', 1)[1]}s"
    return _NAMES[dict if isinstance(shape, dict) else shape]


def _fits(value: Any, shape: Shape) -> bool:
    if isinstance(shape, tuple):
        return any(_fits(value, one) for one in shape)
    if isinstance(shape, (list, dict)):
        return isinstance(value, type(shape))
    if shape in (float, int):
        return _number(value) and (shape is float or isinstance(value, int))
    return isinstance(value, shape)


def _misfit(value: Any, shape: Shape, where: str) -> str | None:
    """Where ``value`` first departs from ``shape``, and how; None when it fits."""
    if not _fits(value, shape):
        return f"'{where}' is {_kind(value)}; it must be {_name(shape)}"
    if isinstance(shape, tuple):
        return _misfit(value, next(one for one in shape if _fits(value, one)), where)
    inner: list[tuple[str, Shape, Any]] = []
    if isinstance(shape, list):
        inner = [(f"{where}[{i}]", shape[0], item) for i, item in enumerate(value)]
    elif isinstance(shape, dict):
        inner = [(f"{where}.{key}", one, value.get(key)) for key, one in shape.items()]
        if shape is _ENTRY and out_of_range(value.get("score")):
            return f"'{where}.score' is {shown(value['score'])}; a score is from 0 to 1"
    for place, one, item in inner:
        if item is not None and (problem := _misfit(item, one, place)):
            return problem
        if item is None and isinstance(shape, list):
            return f"'{place}' is null; it must be {_name(one)}"
    return None


def out_of_range(value: Any) -> bool:
    return _number(value) and score_of(value) is None


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return json.dumps(value)
    if _number(value):
        return f"the number {shown(value)}"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "an object"


def shown(value: Any) -> str:
    """A value as a message shows it: short (a 400-digit number is not printed whole)."""
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 24 else f"{text[:20]}... ({len(text):,} characters)"


def misfit(row: dict[str, Any]) -> str | None:
    """The first field of a (snake_cased) row that is not what it must be, and how; None when
    every one is."""
    for key, shape in _ROW.items():
        if row.get(key) is not None and (problem := _misfit(row[key], shape, key)):
            return problem
    aggregation = row.get("aggregation") or {}
    needed = AggregationRow.__required_keys__
    if "pass_rate" in aggregation:  # ours (v4's has none), which reports show whole
        missing = [key for key in needed if aggregation.get(key) is None]
        if missing:
            return (
                f"'aggregation' has no '{min(missing)}'; the aggregate of our trials has "
                f"{', '.join(sorted(needed))}"
            )
    if row.get("status") not in (None, "graded", "error", "skipped"):
        return f"'status' is {shown(row['status'])}; it must be graded, error or skipped"
    return None
