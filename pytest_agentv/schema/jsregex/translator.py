"""JavaScript patterns written in the ``regex`` module's syntax: groups, quantifiers and the
escapes outside classes, read in one pass with the open groups on a list (no recursion), and
the repetitions a pattern asks for counted as it is read."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .reader import ANY, GROUP_NAME, TERMINATORS, Reader, is_letter, literal
from .text import canonical

#: How many times, at most, the parts of a pattern may be required to repeat, each weighted by
#: the repetitions around it (``(?:a{100}){1000}`` is 100,000).
MAX_REPEAT_WORK = 100_000
#: The largest count the ``regex`` module takes; a larger maximum is no maximum at all.
_MAX_COUNT = 2**32 - 2
_QUANTIFIER = re.compile(r"\{(\d+)(?:(,)(\d*))?\}")


@dataclass
class _Frame:
    """A group being read: what it emitted, and its last atom, which a quantifier repeats."""

    out: list[str] = field(default_factory=list)
    #: Where the last atom starts in ``out`` (None: nothing to repeat), and whether it is one a
    #: quantifier may follow: "atom", "lookahead" (Annex B allows it) or "" (an assertion).
    atom: int | None = None
    kind: str = ""
    atom_work: int = 0
    work: int = 0
    #: The work of the finished alternatives; the group's is their sum.
    done_work: int = 0
    #: What the group is to its parent: "atom", "lookahead" or "" (a lookbehind).
    opened: str = "atom"


class Translator(Reader):
    """Writes the translation of the pattern it reads."""

    def translate(self) -> str:
        stack = [_Frame()]
        src = self.src
        while self.pos < len(src):
            frame = stack[-1]
            char = src[self.pos]
            self.pos += 1
            if char == "(":
                stack.append(self._open_group())
            elif char == ")":
                if len(stack) == 1:
                    raise self.fail("Unmatched ')'")
                group = stack.pop()
                work = max(group.done_work + group.work, 1)
                self._atom(stack[-1], "".join(group.out) + ")", group.opened, work)
            elif char == "|":
                frame.done_work += frame.work
                frame.work, frame.atom = 0, None
                frame.out.append("|")
            elif char in "*+?" or (char == "{" and _QUANTIFIER.match(src, self.pos - 1)):
                self._quantify(frame, char)
            elif char == "{" or char in "}]":
                if self.unicode:
                    raise self.fail("Lone quantifier brackets" if char != "]" else "Lone ']'")
                self._atom(frame, literal(char))
            elif char == "[":
                self._atom(frame, self._class())
            elif char == "\\":
                self._escape(frame)
            elif char == "^":
                self._assertion(frame, f"(?<![^{TERMINATORS}])" if self.multiline else "^")
            elif char == "$":
                self._assertion(frame, f"(?![^{TERMINATORS}])" if self.multiline else "\\Z")
            elif char == ".":
                self._atom(frame, ANY if self.dotall else f"[^{TERMINATORS}]")
            else:
                self._char(frame, ord(char))
        if len(stack) > 1:
            raise self.fail("Unterminated group")
        root = stack[0]
        if root.done_work + root.work > MAX_REPEAT_WORK:
            raise self.fail(
                f"its repetitions add up to {root.done_work + root.work:,} matches of its parts; "
                f"pytest-agentv takes at most {MAX_REPEAT_WORK:,} (JavaScript engines take any)"
            )
        return "".join(root.out)

    def _atom(self, frame: _Frame, text: str, kind: str = "atom", work: int = 1) -> None:
        frame.atom = len(frame.out)
        frame.out.append(text)
        frame.kind, frame.atom_work = kind, work
        frame.work += work

    def _assertion(self, frame: _Frame, text: str) -> None:
        self._atom(frame, text, kind="", work=0)

    def _char(self, frame: _Frame, point: int) -> None:
        self._atom(frame, literal(chr(canonical(point) if self.canonical else point)))

    def _open_group(self) -> _Frame:
        src, at = self.src, self.pos
        group = _Frame()
        if not src.startswith("?", at):
            group.out.append("(")
            return group
        opener = src[at : at + 2]
        if opener in ("?=", "?!"):
            group.opened = "lookahead"
        elif src.startswith(("?<=", "?<!"), at):
            opener, group.opened = src[at : at + 3], ""
        elif opener == "?<" and (name := GROUP_NAME.match(src, at + 2)):
            if not src.startswith(">", name.end()):
                raise self.fail("Invalid capture group name")
            self.pos = name.end() + 1
            group.out.append("(")
            return group
        elif opener != "?:":
            raise self.fail("Invalid group")
        self.pos += len(opener)
        group.out.append("(" + opener)
        return group

    def _quantify(self, frame: _Frame, char: str) -> None:
        if char == "{":
            found = _QUANTIFIER.match(self.src, self.pos - 1)
            assert found is not None
            low = _count(found.group(1))
            high = low if not found.group(2) else _count(found.group(3)) if found.group(3) else None
            if high is not None and high < low:
                raise self.fail("numbers out of order in {} quantifier")
            self.pos = found.end()
        else:
            low, high = {"*": (0, None), "+": (1, None), "?": (0, 1)}[char]
        allowed = frame.kind == "atom" or (frame.kind == "lookahead" and not self.unicode)
        if frame.atom is None or not allowed:
            raise self.fail("Nothing to repeat")
        lazy = self.src.startswith("?", self.pos)
        self.pos += lazy
        atom = "".join(frame.out[frame.atom :])
        del frame.out[frame.atom :]
        top = "" if high is None or high > _MAX_COUNT else str(high)
        count = f"{{{low}}}" if high == low else f"{{{low},{top}}}"  # a large low is refused
        frame.out.append(f"(?:{atom}){count}" + ("?" if lazy else ""))
        frame.work -= frame.atom_work
        repeated = frame.atom_work * max(low, 1) + (frame.atom_work if high != low else 0)
        frame.kind = "quantified"
        frame.work += repeated
        frame.atom_work = repeated

    # -- escapes ----------------------------------------------------------------------------

    def _escape(self, frame: _Frame) -> None:
        src = self.src
        if self.pos >= len(src):
            raise self.fail("\\ at end of pattern")
        char = src[self.pos]
        self.pos += 1
        if char in "bB":
            word = self._word()
            at_edge = f"(?<={word})(?!{word})|(?<!{word})(?={word})"
            inside = f"(?<={word})(?={word})|(?<!{word})(?!{word})"
            self._assertion(frame, f"(?:{at_edge if char == 'b' else inside})")
        elif char in "dDsSwW":
            self._atom(frame, self._set(char))
        elif char in "pP" and self.unicode:
            self._atom(frame, self._property(char))
        elif char.isdigit() and char != "0":
            self.pos -= 1
            self._decimal(frame)
        elif char == "k" and (self.unicode or self.names):
            name = GROUP_NAME.match(src, self.pos + 1)
            if not src.startswith("<", self.pos) or not name or name.group() not in self.names:
                raise self.fail("Invalid named capture referenced")
            if not src.startswith(">", name.end()):
                raise self.fail("Invalid named reference")
            self.pos = name.end() + 1
            self._atom(frame, self._backreference(self.names[name.group()]))
        elif char == "c" and not (self.pos < len(src) and is_letter(src[self.pos])):
            if self.unicode:
                raise self.fail("Invalid unicode escape")
            self.pos -= 1  # Annex B: a backslash, then "c" as written
            self._atom(frame, "\\\\")
        else:
            self._char(frame, self._character_escape(char, in_class=False))

    def _decimal(self, frame: _Frame) -> None:
        digits = re.match(r"\d+", self.src[self.pos :])
        assert digits is not None
        number = int(digits.group())
        if number <= self.groups:
            self.pos += len(digits.group())
            self._atom(frame, self._backreference(number))
        elif self.unicode:
            raise self.fail("Invalid escape")
        else:
            first = self.src[self.pos]
            self.pos += 1
            self._char(frame, self._character_escape(first, in_class=False))

    @staticmethod
    def _backreference(number: int) -> str:
        """JavaScript's: the empty string when the group did not take part."""
        return f"(?:(?({number})\\g<{number}>))"


def _count(digits: str) -> int:
    """A quantifier's count; any count past what the ``regex`` module takes is one more."""
    return int(digits) if len(digits) <= 10 else _MAX_COUNT + 1


def translate(pattern: str, flags: str) -> str:
    """``pattern`` (JavaScript's, with ``flags``) in the ``regex`` module's syntax, with
    JavaScript's meaning; ``ValueError`` where JavaScript refuses it."""
    return Translator(pattern, flags).translate()
