"""Per-case data on pytest's reports, and in JUnit XML as ``<property>`` elements.

A case's row travels on the report that ends it as ``report.agentv`` (plain builtins, so
pytest-xdist can carry it to the controller); its scores, verdicts, trials, deltas and cost are
the test's JUnit properties (``agentv.score``, ``agentv.evaluator.<name>.score``, its
metadata's tags ``agentv.tags``...), one key each: evaluator names holding a dot are quoted,
and a test's later ``assert_judged`` calls are numbered (``agentv.2.score``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import pytest

from ..redaction import printable
from ..results import js_fixed, metadata_tags
from .jsonl import compact_json

if TYPE_CHECKING:
    from ..results import EvaluatorRow, ResultRow

#: An eval item's result row, which goes on its report.
result_key: pytest.StashKey[ResultRow] = pytest.StashKey()

#: Rows of the ``assert_judged`` calls a test made.
judged_key: pytest.StashKey[list[ResultRow]] = pytest.StashKey()


def key_part(name: str) -> str:
    """An evaluator name as one part of a property key: as written, or as a JSON string when it
    holds a dot or starts with a quote, so that no two paths share a key (a composite ``a``
    with member ``b.c`` writes ``a."b.c"``, a composite ``a.b`` with member ``c`` ``"a.b".c``);
    in that string every character outside ASCII is escaped, so that none of a name with an
    invisible or reordering character (U+202E) is hidden either."""
    plain = "." not in name and not name.startswith('"') and printable(name) == name
    return name if plain else json.dumps(name)


def _evaluator_properties(
    entries: Sequence[EvaluatorRow], prefix: str
) -> Iterator[tuple[str, str]]:
    """Each evaluator's score, verdict and checks (AgentV v4's ``assertions``: text, passed,
    evidence), none of them for one that could not grade; a composite's members under its
    name."""
    for entry in entries:
        name = f"{prefix}.{key_part(entry['name'])}"
        if "error" not in entry:
            yield f"{name}.score", f"{entry['score']:.4f}"
            yield f"{name}.verdict", entry["verdict"]
            if entry.get("assertions"):
                yield f"{name}.assertions", compact_json(entry["assertions"])
        yield from _evaluator_properties(entry.get("evaluator_results", ()), name)


def properties_for(row: ResultRow, prefix: str = "agentv") -> list[tuple[str, str]]:
    """JUnit ``<property>`` pairs for one graded (or ungraded) evaluation."""
    props: list[tuple[str, str]] = [(f"{prefix}.status", row["status"])]
    if row["score"] is not None and row["verdict"] is not None:  # graded: not an error, a skip
        props += [(f"{prefix}.score", f"{row['score']:.4f}"), (f"{prefix}.verdict", row["verdict"])]
    props.extend(_evaluator_properties(row["evaluator_results"], f"{prefix}.evaluator"))
    for turn in row.get("turns") or ():
        if turn["score"] is not None and turn["verdict"] is not None:
            props.append((f"{prefix}.turn.{turn['turn']}.score", f"{turn['score']:.4f}"))
            props.append((f"{prefix}.turn.{turn['turn']}.verdict", turn["verdict"]))
    trials, aggregation = row["trials"], row["aggregation"]
    if trials is not None:
        props.append((f"{prefix}.trials", str(len(trials))))
    if aggregation is not None:
        props.append((f"{prefix}.pass_rate", f"{aggregation['pass_rate']:.4f}"))
        props.append((f"{prefix}.ci_low", f"{aggregation['ci_low']:.4f}"))
        props.append((f"{prefix}.ci_high", f"{aggregation['ci_high']:.4f}"))
    props.append((f"{prefix}.hits", compact_json(row["hits"])))
    props.append((f"{prefix}.misses", compact_json(row["misses"])))
    if row.get("baseline_score") is not None:
        props.append((f"{prefix}.baseline_score", f"{row['baseline_score']:.4f}"))
    delta = row.get("delta")
    if delta is not None:
        props.append((f"{prefix}.delta", f"{delta:+.4f}"))
    usage = row["usage"]
    if usage["calls"] or usage["reused"]:
        props.append((f"{prefix}.tokens", str(usage["tokens"])))
        cost = usage["cost_usd"]
        props.append((f"{prefix}.cost_usd", "unknown" if cost is None else js_fixed(cost, 6)))
    if row["error"]:
        props.append((f"{prefix}.error", row["error"]))
    tags = metadata_tags(row.get("metadata"))
    if tags:  # a red-team suite's OWASP and ATLAS ids, for CI to filter by
        props.append((f"{prefix}.tags", compact_json(tags)))
    return props


def record_properties(item: pytest.Item, row: ResultRow, prefix: str = "agentv") -> None:
    # Appended to the item, not the report: junitxml writes them from the teardown report.
    item.user_properties.extend(properties_for(row, prefix))


def record_judged(item: pytest.Item, row: ResultRow) -> None:
    """Keep an ``assert_judged`` row on its test, with its properties: the first call's keys are
    ``agentv.*``, later calls' are numbered (``agentv.2.*``...) so that no key is written twice."""
    judged = item.stash.setdefault(judged_key, [])
    judged.append(row)
    record_properties(item, row, f"agentv.{len(judged)}" if len(judged) > 1 else "agentv")


def attach(item: pytest.Item, report: pytest.TestReport) -> None:
    """Put the case result (or a test's ``assert_judged`` results) on the report that ends it."""
    result = item.stash.get(result_key, None)
    if result is not None:
        if report.when == ("call" if result["status"] == "graded" else "setup"):
            report.agentv = {"case": result}  # type: ignore[attr-defined]
            del item.stash[result_key]
        return
    judged = item.stash.get(judged_key, None)
    if judged and report.when == "call":
        report.agentv = {"judged": list(judged)}  # type: ignore[attr-defined]
