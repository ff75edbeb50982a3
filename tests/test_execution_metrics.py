"""latency, cost and token_usage: thresholds on what the target reported, AgentV's boundary rule
(at the limit passes) and its "no data" result."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from pytest_agentv import (
    AgentvJudge,
    ConfigError,
    EvaluationContext,
    EvaluationScore,
    EvaluatorConfig,
    JudgedAssertionError,
    PreparedCase,
    assert_judged,
)
from pytest_agentv.evaluators.latency import LatencyEvaluator
from pytest_agentv.results import js_fixed, js_number
from tests.helpers import write


def grade(judge: AgentvJudge, trace: dict[str, Any] | None, **entry: Any) -> EvaluationScore:
    entry = {"name": "metric", **entry}
    return judge.evaluate("done", evaluators=[entry], trace=trace).evaluator_results[0].score


@pytest.mark.parametrize(
    ("duration", "score", "line"),
    [
        (1500, 1.0, "Duration 1500ms <= 2000ms threshold"),
        (2000, 1.0, "Duration 2000ms <= 2000ms threshold"),
        (2000.5, 0.0, "Duration 2000.5ms > 2000ms threshold"),
    ],
)
def test_latency(agentv_judge: AgentvJudge, duration: float, score: float, line: str) -> None:
    result = grade(agentv_judge, {"duration_ms": duration}, type="latency", threshold=2000)
    assert result.score == score
    assert (result.hits or result.misses) == (line,)
    assert result.verdict == ("pass" if score else "fail")


@pytest.mark.parametrize(
    ("cost", "score", "line"),
    [
        (0.05, 1.0, "Cost $0.0500 <= $0.1000 budget"),
        (0.1, 1.0, "Cost $0.1000 <= $0.1000 budget"),
        (0.15, 0.0, "Cost $0.1500 > $0.1000 budget"),
    ],
)
def test_cost(agentv_judge: AgentvJudge, cost: float, score: float, line: str) -> None:
    result = grade(agentv_judge, {"cost_usd": cost}, type="cost", budget=0.1)
    assert (result.score, result.hits or result.misses) == (score, (line,))


def test_token_usage_limits(agentv_judge: AgentvJudge) -> None:
    usage = {"token_usage": {"input": 400, "output": 500, "cached": 100}}
    total = grade(agentv_judge, usage, type="token_usage", max_total=1000)
    assert (total.score, total.hits) == (1.0, ("Total tokens 1000 <= 1000",))
    assert total.reasoning == "token_usage input=400, output=500, cached=100, total=1000"
    output = grade(agentv_judge, usage, type="token_usage", max_output=100, maxInput=400)
    assert (output.score, output.hits, output.misses) == (
        0.0,
        ("Input tokens 400 <= 400",),
        ("Output tokens 500 > 100",),
    )
    assert output.expected_aspect_count == 2


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (45.0, "45"),
        (-2.5, "-2.5"),
        (1e20, "100000000000000000000"),
        (1e21, "1e+21"),
        (1e308, "1e+308"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (0.000001, "0.000001"),
        (1e-7, "1e-7"),
        (123.456, "123.456"),
    ],
)
def test_numbers_print_as_javascript_prints_them(value: float, shown: str) -> None:
    assert js_number(value) == shown
    assert js_fixed(value, 2) == (shown if abs(value) >= 1e21 else f"{value:.2f}")


def test_huge_numbers_from_hostile_data_print_readably(agentv_judge: AgentvJudge) -> None:
    """A number near the float limit is ``1e+308``, not a 309-digit integer, in hits, misses
    and reasoning; small ties round as JavaScript's ``toFixed`` does."""
    slow = grade(agentv_judge, {"duration_ms": 1e308}, type="latency", threshold=1e300)
    assert slow.misses == ("Duration 1e+308ms > 1e+300ms threshold",)
    dear = grade(agentv_judge, {"cost_usd": 1e308}, type="cost", budget=0.1)
    assert dear.misses == ("Cost $1e+308 > $0.1000 budget",)
    assert grade(agentv_judge, {"cost_usd": 0.03125}, type="cost", budget=1).hits == (
        "Cost $0.0313 <= $1.0000 budget",
    )
    usage = {"token_usage": {"input": 1e308, "output": 1}}
    tokens = grade(agentv_judge, usage, type="token_usage", max_input=1e300)
    assert tokens.misses == ("Input tokens 1e+308 > 1e+300",)
    calls = [{"role": "assistant", "tool_calls": [{"tool": "Read", "duration_ms": 1e308}]}]
    step = {"tool": "Read", "max_duration_ms": 1e300}
    trajectory = (
        agentv_judge.evaluate(
            calls,
            evaluators=[
                {"name": "t", "type": "tool_trajectory", "mode": "exact", "expected": [step]}
            ],
        )
        .evaluator_results[0]
        .score
    )
    assert trajectory.misses == ("Read took 1e+308ms (max: 1e+300ms)",)


def test_huge_costs_print_readably_in_a_failure_report() -> None:
    answer = {"text": "x", "duration_ms": 5, "cost_usd": 1e308}
    with pytest.raises(JudgedAssertionError) as failed:
        assert_judged(
            answer, evaluators=[{"name": "fast", "type": "latency", "threshold": 1}], trials=2
        )
    report = str(failed.value)
    assert "$1e+308" in report and "0" * 30 not in report
    assert "spent an unknown amount" in report  # two of them add up to more than a float


@pytest.mark.parametrize(
    ("entry", "miss"),
    [
        ({"type": "latency", "threshold": 1}, "No duration data available in trace"),
        ({"type": "cost", "budget": 1}, "No cost data available in trace"),
        ({"type": "token_usage", "max_total": 1}, "No token usage data available in trace"),
    ],
)
def test_no_data_is_a_zero_that_says_so(
    agentv_judge: AgentvJudge, entry: dict[str, Any], miss: str
) -> None:
    result = grade(agentv_judge, None, **entry)
    assert (result.score, result.verdict, result.misses) == (0.0, "fail", (miss,))


def test_metrics_come_from_the_answer_too() -> None:
    answer = {
        "text": "ok",
        "duration_ms": 300,
        "cost_usd": 0.002,
        "token_usage": {"input": 5, "output": 7},
    }
    score = assert_judged(
        answer,
        evaluators=[
            {"name": "fast", "type": "latency", "threshold": 300},
            {"name": "cheap", "type": "cost", "budget": 0.01},
            {"name": "short", "type": "token_usage", "max_total": 12},
        ],
    )
    assert score.score == 1.0
    with pytest.raises(JudgedAssertionError, match=r"✗ Duration 300ms > 100ms threshold"):
        assert_judged(answer, evaluators=[{"name": "fast", "type": "latency", "threshold": 100}])


METRICS_AGENT = """\
import json, sys
heavy = "research" in sys.argv[1]
json.dump({
    "text": "findings" if heavy else "hello",
    "token_usage": {"input": 450, "output": 380, "cached": 120}
    if heavy
    else {"input": 15, "output": 12},
    "cost_usd": 0.0042 if heavy else 0.0001,
    "duration_ms": 3420 if heavy else 245,
}, open(sys.argv[2], "w"))
"""


def test_eval_file_with_a_metrics_reporting_cli_agent(pytester: pytest.Pytester) -> None:
    write(pytester, "agent.py", METRICS_AGENT)
    write(
        pytester,
        ".agentv/targets.yaml",
        """
        targets:
          - name: default
            provider: cli
            command_template: python agent.py {PROMPT} {OUTPUT_FILE}
          - name: plain
            provider: mock
            response: hello
        """,
    )
    write(
        pytester,
        "m.eval.yaml",
        """
        execution:
          evaluators:
            - {name: fast, type: latency, threshold: 1000}
            - {name: cheap, type: cost, budget: 0.001}
            - {name: short, type: token_usage, max_total: 100}
        evalcases:
          - id: hello
            input: hello
          - id: research
            input: research machine learning
          - id: mock
            input: hello
            execution: {target: plain}
        """,
    )
    result = pytester.runpytest("-rA")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*eval 'research' failed: score 0.00 (fail)",
            "*✗ Duration 3420ms > 1000ms threshold",
            "*✗ Cost $0.0042 > $0.0010 budget",
            "*✗ Total tokens 950 > 100",
            "*eval 'mock' failed: score 0.00 (fail)",
            "*✗ No cost data available in trace",
        ]
    )


def test_trace_must_be_a_mapping(agentv_judge: AgentvJudge) -> None:
    with pytest.raises(TypeError, match="trace must be a mapping"):
        agentv_judge.evaluate("x", trace=[1200], evaluators=[])  # type: ignore[arg-type]


def test_a_builtin_registered_under_another_kind_validates_its_settings() -> None:
    """An evaluator a hook answers under its own kind name checks the entry's settings when it
    runs, with the same messages."""
    case = PreparedCase(id="c", question="q", input_messages=({"role": "user", "content": "q"},))
    trace = {"duration_ms": 5}
    speed = EvaluatorConfig(name="speed", type="speed", threshold=10)
    context = EvaluationContext(eval_case=case, candidate="x", trace_summary=trace)
    assert LatencyEvaluator().evaluate(replace(context, evaluator=speed)).score == 1.0
    bad = EvaluatorConfig(name="speed", type="speed", threshold=-1)
    with pytest.raises(ConfigError, match=r"'speed' \(speed\): threshold: threshold \(millis"):
        LatencyEvaluator().evaluate(replace(context, evaluator=bad))
