"""Verdicts cannot be planted, clamped or lost: gates travel with scores, custom evaluators are
not failed by default, prompts are filled in, details reach the results file."""

from __future__ import annotations

import json

import pytest
from fake_openai import FakeOpenAI, checklist
from helpers import write

from pytest_agentv import EvaluationScore

DETAILS_JUDGE = """\
import json, sys
config = json.load(sys.stdin)["config"]
print(json.dumps({"score": config["score"], "details": {"checked": ["a", "b"]}}))
"""


def rows(pytester: pytest.Pytester, name: str = "out.jsonl") -> dict[str, dict]:  # type: ignore[type-arg]
    lines = (pytester.path / name).read_text().splitlines()
    return {row["eval_id"]: row for row in map(json.loads, lines)}


def test_a_failed_gate_survives_the_mean_of_several_evaluators(
    judged: pytest.Pytester, fake_llm: FakeOpenAI
) -> None:
    # The rubric scores 0.5 with its required item unmet; the code judge scores 1.0; the mean
    # is 0.75 (borderline), but the unmet required item fails the case.
    fake_llm.responder = lambda r: checklist(rubric_1=False, rubric_2=True)
    write(judged, "judge.py", DETAILS_JUDGE)
    write(
        judged,
        "g.eval.yaml",
        """
        evalcases:
          - id: gated
            input: Refunds?
            rubrics: [States the 30-day window, Is polite]
            evaluators:
              - {name: code, type: code_judge, script: [python, judge.py], config: {score: 1}}
        """,
    )
    result = judged.runpytest("--agentv-results=out.jsonl")
    result.assert_outcomes(failed=1)
    row = rows(judged)["gated"]
    assert row["score"] == pytest.approx(0.75)
    assert row["verdict"] == "fail"
    rubric, code = row["evaluator_results"]
    assert (rubric["score"], rubric["verdict"]) == (0.5, "fail")
    assert (code["score"], code["verdict"]) == (1.0, "pass")
    result.stdout.fnmatch_lines(
        ["*eval 'gated' failed: score 0.75 (fail) (a required criterion or check was not met)"]
    )


def test_scores_carry_their_gate_and_derive_their_verdict() -> None:
    assert EvaluationScore(score=1.0).verdict == "pass"
    assert EvaluationScore(score=0.7).verdict == "borderline"
    assert EvaluationScore(score=0.2).verdict == "fail"
    gated = EvaluationScore(score=0.5, gate_failed=True)
    assert (gated.verdict, gated.gate_failed) == ("fail", True)
    # An explicit fail on a passing score is a gate.
    assert EvaluationScore(score=0.9, verdict="fail").gate_failed


CUSTOM = """
import pytest
from pytest_agentv import EvaluationScore

class Always:
    kind = "always"
    def evaluate(self, context):
        return EvaluationScore(score=1.0)

@pytest.hookimpl
def pytest_agentv_make_evaluator(config, kind):
    return Always() if kind == "always" else None
"""


def test_a_custom_evaluator_that_scores_one_passes(project: pytest.Pytester) -> None:
    write(project, "conftest.py", CUSTOM)
    write(
        project,
        "c.eval.yaml",
        """
        evalcases:
          - id: custom
            input: q
            evaluators: [{name: always, type: always}]
        """,
    )
    project.runpytest("--agentv-results=out.jsonl").assert_outcomes(passed=1)
    assert rows(project)["custom"]["verdict"] == "pass"


def test_a_prompt_file_in_rubric_mode_is_filled_in(
    judged: pytest.Pytester, fake_llm: FakeOpenAI
) -> None:
    fake_llm.responder = lambda r: checklist(rubric_1=True)
    write(
        judged,
        "grader.md",
        "Grade the answer to {{question}} strictly.\nThe answer: {{candidate_answer}}\n",
    )
    write(
        judged,
        "p.eval.yaml",
        """
        evalcases:
          - id: templated
            input: How long do refunds take?
            evaluators:
              - name: rubric
                type: llm_judge
                prompt: grader.md
                rubrics: [Gives the 30-day window]
        """,
    )
    judged.runpytest().assert_outcomes(passed=1)
    user = fake_llm.requests[0].user
    assert "{{" not in user
    assert "Grade the answer to How long do refunds take? strictly." in user
    assert "The answer: <AGENTV-DATA nonce=" in user
    assert "- [rubric-1] (REQUIRED) (weight: 1): Gives the 30-day window" in user


def test_one_listed_evaluator_keeps_its_details_in_the_results_file(
    project: pytest.Pytester,
) -> None:
    write(project, "judge.py", DETAILS_JUDGE)
    write(
        project,
        "d.eval.yaml",
        """
        evalcases:
          - id: one
            input: q
            evaluators:
              - {name: code, type: code_judge, script: [python, judge.py], config: {score: 1}}
        """,
    )
    project.runpytest("--agentv-results=out.jsonl").assert_outcomes(passed=1)
    [entry] = rows(project)["one"]["evaluator_results"]
    assert entry["name"] == "code" and entry["details"] == {"checked": ["a", "b"]}


def test_an_invalid_rubric_in_assert_judged_is_a_clear_error(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_rubric="""
        from pytest_agentv import assert_judged

        def test_overlap():
            assert_judged("answer", rubrics=[{
                "id": "brevity",
                "score_ranges": [
                    {"score_range": [0, 5], "expected_outcome": "long"},
                    {"score_range": [5, 10], "expected_outcome": "short"},
                ],
            }])
        """
    )
    result = project.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*ValueError: rubrics.0.score_ranges: Overlapping score_ranges in rubric 'brevity': "
            "[[]0, 5] overlaps with [[]5, 10]"
        ]
    )
    result.stdout.no_fnmatch_line("*pydantic_core._pydantic_core.ValidationError*")
