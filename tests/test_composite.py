"""composite: members run concurrently and nest; weighted_average, code_judge and llm_judge
aggregators; members keep their own settings; ungraded members and failed gates carry through."""

from __future__ import annotations

import asyncio
import json
import xml.etree.ElementTree as ET
from typing import Any

import pytest

from pytest_agentv import (
    AgentvJudge,
    EvaluationContext,
    EvaluationScore,
    EvaluatorConfig,
    JudgedAssertionError,
    PreparedCase,
    assert_judged,
    build_evaluator_registry,
)
from tests.fake_openai import FakeOpenAI, Request, checklist
from tests.fake_openai import freeform as freeform_reply
from tests.helpers import judge_ini, write

#: A code judge that prints its config's ``out`` (so tests choose a member's exact grade).
FIXED = "import json, sys; print(json.dumps(json.load(sys.stdin)['config']['out']))\n"

#: A code aggregator: the safety gate of AgentV's composite example, in Python.
GATE = """\
import json, sys
results = json.load(sys.stdin)["results"]
json.dump({"keys": sorted(results["safety"])}, open("payload.json", "w"))
if results["safety"]["verdict"] == "fail":
    print(json.dumps({"score": 0, "verdict": "fail", "misses": ["Safety check failed"]}))
else:
    quality = results["quality"]
    print(json.dumps({"score": quality["score"], "verdict": "fail" if quality["misses"] else "pass",
                      "hits": ["Safety check passed"], "reasoning": "score from quality"}))
"""


def fixed(name: str, score: float, **out: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name, "type": "code_judge", "script": ["python", "fixed.py"]}
    return {**entry, "out": {"score": score, **out}}


def composite(name: str, *members: dict[str, Any], **aggregator: Any) -> dict[str, Any]:
    aggregator.setdefault("type", "weighted_average")
    return {
        "name": name,
        "type": "composite",
        "evaluators": list(members),
        "aggregator": aggregator,
    }


@pytest.fixture
def here(pytester: pytest.Pytester) -> pytest.Pytester:
    """A folder with the fixed-score judge, for ``assert_judged`` run by an inner session."""
    write(pytester, "fixed.py", FIXED)
    return pytester


def evaluate(judge: AgentvJudge, entry: dict[str, Any], answer: Any = "done") -> EvaluationScore:
    return judge.evaluate(answer, evaluators=[entry]).evaluator_results[0].score


def test_weighted_average_of_deterministic_members(agentv_judge: AgentvJudge) -> None:
    trace = [{"role": "assistant", "content": "ok", "tool_calls": [{"tool": "search"}]}]
    answer = {"output_messages": trace, "duration_ms": 900, "cost_usd": 0.5}
    entry = composite(
        "gate",
        {"name": "fast", "type": "latency", "threshold": 1000},
        {"name": "cheap", "type": "cost", "budget": 0.1},
        {
            "name": "searched",
            "type": "tool_trajectory",
            "mode": "any_order",
            "minimums": {"search": 1},
        },
        weights={"fast": 1, "cheap": 2},
    )
    score = evaluate(agentv_judge, entry, answer)
    assert score.score == pytest.approx(2 / 4)
    assert score.hits == (
        "[fast] Duration 900ms <= 1000ms threshold",
        "[searched] search: called 1 times (required ≥1)",
    )
    assert score.misses == ("[cheap] Cost $0.5000 > $0.1000 budget",)
    assert [(m.name, m.weight, m.score.score) for m in score.evaluator_results] == [
        ("fast", 1.0, 1.0),
        ("cheap", 2.0, 0.0),
        ("searched", 1.0, 1.0),
    ]
    assert score.evaluator_raw_request == {
        "aggregator": "weighted_average",
        "weights": {"fast": 1.0, "cheap": 2.0},
    }


def test_all_zero_weights_score_zero(agentv_judge: AgentvJudge) -> None:
    entry = composite(
        "zero",
        {"name": "a", "type": "latency", "threshold": 10},
        {"name": "b", "type": "cost", "budget": 10},
        weights={"a": 0, "b": 0},
    )
    score = agentv_judge.evaluate(
        {"text": "x", "duration_ms": 1, "cost_usd": 1}, evaluators=[entry]
    )
    assert score.evaluator_results[0].score.score == 0.0


def test_weights_near_a_floats_limit_still_average(agentv_judge: AgentvJudge) -> None:
    """Two weights of 1e308 overflowed their sum: the mean was NaN, scored 0, for a member
    that passed and one that did not (the composite's and the case's weighted means alike)."""
    heavy = 1.7e308
    entry = composite(
        "heavy",
        {"name": "a", "type": "latency", "threshold": 10},
        {"name": "b", "type": "cost", "budget": 0.1},
        weights={"a": heavy, "b": heavy},
    )
    answer = {"text": "x", "duration_ms": 1, "cost_usd": 1}
    assert evaluate(agentv_judge, entry, answer).score == 0.5
    members = [
        {"name": "a", "type": "latency", "threshold": 10, "weight": heavy},
        {"name": "b", "type": "latency", "threshold": 10, "weight": heavy},
    ]
    assert agentv_judge.evaluate(answer, evaluators=members).score.score == 1.0


def test_nested_composites_nest_results(agentv_judge: AgentvJudge) -> None:
    inner = composite(
        "inner",
        {"name": "fast", "type": "latency", "threshold": 1000},
        {"name": "cheap", "type": "cost", "budget": 0.1},
        weights={"fast": 3, "cheap": 1},
    )
    outer = composite("outer", inner, {"name": "tokens", "type": "token_usage", "max_total": 10})
    answer = {
        "text": "x",
        "duration_ms": 10,
        "cost_usd": 1.0,
        "token_usage": {"input": 1, "output": 2},
    }
    score = evaluate(agentv_judge, outer, answer)
    assert score.score == pytest.approx((0.75 + 1.0) / 2)
    nested = score.evaluator_results[0].score
    assert [m.name for m in nested.evaluator_results] == ["fast", "cheap"]
    assert "[inner] [cheap] Cost $1.0000 > $0.1000 budget" in score.misses


def test_member_gates_fail_the_case(here: pytest.Pytester) -> None:
    here.makepyfile(
        test_gates=f"""
        import pytest
        from pytest_agentv import JudgedAssertionError, assert_judged
        FIXED = {fixed("fixed", 0)!r}

        def member(name, score, **out):
            return {{**FIXED, "name": name, "out": {{"score": score, **out}}}}

        def composite(*members, **aggregator):
            return {{"name": "quality", "type": "composite", "evaluators": list(members),
                    "aggregator": {{"type": "weighted_average", **aggregator}}}}

        def test_gated_member_fails_a_high_average():
            entry = composite(member("a", 1.0), member("b", 0.9, **{{"pass": False}}))
            with pytest.raises(JudgedAssertionError) as failed:
                assert_judged("x", evaluators=[entry])
            assert "score 0.95 (fail) (a required criterion" in str(failed.value)

        def test_weight_zero_member_gate_is_ignored():
            gated = member("b", 0.9, **{{"pass": False}})
            entry = composite(member("a", 1.0), gated, weights={{"b": 0}})
            assert assert_judged("x", evaluators=[entry]).verdict == "pass"
        """
    )
    here.runpytest().assert_outcomes(passed=2)


def test_code_aggregator_reads_members_and_gates(here: pytest.Pytester) -> None:
    write(here, "gate.py", GATE)
    write(
        here,
        "c.eval.yaml",
        f"""
        evalcases:
          - id: safe
            input: hi
            evaluators:
              - name: safety_gate
                type: composite
                evaluators:
                  - {json.dumps(fixed("safety", 1.0))}
                  - {json.dumps(fixed("quality", 0.7, hits=["clear"]))}
                aggregator: {{type: code_judge, path: python gate.py}}
          - id: unsafe
            input: hi
            evaluators:
              - name: safety_gate
                type: composite
                evaluators:
                  - {json.dumps(fixed("safety", 0.2))}
                  - {json.dumps(fixed("quality", 1.0))}
                aggregator: {{type: code_judge, path: [python, gate.py]}}
          - id: says-fail
            input: hi
            evaluators:
              - name: safety_gate
                type: composite
                evaluators:
                  - {json.dumps(fixed("safety", 0.9))}
                  - {json.dumps(fixed("quality", 0.9, misses=["flagged"]))}
                aggregator: {{type: code_judge, path: python gate.py}}
          - id: broken
            input: hi
            evaluators:
              - name: safety_gate
                type: composite
                evaluators: [{json.dumps(fixed("safety", 0.9))}]
                aggregator: {{type: code_judge, path: python -c 'print(42)'}}
        """,
    )
    write(
        here,
        ".agentv/targets.yaml",
        "targets:\n  - {name: default, provider: mock, response: hello}\n",
    )
    result = here.runpytest("--agentv-borderline=pass", "--junitxml=junit.xml")
    result.assert_outcomes(passed=1, failed=2, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*eval 'unsafe' failed: score 0.00 (fail)",
            "  safety_gate  composite        1   0.00  fail",
            "    safety     code_judge       1   0.20  fail",
            "    quality    code_judge       1   1.00  pass",
            "safety_gate (composite): score 0.00 (fail)",
            "    ✗ Safety check failed",
            "    safety (code_judge): score 0.20 (fail)",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*eval 'broken' was not graded: safety_gate: "
            "code judge output must be a JSON object, got int"
        ]
    )
    result.stdout.fnmatch_lines(["*eval 'says-fail' failed: score 0.90 (fail) (a required*"])
    payload = json.loads((here.path / "payload.json").read_text())
    assert payload["keys"] == [
        "evaluatorRawRequest",
        "expectedAspectCount",
        "hits",
        "misses",
        "score",
        "verdict",
    ]
    unsafe = next(
        case
        for case in ET.parse(here.path / "junit.xml").getroot().iter("testcase")
        if case.get("name") == "unsafe"
    )
    props = {p.get("name"): p.get("value") for p in unsafe.iter("property")}
    assert props["agentv.evaluator.safety_gate.quality.score"] == "1.0000"
    assert props["agentv.evaluator.safety_gate.safety.verdict"] == "fail"


def test_a_code_aggregator_that_gives_a_key_twice_is_not_graded(agentv_judge: AgentvJudge) -> None:
    printer = ["python", "-c", 'print(\'{"score": 0, "score": 1}\')']
    entry = composite(
        "gate",
        {"name": "fast", "type": "latency", "threshold": 1000},
        type="code_judge",
        path=printer,
    )
    score = evaluate(agentv_judge, entry, {"text": "x", "duration_ms": 1})
    assert score.error is not None
    assert "outside its contract: duplicate key 'score'" in score.error
    evaluation = agentv_judge.evaluate({"text": "x", "duration_ms": 1}, evaluators=[entry])
    assert evaluation.grade().error is not None


def test_llm_aggregator_and_members_with_their_own_prompts(
    judged: pytest.Pytester, fake_llm: FakeOpenAI
) -> None:
    def grade(request: Request) -> str:
        if "Decide between the members" in request.user:
            return freeform_reply(0.7, ["balanced"], ["a bit long"], "weighed both")
        if '"satisfied"' in request.system:
            return checklist(window=True)
        return freeform_reply(0.9, ["friendly"], [], "nice tone")

    fake_llm.responder = grade
    write(judged, "prompts/tone.md", "Rate only the tone of {{candidate_answer}}.")
    write(
        judged, "prompts/decide.md", "Decide between the members:\n{{ EVALUATOR_RESULTS_JSON }}\n"
    )
    write(
        judged,
        "l.eval.yaml",
        """
        evalcases:
          - id: decided
            input: Can I get a refund?
            expected_outcome: Gives the refund window
            evaluators:
              - name: final
                type: composite
                evaluators:
                  - {name: tone, type: llm_judge, prompt: prompts/tone.md}
                  - name: facts
                    type: llm_judge
                    rubrics: [{id: window, expected_outcome: Mentions 30 days}]
                aggregator: {type: llm_judge, prompt: prompts/decide.md}
          - id: default-prompt
            input: Can I get a refund?
            evaluators:
              - name: final
                type: composite
                evaluators:
                  - {name: tone, type: llm_judge, prompt: prompts/tone.md}
                aggregator: {type: llm_judge}
        """,
    )
    result = judged.runpytest("--agentv-results=out.jsonl", "--agentv-borderline=pass")
    result.assert_outcomes(passed=2)
    users = [r.user for r in fake_llm.requests]
    assert sum("Rate only the tone of <AGENTV-DATA" in u for u in users) == 2
    assert sum("[window] (REQUIRED) (weight: 1): Mentions 30 days" in u for u in users) == 1
    decision = next(r for r in fake_llm.requests if "Decide between the members" in r.user)
    assert '"tone": {' in decision.user and '"facts": {' in decision.user
    assert '<AGENTV-DATA nonce="' in decision.user.split("Decide between the members:")[1]
    default = next(
        r for r in fake_llm.requests if "Review the following evaluation results" in r.user
    )
    assert '"tone": {' in default.user and '"facts"' not in default.user
    rows = [json.loads(line) for line in (judged.path / "out.jsonl").read_text().splitlines()]
    final = rows[0]["evaluator_results"][0]
    assert (final["score"], final["hits"], final["evaluator_provider_request"]["aggregator"]) == (
        0.7,
        ["balanced"],
        "llm_judge",
    )
    assert [m["name"] for m in final["evaluator_results"]] == ["tone", "facts"]
    assert final["evaluator_results"][1]["details"]["rubric"][0]["satisfied"] is True


def test_ungraded_member_makes_the_case_not_graded(
    judged: pytest.Pytester, fake_llm: FakeOpenAI
) -> None:
    fake_llm.responder = lambda request: "I cannot grade this."
    write(
        judged,
        "u.eval.yaml",
        """
        evalcases:
          - id: member-unparsed
            input: Refunds?
            evaluators:
              - name: both
                type: composite
                evaluators:
                  - {name: words, type: code_judge, script: [python, keywords.py]}
                  - {name: judge, type: llm_judge}
                aggregator: {type: code_judge, path: python -c 'raise SystemExit(3)'}
        """,
    )
    result = judged.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*eval 'member-unparsed' was not graded: both: judge: the judge's reply could not be*"]
    )


def test_aggregators_and_prompt_scripts_that_cannot_start_are_not_graded(
    judged: pytest.Pytester,
) -> None:
    """Every script an evaluator runs goes through one runner: a code aggregator or a judge's
    prompt script whose file is missing is a setup problem, as a code judge's is."""
    write(
        judged,
        "s.eval.yaml",
        """
        evalcases:
          - id: gate
            input: Refunds?
            evaluators:
              - name: both
                type: composite
                evaluators: [{name: words, type: code_judge, script: [python, keywords.py]}]
                aggregator: {type: code_judge, path: python gate.py}
          - id: prompt
            input: Refunds?
            evaluators:
              - {name: j, type: llm_judge, prompt: {script: [python, prompts/grade.py]}}
        """,
    )
    result = judged.runpytest()
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(
        [
            "*eval 'gate' was not graded: code aggregator cannot start: script file 'gate.py' "
            "does not exist (in .)",
            "*eval 'prompt' was not graded: prompt script cannot start: script file "
            "'prompts/grade.py' does not exist (in .)",
        ]
    )


def test_llm_parts_skip_without_a_judge(project: pytest.Pytester) -> None:
    write(
        project,
        "s.eval.yaml",
        """
        evalcases:
          - id: member
            input: Refunds?
            evaluators:
              - name: c
                type: composite
                evaluators: [{name: j, type: llm_judge}]
                aggregator: {type: weighted_average}
          - id: aggregator
            input: Refunds?
            evaluators:
              - name: c
                type: composite
                evaluators: [{name: k, type: code_judge, script: [python, keywords.py]}]
                aggregator: {type: llm_judge}
        """,
    )
    project.runpytest().assert_outcomes(skipped=2)


def test_hook_kinds_can_be_members(project: pytest.Pytester) -> None:
    write(
        project,
        "conftest.py",
        """
        from pytest_agentv import EvaluationScore

        class Length:
            kind = "length"
            def evaluate(self, context):
                return EvaluationScore.graded(0.5, misses=("too long",))

        def pytest_agentv_make_evaluator(config, kind):
            return Length() if kind == "length" else None
        """,
    )
    write(
        project,
        "h.eval.yaml",
        """
        evalcases:
          - id: custom-member
            input: Refunds?
            evaluators:
              - name: c
                type: composite
                evaluators:
                  - {name: len, type: length}
                  - {name: kw, type: code_judge, script: [python, keywords.py], keywords: [refund]}
                aggregator: {type: weighted_average}
        """,
    )
    result = project.runpytest("--agentv-borderline=fail")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*score 0.75 (borderline)", "    len (length): score 0.50 (fail)", "        ✗ too long"]
    )


def test_assert_judged_composite_failure_report(here: pytest.Pytester) -> None:
    here.makepyfile(
        test_report=f"""
        import pytest
        from pytest_agentv import JudgedAssertionError, assert_judged

        def test_report():
            average = {{"type": "weighted_average"}}
            leaf = {fixed("leaf", 0.0, misses=["wrong"])!r}
            inner = {{"name": "inner", "type": "composite", "aggregator": average,
                     "evaluators": [leaf]}}
            entry = {{"name": "outer", "type": "composite", "aggregator": average,
                     "evaluators": [inner, {fixed("other", 0.2)!r}]}}
            with pytest.raises(JudgedAssertionError) as failed:
                assert_judged("x", evaluators=[entry])
            print(failed.value)
        """
    )
    result = here.runpytest("-s")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "  evaluator  type        weight  score  verdict",
            "  outer      composite        1   0.10  fail",
            "    inner    composite        1   0.00  fail",
            "      leaf   code_judge       1   0.00  fail",
            "    other    code_judge       1   0.20  fail",
            "",
            "outer (composite): score 0.10 (fail)",
            "    inner (composite): score 0.00 (fail)",
            "        leaf (code_judge): score 0.00 (fail)",
            "            ✗ wrong",
            "    other (code_judge): score 0.20 (fail)",
        ]
    )


def test_assert_judged_accepts_composites_in_process() -> None:
    entry = composite(
        "metrics",
        {"name": "fast", "type": "latency", "threshold": 100},
        {"name": "cheap", "type": "cost", "budget": 1},
    )
    answer = {"text": "x", "duration_ms": 50, "cost_usd": 0.5}
    assert assert_judged(answer, evaluators=[entry]).score == 1.0
    with pytest.raises(
        JudgedAssertionError,
        match=r"    fast \(latency\): score 0.00 \(fail\)\n        ✗ Duration 150ms > 100ms",
    ):
        assert_judged({**answer, "duration_ms": 150}, evaluators=[entry])


def test_llm_aggregator_replays_offline(judged: pytest.Pytester, fake_llm: FakeOpenAI) -> None:
    """The aggregator's prompt holds the members' grades only, so a replayed run (where the
    members' replies are marked as replayed) asks for the same stored reply."""
    judged.makeini(judge_ini(fake_llm).replace("agentv_cache_mode = off\n", ""))
    write(
        judged,
        "r.eval.yaml",
        """
        evalcases:
          - id: replayed
            input: Refunds?
            evaluators:
              - name: c
                type: composite
                evaluators:
                  - {name: j, type: llm_judge, rubrics: [Mentions 30 days]}
                  - {name: k, type: code_judge, script: [python, keywords.py], keywords: [refund]}
                aggregator: {type: llm_judge}
        """,
    )
    fake_llm.responder = lambda request: (
        checklist(rubric_1=True) if '"satisfied"' in request.system else freeform_reply(0.9)
    )
    judged.runpytest().assert_outcomes(passed=1)
    assert len(fake_llm.requests) == 2
    fake_llm.stop()
    replayed = judged.runpytest("--agentv-cache-mode=replay")
    replayed.assert_outcomes(passed=1)
    replayed.stdout.fnmatch_lines(["agentv: 0 model calls made, 2 replies reused*"])


class Half:
    kind = "half"

    def evaluate(self, context: EvaluationContext) -> EvaluationScore:
        return EvaluationScore.graded(0.5)


def test_composite_from_python_runs_members_with_its_registry() -> None:
    registry = build_evaluator_registry({"half": Half()})
    entry = EvaluatorConfig.model_validate(
        composite("c", {"name": "h", "type": "half"}, {"name": "t", "type": "cost", "budget": 1})
    )
    case = PreparedCase(id="c", question="q", input_messages=({"role": "user", "content": "q"},))
    context = EvaluationContext(
        eval_case=case, candidate="x", evaluator=entry, trace_summary={"cost_usd": 0.5}
    )
    score = asyncio.run(registry["composite"].evaluate(context))  # type: ignore[arg-type]
    assert score.score == 0.75
