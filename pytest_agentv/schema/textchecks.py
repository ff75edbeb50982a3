"""The settings of AgentV v4's deterministic checks (``contains`` ... ``equals``, ``regex``,
``is-json``): the shape of ``value`` each kind takes, and a ``regex`` pattern read with
JavaScript's meaning and compiled when the file loads.

A pattern is written for JavaScript's ``RegExp``; it runs on the ``regex`` module (which can stop
a search after a time limit) after a translation of the places where Python's reading differs:
``$`` without the ``m`` flag matches only at the very end, ``.`` never matches a line
terminator without ``s``, ``\\d`` and ``\\w`` are ASCII, ``\\s`` is JavaScript's whitespace, and
JavaScript's flags map onto Python's (``g``, ``y``, ``d`` and ``u`` change nothing a ``test``
sees; ``v`` is refused). Case-insensitive matching folds case as Unicode does, which for a
few letters (Turkish dotted I) differs from JavaScript's non-Unicode mode.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from pydantic import PrivateAttr, field_validator

from .base import Model

if TYPE_CHECKING:
    import regex

#: Kinds whose ``value`` is one non-empty string, and kinds whose ``value`` is a list of them.
ONE_VALUE_KINDS = ("contains", "icontains", "starts_with", "ends_with", "equals", "regex")
LIST_VALUE_KINDS = ("contains_any", "contains_all", "icontains_any", "icontains_all")

#: JavaScript's flags that change a match, by the ``regex`` module's names for them.
_FLAGS = {"i": "IGNORECASE", "m": "MULTILINE", "s": "DOTALL"}
#: Flags that change nothing ``RegExp.test`` on a new pattern sees (``y`` anchors at 0).
_NEUTRAL_FLAGS = "gdu"

#: JavaScript's whitespace (``\s``, ``trim``): Python's ``\s`` leaves out U+FEFF and adds
#: U+001C to U+001F.
JS_SPACE_CLASS = "\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"

#: JavaScript's meaning of ``\d``, ``\w`` (ASCII) and ``\s``, outside and inside a class.
_OUTSIDE = {
    "d": "[0-9]",
    "D": "[^0-9]",
    "w": "[A-Za-z0-9_]",
    "W": "[^A-Za-z0-9_]",
    "s": f"[{JS_SPACE_CLASS}]",
    "S": f"[^{JS_SPACE_CLASS}]",
}
_INSIDE = {"d": "0-9", "w": "A-Za-z0-9_", "s": JS_SPACE_CLASS}
#: What ``.`` matches without the ``s`` flag: anything but JavaScript's line terminators.
_DOT = "[^\n\r\u2028\u2029]"
_BACKREFERENCE = re.compile(r"\\k<([A-Za-z_][A-Za-z0-9_]*)>")


def js_pattern(pattern: str, flags: str) -> str:
    r"""A JavaScript pattern in the ``regex`` module's syntax with JavaScript's meaning for
    ``$`` (the very end, without ``m``), ``.`` (no line terminator, without ``s``), ``\d``,
    ``\w``, ``\s`` and named backreferences (``\k<name>``)."""
    out: list[str] = []
    in_class = False
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\" and index + 1 < len(pattern):
            named = _BACKREFERENCE.match(pattern, index)
            if named and not in_class:
                out.append(f"(?P={named.group(1)})")
                index = named.end()
                continue
            letter = pattern[index + 1]
            table = _INSIDE if in_class else _OUTSIDE
            out.append(table.get(letter, char + letter))
            index += 2
            continue
        if char == "[" and not in_class:
            in_class = True
        elif char == "]" and in_class:
            in_class = False
        elif char == "$" and not in_class and "m" not in flags:
            char = r"\Z"
        elif char == "." and not in_class and "s" not in flags:
            char = _DOT
        out.append(char)
        index += 1
    return "".join(out)


def compile_js(pattern: str, flags: str) -> regex.Pattern[str]:
    """Compile a JavaScript pattern with its flags; ``ValueError`` naming the problem. (The
    ``regex`` module is imported here: it takes longer to import than the rest of a file's
    schema, and most files have no pattern.)"""
    import regex

    unknown = sorted({f for f in flags if f not in _FLAGS and f not in _NEUTRAL_FLAGS + "y"})
    if unknown:
        raise ValueError(
            f"regex flags {''.join(unknown)!r} are not supported (use i, m, s, g, y, u or d)"
        )
    if len(set(flags)) != len(flags):
        raise ValueError(f"regex flags {flags!r} repeat a flag")
    bits = regex.VERSION0
    for flag in flags:
        if flag in _FLAGS:
            bits |= getattr(regex, _FLAGS[flag])
    try:
        return regex.compile(js_pattern(pattern, flags), bits)
    except regex.error as exc:
        raise ValueError(f"invalid regular expression /{pattern}/: {exc}") from None


class TextCheckSpec(Model):
    """A deterministic check's ``value`` (``flags`` for ``regex``), by the kind's shape."""

    value: Any = None
    flags: str | None = None
    _kind: str = PrivateAttr("")
    _pattern: regex.Pattern[str] | None = PrivateAttr(None)

    @field_validator("flags", mode="before")
    @classmethod
    def _flags(cls, value: Any) -> Any:
        if value is not None and not isinstance(value, str):
            raise ValueError("flags must be a string of regex flags such as 'i' or 'im'")
        return value

    @property
    def kind(self) -> str:
        """The kind these settings were checked for."""
        return self._kind

    @property
    def pattern(self) -> regex.Pattern[str] | None:
        return self._pattern

    @property
    def sticky(self) -> bool:
        """``y``: the pattern must match at the start (``RegExp.test`` from ``lastIndex`` 0)."""
        return "y" in (self.flags or "")

    @property
    def values(self) -> list[str]:
        return [self.value] if isinstance(self.value, str) else list(self.value or ())

    def for_kind(self, kind: str) -> TextCheckSpec:
        """Check ``value`` against what ``kind`` takes (and compile a ``regex``)."""
        value = self.value
        if kind in ONE_VALUE_KINDS and (not isinstance(value, str) or not value):
            got = "nothing" if value is None else repr(value)
            raise ValueError(f"'{kind}' needs 'value': a non-empty string (got {got})")
        if kind in LIST_VALUE_KINDS and not (
            isinstance(value, list) and value and all(isinstance(v, str) for v in value)
        ):
            got = "nothing" if value is None else repr(value)
            raise ValueError(f"'{kind}' needs 'value': a non-empty list of strings (got {got})")
        if self.flags is not None and kind != "regex":
            raise ValueError("'flags' applies to 'regex' only")
        self._kind = kind
        if kind == "regex":
            self._pattern = compile_js(str(value), self.flags or "")
        return self
