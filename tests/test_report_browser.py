"""The HTML report in a real browser (headless Chromium driven by selenium), used as a person
would: filter to the failures, sort by delta, follow a case's link, filter by a governance tag,
search the text; the console stays free of errors. The last screen is saved as
``test-artifacts/report.png``.

Skipped, saying why, only where no browser is installed (``.ci/run`` installs Debian's
``chromium`` and ``chromium-driver``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.headless import NoBrowser, chromium
from tests.report_suite import make_suite

if TYPE_CHECKING:
    from tests.fake_openai import FakeOpenAI

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"


@pytest.fixture
def browser() -> Iterator[Any]:
    try:
        with chromium() as driver:
            yield driver
    except NoBrowser as exc:
        pytest.skip(str(exc))


def shown_cases(driver: Any) -> list[str]:
    """The ids of the cases on screen, top to bottom."""
    found: list[str] = driver.execute_script(
        "return Array.from(document.querySelectorAll('details.case'))"
        ".filter(el => !el.hidden).map(el => el.id)"
    )
    return found


def choose(driver: Any, control: str, value: str) -> None:
    from selenium.webdriver.support.ui import Select

    Select(driver.find_element("id", control)).select_by_value(value)


def test_a_person_filters_sorts_and_follows_a_link(
    judged: pytest.Pytester, fake_llm: FakeOpenAI, browser: Any
) -> None:
    judged.runpytest(*make_suite(judged, fake_llm), "--agentv-html=report.html")
    report = judged.path / "report.html"
    browser.get(report.as_uri())
    assert browser.title == "agentv report"
    assert browser.find_element("id", "shown").text == "7 of 7 shown"

    choose(browser, "f-kind", "fail")
    failing = {"evals/support.eval.yaml::wrong-policy", "evals/support.eval.yaml::tone-rubric"}
    assert set(shown_cases(browser)) == failing
    assert browser.find_element("id", "shown").text == "2 of 7 shown"

    choose(browser, "f-kind", "")
    choose(browser, "sort", "delta")
    ordered = shown_cases(browser)
    assert ordered[:2] == [
        "evals/support.eval.yaml::wrong-policy",  # 1.00 -> 0.00
        "evals/support.eval.yaml::tone-rubric",  # 0.90 -> 0.67
    ]
    assert set(ordered[-3:]) == {  # no delta: new, or not graded
        "evals/agent/tools.eval.yaml::looks-up-order",
        "evals/support.eval.yaml::agent-crashes",
        "evals/support.eval.yaml::steady",
    }

    choose(browser, "f-kind", "fail")
    target = browser.find_element("id", "evals/support.eval.yaml::wrong-policy")
    assert target.get_attribute("open") is None
    target.find_element("css selector", "a.link").click()
    assert browser.current_url.endswith("#evals/support.eval.yaml::wrong-policy")
    assert target.get_attribute("open") == "true"
    body = target.find_element("css selector", ".body").text
    assert "Can I get my money back?" in body
    assert "We never give refunds." in body
    assert "baseline: 1.00 → 0.00 (delta -1.00)" in body
    browser.execute_script("arguments[0].scrollIntoView()", target)
    ARTIFACTS.mkdir(exist_ok=True)
    browser.save_screenshot(str(ARTIFACTS / "report.png"))

    # A link opens its case on a fresh page, whatever filters the sender had.
    browser.get(report.as_uri() + "#evals/agent/tools.eval.yaml::looks-up-order")
    tools = browser.find_element("id", "evals/agent/tools.eval.yaml::looks-up-order")
    assert tools.get_attribute("open") == "true"
    assert "lookup_order" in tools.find_element("css selector", "table.tools").text

    choose(browser, "f-tag", "governance.owasp_llm_top_10_2025:LLM06")
    assert shown_cases(browser) == ["evals/agent/tools.eval.yaml::looks-up-order"]
    choose(browser, "f-tag", "")

    browser.find_element("id", "f-text").send_keys("kettle")
    assert shown_cases(browser) == ["evals/support.eval.yaml::tone-rubric"]

    errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert errors == []
