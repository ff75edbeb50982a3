"""Rubric items: checklist items (satisfied or not) and items graded 0-10 against score ranges,
with AgentV's shorthands, default ids and gates."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails

from ..spellings import field_groups, one_spelling, spelled
from .base import NOT_BLANK, Flag, Model, Number, Text, Weight, also, problem_text


def rubrics_shorthand(schema: dict[str, Any]) -> None:
    """Rubric lists take strings too (a required checklist item each)."""
    for alternative in schema.get("anyOf", [schema]):
        if alternative.get("type") == "array":
            alternative["items"] = {"anyOf": [alternative["items"], {"type": "string"}]}


#: A bound of a score range: a whole number from 0 to 10.
ScoreBound = Annotated[int, Field(ge=0, le=10)]


class ScoreRange(Model):
    score_range: tuple[ScoreBound, ScoreBound]
    expected_outcome: Annotated[str, NOT_BLANK] = Field(
        validation_alias=spelled("ScoreRange", "expected_outcome")
    )


#: ``{0: text, 5: text}``: ranges from each key to the next one, starting at 0.
_SCORE_RANGES_SHORTHAND = also(
    {
        "type": "object",
        "additionalProperties": {"type": "string", **NOT_BLANK.extra},
        "propertyNames": {"pattern": "^(10|[0-9])$"},
        "required": ["0"],
    }
)


def _score_ranges(raw: Any, rubric: str) -> list[dict[str, Any]]:
    """Validate ``score_ranges`` (list or shorthand map) and return them as a sorted list.

    The messages name the rule that was broken: entry shape, bounds, overlap or coverage.
    """
    if isinstance(raw, dict):
        keys: list[tuple[int, str]] = []
        for key, text in raw.items():
            if isinstance(key, bool) or not isinstance(key, (int, str)):
                raise ValueError(f"score_ranges shorthand keys must be integers 0-10 (got {key!r})")
            try:
                lower = int(key)
            except ValueError:
                raise ValueError(
                    f"score_ranges shorthand keys must be integers 0-10 (got {key!r})"
                ) from None
            if not 0 <= lower <= 10:
                raise ValueError(
                    f"score_ranges values must be 0-10 in rubric '{rubric}' (got {lower})"
                )
            keys.append((lower, text))
        keys.sort()
        if not keys or keys[0][0] != 0:
            first = keys[0][0] if keys else None
            raise ValueError(f"score_ranges shorthand map must start at 0 (got {first})")
        entries: list[Any] = []
        for index, (lower, text) in enumerate(keys):
            upper = keys[index + 1][0] - 1 if index + 1 < len(keys) else 10
            entries.append({"score_range": [lower, upper], "expected_outcome": text})
        raw = entries
    if not isinstance(raw, list) or not raw:
        raise ValueError(
            f"Invalid score_ranges in rubric '{rubric}': "
            "must be a non-empty list or a shorthand map"
        )
    ranges: list[tuple[int, int, str]] = []
    for index, entry in enumerate(raw):
        where = f"score_range entry at index {index} for rubric '{rubric}'"
        if not isinstance(entry, dict):
            raise ValueError(f"Invalid {where}: expected object")
        one_spelling(entry, field_groups(ScoreRange), (index,))
        bounds = entry.get("score_range")
        if not (
            isinstance(bounds, (list, tuple))
            and len(bounds) == 2
            and all(isinstance(b, (int, float)) and not isinstance(b, bool) for b in bounds)
        ):
            raise ValueError(f"Invalid {where}: must be [min, max] array of two numbers")
        low, high = bounds
        if low != int(low) or high != int(high):
            raise ValueError(f"Invalid {where}: values must be integers (got [{low}, {high}])")
        low, high = int(low), int(high)
        if not (0 <= low <= 10 and 0 <= high <= 10):
            raise ValueError(f"Invalid {where}: values must be 0-10 (got [{low}, {high}])")
        if low > high:
            raise ValueError(f"Invalid {where}: min must be <= max (got [{low}, {high}])")
        text = entry.get("expected_outcome", entry.get("description", entry.get("outcome")))
        if not isinstance(text, str) or not text.strip():
            raise ValueError(
                f"Missing expected_outcome for score_range [{low}, {high}] in rubric '{rubric}'"
            )
        ranges.append((low, high, text))
    ranges.sort()
    for previous, current in itertools.pairwise(ranges):
        if current[0] <= previous[1]:
            raise ValueError(
                f"Overlapping score_ranges in rubric '{rubric}': "
                f"[{previous[0]}, {previous[1]}] overlaps with [{current[0]}, {current[1]}]"
            )
    covered = {score for low, high, _ in ranges for score in range(low, high + 1)}
    missing = [score for score in range(11) if score not in covered]
    if missing:
        raise ValueError(
            f"Incomplete score_ranges coverage in rubric '{rubric}': missing coverage for scores: "
            f"{', '.join(map(str, missing))}. Ranges must cover all integers 0-10."
        )
    return [{"score_range": [low, high], "expected_outcome": text} for low, high, text in ranges]


def _rubric_rules(schema: dict[str, Any]) -> None:
    """What ``_later_shape`` checks, in the JSON Schema: one of the two gates."""
    schema.setdefault("allOf", []).append(
        {"not": {"required": ["min_score", "required_min_score"]}}
    )


class RubricItem(Model):
    """One rubric criterion: a checklist item, or an item graded 0-10 against score ranges."""

    model_config = ConfigDict(json_schema_extra=_rubric_rules)

    id: Text
    expected_outcome: str = Field("", validation_alias=spelled("RubricItem", "expected_outcome"))
    weight: Weight = 1.0
    required: Flag | None = None
    required_min_score: ScoreBound | None = None
    score_ranges: list[ScoreRange] | None = Field(None, json_schema_extra=_SCORE_RANGES_SHORTHAND)
    min_score_fraction: Number | None = Field(
        None,
        validation_alias=spelled("RubricItem", "min_score_fraction"),
        gt=0,
        le=1,
        description="AgentV v4's 0-1 gate: required_min_score = ceil(min_score * 10)",
    )

    #: AgentV v4: ``contradiction`` is satisfied unless the answer contradicts the outcome
    #: (the judge is told so, as AgentV tells it); ``correctness`` is the classic meaning.
    operator: Literal["correctness", "contradiction"] | None = None

    @model_validator(mode="before")
    @classmethod
    def _later_shape(cls, value: Any) -> Any:
        if isinstance(value, dict):
            if "min_score" in value and "required_min_score" in value:
                raise ValueError(
                    "give either required_min_score (0-10) or min_score (0-1), not both"
                )
        return value

    @field_validator("required_min_score", mode="before")
    @classmethod
    def _min_score(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None:
            return None
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or value != int(value)
            or not 0 <= value <= 10
        ):
            rubric = info.data.get("id", "?")
            raise ValueError(
                f"Invalid required_min_score for rubric '{rubric}': "
                f"must be an integer 0-10 (got {value!r})"
            )
        return int(value)

    @field_validator("score_ranges", mode="before")
    @classmethod
    def _ranges(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None:
            return None
        return _score_ranges(value, str(info.data.get("id", "?")))

    @property
    def is_checklist(self) -> bool:
        return not self.score_ranges

    @property
    def is_required(self) -> bool:
        """Checklist items are required unless they say otherwise (AgentV's default)."""
        return True if self.required is None and self.is_checklist else bool(self.required)

    @property
    def min_score(self) -> int | None:
        """The 0-10 gate of a score-range item: ``required_min_score`` (or AgentV v4's 0-1
        ``min_score`` scaled up), or 10 if ``required``."""
        if self.required_min_score is not None:
            return self.required_min_score
        if self.min_score_fraction is not None:
            return math.ceil(round(self.min_score_fraction * 10, 9))
        return 10 if self.required else None


def rubric_list(value: Any) -> Any:
    if not isinstance(value, list):
        return value
    items: list[Any] = []
    for index, item in enumerate(value):
        if isinstance(item, str):
            item = {"expected_outcome": item}
        if isinstance(item, dict) and item.get("id") in (None, ""):
            item = {**item, "id": f"rubric-{index + 1}"}
        items.append(item)
    return items


def _duplicate_rubric(items: Sequence[RubricItem]) -> tuple[int, str] | None:
    """The first item whose id an earlier item has, and why that is refused: the judge returns
    one check per id, so both items would get the first's grade."""
    seen: set[str] = set()
    for index, item in enumerate(items):
        if item.id in seen:
            generated = item.id.startswith("rubric-") and item.id[7:].isdigit()
            hint = " (an item without an id is named rubric-<its position>)" if generated else ""
            return index, f"rubric id '{item.id}' is used twice{hint}; ids must be unique"
        seen.add(item.id)
    return None


def rubric_ids_unique(value: list[RubricItem]) -> list[RubricItem]:
    duplicate = _duplicate_rubric(value)
    if duplicate is not None:
        index, message = duplicate
        raise ValidationError.from_exception_data(
            "rubrics",
            [
                InitErrorDetails(
                    type="value_error",
                    loc=(index, "id"),
                    input=message,
                    ctx={"error": ValueError(message)},
                )
            ],
        )
    return value


#: A rubric list as files write it: a string is a required checklist item, an item without an
#: id is named ``rubric-<its position>``, and each id is used once.
Rubrics = Annotated[
    list[RubricItem], BeforeValidator(rubric_list), AfterValidator(rubric_ids_unique)
]


def rubric_items(items: Any) -> list[RubricItem]:
    """Rubrics given in Python (strings, dicts or ``RubricItem``), with AgentV's default ids.

    An invalid item is a ``ValueError`` worded as in eval files:
    ``rubrics.0.score_ranges: Overlapping score_ranges in rubric 'x': ...``.
    """
    found: list[RubricItem] = []
    for index, item in enumerate(rubric_list(list(items))):
        if isinstance(item, RubricItem):
            found.append(item)
            continue
        try:
            found.append(RubricItem.model_validate(item))
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            where = ".".join(map(str, ("rubrics", index, *first["loc"])))
            raise ValueError(f"{where}: {problem_text(first)}") from None
    duplicate = _duplicate_rubric(found)
    if duplicate is not None:
        raise ValueError(f"rubrics.{duplicate[0]}.id: {duplicate[1]}")
    return found
