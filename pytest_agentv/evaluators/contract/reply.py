"""Reading a judge's reply: the one JSON object that carries the call's nonce, and the pieces
every mode's contract shares (the nonce rule, its place in a schema, short lists and bounded
strings, numbers in a range, text copied from the prompt, the reply's token bound)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any, TypeGuard

from ...errors import DuplicateKeyError
from ...llm.client import ReplyError
from ...schema.base import finite_number
from ..text import json_objects

MAX_HITS = 4
#: The longest a hit or a miss may be, in characters (the schema's ``maxLength``: a grammar that
#: enforces it cannot loop inside a string).
NOTE_CHARS = 120
#: The longest a check's reasoning, and a reply's overall reasoning, may be.
CHECK_REASONING_CHARS = 240
REASONING_CHARS = 400
#: A reply bound's allowance: characters per token (generous: grammar-constrained small models
#: spend tokens on single characters), and tokens beyond the schema's size.
CHARS_PER_TOKEN = 2
SPARE_TOKENS = 64


def contract_object(text: str, nonce: str) -> dict[str, Any]:
    """The JSON object of a reply that carries this call's nonce as its ``"nonce"`` field.

    Every outermost object in the reply is read (the whole reply, a fenced block, or objects
    inside prose); objects without the nonce — quoted from the candidate, say — never count, and
    two different objects that both carry it are a reply outside the contract, as is an object
    that gives a key twice (``{"score": 0.1, "score": 0.95}``: which score?).
    """
    carrying: list[dict[str, Any]] = []
    others = 0
    try:
        for value in json_objects(text):
            if isinstance(value, dict) and value.get("nonce") == nonce:
                if value not in carrying:
                    carrying.append(value)
            else:
                others += 1
    except DuplicateKeyError as exc:
        raise ReplyError(f"a JSON object in the reply has a {exc}") from None
    if len(carrying) == 1:
        return carrying[0]
    if carrying:
        raise ReplyError(
            f"the reply holds {len(carrying)} different JSON objects carrying this call's nonce"
        )
    if others:
        raise ReplyError(f'no JSON object in the reply carries "nonce": "{nonce}"')
    raise ReplyError("no JSON object in the reply" if text.strip() else "the reply was empty")


def strings(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(v.strip() for v in value if isinstance(v, str) and v.strip())[:MAX_HITS]


def number_in(value: Any, low: float, high: float) -> TypeGuard[float]:
    number = finite_number(value)
    return number is not None and low <= number <= high


def echo_rule(nonce: str) -> str:
    return f'Set "nonce" to exactly "{nonce}": only an object carrying it counts as your answer.\n'


def with_nonce(schema: dict[str, Any], nonce: str) -> dict[str, Any]:
    properties = {**schema["properties"], "nonce": {"type": "string", "const": nonce}}
    return {**schema, "properties": properties, "required": [*schema["required"], "nonce"]}


def text_schema(most: int) -> dict[str, Any]:
    return {"type": "string", "maxLength": most}


def notes_schema() -> dict[str, Any]:
    return {"type": "array", "items": text_schema(NOTE_CHARS), "maxItems": MAX_HITS}


_PLACEHOLDER = re.compile(r"^\s*(<[^<>]*>|\.\.\.|…)\s*$")


def copied(text: Any, examples: Iterable[str]) -> bool:
    """Whether a reply's text is a template's placeholder (``<one or two sentences>``) or one
    of the prompt's own descriptions of what to write (``examples``): copied, not written."""
    if not isinstance(text, str):
        return False
    said = " ".join(text.split()).strip(" .").lower()
    return bool(_PLACEHOLDER.match(text)) or any(
        said == " ".join(example.split()).strip(" .").lower() for example in examples
    )


def written(data: Mapping[str, Any], key: str, examples: Iterable[str]) -> None:
    """Refuse a reply whose ``key`` (a string, or strings) is copied from the prompt."""
    value = data.get(key)
    for text in value if isinstance(value, list) else [value]:
        if copied(text, examples):
            raise ReplyError(
                f"'{key}' holds {text!r}, copied from the prompt instead of written for this answer"
            )


def reply_tokens(schema: Mapping[str, Any]) -> int:
    """The reply bound (``max_tokens``) for a reply within ``schema``: every string at its
    ``maxLength``, every list at its ``maxItems``, every key and separator, at
    ``CHARS_PER_TOKEN``, plus ``SPARE_TOKENS``."""
    return math.ceil(_chars(schema) / CHARS_PER_TOKEN) + SPARE_TOKENS


def _chars(schema: Mapping[str, Any]) -> int:
    if "const" in schema:
        return len(str(schema["const"])) + 4
    if "enum" in schema:
        return max(len(str(value)) for value in schema["enum"]) + 4
    kind = schema.get("type")
    if kind == "object":
        return 2 + sum(len(key) + 6 + _chars(value) for key, value in schema["properties"].items())
    if kind == "array":
        return 2 + int(schema.get("maxItems", MAX_HITS)) * (_chars(schema["items"]) + 2)
    if kind == "string":
        return int(schema.get("maxLength", REASONING_CHARS)) + 2
    return 8  # a number or a boolean
