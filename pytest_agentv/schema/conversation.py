"""A conversation case (AgentV v4.15's ``mode: conversation``): its turns, how their scores
aggregate, what a failing turn stops, and how many earlier turns the graders see.

A conversation's shared ``input`` (a system prompt, earlier messages) is optional; each turn is
one user message, answered live by the target, with the checks that grade that reply.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field, ValidationError, field_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from .base import Model, Schema, also, shown_number
from .entries import entries_or_strings
from .evaluators import Entries
from .messages import (
    MESSAGES_SHORTHAND,
    ContentSegment,
    Message,
    as_messages,
    normalize_content,
)

Aggregation = Literal["mean", "min", "max"]
TurnFailure = Literal["continue", "stop"]

#: The keys only a conversation has (besides ``mode``).
CONVERSATION_KEYS = ("turns", "aggregation", "on_turn_failure", "window_size")

#: The name AgentV v4 gives the rubric its turns' plain-string assertions make.
TURN_RUBRICS = "turn-rubrics"


def _turn_strings(value: Any) -> Any:
    """A turn's plain-string assertions become one ``llm-grader`` named ``turn-rubrics``, placed
    first, with criteria ``criterion-1``... each weighing 1 and none required (AgentV v4
    ``buildTurnAssertions``; a case's own strings are read another way, see ``entries``: there
    each is required); entries follow as written."""
    if not isinstance(value, list) or not any(isinstance(item, str) for item in value):
        return value
    criteria = [
        {"id": f"criterion-{index}", "outcome": text, "weight": 1, "required": False}
        for index, text in enumerate((item for item in value if isinstance(item, str)), 1)
    ]
    rubric = {"name": TURN_RUBRICS, "type": "llm-grader", "rubrics": criteria}
    return [rubric, *(item for item in value if not isinstance(item, str))]


def _whole_number(value: Any) -> Any:
    """A count as files write it: a whole number (``2`` or ``2.0``), never text or a boolean."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"must be a whole number (got {shown_number(value)})")
    return value


def _one_or_more(what: str) -> Any:
    def check(value: int) -> int:
        if value < 1:
            raise ValueError(f"must be at least 1 {what} (got {value})")
        return value

    return AfterValidator(check)


#: How many turns (the current one included) a turn's graders see, besides system messages.
WindowSize = Annotated[
    int,
    BeforeValidator(_whole_number),
    _one_or_more("turn"),
    Schema({"type": "integer", "minimum": 1}),
]

#: A turn's message: text, a mapping (JSON content) or a list of segments, not empty.
_TURN_INPUT = also(
    {"type": ["string", "object"]},
    {
        "type": "array",
        "minItems": 1,
        "items": {"anyOf": [{"type": "string"}, {"$ref": "#/$defs/ContentSegment"}]},
    },
)


class ConversationTurn(Model):
    """One turn: the user's message, and what grades the target's reply to it."""

    input: list[ContentSegment] = Field(min_length=1, json_schema_extra=_TURN_INPUT)
    #: The reply a turn is compared with (its reference answer); never sent to the target.
    expected_output: list[Message] = Field(
        default_factory=list, json_schema_extra=MESSAGES_SHORTHAND
    )
    assertions: Annotated[Entries, BeforeValidator(_turn_strings)] | None = Field(
        None, json_schema_extra=entries_or_strings
    )

    @field_validator("input", mode="before")
    @classmethod
    def _input(cls, value: Any) -> Any:
        return normalize_content(value)

    @field_validator("expected_output", mode="before")
    @classmethod
    def _expected(cls, value: Any) -> Any:
        return [] if value is None else as_messages(value, "assistant")

    @property
    def checked(self) -> bool:
        """Whether anything grades this turn's reply (its assertions, or its expected reply
        for the case's default judge); AgentV v4 scores a turn with neither 1."""
        return bool(self.assertions or self.expected_output)


def _problem(key: str, message: str) -> ValidationError:
    problem = PydanticCustomError("conversation", message)
    return ValidationError.from_exception_data(
        "conversation", [InitErrorDetails(type=problem, loc=(key,), input=None)]
    )


def check_conversation(case: Any) -> None:
    """Refuse, at the key, what makes a case half a conversation: turns without ``mode:
    conversation`` or the reverse, conversation settings on another case, expected replies on
    a conversation as a whole; and a case that is not a conversation without its ``input``."""
    if case.mode is None:
        if not case.input_messages:
            raise ValidationError.from_exception_data(
                "case", [InitErrorDetails(type="missing", loc=("input_messages",), input=None)]
            )
        for key in CONVERSATION_KEYS:
            if getattr(case, key) is not None:
                raise _problem(
                    key,
                    f"'{key}' belongs to a conversation: add 'mode: conversation' to the case "
                    "(AgentV v4.15)",
                )
        return
    if case.turns is None:
        raise _problem(
            "mode",
            "a conversation needs 'turns': a list of {input, expected_output, assertions}",
        )
    if case.expected_messages:
        raise _problem(
            "expected_messages",
            "a conversation's expected replies belong to its turns (turns[].expected_output)",
        )


def _given(key: str, value: dict[str, Any] | None = None) -> dict[str, Any]:
    """A key written with a value (null is as good as no key)."""
    return {"required": [key], "properties": {key: value or {"not": {"type": "null"}}}}


def conversation_schema(schema: dict[str, Any]) -> None:
    """What ``check_conversation`` checks, in a case's JSON Schema."""
    replies = {"anyOf": [{"type": ["string", "object"]}, {"type": "array", "minItems": 1}]}
    schema.setdefault("allOf", []).extend(
        [
            {
                "if": {"not": _given("mode")},
                "then": {
                    "anyOf": [{"required": ["input_messages"]}, {"required": ["input"]}],
                    "not": {"anyOf": [_given(key) for key in CONVERSATION_KEYS]},
                },
            },
            {
                "if": _given("mode"),
                "then": {
                    **_given("turns"),
                    "not": {
                        "anyOf": [
                            _given(key, replies) for key in ("expected_messages", "expected_output")
                        ]
                    },
                },
            },
        ]
    )
