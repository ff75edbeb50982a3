"""The HTML and Markdown reports of a run (``--agentv-html``, ``--agentv-markdown``, the GitHub
job summary) and ``python -m pytest_agentv report``: what they show, and that what answers and
judges wrote is text on them, never markup."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import cmarkgfm
import pytest
from lxml import html

from tests.helpers import run_report, write
from tests.report_suite import make_suite

if TYPE_CHECKING:
    from tests.fake_openai import FakeOpenAI


def page(path: Path) -> html.HtmlElement:
    return html.fromstring(path.read_bytes())


def case(doc: html.HtmlElement, anchor: str) -> html.HtmlElement:
    found = doc.get_element_by_id(anchor)
    assert found.tag == "details"
    return found


def text(element: html.HtmlElement) -> str:
    return " ".join(element.text_content().split())


def test_the_page_and_the_markdown_summary_show_the_run(
    judged: pytest.Pytester, fake_llm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page shows every field; the summary names regressions and failures, and is added to
    the GitHub job summary. Both from one run."""
    args = make_suite(judged, fake_llm)
    summary = judged.path / "step-summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result = judged.runpytest(
        *args, "--agentv-html=out/report.html", "--agentv-markdown=summary.md"
    )
    result.assert_outcomes(passed=3, failed=2, xfailed=1, errors=1)
    result.stdout.fnmatch_lines(["agentv: HTML report written to *out?report.html"])
    assert_the_summary_names_regressions_and_failures(judged.path / "summary.md", summary)
    doc = page(judged.path / "out" / "report.html")
    header = text(doc.body.find("header"))
    for shown in (
        "started 20",
        "judge: openai/gpt-4o-mini",
        "targets: agentv_target, crashing, default, wrong",
        "3 pass",
        "1 borderline",
        "2 fail",
        "1 not graded",
        "7 evaluations",
        "2 made, 0 reused from the store, 240 tokens, $0.000054",
        "spent of $5.0000 (--agentv-budget-usd)",
        "judge openai/gpt-4o-mini graded 1 canaries as expected",
        "0 improved, 2 regressed",
    ):
        assert shown in header
    assert "took " in header

    wrong = case(doc, "evals/support.eval.yaml::wrong-policy")
    assert wrong.get("data-kind") == "fail"
    assert wrong.get("data-delta") == "-1.0"
    shown = text(wrong)
    for expected in (
        "Can I get my money back?",  # the question
        "Gives the 30-day refund window",  # the expected outcome
        "We never give refunds.",  # the answer
        "target wrong",
        "baseline: 1.00 → 0.00 (delta -1.00)",
        "✗ does not mention 30 days",
        "0 of 1 keywords",
        "latency",
    ):
        assert expected in shown
    table = wrong.find_class("evaluators")[0]
    assert [text(cell) for cell in table.findall(".//tbody/tr/td")][:2] == ["window", "code_judge"]

    borderline = case(doc, "evals/support.eval.yaml::refund-details")
    assert borderline.get("data-kind") == "borderline"
    assert "✓ mentions refunds" in text(borderline)
    assert "✗ does not mention receipt" in text(borderline)

    crashed = case(doc, "evals/support.eval.yaml::agent-crashes")
    assert crashed.get("data-kind") == "error"
    assert "Not graded: " in text(crashed)
    assert "the agent crashed" in text(crashed.find_class("warn")[0])

    rubric = case(doc, "evals/support.eval.yaml::tone-rubric")
    items = [text(item) for item in rubric.find_class("checks")[0].findall("li")]
    assert items == [
        "✓ rubric-1 States the 30-day window (required)rubric_1 checked",
        "✗ tone Is friendly (required)tone checked",
        "✓ channel Says where the money goeschannel checked",
    ]
    assert [text(r) for r in rubric.find_class("reason")][-1] == "checked every item"
    assert "baseline: 0.90 → 0.67 (delta -0.23)" in text(rubric)

    steady = text(case(doc, "evals/support.eval.yaml::steady"))
    assert "trials: mean, 3 of 3 run, 3 passed" in steady
    assert "interval [" in steady

    tools = case(doc, "evals/agent/tools.eval.yaml::looks-up-order")
    calls = text(tools.find_class("tools")[0])
    assert "lookup_order" in calls and '"order": 42' in calls and "12 ms" in calls
    assert "new" not in (tools.get("data-delta") or "")
    assert "baseline: no graded score for this case" in text(tools)


def assert_the_summary_names_regressions_and_failures(path: Path, summary: Path) -> None:
    """``path``: the run's Markdown summary; ``summary``: the GitHub job summary it joined."""
    written = path.read_text()
    assert summary.read_text() == "earlier step\n" + written
    assert written.startswith("### agentv report: 2 failed, 1 not graded\n")
    assert "7 evaluations: 3 pass, 1 borderline, 2 fail, 1 not graded, 0 skipped" in written
    regressed = written.index("**Regressed: 2 cases** (score dropped)")
    assert (
        written.index("| evals/support.eval.yaml::wrong-policy | 1.00 | 0.00 | -1.00 |") > regressed
    )
    failed = written.index("**Failed: 2 cases**")
    assert failed > regressed
    assert (
        "| evals/support.eval.yaml::wrong-policy | 0.00 | window (code\\_judge) 0.00 |" in written
    )
    assert "| rubric (llm\\_judge) 0.67, a required check not met |" in written
    assert "**Not graded: 1 case**" in written
    assert "**Cost:** $0.000054 for 2 model calls" in written
    assert "spent of $5.0000" in written


def test_the_job_summary_can_be_turned_off(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(project, "a.eval.yaml", "evalcases:\n  - {id: one, input: Hi, expected_outcome: Hi}\n")
    summary = project.path / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    project.runpytest("--agentv-step-summary=off")
    assert not summary.exists()
    project.runpytest()
    assert "1 skipped" in summary.read_text()
    monkeypatch.setenv("AGENTV_STEP_SUMMARY", "off")
    summary.unlink()
    project.runpytest()
    assert not summary.exists()


def test_no_job_summary_without_eval_cases(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile("def test_plain(): pass")
    summary = pytester.path / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    pytester.runpytest().assert_outcomes(passed=1)
    assert not summary.exists()


HOSTILE = """\
import pytest

ANSWERS = {
    "script": "<script>document.title='owned'</script><img src=x onerror=alert(1)>",
    "end": "</html></body><!-- and more",
    "huge": "x" * 1_000_000 + "<b>END</b>",
    "surrogate": "before \\ud800 after",
    "rtl": "total: \\u202e1 $ 0001\\u202c",
    "markdown": "| a | b |\\n# heading [link](http://example.com) `code` @someone",
}


@pytest.fixture
def agentv_target():
    return lambda case: ANSWERS[case.id]
"""


# Serially only: results crossing pytest-xdist workers are tests/test_integrity.py's.
@pytest.mark.parametrize("run_args", [[]], ids=["serial"])
def test_hostile_answers_are_text(project: pytest.Pytester, run_args: list[str]) -> None:
    # A miss that says it too (a built-in check: a code judge's process per case costs more).
    value = json.dumps("| a | b | <img src=x> # [link](http://example.com) `code`")
    cases = "".join(
        f"  - {{id: {name}, input: Hi, evaluators: [{{type: contains, value: {value}}}]}}\n"
        for name in ("script", "end", "huge", "surrogate", "rtl", "markdown")
    )
    write(project, "h.eval.yaml", "evalcases:\n" + cases)
    write(project, "conftest.py", HOSTILE)
    result = project.runpytest(
        *run_args, "--agentv-html=report.html", "--agentv-markdown=summary.md"
    )
    result.assert_outcomes(failed=6)
    doc = page(project.path / "report.html")
    assert len(doc.findall(".//script")) == 1  # the page's own
    assert doc.findall(".//img") == []
    assert doc.findtext(".//title") == "agentv report"
    assert "<script>document.title='owned'</script>" in text(case(doc, "h.eval.yaml::script"))
    assert "</html></body><!-- and more" in text(case(doc, "h.eval.yaml::end"))
    huge = text(case(doc, "h.eval.yaml::huge"))
    assert "more characters: see the results file" in huge
    assert "<b>END</b>" not in huge
    assert (project.path / "report.html").stat().st_size < 300_000
    assert "before \ufffd after" in text(case(doc, "h.eval.yaml::surrogate"))
    rtl = text(case(doc, "h.eval.yaml::rtl"))
    assert "\u202e" not in rtl and "total: \\u202e1 $ 0001\\u202c" in rtl
    summary = (project.path / "summary.md").read_text()
    assert "<" not in summary and "\u202e" not in summary
    shown = "\\| a \\| b \\| &lt;img src=x&gt; \\# \\[link\\](http\\://example.com) \\`code\\`"
    assert shown in summary


def test_the_markdown_summary_makes_no_link_of_what_answers_say(project: pytest.Pytester) -> None:
    """GitHub makes links of bare URLs, ``www.`` names and e-mail addresses in text: the
    summary, rendered by GitHub's own Markdown (cmark-gfm), has none."""
    said = "https://evil.example/x, WWW.evil.example, (www.a.b), ftp://f.g, a.b@evil.example"
    write(
        project,
        "a.eval.yaml",
        f"tests:\n  - {{id: a, input: q, assertions: [{{type: contains, value: '{said}'}}]}}\n",
    )
    project.runpytest("--agentv-markdown=summary.md").assert_outcomes(failed=1)
    rendered = cmarkgfm.github_flavored_markdown_to_html((project.path / "summary.md").read_text())
    assert "evil.example" in rendered
    assert "<a " not in rendered


def test_a_report_that_cannot_be_written_fails_the_run(project: pytest.Pytester) -> None:
    write(project, "a.eval.yaml", "evalcases:\n  - {id: one, input: Hi, expected_outcome: Hi}\n")
    (project.path / "taken").mkdir()
    result = project.runpytest("--agentv-html=taken")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(["ERROR: --agentv-html=*taken could not be written: *"])
    result = project.runpytest("--agentv-markdown=a.eval.yaml/inside.md")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--agentv-markdown=*inside.md cannot be used: *not a folder;*"])


def test_report_renders_our_results_file_with_a_baseline(
    judged: pytest.Pytester, fake_llm: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    args = make_suite(judged, fake_llm)
    judged.runpytest(*args[1:], "--agentv-results=run.jsonl")
    result = run_report(capsys, "run.jsonl", "--baseline", "baseline.jsonl", "-o", "again.html")
    assert result.ret == 1  # as the run ended: two cases failed, one was not graded
    result.stdout.fnmatch_lines(
        [
            "again.html: 7 evaluations: 3 pass, 1 borderline, 2 fail*",
            "2 failed: run.jsonl:* (wrong-policy), run.jsonl:* (tone-rubric)",
            "1 not graded: run.jsonl:* (agent-crashes)",
        ]
    )
    doc = page(judged.path / "again.html")
    assert "results file: run.jsonl" in text(doc.body.find("header"))
    assert "0 improved, 2 regressed" in text(doc.body.find("header"))
    wrong = text(case(doc, "evals/support.eval.yaml::wrong-policy"))
    assert "Can I get my money back?" in wrong and "baseline: 1.00 → 0.00 (delta -1.00)" in wrong
    calls = text(case(doc, "evals/agent/tools.eval.yaml::looks-up-order"))
    assert "lookup_order" in calls and "1440 min" not in calls  # measured latency, not reported
    result = run_report(capsys, "run.jsonl", "--markdown", "-")
    assert result.ret == 1
    assert "**Failed: 2 cases**" in result.stdout.str()


V258_ROW = {
    "timestamp": "2025-01-02T03:04:05Z",
    "eval_id": "old-case",
    "dataset": "legacy",
    "score": 0.7,
    "hits": ["says hello"],
    "misses": ["forgets the name"],
    "candidate_answer": "Hello!",
    "target": "old-target",
    "reasoning": "mostly there",
    "evaluator_results": [
        {"name": "greeting", "type": "llm_judge", "score": 0.7, "hits": [], "misses": []}
    ],
}

V4_ROW = {
    "timestamp": "2026-01-02T03:04:05Z",
    "test_id": "new-case",
    "suite": "modern",
    "score": 0.4,
    "target": "agent-v4",
    "output": "I could not find it.",
    "input": [{"role": "user", "content": [{"type": "text", "text": "Where is my order?"}]}],
    "scores": [
        {
            "name": "found-it",
            "type": "llm-grader",
            "score": 0.4,
            "verdict": "fail",
            "assertions": [
                {"text": "Names the order status", "passed": False, "evidence": "no status"},
                {"text": "Is polite", "passed": True},
            ],
        }
    ],
    "token_usage": {"input": 100, "output": 20},
    "cost_usd": 0.01,
    "duration_ms": 2500,
    "execution_status": "quality_failure",
    "trace": {
        "tool_calls": {"search": 1},
        "messages": [
            {"role": "assistant", "tool_calls": [{"tool": "search", "input": {"q": "order"}}]}
        ],
    },
}

V4_ERROR = {
    "test_id": "broken",
    "score": 0,
    "output": "",
    "execution_status": "execution_error",
    "execution_error": {"message": "agent timed out", "stage": "agent"},
}

CONVERSATION = {
    "eval_id": "chat",
    "dataset": "talks",
    "score": 0.9,
    "verdict": "pass",
    "status": "graded",
    "candidate_answer": "Bye!",
    "turns": [
        {"input": "Hi", "answer": "Hello, how can I help?", "score": 1.0, "verdict": "pass"},
        {"input": "Bye", "answer": "Bye!", "score": 0.8, "verdict": "pass", "reasoning": "ok"},
    ],
}


def test_report_reads_agentv_rows_of_both_versions(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [V258_ROW, V4_ROW, V4_ERROR, CONVERSATION]
    write(pytester, "agentv.jsonl", "".join(json.dumps(row) + "\n" for row in rows))
    result = run_report(capsys, "agentv.jsonl")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["report.html: 4 evaluations: 1 pass, 1 borderline, 1 fail, 1 *"])
    doc = page(pytester.path / "report.html")
    old = case(doc, "old-case")
    assert old.get("data-kind") == "borderline"
    assert "✓ says hello" in text(old) and "old-target" in text(old)
    new = case(doc, "new-case")
    assert new.get("data-kind") == "fail"
    shown = text(new)
    for expected in (
        "Where is my order?",
        "I could not find it.",
        "✗ Names the order statusno status",
        "✓ Is polite",
        "120 tokens",
        "cost $0.0100",
        "latency 2.5 s",
        "search",
    ):
        assert expected in shown
    broken = case(doc, "broken")
    assert broken.get("data-kind") == "error"
    assert 'Not graded: execution_status "execution_error": agent timed out' in text(broken)
    turns = [text(turn) for turn in case(doc, "chat").find_class("turns")[0].findall("li")]
    assert turns == [
        "user Hiassistant Hello, how can I help?pass 1.00",
        "user Byeassistant Bye!pass 0.80ok",
    ]


def test_report_exits_as_the_run_did_when_cases_were_skipped(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """A case skipped for want of a judge fails no gate: the run exited 0, and so does
    ``report`` on its results (it counted skipped rows as failed ones, exit 1)."""
    write(
        project,
        "s.eval.yaml",
        """
        evalcases:
          - {id: plain, input: q, evaluators: [{name: c, type: contains, value: hi}]}
          - {id: judged, input: q, expected_outcome: Says hello}
        """,
    )
    write(
        project,
        ".agentv/targets.yaml",
        "targets: [{name: default, provider: mock, response: hi}]\n",
    )
    run = project.runpytest("--agentv-results=run.jsonl")
    run.assert_outcomes(passed=1, skipped=1)
    assert run.ret == 0
    result = run_report(capsys, "run.jsonl")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["report.html: 2 evaluations: 1 pass, * 1 skipped*"])
    result.stdout.no_fnmatch_line("*failed*")


def test_report_names_the_line_of_a_bad_row(pytester: pytest.Pytester) -> None:
    write(pytester, "bad.jsonl", json.dumps(V258_ROW) + "\n" + '{"score": 1}\n')
    # A process of its own: what ``python -m pytest_agentv`` exits with and writes to stderr.
    result = pytester.run(sys.executable, "-m", "pytest_agentv", "report", "bad.jsonl")
    assert result.ret == 2
    result.stderr.fnmatch_lines(["error: bad.jsonl:2: a results row needs a string 'eval_id'*"])
    assert not (pytester.path / "report.html").exists()


def test_no_secret_reaches_the_reports(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SHOP_ADMIN_TOKEN", "tok-7f3a9c2e51d8")
    write(
        project,
        "conftest.py",
        "import os, pytest\n\n\n@pytest.fixture\ndef agentv_target():\n"
        "    return lambda case: 'the admin token is ' + os.environ['SHOP_ADMIN_TOKEN']\n",
    )
    write(
        project,
        "s.eval.yaml",
        "evalcases:\n  - {id: leak, input: Hi, evaluators: [{name: kw, type: code_judge, "
        "script: [python, keywords.py], config: {keywords: [nothing]}}]}\n",
    )
    project.runpytest("--agentv-html=r.html", "--agentv-markdown=r.md").assert_outcomes(failed=1)
    page = (project.path / "r.html").read_text()
    assert "the admin token is [redacted]" in page
    assert "7f3a9c2e" not in page and "7f3a9c2e" not in (project.path / "r.md").read_text()
    row = {"eval_id": "old", "score": 1, "candidate_answer": "key sk-abcdefghijklmnop1234"}
    write(project, "old.jsonl", json.dumps(row) + "\n")
    assert run_report(capsys, "old.jsonl", "-o", "old.html").ret == 0
    assert "sk-abcdefgh" not in (project.path / "old.html").read_text()
