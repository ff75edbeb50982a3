"""Pydantic schemas of AgentV eval files (classic v2 format), targets files and
``.agentv/config.yaml``; the JSON Schema of eval and targets files is generated from them.

Legacy and later AgentV spellings are aliases of the classic names, never replacements
(``outcome``, ``input``, ``expected_output``, ``description`` on rubric items, ``grader_target``;
and from later AgentV versions ``tests``, ``criteria``, ``assertions``, ``command``, ``-grader``
kinds, rubric ``outcome`` and ``min_score``). A field written under two of its spellings is an
error, as pydantic would read one and drop the other. Unknown keys are kept (``extra="allow"``) so
that the loader can warn about them with a line number instead of rejecting real-world files.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, ClassVar, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails, InitErrorDetails, PydanticCustomError

from .errors import did_you_mean
from .options import MAX_TRIALS

Role = Literal["system", "user", "assistant", "tool"]

#: Evaluator ``type`` spellings that map onto a classic (AgentV v2.5.8) kind: legacy ones, and the
#: kebab-case (v2.19), ``-grader`` (v3.1) and ``rubrics`` (v2.10) names of later AgentV versions.
KIND_ALIASES: dict[str, str] = {
    "code": "code_judge",
    "code-judge": "code_judge",
    "code_grader": "code_judge",
    "code-grader": "code_judge",
    "llm-judge": "llm_judge",
    "llm_grader": "llm_judge",
    "llm-grader": "llm_judge",
    "rubric": "llm_judge",
    "rubrics": "llm_judge",
    "tool-trajectory": "tool_trajectory",
    "field-accuracy": "field_accuracy",
    "token-usage": "token_usage",
}

#: Evaluator kinds of later AgentV versions that have no classic equivalent, and the version
#: that introduced each: an eval file naming one gets an error saying so, never the default judge.
LATER_KINDS: dict[str, str] = {
    **dict.fromkeys(
        (
            "execution_metrics",
            "agent_judge",
            "contains",
            "contains_any",
            "contains_all",
            "icontains",
            "icontains_any",
            "icontains_all",
            "starts_with",
            "ends_with",
            "regex",
            "is_json",
            "equals",
        ),
        "v2.10",
    ),
    **dict.fromkeys(
        (
            "execution-metrics",
            "agent-judge",
            "contains-any",
            "contains-all",
            "icontains-any",
            "icontains-all",
            "starts-with",
            "ends-with",
            "is-json",
        ),
        "v2.19",
    ),
    **dict.fromkeys(("skill-trigger", "inline-assert"), "v3.1"),
    **dict.fromkeys(
        (
            "llm-rubric",
            "agent-rubric",
            "script",
            "assert-set",
            "skill-used",
            "not-skill-used",
            "javascript",
            "python",
            "webhook",
            "similar",
        ),
        "v5 (5.x-next)",
    ),
}


def canonical_kind(kind: str) -> str:
    return KIND_ALIASES.get(kind, kind)


def later_kind_version(kind: str) -> str | None:
    """The AgentV version that introduced a kind pytest-agentv cannot map, if it is one."""
    if kind.startswith(("trajectory:", "not-trajectory:")):
        return "v5 (5.x-next)"
    return LATER_KINDS.get(kind)


#: Rubric-evaluator spellings (``type: rubric`` of v2.5.8, ``type: rubrics`` of v2.10+): both
#: need their criteria list.
RUBRIC_KINDS = ("rubric", "rubrics")

#: Keys of later AgentV versions on an evaluator entry that change how its score counts, and the
#: version that introduced them. pytest-agentv cannot honour them yet, so it refuses them rather
#: than passing them on as the judge's ``config``.
LATER_EVALUATOR_GATES: dict[str, str] = {
    "min_score": "v4.7",
    "required": "v3",
    "negate": "v4",
}


#: The error type of a field written under two of its spellings; the loader points at the key.
SPELLED_TWICE = "spelled_twice"


@functools.cache
def field_spellings(model: type[BaseModel]) -> dict[str, tuple[str, ...]]:
    """The fields a model reads under several keys, by name: their aliases and their name."""
    found: dict[str, tuple[str, ...]] = {}
    for name, info in model.model_fields.items():
        alias = info.validation_alias
        written = [str(c) for c in alias.choices] if isinstance(alias, AliasChoices) else []
        written += [a for a in (alias, info.alias) if isinstance(a, str)]
        spellings = tuple(dict.fromkeys([*written, name]))
        if len(spellings) > 1:
            found[name] = spellings
    return found


def _field_spellings(model: type[BaseModel]) -> tuple[tuple[str, ...], ...]:
    """Every group of keys a model reads as one field."""
    return tuple(field_spellings(model).values())


def _one_spelling(
    value: dict[str, Any], groups: Iterable[tuple[str, ...]], at: tuple[int, ...] = ()
) -> None:
    """Refuse a field given under two spellings (pydantic would read one and drop the other),
    at the second one written."""
    for group in groups:
        written = [key for key in value if key in group]
        if len(written) > 1:
            first, second = written[:2]
            problem = PydanticCustomError(
                SPELLED_TWICE,
                "give either '{first}' or '{second}', not both",
                {"first": first, "second": second},
            )
            raise ValidationError.from_exception_data(
                "spellings", [InitErrorDetails(type=problem, loc=(*at, second), input=value)]
            )


class _Model(BaseModel):
    model_config = ConfigDict(
        extra="allow", frozen=True, populate_by_name=True, ser_json_inf_nan="null"
    )
    #: Groups of keys read as one that are not fields (a target's camelCase settings).
    _more_spellings: ClassVar[tuple[tuple[str, ...], ...]] = ()

    @model_validator(mode="before")
    @classmethod
    def _spelled_once(cls, value: Any) -> Any:
        if isinstance(value, dict):
            _one_spelling(value, (*_field_spellings(cls), *cls._more_spellings))
        return value


def finite_number(value: Any) -> float | None:
    """A number as data reports it: a finite int or float (a bool is not a number), else None."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _finite_weight(value: float) -> float:
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"weight must be a finite number >= 0 (got {value})")
    return value


def _also(*alternatives: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    """A ``json_schema_extra`` that widens a field's JSON Schema to the shorthand forms its
    ``before`` validator accepts (a string for one message, a map for score ranges...)."""

    def widen(schema: dict[str, Any]) -> None:
        written = dict(schema)
        for key in ("title", "description", "default"):
            written.pop(key, None)
        kept: dict[str, Any] = {
            key: schema[key] for key in ("title", "description", "default") if key in schema
        }
        schema.clear()
        schema.update(kept)
        schema["anyOf"] = [written, *alternatives]

    return widen


_SEGMENT_SHORTHAND = {"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "object"}]}}
_CONTENT_SHORTHAND = _also(
    {"type": "string"}, {"type": "object"}, _SEGMENT_SHORTHAND, {"type": "null"}
)
_MESSAGES_SHORTHAND = _also({"type": "string"}, {"type": "object"})


def _rubrics_shorthand(schema: dict[str, Any]) -> None:
    """Rubric lists take strings too (a required checklist item each)."""
    for alternative in schema.get("anyOf", [schema]):
        if alternative.get("type") == "array":
            alternative["items"] = {"anyOf": [alternative["items"], {"type": "string"}]}


class ContentSegment(_Model):
    """A piece of message content: inline text, a file reference, or a JSON object."""

    type: Literal["text", "file", "json"]
    value: Any

    @model_validator(mode="after")
    def _check_value(self) -> ContentSegment:
        if self.type in ("text", "file") and not isinstance(self.value, str):
            raise ValueError(f"a '{self.type}' segment needs a string 'value'")
        if self.type == "file" and not self.value.strip():
            raise ValueError("a 'file' segment needs a non-empty path in 'value'")
        return self


def _normalize_content(value: Any) -> Any:
    if value is None:
        return []
    if isinstance(value, str):
        return [{"type": "text", "value": value}]
    if isinstance(value, dict):
        if set(value) == {"type", "value"} and value.get("type") in ("text", "file"):
            return [value]
        return [{"type": "json", "value": value}]
    if isinstance(value, list):
        return [
            {"type": "text", "value": item} if isinstance(item, str) else item for item in value
        ]
    raise ValueError(
        "content must be a string, a mapping, or a list of {type: text|file, value: ...} segments"
    )


class Message(_Model):
    role: Role
    content: list[ContentSegment] = Field(
        default_factory=list, json_schema_extra=_CONTENT_SHORTHAND
    )
    name: str | None = None
    tool_calls: list[dict[str, Any]] | None = None

    @field_validator("content", mode="before")
    @classmethod
    def _content(cls, value: Any) -> Any:
        return _normalize_content(value)

    def authored_content(self) -> Any:
        """The content in the shape it was written: text, an object, or a segment list."""
        if len(self.content) == 1 and self.content[0].type in ("text", "json"):
            return self.content[0].value
        return [segment.model_dump() for segment in self.content]


def _messages(value: Any, default_role: str) -> Any:
    if isinstance(value, str):
        return [{"role": default_role, "content": value}]
    if isinstance(value, dict):
        if "role" in value:
            return [value]
        return [{"role": default_role, "content": value}]
    return value


class ScoreRange(_Model):
    score_range: tuple[int, int]
    expected_outcome: str = Field(
        validation_alias=AliasChoices("expected_outcome", "description", "outcome")
    )


_SCORE_RANGES_SHORTHAND = _also(
    {
        "type": "object",
        "additionalProperties": {"type": "string"},
        "propertyNames": {"pattern": "^(10|[0-9])$"},
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
        _one_spelling(entry, _field_spellings(ScoreRange), (index,))
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


class RubricItem(_Model):
    """One rubric criterion: a checklist item, or an item graded 0-10 against score ranges."""

    id: str
    expected_outcome: str = Field(
        "", validation_alias=AliasChoices("expected_outcome", "description", "outcome")
    )
    weight: float = 1.0
    required: bool | None = None
    required_min_score: int | None = None
    score_ranges: list[ScoreRange] | None = Field(None, json_schema_extra=_SCORE_RANGES_SHORTHAND)
    min_score_fraction: float | None = Field(
        None,
        validation_alias="min_score",
        gt=0,
        le=1,
        description="AgentV v4's 0-1 gate: required_min_score = ceil(min_score * 10)",
    )

    @model_validator(mode="before")
    @classmethod
    def _later_shape(cls, value: Any) -> Any:
        """AgentV v4 rubric items: ``operator: contradiction`` inverts what an item means, which
        the classic judge cannot do, so it is refused rather than graded the other way round."""
        if isinstance(value, dict):
            operator = value.get("operator")
            if operator not in (None, "correctness"):
                raise ValueError(
                    f"rubric operator {operator!r} was introduced in AgentV v4 and is not "
                    "supported by pytest-agentv (only 'correctness', the classic meaning)"
                )
            if "min_score" in value and "required_min_score" in value:
                raise ValueError(
                    "give either required_min_score (0-10) or min_score (0-1), not both"
                )
        return value

    @field_validator("id", mode="before")
    @classmethod
    def _id(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value

    @field_validator("weight")
    @classmethod
    def _weight(cls, value: float) -> float:
        return _finite_weight(value)

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


def _rubric_list(value: Any) -> Any:
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


def _rubric_ids_unique(value: list[RubricItem] | None) -> list[RubricItem] | None:
    duplicate = _duplicate_rubric(value or ())
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


#: Our words for pydantic's error types (its ``type`` codes are its stable API, its messages
#: are not): what a field must be, with the bound or choices pydantic puts in ``ctx``.
_PROBLEMS = {
    "missing": "required field is missing",
    "extra_forbidden": "is not a known field",
    "literal_error": "must be {expected}",
    "enum": "must be {expected}",
    "int_type": "must be a whole number",
    "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "string_type": "must be a string",
    "list_type": "must be a list",
    "dict_type": "must be a mapping",
    "model_type": "must be a mapping",
    "model_attributes_type": "must be a mapping",
    "greater_than": "must be greater than {gt}",
    "greater_than_equal": "must be at least {ge}",
    "less_than": "must be less than {lt}",
    "less_than_equal": "must be at most {le}",
    "too_short": "must have at least {min_length} item(s)",
    "too_long": "must have at most {max_length} item(s)",
    "string_too_short": "must be at least {min_length} character(s) long",
    "string_too_long": "must be at most {max_length} character(s) long",
}


def problem_text(error: ErrorDetails) -> str:
    """A validation problem in the words eval-file errors use."""
    message = str(error["msg"])
    if error["type"] in ("value_error", "assertion_error"):
        return message.split(", ", 1)[1] if ", " in message else message
    wording = _PROBLEMS.get(error["type"])
    if (
        error["type"] in ("too_short", "string_too_short")
        and error.get("ctx", {}).get("min_length") == 1
    ):
        return "must not be empty"
    if wording is None:
        return message
    try:
        return wording.format(**error.get("ctx", {}))
    except (KeyError, IndexError):
        return message


def rubric_items(items: Any) -> list[RubricItem]:
    """Rubrics given in Python (strings, dicts or ``RubricItem``), with AgentV's default ids.

    An invalid item is a ``ValueError`` worded as in eval files:
    ``rubrics.0.score_ranges: Overlapping score_ranges in rubric 'x': ...``.
    """
    found: list[RubricItem] = []
    for index, item in enumerate(_rubric_list(list(items))):
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


class PromptScript(_Model):
    """An executable prompt template: a script that prints the judge's user prompt."""

    script: list[str] | str = Field(validation_alias=AliasChoices("script", "command"))
    config: dict[str, Any] = Field(default_factory=dict)


class EvaluatorConfig(_Model):
    """An entry of an ``evaluators`` list. Keys we do not know become its ``config``."""

    name: str
    type: str
    weight: float = 1.0
    script: list[str] | str | None = Field(None, validation_alias=AliasChoices("script", "command"))
    cwd: str | None = None
    timeout_seconds: float | None = Field(None, gt=0)
    prompt: str | PromptScript | None = None
    model: str | None = None
    rubrics: list[RubricItem] | None = Field(
        None,
        validation_alias=AliasChoices("rubrics", "criteria"),
        json_schema_extra=_rubrics_shorthand,
    )
    config: dict[str, Any] = Field(default_factory=dict)
    _spec: KindSpec | None = PrivateAttr(None)

    @model_validator(mode="before")
    @classmethod
    def _later_shape(cls, value: Any) -> Any:
        """AgentV v4 entries may leave out ``name`` (the type names them), and may carry score
        gates pytest-agentv cannot honour yet: those are refused, never passed on as config."""
        if not isinstance(value, dict):
            return value
        for key, version in LATER_EVALUATOR_GATES.items():
            gate = value.get(key)
            if gate is None or isinstance(gate, (list, dict, str)):
                continue
            raise ValueError(
                f"'{key}' on an evaluator is a score gate introduced in AgentV {version}; "
                "pytest-agentv cannot apply it yet (put it under 'config:' if it is meant for "
                "the judge script)"
            )
        if "name" not in value and isinstance(value.get("type"), str):
            value = {**value, "name": value["type"]}
        return value

    @field_validator("weight")
    @classmethod
    def _weight(cls, value: float) -> float:
        return _finite_weight(value)

    @field_validator("rubrics", mode="before")
    @classmethod
    def _rubrics(cls, value: Any) -> Any:
        return _rubric_list(value)

    _unique_rubrics = field_validator("rubrics")(_rubric_ids_unique)

    @field_validator("script")
    @classmethod
    def _script(cls, value: list[str] | str | None) -> list[str] | str | None:
        if value is not None and not (value.strip() if isinstance(value, str) else value):
            raise ValueError("script must not be empty")
        return value

    @model_validator(mode="after")
    def _kind_fields(self) -> EvaluatorConfig:
        if self.kind == "code_judge" and self.script is None:
            raise ValueError(
                f"code_judge evaluator '{self.name}' needs a 'script' "
                "(an argv list, or a string run through the shell)"
            )
        if self.type in RUBRIC_KINDS and not self.rubrics:
            raise ValueError(
                f"{self.type} evaluator '{self.name}' needs a non-empty 'rubrics' "
                "(or 'criteria') list"
            )
        spec = KIND_SPECS.get(self.kind)
        if spec is not None:
            # Errors inside keep their place: pydantic prefixes them with this entry's location.
            self._spec = spec.model_validate(self.options)
        return self

    @property
    def kind(self) -> str:
        return canonical_kind(self.type)

    @property
    def options(self) -> dict[str, Any]:
        """The evaluator's ``config``: the explicit mapping plus every unknown key."""
        return {**self.config, **(self.model_extra or {})}

    @property
    def spec(self) -> KindSpec | None:
        """The validated settings of a built-in kind that has them (``tool_trajectory``,
        ``field_accuracy``, ``latency``, ``cost``, ``token_usage``, ``composite``)."""
        return self._spec

    @property
    def members(self) -> tuple[EvaluatorConfig, ...]:
        """A composite's member entries; none for other kinds."""
        return tuple(self._spec.evaluators) if isinstance(self._spec, CompositeSpec) else ()


def walk_entries(entries: Iterable[EvaluatorConfig]) -> Iterator[EvaluatorConfig]:
    """Every entry and, depth first, the members of composites."""
    for entry in entries:
        yield entry
        yield from walk_entries(entry.members)


def _evaluator_names_unique(value: list[EvaluatorConfig] | None) -> list[EvaluatorConfig] | None:
    seen: set[str] = set()
    for entry in value or ():
        if entry.name in seen:
            raise ValueError(f"evaluator name '{entry.name}' is used twice; names must be unique")
        seen.add(entry.name)
    return value


def _limit(value: Any, what: str) -> float:
    """A threshold or budget: a finite number >= 0 (``True`` is not a number here)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
    ):
        raise ValueError(f"{what} must be a number >= 0 (got {value!r})")
    return float(value)


def _choice(value: Any, choices: tuple[str, ...], what: str, hint: str = "") -> str:
    if value not in choices:
        shown = " or ".join(", ".join(choices).rsplit(", ", 1))
        raise ValueError(f"unknown {what} {value!r}: use {shown}{hint}")
    return str(value)


TRAJECTORY_MODES = ("any_order", "in_order", "exact")
FIELD_MATCHES = ("exact", "numeric_tolerance", "date")
FIELD_AGGREGATIONS = ("weighted_average", "all_or_nothing")
AGGREGATORS = ("weighted_average", "code_judge", "llm_judge")
#: Aggregator spellings of later AgentV versions that name a classic aggregator.
AGGREGATOR_ALIASES = {
    name: KIND_ALIASES[name] for name in ("code_grader", "code-grader", "llm_grader", "llm-grader")
}
#: Aggregators of later AgentV versions with no classic equivalent, and where they appeared.
LATER_AGGREGATORS = {"threshold": "v2.7.1"}


class TrajectoryStep(_Model):
    """One expected tool call of an ``in_order`` or ``exact`` trajectory."""

    tool: str = Field(min_length=1)
    args: Literal["any"] | dict[str, Any] | None = None
    max_duration_ms: float | None = Field(
        None, validation_alias=AliasChoices("max_duration_ms", "maxDurationMs")
    )

    @field_validator("args", mode="before")
    @classmethod
    def _args(cls, value: Any) -> Any:
        if value is not None and value != "any" and not isinstance(value, dict):
            raise ValueError(f"args must be 'any' or a mapping of argument values (got {value!r})")
        return value

    @field_validator("max_duration_ms", mode="before")
    @classmethod
    def _max_duration(cls, value: Any) -> Any:
        return None if value is None else _limit(value, "max_duration_ms")


class ToolTrajectorySpec(_Model):
    """``tool_trajectory``: which tools the agent called, in what order, with which arguments."""

    mode: str
    minimums: dict[str, float] | None = None
    expected: list[TrajectoryStep] | None = None

    @field_validator("mode", mode="before")
    @classmethod
    def _mode(cls, value: Any) -> str:
        return _choice(value, TRAJECTORY_MODES, "mode")

    @field_validator("minimums", mode="before")
    @classmethod
    def _minimums(cls, value: Any) -> Any:
        if value is None:
            return None
        if not isinstance(value, dict):
            raise ValueError("minimums must map tool names to minimum call counts")
        return {str(tool): _limit(count, f"minimum for '{tool}'") for tool, count in value.items()}

    @model_validator(mode="after")
    def _mode_needs(self) -> ToolTrajectorySpec:
        if self.mode == "any_order" and self.minimums is None:
            raise ValueError("mode any_order needs 'minimums' (tool name: minimum number of calls)")
        if self.mode != "any_order" and self.expected is None:
            raise ValueError(f"mode {self.mode} needs 'expected' (a list of {{tool, args?}} steps)")
        return self


class FieldSpec(_Model):
    """One field ``field_accuracy`` compares, by its ``a.b[0].c`` path."""

    path: str = Field(min_length=1)
    match: str
    required: bool = True
    weight: float = 1.0
    tolerance: float = 0.0
    relative: bool = False
    formats: list[str] | None = None

    @field_validator("match", mode="before")
    @classmethod
    def _match(cls, value: Any) -> str:
        hint = "; for fuzzy matching use a code_judge evaluator"
        return _choice(value, FIELD_MATCHES, "match", hint)

    @field_validator("weight", "tolerance", mode="before")
    @classmethod
    def _numbers(cls, value: Any, info: ValidationInfo) -> float:
        return _limit(value, str(info.field_name))


class FieldAccuracySpec(_Model):
    """``field_accuracy``: fields of a JSON answer against the expected output."""

    fields: list[FieldSpec] = Field(min_length=1)
    aggregation: str = "weighted_average"

    @field_validator("aggregation", mode="before")
    @classmethod
    def _aggregation(cls, value: Any) -> str:
        return _choice(value, FIELD_AGGREGATIONS, "aggregation")


class LatencySpec(_Model):
    """``latency``: the case's duration (ms) is at most ``threshold``."""

    threshold: float

    @field_validator("threshold", mode="before")
    @classmethod
    def _threshold(cls, value: Any) -> float:
        return _limit(value, "threshold (milliseconds)")


class CostSpec(_Model):
    """``cost``: the case's cost (USD) is at most ``budget``."""

    budget: float

    @field_validator("budget", mode="before")
    @classmethod
    def _budget(cls, value: Any) -> float:
        return _limit(value, "budget (USD)")


class TokenUsageSpec(_Model):
    """``token_usage``: input, output and total tokens within their limits."""

    max_total: float | None = Field(None, validation_alias=AliasChoices("max_total", "maxTotal"))
    max_input: float | None = Field(None, validation_alias=AliasChoices("max_input", "maxInput"))
    max_output: float | None = Field(None, validation_alias=AliasChoices("max_output", "maxOutput"))

    @field_validator("max_total", "max_input", "max_output", mode="before")
    @classmethod
    def _limits(cls, value: Any, info: ValidationInfo) -> float | None:
        return None if value is None else _limit(value, str(info.field_name))

    @model_validator(mode="after")
    def _some_limit(self) -> TokenUsageSpec:
        if self.max_total is None and self.max_input is None and self.max_output is None:
            raise ValueError("token_usage needs at least one of max_total, max_input, max_output")
        return self


class AggregatorSpec(_Model):
    """How a composite turns its members' results into one score."""

    type: str
    weights: dict[str, float] | None = None
    path: list[str] | str | None = Field(None, validation_alias=AliasChoices("path", "script"))
    cwd: str | None = None
    timeout_seconds: float | None = Field(None, gt=0)
    prompt: str | None = None
    model: str | None = None

    @field_validator("type", mode="before")
    @classmethod
    def _type(cls, value: Any) -> str:
        value = AGGREGATOR_ALIASES.get(value, value) if isinstance(value, str) else value
        if value in LATER_AGGREGATORS:
            raise ValueError(
                f"aggregator type {value!r} was introduced in AgentV {LATER_AGGREGATORS[value]} "
                f"and is not supported by pytest-agentv; use {', '.join(AGGREGATORS)}"
            )
        return _choice(value, AGGREGATORS, "aggregator type")

    @field_validator("weights", mode="before")
    @classmethod
    def _weights(cls, value: Any) -> Any:
        if value is None:
            return None
        if not isinstance(value, dict):
            raise ValueError("weights must map member names to numbers >= 0")
        return {str(name): _limit(w, f"weight of '{name}'") for name, w in value.items()}

    @model_validator(mode="after")
    def _script(self) -> AggregatorSpec:
        if self.type == "code_judge" and not (
            self.path.strip() if isinstance(self.path, str) else self.path
        ):
            raise ValueError(
                "a code_judge aggregator needs a 'path': the command that reads "
                '{"results": {...}} on stdin and prints {"score": ...}'
            )
        return self


class CompositeSpec(_Model):
    """``composite``: member evaluators (composites nest) and their aggregator."""

    #: ``assertions`` is AgentV v3's name for the members.
    evaluators: list[EvaluatorConfig] = Field(
        min_length=1, validation_alias=AliasChoices("evaluators", "assertions")
    )
    aggregator: AggregatorSpec

    _unique = field_validator("evaluators")(_evaluator_names_unique)

    @model_validator(mode="after")
    def _weights_name_members(self) -> CompositeSpec:
        names = [member.name for member in self.evaluators]
        unknown = [name for name in self.aggregator.weights or {} if name not in names]
        if unknown:
            raise ValidationError.from_exception_data(
                "CompositeSpec",
                [
                    InitErrorDetails(
                        type="value_error",
                        loc=("aggregator", "weights", name),
                        input=name,
                        ctx={
                            "error": ValueError(
                                f"weights name '{name}', which is not a member of this "
                                f"composite{did_you_mean(name, names)}; members: "
                                f"{', '.join(names)}"
                            )
                        },
                    )
                    for name in unknown
                ],
            )
        return self


KindSpec = (
    ToolTrajectorySpec | FieldAccuracySpec | LatencySpec | CostSpec | TokenUsageSpec | CompositeSpec
)

#: The built-in kinds whose settings are checked when the file loads.
KIND_SPECS: dict[str, type[KindSpec]] = {
    "tool_trajectory": ToolTrajectorySpec,
    "field_accuracy": FieldAccuracySpec,
    "latency": LatencySpec,
    "cost": CostSpec,
    "token_usage": TokenUsageSpec,
    "composite": CompositeSpec,
}


#: ``execution.trials`` strategies: AgentV's (``pass_any`` is ``pass_at_k``'s later name) and
#: ``adaptive``, which stops when the case's pass probability is settled.
TrialStrategy = Literal[
    "pass_at_k", "pass_any", "pass_all", "mean", "confidence_interval", "adaptive"
]
#: Keys that only the ``adaptive`` strategy reads.
ADAPTIVE_KEYS = ("threshold", "confidence", "min", "max", "interval")


def _real_number(value: Any) -> Any:
    """A number as YAML writes it: not a boolean, a numeric string, infinity or NaN."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"must be a number, not {type(value).__name__}")
    if not math.isfinite(value):
        raise ValueError("must be a finite number")
    return value


class TrialsConfig(_Model):
    """``execution.trials``: run a case several times and aggregate (file or case; case wins)."""

    count: int | None = Field(None, ge=1, le=MAX_TRIALS, strict=True)
    strategy: TrialStrategy = "pass_at_k"
    cost_limit_usd: float | None = Field(
        None, gt=0, validation_alias=AliasChoices("cost_limit_usd", "costLimitUsd")
    )
    threshold: float | None = Field(None, gt=0, lt=1)
    confidence: float | None = Field(None, ge=0.5, lt=1)
    min: int | None = Field(None, ge=1, le=MAX_TRIALS, strict=True)
    max: int | None = Field(None, ge=1, le=MAX_TRIALS, strict=True)
    interval: Literal["wilson", "exact"] | None = None

    @field_validator("cost_limit_usd", "threshold", "confidence", mode="before")
    @classmethod
    def _numbers(cls, value: Any) -> Any:
        return None if value is None else _real_number(value)

    @model_validator(mode="after")
    def _strategy_keys(self) -> TrialsConfig:
        if self.strategy != "adaptive":
            for key in ADAPTIVE_KEYS:
                if getattr(self, key) is not None:
                    raise ValueError(
                        f"'{key}' applies to strategy 'adaptive' only (this block's strategy "
                        f"is '{self.strategy}')"
                    )
            return self
        if self.count is not None:
            raise ValueError(
                "strategy 'adaptive' runs between 'min' and 'max' trials until the verdict is "
                "settled: give 'max' instead of 'count'"
            )
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min ({self.min}) must not be more than max ({self.max})")
        return self


class Execution(_Model):
    target: str | None = None
    evaluators: list[EvaluatorConfig] | None = Field(
        None, validation_alias=AliasChoices("evaluators", "assertions")
    )
    trials: TrialsConfig | None = None

    _unique = field_validator("evaluators")(_evaluator_names_unique)


class EvalCase(_Model):
    """One eval case as written in the file."""

    id: str
    description: str | None = None
    expected_outcome: str = Field(
        "", validation_alias=AliasChoices("expected_outcome", "outcome", "criteria")
    )
    input_messages: list[Message] = Field(
        validation_alias=AliasChoices("input_messages", "input"),
        min_length=1,
        json_schema_extra=_MESSAGES_SHORTHAND,
    )
    expected_messages: list[Message] = Field(
        default_factory=list,
        validation_alias=AliasChoices("expected_messages", "expected_output"),
        json_schema_extra=_MESSAGES_SHORTHAND,
    )
    conversation_id: str | None = None
    evaluators: list[EvaluatorConfig] | None = Field(
        None, validation_alias=AliasChoices("evaluators", "assertions")
    )
    execution: Execution | None = None
    rubrics: list[RubricItem] | None = Field(None, json_schema_extra=_rubrics_shorthand)
    evaluator: str | None = None
    grader: str | None = None

    @field_validator("id", "conversation_id", mode="before")
    @classmethod
    def _ids(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value

    @field_validator("id")
    @classmethod
    def _id_chars(cls, value: str) -> str:
        """Any id AgentV accepts is kept (the pytest name is made safe from it), except what no
        test name can carry: nothing at all, or control characters such as line breaks."""
        if not value.strip():
            raise ValueError("case id must not be empty")
        if any(ord(c) < 32 or ord(c) == 127 for c in value):
            raise ValueError(
                f"case id {value!r} contains a control character (a line break, tab...), "
                "which no pytest test name, terminal line or JUnit report can carry"
            )
        return value

    @field_validator("input_messages", mode="before")
    @classmethod
    def _input(cls, value: Any) -> Any:
        return _messages(value, "user")

    @field_validator("expected_messages", mode="before")
    @classmethod
    def _expected(cls, value: Any) -> Any:
        return [] if value is None else _messages(value, "assistant")

    @field_validator("rubrics", mode="before")
    @classmethod
    def _rubrics(cls, value: Any) -> Any:
        return _rubric_list(value)

    _unique_rubrics = field_validator("rubrics")(_rubric_ids_unique)

    _unique = field_validator("evaluators")(_evaluator_names_unique)


class EvalSuite(_Model):
    """A whole eval file."""

    schema_: str | None = Field(None, alias="$schema")
    description: str | None = None
    dataset: str | None = None
    execution: Execution | None = None
    target: str | None = None
    evaluator: str | None = None
    grader: str | None = None
    evalcases: list[EvalCase] = Field(
        validation_alias=AliasChoices("evalcases", "tests", "eval_cases"), min_length=1
    )

    @field_validator("dataset", mode="before")
    @classmethod
    def _dataset(cls, value: Any) -> Any:
        return (
            str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value
        )


class JsonlSidecar(_Model):
    """The sidecar of a JSONL dataset: defaults for every case of the ``.jsonl`` beside it."""

    schema_: str | None = Field(None, alias="$schema")
    description: str | None = None
    dataset: str | None = None
    execution: Execution | None = None
    evaluator: str | None = None

    @field_validator("dataset", mode="before")
    @classmethod
    def _dataset(cls, value: Any) -> Any:
        return (
            str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value
        )


def listed_evaluators(case: EvalCase, suite: EvalSuite) -> list[EvaluatorConfig]:
    """The evaluators a file lists for a case: case ``execution.evaluators`` > case
    ``evaluators`` > the file's ``execution.evaluators`` (AgentV does not merge them)."""
    return (
        (case.execution.evaluators if case.execution else None)
        or case.evaluators
        or (suite.execution.evaluators if suite.execution else None)
        or []
    )


def evaluator_entries(
    listed: Sequence[EvaluatorConfig], rubrics: Sequence[RubricItem] | None, default_kind: str
) -> tuple[EvaluatorConfig, ...]:
    """The evaluators that grade an answer: inline ``rubrics`` become an ``llm_judge`` named
    ``rubric`` placed first (``inline-rubric`` when that name is taken); with none at all, the
    default kind."""
    entries = list(listed)
    if rubrics:
        name = "rubric" if all(entry.name != "rubric" for entry in entries) else "inline-rubric"
        entries.insert(0, EvaluatorConfig(name=name, type="llm_judge", rubrics=list(rubrics)))
    if not entries:
        entries.append(
            EvaluatorConfig.model_construct(
                name=default_kind, type=default_kind, weight=1.0, config={}
            )
        )
    return tuple(entries)


class ProjectConfig(_Model):
    """``.agentv/config.yaml``: which referenced files are guidelines (micromatch-style globs,
    matched against the path from the rootdir)."""

    schema_: str | None = Field(None, alias="$schema")
    guideline_patterns: list[str] = Field(default_factory=list)


_STRING = {"type": "string"}
_POSITIVE = {"type": "number", "exclusiveMinimum": 0}
_HEALTHCHECK = {
    "anyOf": [
        {
            "type": "object",
            "properties": {
                "type": {"const": "http"},
                "url": _STRING,
                "timeout_seconds": _POSITIVE,
            },
            "required": ["url"],
            "additionalProperties": False,
        },
        {
            "type": "object",
            "properties": {
                "type": {"const": "command"},
                "command_template": _STRING,
                "cwd": _STRING,
                "timeout_seconds": _POSITIVE,
            },
            "required": ["command_template"],
            "additionalProperties": False,
        },
    ]
}

#: Target settings pytest-agentv reads (any provider), with their JSON Schema. The loader warns
#: about every other key, and the targets-file JSON Schema is made from this table.
TARGET_SETTINGS: dict[str, dict[str, Any]] = {
    "response": {},
    "delay_ms": {"type": "number", "minimum": 0},
    "command_template": _STRING,
    "cwd": _STRING,
    "timeout_seconds": _POSITIVE,
    "files_format": _STRING,
    "healthcheck": _HEALTHCHECK,
    "provider_batching": {"type": "boolean"},
    "model": _STRING,
    "deployment": _STRING,
    "api_key": _STRING,
    "endpoint": _STRING,
    "api_base": _STRING,
    "base_url": _STRING,
    "version": _STRING,
    "api_version": _STRING,
    "temperature": {"type": "number"},
    "max_tokens": {"type": "integer"},
    "max_output_tokens": {"type": "integer"},
}

#: Other spellings AgentV accepts for settings we read.
TARGET_SETTING_ALIASES: dict[str, str] = {
    "commandTemplate": "command_template",
    "timeoutSeconds": "timeout_seconds",
    "filesFormat": "files_format",
    "attachments_format": "files_format",
    "attachmentsFormat": "files_format",
    "providerBatching": "provider_batching",
    "delayMs": "delay_ms",
}

#: Target settings AgentV v2.5.8 reads and pytest-agentv does not: named in a warning, once.
AGENTV_ONLY_TARGET_SETTINGS = frozenset(
    {
        "workers",
        "verbose",
        "cli_verbose",
        "cliVerbose",
        "keep_temp_files",
        "keepTempFiles",
        "keep_output_files",
        "keepOutputFiles",
        "max_retries",
        "maxRetries",
        "retry_initial_delay_ms",
        "retryInitialDelayMs",
        "retry_max_delay_ms",
        "retryMaxDelayMs",
        "retry_backoff_factor",
        "retryBackoffFactor",
        "retry_status_codes",
        "retryStatusCodes",
        "delay_min_ms",
        "delayMinMs",
        "delay_max_ms",
        "delayMaxMs",
        "thinking_budget",
        "executable",
        "args",
        "log_dir",
        "log_format",
        "system_prompt",
        "workspace_template",
        "subagent_root",
        "wait_for_response",
        "tools",
        "thinking",
        "pi_provider",
    }
)


class TargetConfig(_Model):
    """A target entry of ``.agentv/targets.yaml``; provider settings are extra keys."""

    name: str
    provider: str
    judge_target: str | None = Field(
        None, validation_alias=AliasChoices("judge_target", "grader_target")
    )
    _more_spellings = tuple(
        (key, *(alias for alias, name in TARGET_SETTING_ALIASES.items() if name == key))
        for key in sorted(set(TARGET_SETTING_ALIASES.values()))
    )

    @property
    def settings(self) -> dict[str, Any]:
        """Provider settings, with AgentV's camelCase and legacy spellings under our names."""
        return {TARGET_SETTING_ALIASES.get(k, k): v for k, v in (self.model_extra or {}).items()}


class TargetsFile(_Model):
    schema_: str | None = Field(None, alias="$schema")
    targets: list[TargetConfig]

    @field_validator("targets")
    @classmethod
    def _unique_names(cls, value: list[TargetConfig]) -> list[TargetConfig]:
        seen: set[str] = set()
        for target in value:
            if target.name in seen:
                raise ValueError(f"target name '{target.name}' is defined twice")
            seen.add(target.name)
        return value


class Canary(BaseModel):
    """A calibration canary: an answer, what it is graded against, and the verdict a sane judge
    must give it. A format of pytest-agentv's own, so unknown keys are errors, not warnings."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    input: str
    answer: str
    expected_outcome: str
    rubrics: list[RubricItem] | None = Field(None, json_schema_extra=_rubrics_shorthand)
    verdict: Literal["pass", "fail"]

    @field_validator("id", mode="before")
    @classmethod
    def _id(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value

    @field_validator("id")
    @classmethod
    def _id_text(cls, value: str) -> str:
        if not value.strip() or any(ord(c) < 32 for c in value):
            raise ValueError("a canary id must be a non-empty single line")
        return value

    @field_validator("rubrics", mode="before")
    @classmethod
    def _rubrics(cls, value: Any) -> Any:
        return _rubric_list(value)

    _unique_rubrics = field_validator("rubrics")(_rubric_ids_unique)


class CalibrationFile(BaseModel):
    """``.agentv/calibration.yaml``: the canaries a judge is checked against before a run."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    canaries: list[Canary] = Field(min_length=1)

    @field_validator("canaries")
    @classmethod
    def _unique_ids(cls, value: list[Canary]) -> list[Canary]:
        seen: set[str] = set()
        for canary in value:
            if canary.id in seen:
                raise ValueError(f"canary id '{canary.id}' is used twice")
            seen.add(canary.id)
        return value


def render_content(value: Any) -> str:
    """Objects in message content are shown to models and judges as pretty JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)


#: Models whose unknown keys are meaningful (an evaluator entry's become its ``config``); every
#: other object in the JSON Schema is closed, so editors flag a typo'd key as the loader does.
_OPEN_MODELS = (EvaluatorConfig,)
#: The models of an eval file's keys (messages aside).
EVAL_FILE_MODELS: tuple[type[BaseModel], ...] = (
    EvalSuite,
    EvalCase,
    Execution,
    TrialsConfig,
    EvaluatorConfig,
    PromptScript,
    RubricItem,
    ScoreRange,
)
_SCHEMA_MODELS: tuple[type[BaseModel], ...] = (
    *EVAL_FILE_MODELS,
    Message,
    ContentSegment,
    TargetsFile,
    TargetConfig,
)


#: Required in the models but filled in by their ``before`` validators when a file leaves them
#: out (rubric ``id`` from the position, evaluator ``name`` from the type).
_DEFAULTED = {RubricItem: "id", EvaluatorConfig: "name"}


def _spell_aliases(node: dict[str, Any], model: type[BaseModel]) -> None:
    """List every spelling a field accepts; a required field needs any one of them."""
    properties = node.get("properties", {})
    required: list[str] = node.get("required", [])
    for info in model.model_fields.values():
        choices = [str(c) for c in getattr(info.validation_alias, "choices", ())]
        if len(choices) < 2 or choices[0] not in properties:
            continue
        for choice in choices[1:]:
            properties[choice] = properties[choices[0]]
        if choices[0] in required:
            required.remove(choices[0])
            node.setdefault("allOf", []).append(
                {"anyOf": [{"required": [choice]} for choice in choices]}
            )
    if "required" in node and not required:
        del node["required"]


def json_schema(kind: Literal["eval", "targets"]) -> dict[str, Any]:
    """The JSON Schema of eval files or targets files, made from these models on every call, so
    it can never drift from what the loader accepts. Shorthands (a string for a message, a map
    of score ranges...) and every alias are included; unknown keys are flagged except in
    evaluator entries, where they are the judge's ``config``."""
    root: type[BaseModel] = EvalSuite if kind == "eval" else TargetsFile
    schema = root.model_json_schema(by_alias=True, mode="validation")
    definitions: dict[str, Any] = schema.get("$defs", {})
    for model in _SCHEMA_MODELS:
        node = schema if model is root else definitions.get(model.__name__)
        if node is None:
            continue
        if model in _DEFAULTED:
            node["required"].remove(_DEFAULTED[model])
        _spell_aliases(node, model)
        node["additionalProperties"] = model in _OPEN_MODELS
    if kind == "targets":
        target = definitions["TargetConfig"]
        target["properties"].update(TARGET_SETTINGS)
        for alias, key in TARGET_SETTING_ALIASES.items():
            target["properties"][alias] = TARGET_SETTINGS[key]
        body = {key: value for key, value in schema.items() if key != "$defs"}
        schema = {
            "$defs": definitions,
            "anyOf": [body, {"type": "array", "items": {"$ref": "#/$defs/TargetConfig"}}],
        }
    title = "AgentV eval file" if kind == "eval" else "AgentV targets file"
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"{title} (pytest-agentv)",
        **{key: value for key, value in schema.items() if key != "title"},
    }
