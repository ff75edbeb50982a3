"""assert_judged, its async twin and the agentv_judge fixture, in plain Python tests."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from tests.fake_openai import FakeOpenAI, Gate, Request, checklist
from tests.fake_openai import freeform as freeform_reply
from tests.helpers import write

UNIT_TESTS = """
import pytest
from pytest_agentv import EvaluationScore, assert_judged

ANSWER = "You can return items within 30 days."

def test_good():
    score = assert_judged(ANSWER, expected_outcome="Gives the 30-day window", question="Returns?")
    assert isinstance(score, EvaluationScore) and score.verdict == "pass"

def test_meh():
    assert_judged(ANSWER, expected_outcome="Gives the window and the refund method")
    raise AssertionError("not reached: borderline xfails")

def test_bad():
    assert_judged(ANSWER, expected_outcome="Explains the warranty")
"""


def score_by_outcome(request: Request) -> str:
    if "warranty" in request.user:
        return freeform_reply(0.2, ["polite"], ["says nothing about the warranty"], "Off topic.")
    if "refund method" in request.user:
        return freeform_reply(0.7, [], ["no refund method"])
    return freeform_reply(0.95, ["30 days"])


def test_three_outcomes(judged: pytest.Pytester, fake_llm: FakeOpenAI) -> None:
    fake_llm.responder = score_by_outcome
    judged.makepyfile(test_unit=UNIT_TESTS)
    result = judged.runpytest("-rx")
    result.assert_outcomes(passed=1, xfailed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "    def test_bad():",
            '>       assert_judged(ANSWER, expected_outcome="Explains the warranty")',
            "E       pytest_agentv.assertions.JudgedAssertionError: assert_judged failed: "
            "score 0.20 (fail)",
            "E         evaluator  type       weight  score  verdict",
            "E         llm_judge  llm_judge       1   0.20  fail",
            "E       llm_judge (llm_judge): score 0.20 (fail)",
            "E           ✓ polite",
            "E           ✗ says nothing about the warranty",
            "E           reasoning: Off topic.",
            "test_unit.py:15: JudgedAssertionError",
        ]
    )
    result.stdout.fnmatch_lines(
        ["XFAIL test_unit.py::test_meh - borderline: score 0.70; misses: no refund method"]
    )
    assert "pytest_agentv/assertions.py" not in result.stdout.str()
    result.stdout.fnmatch_lines(["*3 evaluations: 1 pass, 1 borderline, 1 fail*"])
    judged.runpytest("--agentv-borderline=fail").assert_outcomes(passed=1, failed=2)


def test_async_twin_overlaps_calls(judged: pytest.Pytester, fake_llm: FakeOpenAI) -> None:
    # No call gets its reply until all four are waiting for one: they overlap, or time out.
    fake_llm.responder = lambda r: Gate(4, freeform_reply(0.9))
    judged.makepyfile(
        test_async="""
        import asyncio
        import pytest
        from pytest_agentv import assert_judged_async

        @pytest.mark.asyncio
        async def test_many():
            scores = await asyncio.gather(
                *(assert_judged_async(f"answer {i}", expected_outcome="ok") for i in range(4))
            )
            assert [s.score for s in scores] == [0.9] * 4
        """
    )
    judged.runpytest().assert_outcomes(passed=1)
    assert fake_llm.peak_in_flight == 4


def test_code_judges_and_rubric_forms(judged: pytest.Pytester, fake_llm: FakeOpenAI) -> None:
    fake_llm.responder = lambda r: checklist(rubric_1=True, tone=True, brief=True)
    write(judged, "judges/kw.py", (judged.path / "keywords.py").read_text())
    judged.makepyfile(
        test_forms="""
        from pytest_agentv import RubricItem, assert_judged

        def test_code_judge():
            score = assert_judged(
                "Refunds within 30 days",
                evaluators=[{"name": "kw", "type": "code_judge",
                             "script": ["python", "judges/kw.py"], "keywords": ["30 days"]}],
            )
            assert score.hits == ("mentions 30 days",)

        def test_rubric_forms():
            score = assert_judged(
                "Refunds within 30 days",
                rubrics=["Mentions 30 days", {"id": "tone", "expected_outcome": "Polite"},
                         RubricItem(id="brief", expected_outcome="Short")],
            )
            assert score.score == 1.0

        def test_bad_entry():
            assert_judged("x", evaluators=[{"type": "code_judge"}])

        def test_unknown_keyword():
            assert_judged("x", expected_outcom="typo")
        """
    )
    result = judged.runpytest()
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines(
        ["*ValueError: evaluators[[]0] is invalid: *code_judge evaluator 'code-judge' needs*"]
    )
    result.stdout.fnmatch_lines(["*TypeError: unexpected keyword argument(s): expected_outcom*"])
    assert "- [tone] (REQUIRED) (weight: 1): Polite" in fake_llm.requests[0].user


def test_duplicate_rubric_ids_are_refused(judged: pytest.Pytester, fake_llm: FakeOpenAI) -> None:
    """One check per id comes back from the judge: a second item would get the first's grade."""
    judged.makepyfile(
        test_dup="""
        import pytest
        from pytest_agentv import assert_judged

        def test_dup():
            with pytest.raises(ValueError, match="rubrics.1.id: rubric id 'r1' is used twice"):
                assert_judged("x", rubrics=[{"id": "r1", "expected_outcome": "apples"},
                                            {"id": "r1", "expected_outcome": "bananas"}])
        """
    )
    judged.runpytest().assert_outcomes(passed=1)
    assert not fake_llm.requests


def test_junit_properties_on_the_calling_test(
    judged: pytest.Pytester, fake_llm: FakeOpenAI
) -> None:
    fake_llm.responder = lambda r: freeform_reply(0.9, ["fine"])
    judged.makepyfile(
        test_props="""
        from pytest_agentv import assert_judged

        def test_it():
            assert_judged("answer", expected_outcome="ok")
        """
    )
    judged.runpytest("--junitxml=junit.xml").assert_outcomes(passed=1)
    props = {
        p.get("name"): p.get("value") for p in ET.parse(judged.path / "junit.xml").iter("property")
    }
    assert props["agentv.score"] == "0.9000"
    assert props["agentv.verdict"] == "pass"
    assert props["agentv.evaluator.llm_judge.score"] == "0.9000"
    assert props["agentv.hits"] == '["fine"]'
    assert props["agentv.tokens"] == "120"


def test_later_calls_in_one_test_get_numbered_junit_keys(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_twice="""
        from pytest_agentv import assert_judged

        def test_it():
            assert_judged({"text": "a", "duration_ms": 5}, evaluators=[
                {"name": "fast", "type": "latency", "threshold": 10}])
            assert_judged({"text": "b", "duration_ms": 9}, evaluators=[
                {"name": "faster", "type": "latency", "threshold": 10}])
        """
    )
    project.runpytest("--junitxml=junit.xml").assert_outcomes(passed=1)
    names = [p.get("name") for p in ET.parse(project.path / "junit.xml").iter("property")]
    assert len(names) == len(set(names)), names
    assert {"agentv.evaluator.fast.score", "agentv.2.evaluator.faster.score"} <= set(names)
    assert {"agentv.score", "agentv.2.score"} <= set(names)


def test_skips_without_a_judge_and_require_judge(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_nojudge="""
        from pytest_agentv import assert_judged

        def test_needs_judge():
            assert_judged("answer", expected_outcome="ok")

        def test_code_only():
            assert_judged("ok", evaluators=[{"name": "kw", "type": "code",
                                             "script": ["python", "keywords.py"]}])
        """
    )
    result = project.runpytest("-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(
        [
            "*1 skipped (no judge)*",
            "SKIPPED*assert_judged skipped: no LLM judge is configured: set AGENTV_JUDGE_MODEL*",
        ]
    )
    result = project.runpytest("--agentv-require-judge")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*assert_judged needs a judge: no LLM judge is configured*"])


def test_judge_fixture_evaluates_without_asserting(
    judged: pytest.Pytester, fake_llm: FakeOpenAI
) -> None:
    fake_llm.responder = lambda r: freeform_reply(0.1, [], ["wrong"])
    judged.makepyfile(
        test_fixture=f"""
        def test_evaluate(agentv_judge):
            assert agentv_judge.model == "openai/fake-judge"
            result = agentv_judge.evaluate("answer", expected_outcome="ok")
            assert result.score.score == 0.1 and result.score.verdict == "fail"
            assert [r.name for r in result.evaluator_results] == ["llm_judge"]
            other = agentv_judge.evaluate(
                "answer",
                expected_outcome="ok",
                evaluators=[{{"name": "j", "type": "llm_judge", "model": "openai/other",
                             "api_base": "{fake_llm.api_base}"}}],
            )
            assert [r.name for r in other.evaluator_results] == ["j"]
        """
    )
    judged.runpytest().assert_outcomes(passed=1)
    assert [r.body["model"] for r in fake_llm.requests] == ["fake-judge", "other"]


def test_evaluator_crash_message_is_redacted(
    judged: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_API_TOKEN", "tok-canary-5b1e9f3a7c2d")
    judged.makeconftest(
        """
        import os

        class Crash:
            kind = "crash"
            def evaluate(self, context):
                raise RuntimeError("token " + os.environ["MY_API_TOKEN"])

        def pytest_agentv_make_evaluator(config, kind):
            return Crash() if kind == "crash" else None
        """
    )
    judged.makepyfile(
        test_crash="""
        from pytest_agentv import assert_judged

        def test_it():
            assert_judged("x", evaluators=[{"name": "c", "type": "crash"}])
        """
    )
    result = judged.runpytest("--junitxml=junit.xml")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*assert_judged was not graded: c: Evaluator 'c' failed: *"])
    for text in (result.stdout.str(), (judged.path / "junit.xml").read_text()):
        assert "tok-canary" not in text


AGENT_RAISES = """
import asyncio
import os

import pytest

from pytest_agentv import assert_judged, assert_judged_async
from pytest_agentv.redaction import register_secret

FAST = [{"name": "fast", "type": "latency", "threshold": 1000}]


def broken_agent():
    raise RuntimeError("upstream refused key " + os.environ["MY_API_TOKEN"])


def leaky_agent():
    register_secret("reg-canary-41c7e0d9b2")
    raise ValueError("registered reg-canary-41c7e0d9b2")


async def broken_async_agent():
    await asyncio.sleep(0)
    broken_agent()


def test_sync():
    assert_judged(broken_agent, evaluators=FAST)


def test_sync_trials():
    assert_judged(broken_agent, evaluators=FAST, trials=3)


def test_registered():
    assert_judged(leaky_agent, evaluators=FAST)


def test_sync_awaits_an_async_agent():
    assert_judged(broken_async_agent, evaluators=FAST, trials=2)


@pytest.mark.asyncio
async def test_async():
    await assert_judged_async(broken_async_agent, evaluators=FAST)


@pytest.mark.asyncio
async def test_async_trials():
    await assert_judged_async(broken_agent, evaluators=FAST, trials=2)


def test_skip_in_the_agent():
    def skipping():
        pytest.skip("no agent here")

    assert_judged(skipping, evaluators=FAST)


def test_own_code():
    assert_judged({"text": "fine", "duration_ms": 1}, evaluators=FAST)
    raise KeyError("the test's own bug")
"""


@pytest.mark.parametrize("fail_on_error", ["yes", "no"])
def test_an_agent_callable_that_raises_is_not_graded_and_redacted(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, fail_on_error: str
) -> None:
    monkeypatch.setenv("MY_API_TOKEN", "tok-canary-93e1a7c5f2b8")
    project.makepyfile(test_agent=AGENT_RAISES)
    result = project.runpytest(
        f"--agentv-fail-on-error={fail_on_error}", "--junitxml=junit.xml", "-rs"
    )
    ungraded = 6
    if fail_on_error == "yes":
        result.assert_outcomes(failed=ungraded + 1, skipped=1)
    else:
        result.assert_outcomes(failed=1, skipped=ungraded + 1)
    result.stdout.fnmatch_lines(
        [
            "*assert_judged was not graded: assert_judged agent (broken_agent) raised "
            "RuntimeError: upstream refused key [[]redacted]*",
            "*assert_judged was not graded: attempt 0: assert_judged agent (broken_agent) "
            "raised RuntimeError*",
            "*assert_judged agent (leaky_agent) raised ValueError: registered [[]redacted]*",
            "*assert_judged agent (broken_async_agent) raised RuntimeError*",
        ]
    )
    result.stdout.fnmatch_lines(["*no agent here*"])
    result.stdout.fnmatch_lines(['*KeyError: "the test\'s own bug"*'])
    for text in (result.stdout.str(), (project.path / "junit.xml").read_text()):
        assert "tok-canary" not in text and "reg-canary" not in text
        assert "Traceback" not in text


def test_outside_a_session_is_a_clear_error() -> None:
    from pytest_agentv import assert_judged
    from pytest_agentv.assertions import current_test

    saved = current_test.set(None)
    try:
        with pytest.raises(RuntimeError, match="needs a running pytest session"):
            assert_judged("x")
    finally:
        current_test.reset(saved)


def test_not_graded_assertion_says_so(judged: pytest.Pytester, fake_llm: FakeOpenAI) -> None:
    fake_llm.responder = lambda r: "not json at all"
    judged.makepyfile(
        test_garbage="""
        from pytest_agentv import assert_judged

        def test_it():
            assert_judged("answer", expected_outcome="ok")
        """
    )
    result = judged.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*assert_judged was not graded: llm_judge: the judge's reply could not be "
            "parsed after 3 attempts*"
        ]
    )
    assert len(fake_llm.requests) == 3  # and no more: the retries are bounded


def test_argument_mistakes_are_type_errors_naming_the_argument(project: pytest.Pytester) -> None:
    # A string as rubrics was read letter by letter, one rubric item per character.
    project.makepyfile(
        test_args="""
        import pytest
        from pytest_agentv import assert_judged

        @pytest.mark.parametrize("options", [
            {"rubrics": "Mentions the refund window"},
            {"rubrics": 5},
            {"rubrics": ["ok", 5]},
            {"evaluators": {"name": "l", "type": "latency"}},
            {"evaluators": "latency"},
            {"evaluators": ["latency"]},
            {"model": 5},
            {"question": 5},
            {"expected_outcome": ["x"]},
            {"reference_answer": 5},
            {"trace": "fast"},
        ])
        def test_assert(options):
            assert_judged("answer", **options)

        def test_evaluate(agentv_judge):
            agentv_judge.evaluate("answer", rubrics="Mentions the refund window")

        def test_trials_do_not_call_the_agent(agentv_judge):
            def agent():
                raise AssertionError("not reached: the arguments are checked first")
            assert_judged(agent, trials=2, model=5)
        """
    )
    result = project.runpytest("--tb=line")
    result.assert_outcomes(failed=13)
    rubrics = "rubrics must be a list of rubric items (strings or mappings)"
    evaluators = "evaluators must be a list of mappings like the eval file's evaluators entries"
    model = "model must be a model string such as 'openai/gpt-4o-mini'"
    result.stdout.fnmatch_lines(
        [
            f"*test_args.py:18: TypeError: assert_judged(): {rubrics}, not str",
            f"*test_args.py:18: TypeError: assert_judged(): {rubrics}, not int",
            "*test_args.py:18: TypeError: assert_judged(): rubrics[[]1] must be a string, "
            "a mapping or a RubricItem, not int",
            f"*test_args.py:18: TypeError: assert_judged(): {evaluators}*, not dict",
            f"*test_args.py:18: TypeError: assert_judged(): {evaluators}*, not str",
            "*test_args.py:18: TypeError: assert_judged(): evaluators[[]0] must be a mapping "
            "like an eval file's evaluators entry*, not str",
            f"*test_args.py:18: TypeError: assert_judged(): {model}, not int",
            "*test_args.py:18: TypeError: assert_judged(): question must be a string*, not int",
            "*test_args.py:18: TypeError: assert_judged(): expected_outcome must be a string*"
            ", not list",
            "*test_args.py:18: TypeError: assert_judged(): reference_answer must be a string "
            "or a mapping*, not int",
            "*test_args.py:18: TypeError: assert_judged(): trace must be a mapping like "
            "AgentV's trace_summary, not str",
            f"*test_args.py:21: TypeError: evaluate(): {rubrics}, not str",
            f"*test_args.py:26: TypeError: assert_judged(): {model}*",
        ]
    )
    assert "pytest_agentv/assertions.py" not in result.stdout.str()
