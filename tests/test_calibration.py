"""Judge calibration: canaries graded before the first judged case, enforce / warn / off, the
calibration file's errors, replay, xdist and assert_judged."""

from __future__ import annotations

import threading

import pytest

from tests.fake_openai import FakeOpenAI, Request, checklist, freeform
from tests.helpers import judge_ini, outcome_counts, write

CANARIES = """
canaries:
  - id: right-window
    input: Can I return my shoes?
    answer: Yes, within 30 days, no questions asked.
    expected_outcome: Gives the 30-day return window
    verdict: pass
  - id: wrong-window
    input: Can I return my shoes?
    answer: No, we never take returns.
    expected_outcome: Gives the 30-day return window
    verdict: fail
  - id: no-payment-method
    input: How do refunds work?
    answer: Returns are possible for 30 days.
    expected_outcome: A complete refund answer
    rubrics:
      - Mentions the 30-day window
      - {id: payment-method, expected_outcome: Says refunds go to the original payment method}
    verdict: fail
"""

SUITE = """
evalcases:
  - id: judged
    expected_outcome: Gives the 30-day window
    input: Refunds?
  - id: also-judged
    expected_outcome: Gives the 30-day window
    input: Returns?
  - id: code-only
    input: Refunds?
    evaluators:
      - {name: kw, type: code_judge, script: [python, keywords.py], config: {keywords: [refund]}}
"""


def sane(request: Request) -> str:
    """Fails what is wrong: "never", or the canary's answer without a payment method."""
    if '"satisfied"' in request.system:
        return checklist(rubric_1=True, payment_method="Returns are possible" not in request.user)
    return freeform(0.1 if "never" in request.user else 0.9)


def lenient(request: Request) -> str:
    """Passes everything: the judge calibration is there to catch."""
    if '"satisfied"' in request.system:
        return checklist(rubric_1=True, payment_method=True)
    return freeform(0.95)


def is_canary(request: Request) -> bool:
    return any(
        answer in request.user
        for answer in ("no questions asked", "never take returns", "Returns are possible")
    )


@pytest.fixture
def calibrated(judged: pytest.Pytester) -> pytest.Pytester:
    write(judged, ".agentv/calibration.yaml", CANARIES)
    write(judged, "s.eval.yaml", SUITE)
    return judged


# Under pytest-xdist, in one session with another feature's run: tests/test_result_rows.py.
def test_a_judge_that_passes_a_known_bad_canary_stops_the_judged_cases(
    calibrated: pytest.Pytester, fake_llm: FakeOpenAI
) -> None:
    fake_llm.responder = lenient
    assert_failed_calibration(calibrated.runpytest(), fake_llm)


def assert_failed_calibration(
    result: pytest.RunResult, fake_llm: FakeOpenAI, suite: str = ""
) -> None:
    """The run of ``SUITE`` (the tests under ``suite``, a node id prefix) with a ``lenient``
    judge, which fails calibration."""
    # The code judge's case is graded; both judged cases are not.
    assert outcome_counts(result, suite) == {"passed": 1, "error": 2}
    message = (
        "judge failed calibration: wrong-window: expected fail, got pass (score 0.95); "
        "no-payment-method: expected fail, got pass (score 1.00)"
    )
    result.stdout.fnmatch_lines([f"*eval 'judged' was not graded: {message}"])
    result.stdout.fnmatch_lines(
        [
            "agentv calibration (.agentv/calibration.yaml): judge openai/fake-judge failed 2 of 3 "
            "canaries; its cases were not graded",
            "  wrong-window: expected fail, got pass (score 0.95)",
        ]
    )
    # No case reached the judge: every request was a canary's.
    assert fake_llm.requests and all(is_canary(request) for request in fake_llm.requests)


def test_canaries_are_graded_concurrently_before_the_first_judged_case(
    calibrated: pytest.Pytester, fake_llm: FakeOpenAI
) -> None:
    together = threading.Barrier(3, timeout=30)

    def judge(request: Request) -> str:
        if is_canary(request):
            together.wait()  # breaks (and the canary is not graded) unless all three wait here
        return sane(request)

    fake_llm.responder = judge
    result = calibrated.runpytest()
    result.assert_outcomes(passed=3)
    canaries = [is_canary(request) for request in fake_llm.requests]
    assert canaries == [True, True, True, False, False]
    result.stdout.fnmatch_lines(
        [
            "agentv calibration (.agentv/calibration.yaml): judge openai/fake-judge graded 3 "
            "canaries as expected"
        ]
    )


def test_code_judged_cases_do_not_wait_for_calibration(
    calibrated: pytest.Pytester, fake_llm: FakeOpenAI
) -> None:
    fake_llm.responder = lenient
    calibrated.runpytest("-k", "code").assert_outcomes(passed=1, deselected=2)
    assert fake_llm.requests == []


# Serially only: results crossing pytest-xdist workers are tests/test_integrity.py's.
@pytest.mark.parametrize("run_args", [[]], ids=["serial"])
def test_replay_of_a_calibrated_run_makes_zero_calls(
    calibrated: pytest.Pytester, fake_llm: FakeOpenAI, run_args: list[str]
) -> None:
    fake_llm.responder = sane
    calibrated.makeini(judge_ini(fake_llm).replace("agentv_cache_mode = off", ""))
    calibrated.runpytest().assert_outcomes(passed=3)
    assert len(fake_llm.requests) == 5
    fake_llm.stop()
    replayed = calibrated.runpytest(*run_args, "--agentv-cache-mode=replay")
    replayed.assert_outcomes(passed=3)
    replayed.stdout.fnmatch_lines(
        [
            "*judge openai/fake-judge graded 3 canaries as expected",
            "agentv: 0 model calls made, * replies reused from the store, 0 tokens, $0.0000",
        ]
    )


def test_warn_grades_anyway_and_warns(calibrated: pytest.Pytester, fake_llm: FakeOpenAI) -> None:
    fake_llm.responder = lenient
    result = calibrated.runpytest("--agentv-calibration-mode=warn", "-W", "always")
    result.assert_outcomes(passed=3, warnings=1)
    [warning] = result.reprec.getcalls("pytest_warning_recorded")  # type: ignore[attr-defined]
    assert warning.warning_message.category.__name__ == "AgentvCalibrationWarning"
    assert str(warning.warning_message.message) == (
        "judge openai/fake-judge failed calibration (.agentv/calibration.yaml): wrong-window: "
        "expected fail, got pass (score 0.95); no-payment-method: expected fail, got pass "
        "(score 1.00); its verdicts were used anyway (--agentv-calibration-mode warn)"
    )
    result.stdout.fnmatch_lines(["*failed 2 of 3 canaries; its verdicts were used anyway (warn)"])
    # Made an error, it is an error of the test that reported it; the others run as usual.
    strict = calibrated.runpytest(
        "--agentv-calibration-mode=warn", "-W", "error::pytest_agentv.AgentvWarning"
    )
    strict.assert_outcomes(passed=3, errors=1)
    strict.stdout.fnmatch_lines(["*ERROR at teardown of eval: *"])


def test_off_ignores_the_file(calibrated: pytest.Pytester, fake_llm: FakeOpenAI) -> None:
    fake_llm.responder = lenient
    calibrated.runpytest("--agentv-calibration-mode=off").assert_outcomes(passed=3)
    assert not any(is_canary(request) for request in fake_llm.requests)


def test_the_calibration_file_from_every_source(
    judged: pytest.Pytester, fake_llm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_llm.responder = lenient
    write(judged, "canaries/strict.yaml", CANARIES)
    write(judged, "s.eval.yaml", SUITE)
    judged.runpytest().assert_outcomes(passed=3)  # no file at the default place: no calibration
    judged.runpytest("--agentv-calibration=canaries/strict.yaml").assert_outcomes(
        passed=1, errors=2
    )
    monkeypatch.setenv("AGENTV_CALIBRATION", "canaries/strict.yaml")
    judged.runpytest().assert_outcomes(passed=1, errors=2)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            "canaries:\n  - id: a\n    input: q\n    answer: x\n    expected_outcome: y\n"
            "    verdict: borderline\n",
            "canaries.0.verdict: must be 'pass' or 'fail'",
        ),
        (
            "canaries:\n  - id: a\n    input: q\n    anwser: x\n    expected_outcome: y\n"
            "    verdict: pass\n",
            "canaries.0.answer: required field is missing (+1 more)",
        ),
        ("canaries: []\n", "canaries: must not be empty*"),
    ],
)
def test_a_bad_calibration_file_names_its_line(
    calibrated: pytest.Pytester, fake_llm: FakeOpenAI, text: str, problem: str
) -> None:
    write(calibrated, ".agentv/calibration.yaml", text)
    result = calibrated.runpytest()
    result.assert_outcomes(passed=1, errors=2)
    result.stdout.fnmatch_lines(
        [
            "*'judged' was not graded: the calibration file cannot be used: "
            f"*calibration.yaml:*:*: {problem}"
        ]
    )
    assert fake_llm.requests == []


def test_assert_judged_waits_for_calibration(
    calibrated: pytest.Pytester, fake_llm: FakeOpenAI
) -> None:
    fake_llm.responder = lenient
    write(
        calibrated,
        "test_bot.py",
        """
        from pytest_agentv import assert_judged

        def test_refund_answer():
            assert_judged("Refunds within 30 days", expected_outcome="Gives the window")

        def test_code_only():
            assert_judged("refund", evaluators=[
                {"name": "kw", "type": "code_judge", "script": ["python", "keywords.py"],
                 "config": {"keywords": ["refund"]}}])
        """,
    )
    result = calibrated.runpytest("test_bot.py")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*assert_judged was not graded: judge failed calibration: *"])
