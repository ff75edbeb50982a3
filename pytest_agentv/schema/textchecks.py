"""The settings of AgentV v4's deterministic checks (``contains`` ... ``equals``, ``regex``,
``is-json``): the shape of ``value`` each kind takes, and a ``regex`` pattern read with
JavaScript's meaning (``jsregex.py``) and compiled when the file loads. JavaScript's flags
``i``, ``m``, ``s`` and ``u`` change the translation; ``g``, ``d`` and ``y`` change nothing
``RegExp.test`` on a new pattern sees but that ``y`` anchors the search at the start; ``v``
is refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import PrivateAttr, field_validator

from .base import Model
from .jsregex import translate

if TYPE_CHECKING:
    import regex

#: Kinds whose ``value`` is one non-empty string, and kinds whose ``value`` is a list of them.
ONE_VALUE_KINDS = ("contains", "icontains", "starts_with", "ends_with", "equals", "regex")
LIST_VALUE_KINDS = ("contains_any", "contains_all", "icontains_any", "icontains_all")

#: The flags JavaScript's ``RegExp`` takes and pytest-agentv reads.
_KNOWN_FLAGS = "imsugyd"


def compile_js(pattern: str, flags: str) -> regex.Pattern[str]:
    """Compile a JavaScript pattern with its flags; ``ValueError`` naming the problem. (The
    ``regex`` module is imported here: it takes longer to import than the rest of a file's
    schema, and most files have no pattern.)"""
    import regex

    unknown = sorted({f for f in flags if f not in _KNOWN_FLAGS})
    if unknown:
        raise ValueError(
            f"regex flags {''.join(unknown)!r} are not supported (use i, m, s, g, y, u or d)"
        )
    if len(set(flags)) != len(flags):
        raise ValueError(f"regex flags {flags!r} repeat a flag")
    translated = translate(pattern, flags)  # JavaScript's own errors
    try:
        fold = regex.IGNORECASE if "i" in flags and "u" in flags else 0  # see jsregex
        return regex.compile(translated, regex.VERSION0 | fold)
    except regex.error as exc:  # what JavaScript would take and the regex module does not
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
