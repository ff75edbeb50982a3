"""The public evaluator API (seed 001), used directly from Python."""

from __future__ import annotations

import asyncio

import pytest

import pytest_agentv
from pytest_agentv import (
    EVALUATOR_KINDS,
    CodeEvaluator,
    ConfigError,
    EvaluationContext,
    EvaluationScore,
    EvaluatorConfig,
    LlmJudgeEvaluator,
    PreparedCase,
    build_evaluator_registry,
    is_evaluator_kind,
    run_evaluators_for_case,
)
from pytest_agentv.evaluators.base import lookup_evaluator
from tests.helpers import write


def context(candidate: str = "Refunds within 30 days") -> EvaluationContext:
    case = PreparedCase(
        id="c", question="Refunds?", input_messages=({"role": "user", "content": "Refunds?"},)
    )
    return EvaluationContext(eval_case=case, candidate=candidate)


class Fixed:
    kind = "fixed"

    def __init__(self, score: float) -> None:
        self.value = score

    def evaluate(self, context: EvaluationContext) -> EvaluationScore:
        return EvaluationScore.graded(self.value, hits=("sync",))


class AsyncFixed(Fixed):
    async def evaluate(self, context: EvaluationContext) -> EvaluationScore:  # type: ignore[override]
        await asyncio.sleep(0)
        return EvaluationScore.graded(self.value, misses=("async",))


class Broken:
    kind = "broken"

    def evaluate(self, context: EvaluationContext) -> EvaluationScore:
        raise ValueError("bug in evaluator")


def test_public_names_and_kinds() -> None:
    assert EVALUATOR_KINDS == (
        "llm_judge",
        "code_judge",
        "tool_trajectory",
        "field_accuracy",
        "latency",
        "cost",
        "token_usage",
        "composite",
        "contains",
        "icontains",
        "contains_any",
        "icontains_any",
        "contains_all",
        "icontains_all",
        "starts_with",
        "ends_with",
        "equals",
        "regex",
        "is_json",
        "execution_metrics",
        "skill_trigger",
    )
    assert is_evaluator_kind("llm_judge") and is_evaluator_kind("code")
    assert is_evaluator_kind("tool_trajectory") and is_evaluator_kind("composite")
    assert not is_evaluator_kind("grader") and not is_evaluator_kind(3)
    for name in pytest_agentv.__all__:
        assert getattr(pytest_agentv, name) is not None
    with pytest.raises(AttributeError):
        pytest_agentv.does_not_exist  # noqa: B018


def test_registry_falls_back_to_llm_judge_then_errors() -> None:
    registry = build_evaluator_registry({"fixed": Fixed(1.0)})
    assert isinstance(registry["llm_judge"], LlmJudgeEvaluator)
    assert isinstance(registry["code_judge"], CodeEvaluator)
    assert lookup_evaluator(registry, "fixed").kind == "fixed"
    assert lookup_evaluator(registry, "code") is registry["code_judge"]
    assert lookup_evaluator(registry, "unheard-of") is registry["llm_judge"]
    with pytest.raises(ConfigError, match="no evaluator for kind 'x'"):
        lookup_evaluator({"fixed": Fixed(1.0)}, "x")


def test_run_evaluators_weighted_mean_and_per_evaluator_results() -> None:
    registry = {"fixed": Fixed(1.0), "async": AsyncFixed(0.5), "broken": Broken()}
    entries = [
        EvaluatorConfig(name="a", type="fixed", weight=1),
        EvaluatorConfig(name="b", type="async", weight=3),
        EvaluatorConfig(name="c", type="broken", weight=0),
    ]
    result = asyncio.run(run_evaluators_for_case(context(), entries, registry))
    assert result.score.score == pytest.approx((1.0 + 1.5) / 4)
    assert result.score.verdict == "borderline"
    assert [(r.name, r.type, r.score.score) for r in result.evaluator_results] == [
        ("a", "fixed", 1.0),
        ("b", "async", 0.5),
        ("c", "broken", 0.0),
    ]
    assert result.score.hits == ("sync",)
    assert result.score.misses == ("async", "Evaluator 'c' failed: ValueError: bug in evaluator")
    assert result.score.error == "c: Evaluator 'c' failed: ValueError: bug in evaluator"


def test_score_is_clamped_and_nan_is_zero() -> None:
    assert EvaluationScore(score=1.7).score == 1.0
    assert EvaluationScore(score=-1).score == 0.0
    assert EvaluationScore(score=float("nan")).score == 0.0
    assert EvaluationScore.graded(0.9, gate_failed=True).verdict == "fail"
    assert EvaluationScore.graded(0.9, gate_failed=True).gate_failed


def test_code_evaluator_from_python(tmp_path) -> None:  # type: ignore[no-untyped-def]
    script = tmp_path / "judge.py"
    script.write_text(
        "import json,sys; p=json.load(sys.stdin); "
        "print(json.dumps({'score': 1 if '30 days' in p['candidate_answer'] else 0}))"
    )
    evaluator = CodeEvaluator(script=["python", str(script)], timeout_seconds=10)
    assert asyncio.run(evaluator.evaluate(context())).score == 1.0
    assert asyncio.run(evaluator.evaluate(context("no idea"))).score == 0.0


def test_llm_judged_cases_skip_without_a_judge(project: pytest.Pytester) -> None:
    write(
        project,
        "j.eval.yaml",
        """
        evalcases:
          - id: freeform
            expected_outcome: Mentions the refund window
            input: Refunds?
          - id: code-only
            input: Refunds?
            evaluators: [{name: kw, type: code_judge, script: [python, keywords.py]}]
        """,
    )
    result = project.runpytest("-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(
        [
            "*1 skipped (no judge)*",
            "*skipped cases need an LLM judge: set AGENTV_JUDGE_MODEL*",
            "SKIPPED [[]1] j.eval.yaml:3: eval 'freeform' skipped: no LLM judge is configured: set "
            "AGENTV_JUDGE_MODEL*OPENAI_API_KEY*",
        ]
    )
    result = project.runpytest("--agentv-require-judge")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        ["*needs a judge: no LLM judge is configured*--agentv-require-judge*"]
    )
