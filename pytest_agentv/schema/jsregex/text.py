"""How JavaScript's regular expressions see text: without the ``u`` flag as UTF-16 code units,
folded by ``Canonicalize`` under ``i``; with ``u`` folded by simple case folding."""

from __future__ import annotations

import re
from functools import cache

_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


def subject(text: str, flags: str) -> str:
    """``text`` as a pattern ``translate`` made for ``flags`` searches it: without ``u``, each
    astral character as its UTF-16 surrogate pair, and under ``i`` each code unit as
    JavaScript's ``Canonicalize`` makes it."""
    if "u" in flags or (text.isascii() and "i" not in flags):
        return text
    units = _ASTRAL.sub(lambda m: pair(ord(m.group())), text)
    return units.translate(canonical_table()) if "i" in flags else units


def pair(point: int) -> str:
    point -= 0x10000
    return chr(0xD800 + (point >> 10)) + chr(0xDC00 + (point & 0x3FF))


def canonical(point: int) -> int:
    """JavaScript's ``Canonicalize`` without ``u``: a code unit's upper case, unless that is
    more than one unit or takes a non-ASCII character into ASCII."""
    upper = chr(point).upper()
    if len(upper) != 1 or (point >= 128 and ord(upper) < 128):
        return point
    return ord(upper)


@cache
def canonical_table() -> dict[int, int]:
    return {p: c for p in range(0x10000) if (c := canonical(p)) != p}


def variant_outside(name: str) -> str:
    """The characters of Unicode property ``name`` that fold like a character outside it."""
    import regex

    try:
        inside = regex.compile(f"\\p{{{name}}}")
    except regex.error:
        return ""  # the name is reported when the translation is compiled
    return "".join(
        char
        for group in _case_groups()
        if not all(inside.match(other) for other in group)
        for char in group
        if inside.match(char)
    )


@cache
def _case_groups() -> list[list[str]]:
    """The characters that simple case folding makes one (as the ``regex`` module folds), each
    group of two or more (``k``, ``K``, the Kelvin sign)."""
    import regex

    root: dict[str, str] = {}

    def find(char: str) -> str:
        while root.get(char, char) != char:
            char = root[char]
        return char

    for point in range(0x20000):  # no cased letters beyond
        char = chr(point)
        for other in (char.lower(), char.upper()):
            if (
                len(other) == 1
                and other != char
                and regex.fullmatch(regex.escape(char), other, regex.I)
            ):
                root[find(char)] = find(other)
    groups: dict[str, list[str]] = {}
    for char in root:
        groups.setdefault(find(char), [find(char)]).append(char)
    return [sorted(set(group)) for group in groups.values()]
