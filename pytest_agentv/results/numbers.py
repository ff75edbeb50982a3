"""Numbers as reports show them: as JavaScript prints them (AgentV's messages do) and writes
them in JSON, and dollars; the run's spend so far."""

from __future__ import annotations

import json
import math
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, NamedTuple


def js_number(value: float) -> str:
    """A number as JavaScript prints it, as AgentV's messages do: ``45``, not ``45.0``; ``1e+308``,
    not 309 digits (a limit or a number from hostile data); ``0.000001``, then ``1e-7``."""
    try:
        number = float(value)
    except OverflowError:  # a whole number beyond a float: JavaScript's Infinity
        number = math.inf if value > 0 else -math.inf
    if not math.isfinite(number):
        return "NaN" if math.isnan(number) else ("Infinity" if number > 0 else "-Infinity")
    if number == 0:
        return "0"
    # The shortest digits that read back as the number, and where its decimal point goes.
    shortest = Decimal(repr(abs(number))).normalize().as_tuple()
    digits = "".join(map(str, shortest.digits))
    point = int(shortest.exponent) + len(digits)
    if len(digits) <= point <= 21:
        text = digits + "0" * (point - len(digits))
    elif 0 < point <= 21:
        text = f"{digits[:point]}.{digits[point:]}"
    elif -6 < point <= 0:
        text = f"0.{'0' * -point}{digits}"
    else:
        fraction = f".{digits[1:]}" if len(digits) > 1 else ""
        text = f"{digits[0]}{fraction}e{'+' if point > 0 else '-'}{abs(point - 1)}"
    return f"-{text}" if number < 0 else text


def js_fixed(value: float, places: int) -> str:
    """``value.toFixed(places)`` as JavaScript gives it: ties rounded away from zero, and from
    1e21 on the number as ``js_number`` prints it (``1e+308``), not hundreds of digits."""
    if abs(value) >= 1e21 or not math.isfinite(value):
        return js_number(value)
    return str(Decimal(value).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP))


#: Why a call's cost is unknown, as reports say it.
UNKNOWN_COST = "without a known price or token counts"


class Spend(NamedTuple):
    """The run's model spend so far (``--agentv-budget-usd``): dollars counted, calls whose cost
    is unknown (they cannot be counted against the budget), and calls refused for it."""

    usd: float
    unknown: int
    refused: int


def usd(amount: float) -> str:
    """A dollar amount as reports show it: cents to four places, small sums to six."""
    return f"${js_fixed(amount, 4 if amount == 0 or abs(amount) >= 0.01 else 6)}"


def fmt(score: float | None) -> str:
    """A score as reports show it: two places, ``-`` for none."""
    return "-" if score is None else f"{score:.2f}"


def json_text(value: Any, **layout: Any) -> str:
    """JSON of a row or report file; a number that is not finite (a cost over every limit, as
    an answer's 401-digit ``cost_usd`` reads) is ``null``, as JavaScript writes it, never the
    ``Infinity`` no JSON reader takes."""
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, **layout)
    except ValueError:
        return json.dumps(_finite(value), ensure_ascii=False, allow_nan=False, **layout)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value
