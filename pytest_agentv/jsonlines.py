"""JSON Lines (JSONL datasets, results files, a batch's output) with the limits YAML has.

A line longer than ``MAX_LINE_BYTES`` is refused before it is parsed. Its nesting depth is
counted before ``json`` recurses into it, in linear time and memory (``_too_deep``; a
backtracking regex over the line's strings kept about 125 bytes of state per character, so a
9 MB line took a gigabyte). Duplicate keys and ``NaN``/``Infinity`` are refused, and every
problem names ``file:line:col``. A line's value can be given a node tree of its own
(``json_node``), so that errors about it point at its line like errors about YAML do.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from itertools import accumulate
from typing import Any

import yaml

from .errors import DuplicateKeyError, EvalFileError
from .redaction import has_surrogate, valid_data
from .yamlguards import MAX_DEPTH

#: The longest line read from a JSON Lines file: more than an eval file may hold (10 MiB), so a
#: results row that quotes one whole still fits; far less than a results file may hold (1 GiB).
MAX_LINE_BYTES = 16 * 1024 * 1024

_HIGH, _LOW = r"\\u[dD][89abAB][0-9a-fA-F]{2}", r"\\u[dD][c-fC-F][0-9a-fA-F]{2}"
_LONE_SURROGATE_ESCAPE = re.compile(f"{_HIGH}(?!{_LOW})|(?<!{_HIGH}){_LOW}")
#: A string once its escapes are gone; anything but a bracket.
_STRING = re.compile(r'"[^"]*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for key, value in pairs:
        if key in data:
            raise DuplicateKeyError(
                f"duplicate key '{key}'; JSON would silently keep only the last one"
            )
        data[key] = value
    return data


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def json_decoder(*, nan: bool = False) -> json.JSONDecoder:
    """The one way JSON data is read (files, replies, outputs): a key given twice is refused
    (``DuplicateKeyError``), not left to the last one; ``NaN``/``Infinity`` are too, unless
    ``nan`` (a reader that checks its numbers, to say what is wrong with one)."""
    constant = None if nan else _no_constant
    return json.JSONDecoder(object_pairs_hook=_no_duplicates, parse_constant=constant)


def _too_deep(text: str) -> bool:
    """Whether brackets outside strings nest ``MAX_DEPTH`` deep, found before ``json`` recurses,
    in linear time and memory: escapes are dropped (backslash pairs, then escaped quotes), which
    leaves each string a quote, text without quotes, and a quote; strings and everything else
    but brackets are dropped; the deepest level is then the largest running count of the
    brackets left. A line with fewer brackets than ``MAX_DEPTH`` cannot be that deep."""
    if text.count("[") + text.count("{") < MAX_DEPTH:
        return False
    unescaped = text.replace("\\\\", "").replace('\\"', "")
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", unescaped))
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0) >= MAX_DEPTH


#: What stands for the parts of a program's JSON nested deeper than ``MAX_DEPTH``: read, not kept.
CLIPPED = f"(nested deeper than {MAX_DEPTH} levels: not kept)"
_WHITESPACE = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?")
_LITERALS = {"true": True, "false": False, "null": None}


def read_program_json(text: str) -> Any:
    """One JSON value as a program printed it, read to any depth as JavaScript's ``JSON.parse``
    reads it (``json`` recurses, and gives up near 1,000 levels): parts nested deeper than
    ``MAX_DEPTH`` are read and replaced by ``CLIPPED``, so that what is kept can be written out
    again. Duplicate keys and ``NaN`` are refused as ``json_decoder`` refuses them; raises
    ``ValueError``."""
    if not _too_deep(text):
        return json_decoder().decode(text)
    return _read_deep(text)


class _Open:
    """A container being read by ``_read_deep``; one nested too deep keeps only its keys, to
    refuse a duplicate."""

    def __init__(self, opener: str, kept: bool) -> None:
        self.closer = "}" if opener == "{" else "]"
        self.items: dict[str, Any] | list[Any] = {} if opener == "{" else []
        self.kept = kept
        self.key = ""

    def add(self, value: Any) -> None:
        if isinstance(self.items, list):
            if self.kept:
                self.items.append(value)
        elif self.key in self.items:
            raise DuplicateKeyError(
                f"duplicate key '{self.key}'; JSON would silently keep only the last one"
            )
        else:
            self.items[self.key] = value if self.kept else None

    def value(self) -> Any:
        return self.items if self.kept else CLIPPED


def _read_deep(text: str) -> Any:
    """``read_program_json`` without recursion: the open containers are a list."""

    def skip(at: int) -> int:
        space = _WHITESPACE.match(text, at)
        return space.end() if space else at

    def key_at(at: int) -> tuple[str, int]:
        if not text.startswith('"', at):
            expected = "Expecting property name enclosed in double quotes"
            raise json.JSONDecodeError(expected, text, at)
        key, at = json.decoder.scanstring(text, at + 1)  # type: ignore[attr-defined]
        at = skip(at)
        if not text.startswith(":", at):
            raise json.JSONDecodeError("Expecting ':' delimiter", text, at)
        return str(key), skip(at + 1)

    stack: list[_Open] = []
    pos = skip(0)
    while True:
        char = text[pos : pos + 1]
        value: Any
        if char in ("{", "["):
            stack.append(frame := _Open(char, kept=len(stack) < MAX_DEPTH))
            pos = skip(pos + 1)
            if not text.startswith(frame.closer, pos):
                if char == "{":
                    frame.key, pos = key_at(pos)
                continue
            stack.pop()
            value, pos = frame.value(), pos + 1
        elif char == '"':
            value, pos = json.decoder.scanstring(text, pos + 1)  # type: ignore[attr-defined]
        elif number := _NUMBER.match(text, pos):
            digits = number.group()
            value = float(digits) if number.group(1) or number.group(2) else int(digits)
            pos = number.end()
        else:
            word = next((w for w in _LITERALS if text.startswith(w, pos)), None)
            if word is None:
                raise json.JSONDecodeError("Expecting value", text, pos)
            value, pos = _LITERALS[word], pos + len(word)
        while True:  # the value goes into its container; close those that end after it
            pos = skip(pos)
            if not stack:
                if pos != len(text):
                    raise json.JSONDecodeError("Extra data", text, pos)
                return value
            frame = stack[-1]
            frame.add(value)
            if text.startswith(",", pos):
                pos = skip(pos + 1)
                if frame.closer == "}":
                    frame.key, pos = key_at(pos)
                break
            if not text.startswith(frame.closer, pos):
                raise json.JSONDecodeError("Expecting ',' delimiter", text, pos)
            stack.pop()
            value, pos = frame.value(), pos + 1


def parse_json_line(text: str, display: str, line: int, *, repair: bool = False) -> Any:
    """One JSON value from one line, bounded like YAML: depth counted before ``json`` recurses,
    no duplicate keys, no ``NaN``; errors name ``display:line:col``. A lone surrogate escape is
    refused in what people write (eval files), or, with ``repair``, replaced in what programs
    wrote (results files, a batch's output: JavaScript writes one as ``\\ud800``)."""
    if _too_deep(text):
        raise EvalFileError(display, line, 1, f"JSON is nested deeper than {MAX_DEPTH} levels")
    try:
        value = json_decoder().decode(text)
    except json.JSONDecodeError as exc:
        raise EvalFileError(display, line, exc.colno, f"invalid JSON: {exc.msg}") from None
    except (ValueError, RecursionError) as exc:
        raise EvalFileError(display, line, 1, f"invalid JSON: {exc}") from None
    if "\\u" in text and has_surrogate(value):
        if repair:
            return valid_data(value)
        found = _LONE_SURROGATE_ESCAPE.search(text)
        raise EvalFileError(
            display,
            line,
            found.start() + 1 if found else 1,
            "invalid JSON: a \\uD800-\\uDFFF escape without its pair is not Unicode text; "
            "remove it or give the whole pair",
        )
    return value


def json_lines(text: str, display: str, *, repair: bool = False) -> Iterator[tuple[int, Any]]:
    """``(1-based line, value)`` for every non-blank line of a JSON Lines text; a line longer
    than ``MAX_LINE_BYTES`` is refused before it is parsed (and, in ASCII text, copied)."""
    ascii_text = text.isascii()
    start = number = 0
    while start <= len(text):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        number += 1
        size = end - start
        if not ascii_text and size * 4 > MAX_LINE_BYTES:
            size = len(text[start:end].encode("utf-8", "surrogatepass"))
        if size > MAX_LINE_BYTES:
            raise EvalFileError(
                display, number, 1, f"the line is {size:,} bytes; the limit is {MAX_LINE_BYTES:,}"
            )
        raw = text[start:end]
        if raw.strip():
            yield number, parse_json_line(raw, display, number, repair=repair)
        start = end + 1


def json_node(value: Any, line: int, name: str = "") -> yaml.Node:
    """A node tree for a value read from one JSON line (0-based ``line``) of file ``name``:
    every part of it is marked at that line, so locating a field in it finds the line the value
    came from."""
    return value_node(value, yaml.Mark(name, 0, line, 0, None, 0))


def value_node(value: Any, mark: yaml.Mark) -> yaml.Node:
    """A node tree for a value made in code, every part of it marked at ``mark``."""
    if isinstance(value, dict):
        return yaml.MappingNode(
            "tag:yaml.org,2002:map",
            [
                (yaml.ScalarNode("tag:yaml.org,2002:str", str(k), mark, mark), value_node(v, mark))
                for k, v in value.items()
            ],
            mark,
            mark,
        )
    if isinstance(value, list):
        return yaml.SequenceNode(
            "tag:yaml.org,2002:seq", [value_node(v, mark) for v in value], mark, mark
        )
    return yaml.ScalarNode("tag:yaml.org,2002:str", str(value), mark, mark)
