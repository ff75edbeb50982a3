"""Reading a JavaScript pattern: the cursor, the escapes that mean the same in and out of a
character class, and classes (see ``translator.py`` for the rest)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .text import canonical, subject, variant_outside

TERMINATORS = "\\n\\r\\u2028\\u2029"
_SPACE = "\\t\\n\\v\\f\\r \\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff"
_DIGIT, _WORD = "0-9", "A-Za-z0-9_"
#: What a word character is under ``iu``: also the letters that fold into ASCII ones.
_WORD_FOLDED = "A-Za-z0-9_\\u017f\\u212a"
ANY = "[\\s\\S]"
_SYNTAX = set("^$\\.*+?()[]{}|/")
_CONTROL = {"f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
GROUP_NAME = re.compile(r"(?:[$_]|[^\W\d])[$\w]*")
_HEX2, _HEX4 = re.compile("[0-9A-Fa-f]{2}"), re.compile("[0-9A-Fa-f]{4}")
_BRACED_HEX = re.compile(r"\{([0-9A-Fa-f]+)\}")
_PROPERTY = re.compile(r"\{([A-Za-z0-9_]+(?:=[A-Za-z0-9_]+)?)\}")


def literal(char: str) -> str:
    return "\\" + char if not char.isalnum() and char.isascii() else char


@dataclass
class ClassParts:
    """A character class's parts: what goes inside Python's brackets, and the complemented sets
    that cannot (``\\W``, ``\\D``, ``\\S``), matched as alternatives."""

    inside: list[str] = field(default_factory=list)
    outside: list[str] = field(default_factory=list)


class Reader:
    """A pattern being read (without ``u``, as code units) and its flags. Under ``i`` with
    ``u`` the ``regex`` module folds case as JavaScript does (simple case folding); under ``i``
    alone, literal characters and classes are written canonical (``Canonicalize``) and matched,
    without folding, against a canonical text (``subject``)."""

    def __init__(self, pattern: str, flags: str) -> None:
        self.pattern = pattern
        self.unicode = "u" in flags
        self.src = pattern if self.unicode else subject(pattern, "")
        self.fold = "i" in flags
        self.canonical = self.fold and not self.unicode
        self.multiline = "m" in flags
        self.dotall = "s" in flags
        self.pos = 0
        self.names: dict[str, int] = {}
        self.groups = self._count_groups()

    def fail(self, problem: str) -> ValueError:
        return ValueError(f"invalid regular expression /{self.pattern}/: {problem}")

    def _count_groups(self) -> int:
        """The capturing groups and their names, known before any backreference is read."""
        count, index, in_class, src = 0, 0, False, self.src
        while index < len(src):
            char = src[index]
            if char == "\\":
                index += 1
            elif char == "[":
                in_class = True
            elif char == "]":
                in_class = False
            elif char == "(" and not in_class:
                named = src.startswith("?<", index + 1) and src[index + 3 : index + 4] not in "=!"
                if named or not src.startswith("?", index + 1):
                    count += 1
                if named and (name := GROUP_NAME.match(src, index + 3)):
                    if name.group() in self.names:
                        raise self.fail("Duplicate capture group name")
                    self.names[name.group()] = count
            index += 1
        return count

    def _character_escape(self, char: str, *, in_class: bool) -> int:
        """The code point of a character escape whose letter ``char`` was read."""
        src = self.src
        if char in _CONTROL:
            return ord(_CONTROL[char])
        if char == "c":
            letter = src[self.pos]
            self.pos += 1
            return ord(letter) % 32
        if char == "0" and not src[self.pos : self.pos + 1].isdigit():
            return 0
        if char in "01234567" and not self.unicode:
            return self._octal(char)
        if char == "x" and (hexa := _HEX2.match(src, self.pos)):
            self.pos = hexa.end()
            return int(hexa.group(), 16)
        if char == "u":
            point = self._unicode_escape()
            if point is not None:
                return point
        if self.unicode and char not in _SYNTAX and not (in_class and char == "-"):
            raise self.fail("Invalid escape")
        return ord(char)

    def _unicode_escape(self) -> int | None:
        src = self.src
        if self.unicode and (braced := _BRACED_HEX.match(src, self.pos)):
            point = int(braced.group(1), 16)
            if point > 0x10FFFF:
                raise self.fail("Invalid Unicode escape")
            self.pos = braced.end()
            return point
        hexa = _HEX4.match(src, self.pos)
        if hexa is None:
            return None
        self.pos = hexa.end()
        point = int(hexa.group(), 16)
        low = _HEX4.match(src, self.pos + 2) if src.startswith("\\u", self.pos) else None
        if self.unicode and 0xD800 <= point < 0xDC00 and low and 0xDC00 <= int(low.group(), 16):
            self.pos = low.end()
            return 0x10000 + ((point - 0xD800) << 10) + int(low.group(), 16) - 0xDC00
        return point

    def _octal(self, first: str) -> int:
        """Annex B's legacy octal escape: up to three octal digits, at most 0o377."""
        digits = first
        while len(digits) < 3 and self.src[self.pos : self.pos + 1] in set("01234567") - {""}:
            if int(digits + self.src[self.pos], 8) > 0o377:
                break
            digits += self.src[self.pos]
            self.pos += 1
        return int(digits, 8)

    def _word(self) -> str:
        return f"[{_WORD_FOLDED}]" if self.fold and self.unicode else f"[{_WORD}]"

    def _set(self, letter: str) -> str:
        """``\\d``, ``\\s``, ``\\w`` and their complements, as a class."""
        if letter in "wW":
            word = self._word()
            return word if letter == "w" else f"(?:(?!{word}){ANY})"
        inside = _DIGIT if letter in "dD" else _SPACE
        return f"[{inside}]" if letter.islower() else f"[^{inside}]"

    def _property(self, letter: str) -> str:
        found = _PROPERTY.match(self.src, self.pos)
        if found is None:
            raise self.fail("Invalid property name")
        self.pos = found.end()
        name = found.group(1)
        if letter == "p" or not self.fold:
            return f"\\{letter}{{{name}}}"
        # Under iu JavaScript's \P{X} is what folds like a character outside X: the regex
        # module's is what folds like none inside it.
        return f"(?-i:[\\P{{{name}}}{''.join(map(literal, variant_outside(name)))}])"

    # -- classes ----------------------------------------------------------------------------

    def _class(self) -> str:
        src = self.src
        negated = src.startswith("^", self.pos)
        self.pos += negated
        parts = ClassParts()
        while True:
            if self.pos >= len(src):
                raise self.fail("Unterminated character class")
            if src[self.pos] == "]":
                self.pos += 1
                break
            low = self._class_atom(parts)
            if src.startswith("-", self.pos) and not src.startswith("-]", self.pos):
                self.pos += 1
                high = self._class_atom(parts)
                if low is None or high is None:
                    if self.unicode:
                        raise self.fail("Invalid character class")
                    parts.inside.append("\\-")
                    for point in (low, high):
                        if point is not None:
                            self._member(parts, point, point)
                    continue
                if high < low:
                    raise self.fail("Range out of order in character class")
                self._member(parts, low, high)
            elif low is not None:
                self._member(parts, low, low)
        options = ([f"[{''.join(parts.inside)}]"] if parts.inside else []) + parts.outside
        if not negated:
            return "(?!)" if not options else options[0] if len(options) == 1 else _any(options)
        if not options:
            return ANY
        if not parts.outside:
            return f"[^{''.join(parts.inside)}]"
        return f"(?:(?!{'|'.join(options)}){ANY})"

    def _class_atom(self, parts: ClassParts) -> int | None:
        """One member of a class: a code point, or None after a set (``\\d``...) was added."""
        src = self.src
        char = src[self.pos]
        self.pos += 1
        if char != "\\":
            return ord(char)
        if self.pos >= len(src):
            raise self.fail("\\ at end of pattern")
        char = src[self.pos]
        self.pos += 1
        if char == "b":
            return 8
        if char in "dsw":
            folded = char == "w" and self.fold and self.unicode
            parts.inside.append(_WORD_FOLDED if folded else _inside(char))
            return None
        if char in "DSW":
            parts.outside.append(self._set(char))
            return None
        if char in "pP" and self.unicode:
            found = self._property(char)
            (parts.outside if found.startswith("(") else parts.inside).append(found)
            return None
        if char == "c" and self.pos < len(src):
            control = src[self.pos]
            if is_letter(control) or (not self.unicode and (control.isdigit() or control == "_")):
                self.pos += 1
                return ord(control) % 32
        if (char == "k" and self.names) or (char == "c" and self.unicode):
            raise self.fail("Invalid class escape")
        if char == "c":
            self.pos -= 1  # Annex B: a backslash, then "c" as written
            return ord("\\")
        if char.isdigit() and (self.unicode and char != "0"):
            raise self.fail("Invalid class escape")
        if char in "89":
            return ord(char)
        return self._character_escape(char, in_class=True)

    def _member(self, parts: ClassParts, low: int, high: int) -> None:
        """A class's range (or character); under ``i`` without ``u``, the canonical
        characters of its members."""
        if not self.canonical:
            parts.inside.append(_span(low, high))
            return
        runs: list[list[int]] = []
        for point in sorted({canonical(point) for point in range(low, high + 1)}):
            if runs and point == runs[-1][1] + 1:
                runs[-1][1] = point
            else:
                runs.append([point, point])
        for first, last in runs:
            parts.inside.append(_span(first, last))


def _span(low: int, high: int) -> str:
    first = literal(chr(low))
    return first if low == high else f"{first}-{literal(chr(high))}"


def _inside(letter: str) -> str:
    return {"d": _DIGIT, "s": _SPACE, "w": _WORD}[letter]


def _any(options: list[str]) -> str:
    return f"(?:{'|'.join(options)})"


def is_letter(char: str) -> bool:
    return char.isascii() and char.isalpha()
