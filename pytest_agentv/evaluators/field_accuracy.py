"""``field_accuracy``: fields of a JSON answer against the expected output, AgentV's way.

The answer is parsed as JSON (a fenced block or an object inside prose is found as for judges);
the expected values come from the last expected assistant message with content (an object, or
JSON text). Each field is found by its ``a.b[0].c`` path and compared ``exact`` (deep equality),
``numeric_tolerance`` (absolute, or relative to the expected value) or ``date`` (year, month and
day, across ISO, ``DD-MMM-YYYY`` and US/EU numeric formats). A field the expected output lacks
passes; a missing required field scores 0; a missing optional field does not count.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from ..errors import ConfigError, DuplicateKeyError
from ..loader import EntryProblem, zero_weights
from ..results import js_fixed, js_number
from ..schema.base import finite_number, weighted_average
from ..schema.checks import FieldAccuracySpec, FieldSpec
from ..schema.evaluators import EvaluatorConfig
from .base import NEEDS_SETTINGS, EvaluationContext, EvaluationScore, entry_settings
from .text import deep_equal, first_json_object

MAX_LISTED = 4
_MISSING = object()
_PATH_PARTS = re.compile(r"[.\[\]]")
_LEADING_NUMBER = re.compile(r"^\s*[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|^\s*[+-]?Infinity")
_ISO = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?$",
    re.IGNORECASE,
)
#: Longer than any date the patterns read ("Wednesday, September 30, 2025 12:00:00.000 PM GMT").
_LONGEST_DATE = 80
_YMD = re.compile(r"^(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})$")
_DAY_MONTH_YEAR = re.compile(r"^(\d{1,2})[- ]([A-Za-z]{3,9})\.?,?[- ](\d{4})$")
_MONTH_DAY_YEAR = re.compile(r"^([A-Za-z]{3,9})\.?[- ](\d{1,2}),?[- ](\d{4})$")
_NUMERIC = re.compile(r"^(\d{1,2})[/-](\d{1,2})[/-](\d{4}|\d{2})$")
# What JavaScript's Date parsing, which AgentV tries first, also reads around a day: a weekday
# in front ("Wed, 15 Jan 2025") and a time of day with an optional zone after it.
_WEEKDAY = re.compile(
    r"^(?:mon|tue|tues|wed|thu|thur|thurs|fri|sat|sun)(?:day|sday|nesday|rsday|urday)?\.?,?\s+",
    re.IGNORECASE,
)
_TIME_OF_DAY = re.compile(
    r"(?:,?\s+|T)\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?\s*(?:[ap]\.?m\.?)?"
    r"\s*(?:Z|UTC|GMT|[+-]\d{2}:?\d{2})?$",
    re.IGNORECASE,
)
MONTHS = {
    name: number
    for number, names in enumerate(
        (
            ("jan", "january"),
            ("feb", "february"),
            ("mar", "march"),
            ("apr", "april"),
            ("may",),
            ("jun", "june"),
            ("jul", "july"),
            ("aug", "august"),
            ("sep", "sept", "september"),
            ("oct", "october"),
            ("nov", "november"),
            ("dec", "december"),
        ),
        start=1,
    )
    for name in names
}


@dataclass(frozen=True)
class FieldResult:
    path: str
    score: float
    weight: float
    hit: bool
    message: str


def resolve_path(data: Any, path: str) -> Any:
    """``invoice.line_items[0].amount`` in parsed JSON; ``_MISSING`` when it is not there."""
    current = data
    for part in (p for p in _PATH_PARTS.split(path) if p):
        if isinstance(current, list):
            if not part.isdigit() or int(part) >= len(current):
                return _MISSING
            current = current[int(part)]
        elif isinstance(current, dict):
            current = current.get(part, _MISSING)
            if current is _MISSING:
                return _MISSING
        else:
            return _MISSING
    return current


def js_typeof(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "object"


def to_number(value: Any) -> float | None:
    """A number, or the leading number of a string (as JavaScript's ``parseFloat`` reads it);
    an integer beyond a float's range is infinite, as JavaScript reads it."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        number = finite_number(value)
        return number if number is not None else (math.inf if value > 0 else -math.inf)
    if isinstance(value, float):
        return None if math.isnan(value) else value
    if isinstance(value, str):
        found = _LEADING_NUMBER.match(value)
        return float(found.group(0)) if found else None
    return None


def _ymd(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:
        return None


def parse_date(text: str, formats: list[str]) -> date | None:
    """The calendar day a date string names; a time of day and a zone are ignored, so the day is
    the one written (not shifted into the machine's time zone)."""
    value = text.strip()
    if len(value) > _LONGEST_DATE:  # not a date; and the patterns need not see a huge answer
        return None
    if found := _ISO.match(value):
        return _ymd(int(found.group(1)), int(found.group(2)), int(found.group(3)))
    value = _TIME_OF_DAY.sub("", _WEEKDAY.sub("", value))
    if found := _YMD.match(value):
        return _ymd(int(found.group(1)), int(found.group(2)), int(found.group(3)))
    if found := _DAY_MONTH_YEAR.match(value):
        month = MONTHS.get(found.group(2).lower())
        return _ymd(int(found.group(3)), month, int(found.group(1))) if month else None
    if found := _MONTH_DAY_YEAR.match(value):
        month = MONTHS.get(found.group(1).lower())
        return _ymd(int(found.group(3)), month, int(found.group(2))) if month else None
    if found := _NUMERIC.match(value):
        first, second, year = (int(found.group(i)) for i in (1, 2, 3))
        if len(found.group(3)) == 2:
            year += 2000 if year < 50 else 1900  # JavaScript's reading of a two-digit year
        us = any("MM/DD" in f or "MM-DD" in f for f in formats)
        eu = any("DD/MM" in f or "DD-MM" in f for f in formats)
        if eu and not us:
            return _ymd(year, second, first)
        if us and not eu:
            return _ymd(year, first, second)
        if first > 12 >= second:
            return _ymd(year, second, first)
        return _ymd(year, first, second)
    return None


def compare(spec: FieldSpec, actual: Any, expected: Any) -> FieldResult:
    """One field present on both sides, by its match type."""
    path, weight = spec.path, spec.weight

    def result(hit: bool, message: str) -> FieldResult:
        return FieldResult(path, 1.0 if hit else 0.0, weight, hit, message)

    if spec.match == "exact":
        if deep_equal(actual, expected):
            return result(True, path)
        got, want = js_typeof(actual), js_typeof(expected)
        if got != want:
            return result(False, f"{path} (type mismatch: got {got}, expected {want})")
        return result(False, f"{path} (value mismatch)")
    if spec.match == "numeric_tolerance":
        got_n, want_n = to_number(actual), to_number(expected)
        if got_n is None or want_n is None:
            return result(False, f"{path} (non-numeric value)")
        if not (math.isfinite(got_n) and math.isfinite(want_n)):
            return result(False, f"{path} (invalid numeric value)")
        diff = abs(got_n - want_n)
        off = diff / abs(want_n) if spec.relative and want_n != 0 else diff
        if off <= spec.tolerance:
            return result(True, f"{path} (within tolerance: diff={js_fixed(diff, 2)})")
        return result(
            False,
            f"{path} (outside tolerance: diff={js_fixed(diff, 2)}, "
            f"tolerance={js_number(spec.tolerance)})",
        )
    formats = spec.formats or ["YYYY-MM-DD", "DD-MMM-YYYY", "MM/DD/YYYY", "DD/MM/YYYY"]
    got_d, want_d = parse_date(str(actual), formats), parse_date(str(expected), formats)
    if got_d is None:
        return result(False, f"{path} (unparseable candidate date)")
    if want_d is None:
        return result(False, f"{path} (unparseable expected date)")
    if got_d == want_d:
        return result(True, path)
    return result(False, f"{path} (date mismatch: got {got_d}, expected {want_d})")


def evaluate_field(spec: FieldSpec, candidate: Any, expected: Any) -> FieldResult:
    expected_value = resolve_path(expected, spec.path)
    if expected_value is _MISSING:
        return FieldResult(spec.path, 1.0, spec.weight, True, f"{spec.path}: no expected value")
    actual = resolve_path(candidate, spec.path)
    if actual is _MISSING:
        if spec.required:
            return FieldResult(
                spec.path, 0.0, spec.weight, False, f"{spec.path} (required, missing)"
            )
        return FieldResult(spec.path, 1.0, 0.0, True, f"{spec.path}: optional field missing")
    return compare(spec, actual, expected_value)


def expected_data(context: EvaluationContext) -> dict[str, Any] | None:
    """The last expected assistant message with content: an object, or JSON text."""
    for message in reversed(context.eval_case.expected_messages):
        content = message.get("content")
        # As in AgentV, an empty object is expected data (every field then has no expected value).
        if message.get("role") != "assistant" or content is None or content == "":
            continue
        if isinstance(content, dict):
            return content
        if isinstance(content, str):
            try:
                return first_json_object(content)
            except DuplicateKeyError as exc:
                name = context.evaluator.name if context.evaluator else "field_accuracy"
                raise ConfigError(f"{name}: the expected JSON object has a {exc}") from None
            except ValueError:
                continue
    return None


class FieldAccuracyEvaluator:
    kind = "field_accuracy"
    entry_needs = NEEDS_SETTINGS

    def check_entry(
        self, entry: EvaluatorConfig, folder: Path, rootdir: Path
    ) -> Iterator[EntryProblem]:
        """When the file loads: averaged fields do not all weigh 0."""
        spec = entry.spec
        if isinstance(spec, FieldAccuracySpec) and spec.aggregation == "weighted_average":
            weights = (field.weight for field in spec.fields)
            yield from filter(None, [zero_weights(("fields",), "field", weights)])

    def evaluate(self, context: EvaluationContext) -> EvaluationScore:
        spec = entry_settings(context, FieldAccuracySpec)
        expected = expected_data(context)
        if expected is None:
            # Nothing to compare with says nothing about the answer: the case is not graded.
            name = context.evaluator.name if context.evaluator else self.kind
            raise ConfigError(
                f"field_accuracy evaluator '{name}' needs the expected values: give the case an "
                "expected_output whose last assistant message is a JSON object"
            )
        try:
            candidate = first_json_object(context.candidate)
        except ValueError as exc:
            duplicate = f" (it has a {exc})" if isinstance(exc, DuplicateKeyError) else ""
            return EvaluationScore.graded(
                0.0,
                misses=(f"Failed to parse candidate answer as JSON{duplicate}",),
                expected_aspect_count=len(spec.fields),
                reasoning="Candidate answer is not valid JSON",
            )
        results = [evaluate_field(field, candidate, expected) for field in spec.fields]
        hits = [r.message for r in results if r.hit]
        misses = [r.message for r in results if not r.hit]
        if spec.aggregation == "all_or_nothing":
            score = 0.0 if misses else 1.0
        else:
            score = weighted_average((r.score, r.weight) for r in results)
        return EvaluationScore.graded(
            score,
            hits=tuple(hits[:MAX_LISTED]),
            misses=tuple(misses[:MAX_LISTED]),
            expected_aspect_count=len(results),
            reasoning=f"{len(hits)}/{len(results)} fields matched",
            details={
                "aggregation": spec.aggregation,
                "fields": [
                    {
                        "path": r.path,
                        "match": field.match,
                        "weight": r.weight,
                        "score": r.score,
                        "hit": r.hit,
                        "message": r.message,
                    }
                    for r, field in zip(results, spec.fields, strict=True)
                ],
            },
        )
