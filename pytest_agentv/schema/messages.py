"""Message content as eval files write it: text, a mapping, or a list of text, file and JSON
segments, and the content as models and judges are shown it."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from .base import Model, also

Role = Literal["system", "user", "assistant", "tool"]

#: A list of segments, where a string is a text segment.
_SEGMENT_SHORTHAND = {
    "type": "array",
    "items": {"anyOf": [{"type": "string"}, {"$ref": "#/$defs/ContentSegment"}]},
}

CONTENT_SHORTHAND = also(
    {"type": "string"}, {"type": "object"}, _SEGMENT_SHORTHAND, {"type": "null"}
)

MESSAGES_SHORTHAND = also({"type": "string"}, {"type": "object"})


def _segment_rules(schema: dict[str, Any]) -> None:
    """What ``_check_value`` checks, in the JSON Schema."""
    schema["allOf"] = [
        {
            "if": {"properties": {"type": {"enum": ["text", "file"]}}},
            "then": {"properties": {"value": {"type": "string"}}},
        },
        {
            "if": {"properties": {"type": {"const": "file"}}},
            "then": {"properties": {"value": {"pattern": r"\S"}}},
        },
    ]


class ContentSegment(Model):
    """A piece of message content: inline text, a file reference, or a JSON object."""

    model_config = ConfigDict(json_schema_extra=_segment_rules)

    type: Literal["text", "file", "json"]
    value: Any

    @model_validator(mode="after")
    def _check_value(self) -> ContentSegment:
        if self.type in ("text", "file") and not isinstance(self.value, str):
            raise ValueError(f"a '{self.type}' segment needs a string 'value'")
        if self.type == "file" and not self.value.strip():
            raise ValueError("a 'file' segment needs a non-empty path in 'value'")
        return self


def normalize_content(value: Any) -> Any:
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


class Message(Model):
    role: Role
    content: list[ContentSegment] = Field(default_factory=list, json_schema_extra=CONTENT_SHORTHAND)
    name: str | None = None
    tool_calls: list[dict[str, Any]] | None = None

    @field_validator("content", mode="before")
    @classmethod
    def _content(cls, value: Any) -> Any:
        return normalize_content(value)

    def authored_content(self) -> Any:
        """The content in the shape it was written: text, an object, or a segment list."""
        if len(self.content) == 1 and self.content[0].type in ("text", "json"):
            return self.content[0].value
        return [segment.model_dump() for segment in self.content]


def as_messages(value: Any, default_role: str) -> Any:
    if isinstance(value, str):
        return [{"role": default_role, "content": value}]
    if isinstance(value, dict):
        if "role" in value:
            return [value]
        return [{"role": default_role, "content": value}]
    return value


def render_content(value: Any) -> str:
    """Objects in message content are shown to models and judges as pretty JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)
