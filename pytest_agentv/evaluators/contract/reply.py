"""Reading a judge's reply: the one JSON object that carries the call's nonce, and the pieces
every mode's contract shares (the nonce rule, its place in a schema, short lists, numbers in a
range)."""

from __future__ import annotations

from typing import Any, TypeGuard

from ...errors import DuplicateKeyError
from ...llm.client import ReplyError
from ...schema.base import finite_number
from ..text import json_objects

MAX_HITS = 4


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
