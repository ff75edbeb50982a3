"""The examples project runs green as shipped, and its LLM-judged cases work with a judge."""

from __future__ import annotations

import json
import os

import pytest

from tests.agent_clis import install
from tests.fake_openai import FakeOpenAI, Request, checklist, freeform, ranges
from tests.helpers import judge_ini


@pytest.fixture
def claude(monkeypatch: pytest.MonkeyPatch) -> int:
    """Claude Code on PATH for the coding-agent example (installed as the agents' tests install
    it), and how many cases that example passes: 1; or 0 where it cannot be installed (its case
    is then skipped, as for a user without it)."""
    found = install()
    if isinstance(found, str):
        return 0
    monkeypatch.setenv("PATH", f"{found}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("IS_SANDBOX", "1")  # as root, Claude Code skips permissions only so
    return 1


def test_examples_run_offline(pytester: pytest.Pytester, claude: int) -> None:
    pytester.copy_example(".")
    result = pytester.runpytest("-p", "no:cacheprovider", "--agentv-html", "report.html")
    result.assert_outcomes(passed=24 + claude, skipped=9 - claude, xfailed=3)
    assert result.ret == pytest.ExitCode.OK
    page = (pytester.path / "report.html").read_text()
    assert 'id="evals/refunds.eval.yaml::showcase-wrong-policy"' in page
    # The async example gathers two judged answers: whether the second one records its skip
    # before the first skip ends the test depends on timing.
    result.stdout.re_match_lines([r".* [78] skipped \(no judge\).*"])


def test_showcase_failure_report(pytester: pytest.Pytester) -> None:
    pytester.copy_example(".")
    result = pytester.runpytest("-p", "no:cacheprovider", "--runxfail", "-k", "showcase")
    result.assert_outcomes(failed=3)
    result.stdout.fnmatch_lines(
        [
            "*eval 'showcase-composite-failure' failed: score 0.50 (fail)",
            "  overall      composite             1   0.50  fail",
            "    answer     code_judge            1   0.00  fail",
            "    looked-up  tool_trajectory       1   1.00  pass",
            "        ✗ does not mention 'overnight'",
            "*eval 'showcase-forgets-order' failed: score 0.00 (fail)",
            "conversation of 3 turns; first failing turn: 3",
            "     3  Which order are we talking abou…  Sorry there, which order do you…   0.00"
            '  fail     Output does not contain "4417"',
            "*eval 'showcase-wrong-policy' failed: score 0.00 (fail)",
            "*✗ does not mention 'warranty'",
        ]
    )


def grade(request: Request) -> str:
    """A fake judge that approves every answer but the calibration's wrong ones ("no
    refunds"), in whichever contract it was asked for."""
    wrong = "no refunds" in request.user
    if '"satisfied"' in request.system:
        ids = [
            line.split("]")[0][3:] for line in request.user.splitlines() if line.startswith("- [")
        ]
        return checklist(**{i.replace("-", "_"): not wrong for i in ids})
    if '"score" (an integer from 0 to 10)' in request.system:
        ids = [
            line.split(": ")[1].split(" (")[0]
            for line in request.user.splitlines()
            if line.startswith("### Criterion:")
        ]
        return ranges(**{i.replace("-", "_"): 9 for i in ids})
    if wrong:
        return freeform(0.05, [], ["denies the 30-day window"], "contradicts the policy")
    return freeform(0.95, ["accurate"], [], "matches the policy")


def test_llm_examples_with_a_judge(
    pytester: pytest.Pytester, fake_llm: FakeOpenAI, claude: int
) -> None:
    pytester.copy_example(".")
    fake_llm.responder = grade
    ini = judge_ini(fake_llm).replace("agentv_cache_mode = off\n", "")
    (pytester.path / "pytest.ini").write_text(ini + "agentv_cache_dir = .agentv/test-cache\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "--agentv-results=out.jsonl")
    result.assert_outcomes(passed=32 + claude, skipped=1 - claude, xfailed=3)
    result.stdout.fnmatch_lines(["*judge openai/fake-judge graded 3 canaries as expected"])
    # The default judge's request stands at the top level; listed evaluators carry their own.
    modes = {
        row["eval_id"]: (
            row.get("evaluator_provider_request")
            or next(iter(row.get("evaluator_results") or []), {}).get("evaluator_provider_request")
            or {}
        ).get("mode")
        for row in map(json.loads, (pytester.path / "out.jsonl").read_text().splitlines())
    }
    assert modes["checklist-refund"] == "checklist"
    assert modes["ranges-refund-summary"] == "score_ranges"
    assert modes["freeform-refund-window"] == "freeform"
    custom = [r.user for r in fake_llm.requests if "customer-support assistant" in r.user]
    assert any("Hi! What's your return policy?" in user for user in custom)
    # The composite's `tone` member keeps its own prompt file.
    assert any("How long do I have to return something?" in user for user in custom)
    decision = next(r for r in fake_llm.requests if "can ship" in r.user)
    assert '"facts": {' in decision.user and '"tone": {' in decision.user
    fake_llm.stop()
    replayed = pytester.runpytest("-p", "no:cacheprovider", "--agentv-cache-mode=replay")
    replayed.assert_outcomes(passed=32 + claude, skipped=1 - claude, xfailed=3)
    replayed.stdout.fnmatch_lines(["agentv: 0 model calls made, * replies reused from the store*"])
