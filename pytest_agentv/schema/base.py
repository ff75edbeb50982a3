"""The base of every model of an eval, targets or calibration file, the numbers such files
hold (and how weights average), and validation problems in the words error messages use."""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Annotated, Any, ClassVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    ValidationError,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic.version import VERSION as PYDANTIC_VERSION
from pydantic_core import CoreSchema, ErrorDetails

from ..spellings import field_groups, one_spelling


def _rebuilds_under_a_lock(version: str) -> bool:
    """pydantic builds a deferred model at its first use under a lock from 2.14 on; before,
    two threads using a model first at once (pytest's and the plugin's event loop) could
    validate with a half-built model, or with its base class's validator."""
    found = re.match(r"(\d+)\.(\d+)", version)
    return found is not None and (int(found[1]), int(found[2])) >= (2, 14)


#: Whether models build their validators at first use rather than at import.
DEFER_BUILD = _rebuilds_under_a_lock(PYDANTIC_VERSION)


class Model(BaseModel):
    """Validators are built at a model's first use, not at import (where pydantic makes that
    safe across threads, ``DEFER_BUILD``): a run pays only for the models its files use (a
    kind's settings, a workspace), and a model used only inside an eval file is built once, as
    part of that file's model."""

    model_config = ConfigDict(
        extra="allow",
        frozen=True,
        populate_by_name=True,
        ser_json_inf_nan="null",
        defer_build=DEFER_BUILD,
    )
    #: Groups of keys read as one that are not fields (a target's camelCase settings).
    _more_spellings: ClassVar[tuple[tuple[str, ...], ...]] = ()

    @model_validator(mode="before")
    @classmethod
    def _spelled_once(cls, value: Any) -> Any:
        if isinstance(value, dict):
            one_spelling(value, (*field_groups(cls), *cls._more_spellings))
        return value


def finite_number(value: Any) -> float | None:
    """A number as data reports it: a finite int or float (a bool is not a number), else None.
    An integer beyond a float's range is not finite (JavaScript reads it as Infinity; asking
    ``math.isfinite`` about it raises ``OverflowError``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def metric_number(value: Any) -> float | None:
    """A number an answer or a model server reports about itself (a cost, a duration, a count
    of tokens or calls): a finite number >= 0, else None. The one reading of such numbers; what
    None means (not graded, unknown cost) is up to the reader."""
    number = finite_number(value)
    return number if number is not None and number >= 0 else None


def reported_metric(value: Any) -> float | None:
    """A number an answer reports about itself, as a limit is checked against it: a metric
    (``metric_number``), or ``inf`` for a whole number too large for a float (it is over any
    limit; JavaScript reads it as Infinity); None for NaN, infinities, negatives and what is not
    a number."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return finite_number(value) or math.inf
    return metric_number(value)


def shown_number(value: Any, most: int = 40) -> str:
    """A value as a message shows it: its ``repr``, cut short (a number may have 400 digits)."""
    try:
        text = repr(value)
    except ValueError:  # an integer longer than Python converts to text
        return "an integer too long to show"
    return text if len(text) <= most else f"{text[: most - 3]}..."


@dataclass(frozen=True, eq=False)  # compared (and hashed, in type unions) by identity
class Schema:
    """Field metadata that adds to the field's JSON Schema what its validators read or check and
    pydantic cannot say (an id also written as a number): one place states both."""

    extra: dict[str, Any]

    def __get_pydantic_json_schema__(
        self, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        found = handler(core_schema)
        found.update(self.extra)
        return found


#: Every number but NaN and the infinities. JSON has none of them, but YAML has (``.nan``,
#: ``.inf``), and NaN passes every comparison a JSON Schema makes: it is the one number both
#: ``>= 1`` and ``<= 0``; only the infinities lie beyond the largest float.
FINITE = Schema(
    {
        "not": {
            "anyOf": [
                {"minimum": 1, "maximum": 0},
                {"exclusiveMinimum": sys.float_info.max},
                {"exclusiveMaximum": -sys.float_info.max},
            ]
        }
    }
)

#: A number as files write it: an int or a float, never a quoted number or a boolean (what JSON
#: Schema calls a number), and finite.
Number = Annotated[float, Field(strict=True, allow_inf_nan=False), FINITE]
#: A weight: a finite number >= 0 (a weight of 0 counts for nothing).
Weight = Annotated[Number, Field(ge=0)]
#: A time limit: a finite number of seconds > 0.
Seconds = Annotated[Number, Field(gt=0)]
#: Yes or no: ``true`` or ``false``, never ``"yes"`` or ``1``.
Flag = Annotated[bool, Field(strict=True)]


def weighted_average(graded: Iterable[tuple[float, float]]) -> float:
    """The mean of ``(score, weight)`` pairs by weight (weights finite and >= 0; 0 when they all
    are 0). Weights count relative to the largest: two weights near a float's limit would
    overflow their sum, and the mean would be NaN."""
    pairs = list(graded)
    largest = max((weight for _, weight in pairs), default=0.0)
    if largest <= 0:
        return 0.0
    shares = [(score, weight / largest) for score, weight in pairs]
    return sum(score * share for score, share in shares) / sum(share for _, share in shares)


def _number_as_text(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


def _whole(value: Any) -> Any:
    """``3.0`` is ``3``, as AgentV (JavaScript) reads a number; ``2.5`` and ``true`` stay what
    they are, for a strict ``int`` to refuse."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


#: A count or cap written as a whole number, ``3`` or ``3.0`` (on a strict ``int``).
WHOLE = BeforeValidator(_whole)

#: An id written as a whole number (``id: 1``, or ``1.0``: JSON Schema's integers) is its digits.
Text = Annotated[str, BeforeValidator(_number_as_text), Schema({"type": ["string", "integer"]})]
#: Text that is not blank; a command (text or a list) that is not empty.
NOT_BLANK = Schema({"pattern": r"\S"})
NOT_EMPTY = Schema({**NOT_BLANK.extra, "minItems": 1})


@dataclass(frozen=True)
class _AtLeastZero:
    """A threshold, budget or limit field: a finite number >= 0, named ``what`` in errors."""

    what: str

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> CoreSchema:
        from pydantic_core import core_schema

        return core_schema.no_info_before_validator_function(
            partial(limit, what=self.what), handler(source)
        )

    def __get_pydantic_json_schema__(
        self, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {**handler(core_schema), "minimum": 0, **FINITE.extra}


def at_least_zero(what: str) -> Any:
    """A threshold, budget or limit field: a finite number >= 0, named ``what`` in errors."""
    return _AtLeastZero(what)


#: The values of a map of limits (its before validator names each key in errors).
Limit = Annotated[float, Schema({"minimum": 0, **FINITE.extra})]


def first_repeat(names: Iterable[str]) -> str | None:
    """The first name that comes again, if one does."""
    seen: set[str] = set()
    for name in names:
        if name in seen:
            return name
        seen.add(name)
    return None


def named_once(attribute: str, problem: str) -> AfterValidator:
    """A list whose items' ``attribute`` is each used once; ``problem`` names the one that is
    not (``{}`` stands for it)."""

    def check(values: list[Any]) -> list[Any]:
        repeated = first_repeat(getattr(value, attribute) for value in values)
        if repeated is not None:
            raise ValueError(problem.format(repeated))
        return values

    return AfterValidator(check)


def limit(value: Any, what: str) -> float:
    """A threshold or budget: a finite number >= 0 (``True`` is not a number here)."""
    number = metric_number(value)
    if number is None:
        raise ValueError(f"{what} must be a finite number >= 0 (got {shown_number(value)})")
    return number


def choice(value: Any, choices: tuple[str, ...], what: str, hint: str = "") -> str:
    if value not in choices:
        shown = " or ".join(", ".join(choices).rsplit(", ", 1))
        raise ValueError(f"unknown {what} {value!r}: use {shown}{hint}")
    return str(value)


def real_number(value: Any) -> Any:
    """A number as YAML writes it: not a boolean, a numeric string, infinity or NaN."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"must be a number, not {type(value).__name__}")
    if finite_number(value) is None:
        raise ValueError("must be a finite number")
    return value


def also(*alternatives: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
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
    "finite_number": "must be a finite number",
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
    ctx = {  # a bound of 0 reads "0", not "0.0"
        key: int(value) if isinstance(value, float) and value.is_integer() else value
        for key, value in error.get("ctx", {}).items()
    }
    try:
        return wording.format(**ctx)
    except (KeyError, IndexError):
        return message


def problems(exc: ValidationError) -> str:
    """Every problem of a validation error, ``loc: problem``, joined: for values given in
    Python (``assert_judged``'s entries, a hook's evaluator settings), which have no file."""
    return "; ".join(
        f"{'.'.join(map(str, e['loc'])) or 'entry'}: {problem_text(e)}"
        for e in exc.errors(include_url=False)
    )
