"""``--agentv-markdown`` and the GitHub job summary: the run in a few lines of Markdown.

Totals, then the regressions (against ``--agentv-baseline``), the failures with the evaluator
that sank each, what was not graded and why, and a line with the cost. Lists name the worst
20 cases (``view.WORST``) and count the rest, so a run of 1,000 cases stays a short page.
Everything an answer or a judge wrote is escaped: it is text in a table cell, never Markdown or
HTML.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..results import fmt, usd
from .view import RunFacts, Tally

#: What a cell shows of a reason or an answer.
_CELL = 200
_SPECIAL = re.compile(r"([\\`*_\[\]|~#!])")
#: What GitHub makes a link of in text (its autolink extension): ``scheme://`` URLs, ``www.``
#: names (their ``:`` and ``.`` escaped) and e-mail addresses (a word joiner before the ``@``).
_AUTOLINK = re.compile(r"(?<=[A-Za-z])(:)(?=//)|(?i:(www)\.)|(?=@)")


def cell(text: Any, limit: int = _CELL) -> str:
    """Text for a table cell: one line, cut at ``limit``, no Markdown, HTML or link in effect."""
    flat = " ".join(str(text or "").split())
    if len(flat) > limit:
        flat = flat[: limit - 1] + "…"
    flat = flat.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _AUTOLINK.sub(_unlinked, _SPECIAL.sub(r"\\\1", flat))


def _unlinked(found: re.Match[str]) -> str:
    if found.group(1):
        return "\\:"
    if found.group(2):
        return found.group(2) + "\\."
    return "&#8288;"


def _section(
    heading: str, header: Sequence[str], right: Sequence[int], rows: list[list[str]]
) -> list[str]:
    """A heading and its table, after a blank line."""
    rule = ["---:" if i in right else "---" for i in range(len(header))]
    lines = ["", heading, "", f"| {' | '.join(header)} |", f"| {' | '.join(rule)} |"]
    return lines + [f"| {' | '.join(row)} |" for row in rows]


def _heading(label: str, count: int, shown: int, note: str = "") -> str:
    noun = "case" if count == 1 else "cases"
    more = f"; {shown} shown" if shown < count else ""
    return f"**{label}: {count} {noun}**{note}{more}"


def _cost_line(facts: RunFacts, tally: Tally) -> str:
    usage = facts.usage
    if usage is None:
        cost = "unknown" if tally.unpriced else usd(tally.cost)
        line = f"**Cost:** {cost}, {tally.tokens:,} tokens"
    else:
        cost = (
            f"unknown ({usage['unpriced_calls']} calls to models without a known price)"
            if usage.get("unpriced_calls")
            else usd(float(usage.get("cost_usd") or 0.0))
        )
        line = (
            f"**Cost:** {cost} for {usage['calls']} model calls "
            f"({usage['reused']} replies reused from the store), {usage['tokens']:,} tokens"
        )
    if facts.budget:
        line += f"; {cell(facts.budget.removeprefix('agentv '), 300)}"
    if facts.duration_s is not None:
        line += f"; the run took {facts.duration_s:.1f} s"
    return line


def markdown(facts: RunFacts, tally: Tally, error: str | None = None) -> str:
    """The summary of a run (``facts``) whose rows ``tally`` counted."""
    failed, ungraded = tally.counts.get("fail", 0), tally.counts.get("error", 0)
    if failed or ungraded:
        status = f"{failed} failed, {ungraded} not graded"
    else:
        status = "no failures"
    lines = [f"### {cell(facts.title, 100)}: {status}", "", tally.total_line()]
    if facts.comparison:
        lines += ["", cell(facts.comparison[0], 400)]
    regressions = Tally.worst(tally.regressions)
    if regressions:
        lines += _section(
            _heading("Regressed", tally.regressed, len(regressions), " (score dropped)"),
            ["case", "baseline", "score", "delta"],
            [1, 2, 3],
            [
                [cell(r["where"]), fmt(r["baseline"]), fmt(r["score"]), f"{r['delta']:+.2f}"]
                for r in regressions
            ],
        )
    failures = Tally.worst(tally.failures)
    if failures:
        lines += _section(
            _heading("Failed", failed, len(failures)),
            ["case", "score", "sank by", "why"],
            [1],
            [
                [cell(f["where"]), fmt(f["score"]), cell(f["sank_by"]), cell(f["why"])]
                for f in failures
            ],
        )
    if tally.ungraded:
        lines += _section(
            _heading("Not graded", ungraded, len(tally.ungraded)),
            ["case", "reason"],
            [],
            [[cell(u["where"]), cell(u["error"], 300)] for u in tally.ungraded],
        )
    if error:
        lines += ["", f"**Incomplete:** {cell(error, 300)}"]
    lines += ["", _cost_line(facts, tally), ""]
    return "\n".join(lines)


def write_markdown(path: Path, text: str, *, append: bool = False) -> None:
    """Raises ``OSError``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a" if append else "w", encoding="utf-8") as stream:
        stream.write(text)
