"""``--agentv-shard K/N``: the share of the selected tests that shard K of N runs, so that a CI
matrix of N jobs runs every test exactly once.

Tests are dealt out in groups: an eval case with the cases it depends on (``depends_on``), so
that a dependency's outcome is known where its dependents run; every other test alone. Each group
goes to a shard by a hash of its first test's id (stable when tests are added or removed
elsewhere, balanced in expectation), or, with the durations of a previous run, greedily: the
longest group first, each to the shard with the least work so far (a test without a recorded
duration counts as the mean of those with one). Every shard computes the same deal from the
same collection, whatever else it runs with (``-k`` and ``-m`` apply before, pytest-xdist's
workers each deal the same).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest

from .baseline import PreviousResults
from .cases import CaseSpec
from .dependencies import key
from .errors import AgentvError
from .paths import display_path
from .settings import Settings


def test_id(item: pytest.Item) -> str:
    """A test's id as every shard sees it: its node id without the ``@group`` that
    pytest-xdist's ``--dist loadgroup`` appends to it in workers."""
    group = item.get_closest_marker("xdist_group")
    name = group.args[0] if group is not None and group.args else None
    if name is None and group is not None:
        name = group.kwargs.get("name")
    return item.nodeid.removesuffix(f"@{name}") if name else item.nodeid


def durations_of(
    items: Sequence[pytest.Item],
    spec_of: Callable[[pytest.Item], CaseSpec | None],
    path: Path,
    rootdir: Path,
) -> dict[str, float]:
    """The seconds each eval case's target took in a previous results file (its
    ``duration_ms``), by test id, matched to cases as a baseline is. A file that cannot be read
    is a usage error naming its line."""
    previous = PreviousResults(path, display_path(path, rootdir), "--agentv-shard-durations")
    found: dict[str, float] = {}
    for item in items:
        spec = spec_of(item)
        if spec is None:
            continue
        try:
            row = previous.find(
                spec.dataset, spec.case.id, spec.loaded.display, target=spec.matrix_target
            )
        except AgentvError as exc:
            raise pytest.UsageError(str(exc)) from None
        took = row.data.get("duration_ms") if row is not None else None
        if isinstance(took, (int, float)) and not isinstance(took, bool) and 0 <= took < 1e12:
            found[test_id(item)] = took / 1000
    return found


def groups(
    items: Sequence[pytest.Item], spec_of: Callable[[pytest.Item], CaseSpec | None]
) -> list[list[pytest.Item]]:
    """The items, each case with the cases it depends on (and those that depend on it), in the
    order of their first item."""
    parent = list(range(len(items)))

    def root(index: int) -> int:
        while parent[index] != index:
            parent[index] = parent[parent[index]]
            index = parent[index]
        return index

    by_key = {key(spec): i for i, item in enumerate(items) if (spec := spec_of(item)) is not None}
    for i, item in enumerate(items):
        spec = spec_of(item)
        if spec is None:
            continue
        for dependency in spec.case.depends_on or []:
            other = by_key.get(key(spec, dependency))
            if other is not None:
                parent[root(i)] = root(other)
    found: dict[int, list[pytest.Item]] = {}
    for i, item in enumerate(items):
        found.setdefault(root(i), []).append(item)
    return list(found.values())


def deal(
    items: Sequence[pytest.Item],
    count: int,
    spec_of: Callable[[pytest.Item], CaseSpec | None],
    durations: Mapping[str, float] | None = None,
) -> list[int]:
    """The shard (0-based) of each item."""
    dealt = groups(items, spec_of)
    shard_of: dict[int, int] = {}
    if durations:
        known = [durations[test_id(i)] for i in items if test_id(i) in durations]
        mean = sum(known) / len(known) if known else 1.0

        def weight(group: list[pytest.Item]) -> float:
            return sum(durations.get(test_id(item), mean) for item in group)

        loads = [0.0] * count
        # Longest first; ties in collection order, so that every shard deals the same.
        for group in sorted(dealt, key=weight, reverse=True):
            shard = min(range(count), key=lambda s: (loads[s], s))
            loads[shard] += weight(group)
            shard_of.update((id(item), shard) for item in group)
    else:
        for group in dealt:
            digest = hashlib.sha256(test_id(group[0]).encode()).digest()
            shard = int.from_bytes(digest[:8], "big") % count
            shard_of.update((id(item), shard) for item in group)
    return [shard_of[id(item)] for item in items]


def keep_shard(
    config: pytest.Config, items: list[pytest.Item], settings: Settings, *, eval_items: bool
) -> None:
    """``--agentv-shard K/N``: deselect every test that another shard runs (``eval_items``:
    eval files were collected, whose cases go with their dependencies)."""
    assert settings.shard is not None
    shard, count = settings.shard
    if eval_items:
        from .collect import spec_of

        known = None
        if settings.shard_durations is not None:
            known = durations_of(items, spec_of, settings.shard_durations, config.rootpath)
        dealt = deal(items, count, spec_of, known)
    else:
        dealt = deal(items, count, lambda item: None)
    others = [item for item, to in zip(items, dealt, strict=True) if to != shard - 1]
    if others:
        config.hook.pytest_deselected(items=others)
        items[:] = [item for item, to in zip(items, dealt, strict=True) if to == shard - 1]
