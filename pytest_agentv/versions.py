"""The AgentV version whose semantics pytest-agentv implements, and npm's semver ranges (what a
project's ``required_version`` is written in) checked against it, as node-semver reads them:
``||`` between sets, comparators (``>=1.2``, ``<2``), ``x`` ranges, ``~``, ``^`` and hyphens."""

from __future__ import annotations

import operator
import re
from collections.abc import Callable

#: The AgentV release pytest-agentv reads and grades as (eval files, targets, results rows).
AGENTV_VERSION = "4.42.4"

#: A version as it sorts: major, minor, patch, then a release after every prerelease of it.
Key = tuple[int, int, int, tuple[object, ...]]
Check = Callable[[Key], bool]

_PART = r"0|[1-9]\d*|[xX*]"
_IDENT = r"[0-9A-Za-z-]+"
_PARTIAL = re.compile(
    rf"(?P<op><=|>=|<|>|=|~>|~|\^)?v?(?P<major>{_PART})(?:\.(?P<minor>{_PART})"
    rf"(?:\.(?P<patch>{_PART})(?:-(?P<pre>{_IDENT}(?:\.{_IDENT})*))?(?:\+{_IDENT}(?:\.{_IDENT})*)?)?)?"
)
_SPACED_OPERATOR = re.compile(r"(<=|>=|<|>|=|~>|~|\^)\s+")
_EVERY: Check = lambda key: True  # noqa: E731
_NONE: Check = lambda key: False  # noqa: E731


def _key(major: int, minor: int, patch: int, pre: str | None = None) -> Key:
    if pre is None:
        return (major, minor, patch, (1,))
    ids = [(0, int(i)) if i.isdigit() else (1, i) for i in pre.split(".")]
    return (major, minor, patch, (0, *ids))


def _below(major: int, minor: int = 0, patch: int = 0) -> Check:
    """Below every prerelease of the version (node-semver's ``<X.Y.Z-0``)."""
    bound = _key(major, minor, patch, "0")
    return lambda key: key < bound


def _compare(op: Callable[[Key, Key], bool], bound: Key) -> Check:
    return lambda key: op(key, bound)


def _number(text: str | None) -> int | None:
    return None if text is None or text in "xX*" else int(text)


def _parts(found: re.Match[str]) -> tuple[int | None, int | None, int | None]:
    """A partial version's numbers, None for a wildcard or a missing part; a number after a
    wildcard (``1.x.3``) or a wildcard with a prerelease is no version."""
    written = [found[name] for name in ("major", "minor", "patch") if found[name] is not None]
    shape = "".join("x" if part in "xX*" else "n" for part in written)
    if "xn" in shape or ("x" in shape and found["pre"]):
        raise ValueError(found.group())
    major, minor, patch = (_number(found[name]) for name in ("major", "minor", "patch"))
    return major, minor, patch


def _comparator(token: str) -> list[Check]:
    found = _PARTIAL.fullmatch(token)
    if found is None:
        raise ValueError(token)
    op = found["op"] or "="
    major, minor, patch = _parts(found)
    if major is None:
        return [_NONE if op in ("<", ">") else _EVERY]
    whole = minor is not None and patch is not None
    low = _key(major, minor or 0, patch or 0, found["pre"] if whole else None)
    if op == ">=":
        return [_compare(operator.ge, low)]
    if op == ">":
        if minor is None:
            return [_compare(operator.ge, _key(major + 1, 0, 0))]
        if patch is None:
            return [_compare(operator.ge, _key(major, minor + 1, 0))]
        return [_compare(operator.gt, low)]
    if op == "<":
        return [_compare(operator.lt, low) if whole else _below(major, minor or 0)]
    if op == "<=":
        return [_compare(operator.le, low) if whole else _upper(op, major, minor, patch)]
    if op == "=" and whole:
        return [_compare(operator.eq, low)]
    return [_compare(operator.ge, low), _upper(op, major, minor, patch)]


def _upper(op: str, major: int, minor: int | None, patch: int | None) -> Check:
    """The exclusive upper bound of a partial version (``1.2`` is ``<1.3.0-0``), a tilde
    (``~1.2.3`` is ``<1.3.0-0``) or a caret (``^0.2.3`` is ``<0.3.0-0``) range."""
    if minor is None:
        return _below(major + 1)
    if op == "^" and major > 0:
        return _below(major + 1)
    if op == "^" and patch is not None and minor == 0:
        return _below(0, 0, patch + 1)
    return _below(major, minor + 1)


def _hyphen(low: str, high: str) -> list[Check]:
    """``1.2 - 2.3``: from the first version, its missing parts 0, to the second, a partial
    one up to the next (``<2.4.0-0``)."""
    found = _PARTIAL.fullmatch(high)
    if found is None or found["op"]:
        raise ValueError(high)
    major, minor, patch = _parts(found)
    if major is None:
        upper = _EVERY
    elif minor is None or patch is None:
        upper = _upper("=", major, minor, patch)
    else:
        upper = _compare(operator.le, _key(major, minor, patch, found["pre"]))
    return [*_comparator(">=" + low), upper]


def _range_set(text: str) -> list[Check]:
    text = _SPACED_OPERATOR.sub(r"\1", text.strip())
    parts = re.split(r"\s+-\s+", text)
    if len(parts) == 2:
        return _hyphen(*parts)
    return [check for token in text.split() or ["*"] for check in _comparator(token)]


def satisfies(version: str, spec: str) -> bool:
    """Whether a version (``4.42.4``) is in an npm semver range; ``ValueError`` when the range
    is not one (node-semver's ``validRange`` is null)."""
    if not spec.strip():
        raise ValueError(spec)
    sets = [_range_set(part) for part in spec.split("||")]
    numbers = [int(part) for part in version.split(".")]
    key = _key(numbers[0], numbers[1], numbers[2])
    return any(all(check(key) for check in checks) for checks in sets)
