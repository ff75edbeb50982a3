"""What the ``report`` benchmark needs beyond the harness: a project whose cases make a report
like a real run's (answers of a few hundred characters, a reasoning, hits and misses, every
verdict, a baseline to compare with), and headless Chromium to open the page and time it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness import CASES_PER_FILE, BenchError, Project

ANSWER = (
    "Thanks for reaching out! You can return any item within 30 days of delivery for a full "
    "refund to your original payment method. Items must be unused and in their original "
    "packaging; bring the receipt or the order number. Refunds take 5 to 10 business days to "
    "appear. Sale items can be exchanged but not refunded. If the item arrived damaged, we "
    "cover the return shipping: start the return from your orders page and pick a label."
)
TARGETS = f"""\
targets:
  - name: default
    provider: mock
    response: "{ANSWER}"
"""

#: An in-process evaluator with every verdict: a case's score comes from its number.
EVALUATOR = """

from pytest_agentv import EvaluationScore

ASPECTS = ["30-day window", "original payment method", "receipt", "business days", "damage"]


class Graded:
    kind = "graded"

    def evaluate(self, context):
        number = int(context.eval_case.id.rsplit("-", 1)[1])
        met = len(ASPECTS) - number % 4  # 5, 4, 3 or 2 of 5: pass, pass, borderline, fail
        return EvaluationScore.graded(
            met / len(ASPECTS),
            hits=tuple(f"mentions the {a}" for a in ASPECTS[:met]),
            misses=tuple(f"does not mention the {a}" for a in ASPECTS[met:]),
            reasoning=f"The answer covers {met} of the {len(ASPECTS)} aspects the rubric asks "
            "for; the others are missing or only implied by the wording of the reply.",
        )


def pytest_agentv_make_evaluator(config, kind):
    return Graded() if kind == "graded" else None
"""


def outcomes(cases: int) -> dict[str, int]:
    """What the run ends with (borderline is an expected failure by default)."""
    counts = {"passed": 0, "xfailed": 0, "failed": 0}
    for number in range(cases):
        counts[("passed", "passed", "xfailed", "failed")[number % 4]] += 1
    return counts


def write_project(proj: Project, cases: int) -> None:
    """The cases, 100 per file, and a baseline in which every case scored 1."""
    proj.ini(cache_mode="off")
    proj.probe()
    proj.write("conftest.py", (proj.path / "conftest.py").read_text() + EVALUATOR)
    proj.write(".agentv/targets.yaml", TARGETS)
    baseline = []
    for first in range(0, cases, CASES_PER_FILE):
        name = f"suite_{first // CASES_PER_FILE:03d}"
        lines = [f"description: report benchmark, {name}", "evalcases:"]
        for i in range(first, min(first + CASES_PER_FILE, cases)):
            lines += [
                f"  - id: case-{i:05d}",
                "    expected_outcome: Gives the refund window, the payment method, what to "
                "bring, how long it takes and what happens to damaged items",
                f"    input: Order {i} arrived damaged. Can I return it, and how do refunds work?",
                "    evaluators: [{name: refund-aspects, type: graded}]",
            ]
            baseline.append({"eval_id": f"case-{i:05d}", "dataset": name, "score": 1.0})
        proj.write(f"evals/{name}.eval.yaml", "\n".join(lines) + "\n")
    proj.write("baseline.jsonl", "".join(json.dumps(row) + "\n" for row in baseline))


@contextmanager
def chromium() -> Iterator[Any]:
    """Headless Chromium as the browser test starts it."""
    from headless import NoBrowser
    from headless import chromium as start

    try:
        with start() as browser:
            yield browser
    except NoBrowser as exc:
        raise BenchError(str(exc)) from None


#: Runs in the page: choose a filter or sort, let the browser lay the page out, and say how
#: long that took (ms) and how many cases are shown.
TIMED = """
const [id, value] = arguments;
const started = performance.now();
const control = document.getElementById(id);
control.value = value;
control.dispatchEvent(new Event(id === "f-text" ? "input" : "change"));
document.body.getBoundingClientRect();
const shown = document.querySelectorAll("details.case:not([hidden])").length;
return [performance.now() - started, shown];
"""


def open_and_filter(browser: Any, page: Path) -> dict[str, float]:
    """Open the page (ms until its load event, script included), then filter to failures,
    search its text and sort by delta (ms each, layout included)."""
    browser.get("about:blank")
    browser.get(page.as_uri())
    load = browser.execute_script(
        "const n = performance.getEntriesByType('navigation')[0]; return n.loadEventEnd;"
    )
    timings = {"open_ms": float(load)}
    for name, control, value in (
        ("filter_fail_ms", "f-kind", "fail"),
        ("search_ms", "f-text", "case-00042"),
        ("clear_ms", "f-text", ""),
        ("sort_delta_ms", "sort", "delta"),
    ):
        elapsed, shown = browser.execute_script(TIMED, control, value)
        timings[name] = float(elapsed)
        timings[name.replace("_ms", "_shown")] = float(shown)
    return timings
