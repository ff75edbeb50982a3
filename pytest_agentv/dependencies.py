"""AgentV v4's ``depends_on`` across pytest items: a case runs after the cases it depends on
(of its file, and of its target in a matrix), and ``on_dependency_failure`` says what a failed
dependency does to it: ``skip`` (the default), ``fail``, or ``run`` anyway.

As in AgentV, a dependency *failed* when it could not be graded (or was itself held back by a
failed dependency); a low score is a result, not a failure. A dependency this session does not
run (deselected, or sent to another pytest-xdist worker) holds nothing back: its dependents run.
Under pytest-xdist, ``--dist loadfile`` keeps a file's cases in one worker, in this order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from .cases import CaseSpec

#: A case of a file, on a matrix target: (eval file, case id, target).
Key = tuple[str, str, "str | None"]


def key(spec: CaseSpec, case_id: str | None = None) -> Key:
    return (spec.loaded.display, case_id or spec.case.id, spec.matrix_target)


def ordered(
    items: Sequence[pytest.Item], spec_of: Callable[[pytest.Item], CaseSpec | None]
) -> list[pytest.Item]:
    """``items`` in their order, but each case after the cases it depends on (those selected)."""
    by_key = {key(spec): item for item in items if (spec := spec_of(item)) is not None}
    placed: set[int] = set()
    result: list[pytest.Item] = []
    for item in items:
        stack = [(item, False)]
        while stack:
            current, ready = stack.pop()
            if id(current) in placed:
                continue
            spec = spec_of(current)
            deps = [] if spec is None else spec.case.depends_on or []
            waiting = [by_key[k] for d in deps if (k := key(spec, d)) in by_key] if spec else []
            if ready or not any(id(w) not in placed for w in waiting):
                placed.add(id(current))
                result.append(current)
                continue
            stack.append((current, True))
            stack.extend((w, False) for w in reversed(waiting) if id(w) not in placed)
    return result


class Dependencies:
    """Which cases of this session failed, for the cases that depend on them."""

    def __init__(self) -> None:
        self._failed: dict[Key, bool] = {}

    def record(self, spec: CaseSpec, *, failed: bool) -> None:
        self._failed[key(spec)] = failed

    def failed(self, spec: CaseSpec) -> list[str]:
        """The ids of the case's dependencies that failed in this session."""
        return [dep for dep in spec.case.depends_on or [] if self._failed.get(key(spec, dep))]
