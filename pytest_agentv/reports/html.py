"""``--agentv-html``: the run as one self-contained HTML page (its stylesheet and script inlined,
no request leaves it), written at the end of the run from the rows the spool kept.

Jinja2 is imported here, when a page is written, never when the plugin loads. Autoescape is
on: whatever an answer or a judge wrote is text on the page.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from ..results import fmt, usd
from .view import LABELS, RunFacts, case_view, shown_row

if TYPE_CHECKING:
    import jinja2

    from .spool import RowSpool

_TEMPLATES = Path(__file__).parent / "templates"


def _number(value: Any) -> float | None:
    """What a filter shows: a number, or nothing (a field a row does not have)."""
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _seconds(value: Any) -> str:
    seconds = _number(value)
    if seconds is None:
        return "-"
    return f"{seconds:.1f} s" if seconds < 120 else f"{seconds // 60:.0f} min {seconds % 60:.0f} s"


def _ms(value: Any) -> str:
    ms = _number(value)
    if ms is None:
        return "-"
    return f"{ms:.0f} ms" if ms < 1000 else _seconds(ms / 1000)


def _usd(value: Any) -> str:
    amount = _number(value)
    return "cost unknown" if amount is None else usd(amount)


def _signed(value: Any) -> str:
    delta = _number(value)
    return "-" if delta is None else f"{delta:+.2f}"


def _score(value: Any) -> str:
    return fmt(_number(value))


def _fragment(anchor: str) -> str:
    """A case's link as people read it (``#file::id``): only what a fragment cannot hold is
    escaped."""
    return quote(anchor, safe=":/?@!$&'()*+,;=~")


def _cases(spool: RowSpool) -> Iterator[dict[str, Any]]:
    """Each case as the page shows it, with a link of its own (``file::id``; a second row of
    the same case gets ``~2``)."""
    taken: dict[str, int] = {}
    for row in spool.rows():
        view = case_view(row, "")
        anchor = view["where"]
        taken[anchor] = taken.get(anchor, 0) + 1
        if taken[anchor] > 1:
            anchor = f"{anchor}~{taken[anchor]}"
        view["anchor"] = anchor
        yield view


@functools.cache
def _template() -> jinja2.Template:
    """The page's template, compiled once per process: compiling it costs more than writing a
    small run's page, and ``report`` may write several."""
    import jinja2

    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(_TEMPLATES),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters.update(
        fragment=_fragment, score=_score, usd=_usd, ms=_ms, seconds=_seconds, signed=_signed
    )
    return environment.get_template("report.html.j2")


def write_html(path: Path, facts: RunFacts, spool: RowSpool) -> None:
    """Write the page, case after case as the spool reads them back. Raises ``OSError``."""
    from markupsafe import Markup

    template = _template()
    tally = spool.tally
    usage = facts.usage
    if usage is not None and usage.get("unpriced_calls"):
        run_cost = f"cost unknown ({usage['unpriced_calls']} calls to models without a price)"
    elif usage is not None:
        run_cost = usd(float(usage.get("cost_usd") or 0.0))
    else:
        run_cost = _usd(None if tally.unpriced else tally.cost)
    chunks = template.generate(
        facts=shown_row(vars(facts)),
        tally=tally,
        labels=LABELS,
        run_cost=run_cost,
        error=spool.error,
        cases=_cases(spool),
        css=Markup((_TEMPLATES / "report.css").read_text("utf-8")),
        js=Markup((_TEMPLATES / "report.js").read_text("utf-8")),
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as stream:
        for chunk in chunks:
            stream.write(chunk)
