"""What answers and expected values hold, read and compared as AgentV does: JSON objects found in
text (the whole text, a fenced block, or objects inside prose) and JSON equality. (Numbers are
printed as JavaScript prints them by ``results.js_number``.)
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from ..errors import DuplicateKeyError
from ..jsonlines import json_decoder

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)

#: Where a JSON object can start: ``{`` then a key or ``}``.
_OBJECT_START = re.compile(r'\{\s*["}]')

#: Failed starts tried before giving up: each failure costs time in the text's length (the
#: decoder's error counts lines), so an answer of braces would otherwise take quadratic time.
MAX_FAILED_STARTS = 1000


def json_objects(text: str) -> Iterator[Any]:
    """Every outermost JSON object in a text, in order: the whole text, a fenced block, or
    objects inside prose. An object that gives a key twice raises ``DuplicateKeyError``: it
    says two things, and which one it means is unknown."""
    decoder = json_decoder(nan=True)
    failed = 0
    found = _OBJECT_START.search(text)
    while found is not None and failed < MAX_FAILED_STARTS:
        try:
            value, end = decoder.raw_decode(text, found.start())
        except DuplicateKeyError:
            raise
        except (ValueError, RecursionError):  # nested too deep is not JSON we can read either
            failed += 1
            found = _OBJECT_START.search(text, found.start() + 1)
            continue
        yield value
        found = _OBJECT_START.search(text, end)


def first_json_object(text: str) -> dict[str, Any]:
    """The first JSON object in a text (an answer that should be JSON, say): the whole text,
    else a fenced block, else the first object inside prose (``DuplicateKeyError`` for one
    that gives a key twice)."""
    decoder = json_decoder(nan=True)
    fenced = (block.strip() for block in _FENCE.findall(text))
    for candidate in (text.strip(), *fenced):
        try:
            value = decoder.decode(candidate)
        except DuplicateKeyError:
            raise
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict):
            return value
    for value in json_objects(text):
        if isinstance(value, dict):
            return value
    raise ValueError("no JSON object in the text" if text.strip() else "the text is empty")


def deep_equal(a: Any, b: Any) -> bool:
    """AgentV's equality of JSON values: numbers by value, but a boolean is never a number."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(deep_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(deep_equal(a[key], b[key]) for key in a)
    return type(a) is type(b) and bool(a == b)
