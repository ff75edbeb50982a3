"""latency, cost and token_usage: thresholds on what the target reported, AgentV's boundary rule
(at the limit passes) and its "no data" result."""

from __future__ import annotations

import json
import re
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
    NotGradedError,
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


HUGE_AGENT = """\
import json, sys
huge = int("9" * 401)
answer = {"text": "done", "cost_usd": huge, "duration_ms": huge,
          "token_usage": {"input": huge, "output": 1}}
open(sys.argv[1], "w").write(json.dumps(answer))
"""


def strict_json(line: str) -> Any:
    """A line as a strict JSON reader (JavaScript's) takes it: no NaN nor Infinity."""
    return json.loads(line, parse_constant=lambda name: pytest.fail(f"{name} in {line}"))


@pytest.mark.parametrize("rows", ["pytest-agentv", "agentv-v4"])
def test_a_401_digit_metric_fails_its_checks_and_its_rows_are_json(
    pytester: pytest.Pytester, rows: str
) -> None:
    write(pytester, "agent.py", HUGE_AGENT)
    write(
        pytester,
        ".agentv/targets.yaml",
        "targets: [{name: default, provider: cli, command: 'python agent.py {OUTPUT_FILE}'}]",
    )
    write(
        pytester,
        "m.eval.yaml",
        """
        tests:
          - id: huge
            input: hello
            assertions:
              - {name: fast, type: latency, threshold: 1000}
              - {name: cheap, type: cost, budget: 0.001}
              - {name: short, type: token-usage, max_total: 100}
        """,
    )
    result = pytester.runpytest(
        "--agentv-results=out.jsonl",
        f"--agentv-results-format={rows}",
        "--agentv-html=report.html",
        "--junitxml=junit.xml",
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*✗ Duration Infinityms > 1000ms threshold", "*✗ Total tokens Infinity > 100"]
    )
    assert "Infinity" in (pytester.path / "report.html").read_text()
    [row] = map(strict_json, (pytester.path / "out.jsonl").read_text().splitlines())
    assert row["trace_summary" if rows == "pytest-agentv" else "trace"]["duration_ms"] == int(
        "9" * 401
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


#: Numbers an answer reports about itself that are not metrics, and how the refusal names each.
NOT_METRICS = [
    ({"cost_usd": -5}, "cost_usd -5"),
    ({"duration_ms": -10}, "duration_ms -10"),
    ({"duration_ms": "850"}, "duration_ms '850'"),
    ({"token_usage": {"input": -1e6, "output": 999999}}, "token_usage.input -1000000.0"),
    ({"token_usage": {"input": 100, "output": 100, "cached": -1000}}, "token_usage.cached -1000"),
    ({"token_usage": "lots"}, "token_usage 'lots', which is not an object of metrics"),
]
LIMITS = [
    {"name": "cheap", "type": "cost", "budget": 0.01},
    {"name": "fast", "type": "latency", "threshold": 5000},
    {"name": "short", "type": "token_usage", "max_total": 1000000},
]
SLOW_CALL = {"tool": "search", "duration_ms": -1e9}
TRAJECTORY = {
    "name": "quick",
    "type": "tool_trajectory",
    "mode": "in_order",
    "expected": [{"tool": "search", "max_duration_ms": 100}],
}


def test_a_whole_number_too_large_for_a_float_is_over_every_limit(
    agentv_judge: AgentvJudge,
) -> None:
    """A 401-digit cost, duration or token count is a number (JavaScript reads it as Infinity):
    the checks fail; it left the case not graded, as if it were not a metric."""
    huge = 10**400
    reported = {"cost_usd": huge, "duration_ms": huge, "token_usage": {"input": huge, "output": 1}}
    metrics = {"name": "spent", "type": "execution_metrics", "max_tokens": 10, "max_cost_usd": 1}
    call = {"tool": "search", "duration_ms": huge}
    answer = {"output_messages": [{"role": "assistant", "content": "ok", "tool_calls": [call]}]}
    result = agentv_judge.evaluate(
        {**answer, **reported}, evaluators=[*LIMITS, metrics, TRAJECTORY]
    )
    scores = {r.name: r.score for r in result.evaluator_results}
    assert {name: score.score for name, score in scores.items()} == {
        "cheap": 0.0,
        "fast": 0.0,
        "short": 0.0,
        "spent": 0.0,
        "quick": 0.5,
    }
    assert scores["fast"].misses == ("Duration Infinityms > 5000ms threshold",)
    assert scores["quick"].misses == ("search took Infinityms (max: 100ms)",)
    assert scores["fast"].details == {"threshold_ms": 5000.0, "duration_ms": huge}


@pytest.mark.parametrize(("metrics", "shown"), NOT_METRICS)
def test_a_metric_that_is_not_one_is_not_graded(
    agentv_judge: AgentvJudge, metrics: dict[str, Any], shown: str
) -> None:
    """Negative costs, durations and token counts passed every limit (200 tokens passed
    max_total 100 with cached -1000); what is not a number was dropped, as if not reported."""
    refused = f"reported {shown}"
    with pytest.raises(NotGradedError, match=re.escape(f"assert_judged candidate {refused}")):
        agentv_judge.evaluate({"text": "ok", **metrics}, evaluators=LIMITS)
    with pytest.raises(NotGradedError, match=re.escape(f"assert_judged(trace=...) {refused}")):
        agentv_judge.evaluate("ok", evaluators=LIMITS, trace=metrics)


def test_a_tool_call_duration_that_is_not_a_metric_is_not_graded(
    agentv_judge: AgentvJudge,
) -> None:
    """A call of -1e9 ms passed every max_duration_ms."""
    messages = [{"role": "assistant", "content": "ok", "tool_calls": [SLOW_CALL]}]
    with pytest.raises(NotGradedError, match=r"duration_ms of tool call 'search' -1000000000\.0"):
        agentv_judge.evaluate({"output_messages": messages}, evaluators=[TRAJECTORY])
    with pytest.raises(NotGradedError, match=r"tool_durations\.search -1000000000\.0, which is"):
        agentv_judge.evaluate(
            "ok", evaluators=[TRAJECTORY], trace={"tool_durations": {"search": [5, -1e9]}}
        )
    with pytest.raises(NotGradedError, match=r"tool_calls_by_name\.search -3, which is"):
        agentv_judge.evaluate(
            "ok", evaluators=[TRAJECTORY], trace={"tool_calls_by_name": {"search": -3}}
        )


def test_every_source_of_answers_refuses_what_is_not_a_metric(pytester: pytest.Pytester) -> None:
    """CLI targets dropped a negative cost (then "No cost data": a fail for the wrong reason),
    mock targets and the agentv_target fixture passed negative metrics on, recorded answers
    used their trace summary as it was."""
    write(pytester, "agent.py", 'import json; print(json.dumps({"text": "ok", "cost_usd": -5}))\n')
    write(
        pytester,
        ".agentv/targets.yaml",
        """
        targets:
          - {name: default, provider: cli, command_template: python agent.py}
          - name: mock
            provider: mock
            response: {text: ok, duration_ms: -10}
        """,
    )
    entries = json.dumps(LIMITS)
    cases = f"""
        execution: {{evaluators: {entries}}}
        evalcases:
          - {{id: cli, input: q}}
          - {{id: mock, input: q, execution: {{target: mock}}}}
        """
    write(pytester, "m.eval.yaml", cases)
    write(pytester, "fixture/f.eval.yaml", cases.replace("cli,", "fixture,"))
    write(
        pytester,
        "fixture/conftest.py",
        """
        import pytest

        @pytest.fixture
        def agentv_target(request):
            if request.node.name == "mock":
                return None  # the mock target answers this one
            usage = {"input": 100, "output": 100, "cached": -1000}
            return lambda case: {"text": "ok", "token_usage": usage}
        """,
    )
    result = pytester.runpytest()
    result.assert_outcomes(errors=4)
    result.stdout.fnmatch_lines(
        [
            "*eval 'fixture' was not graded: agentv_target fixture (<lambda>) reported "
            "token_usage.cached -1000, *",
            "*eval 'mock' was not graded: mock target 'mock' reported duration_ms -10, *",
            "*eval 'cli' was not graded: cli target 'default' reported cost_usd -5, which is not "
            "a metric (a finite number >= 0)",
            "*eval 'mock' was not graded: mock target 'mock' reported duration_ms -10, *",
        ]
    )
    trace = {"cost_usd": -5, "duration_ms": 1, "token_usage": {"input": 1, "output": 1}}
    recorded = [
        {"eval_id": "cli", "dataset": "m", "candidate_answer": "ok", "trace_summary": trace},
        {
            "eval_id": "mock",
            "dataset": "m",
            "output_messages": [{"role": "assistant", "content": "ok", "tool_calls": [SLOW_CALL]}],
        },
    ]
    write(pytester, "old.jsonl", "".join(json.dumps(row) + "\n" for row in recorded))
    result = pytester.runpytest("m.eval.yaml", "--agentv-answers", "old.jsonl")
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(
        [
            "*eval 'cli' was not graded: the recorded row for 'cli' reported cost_usd -5, *",
            "*eval 'mock' was not graded: the recorded row for 'mock' reported duration_ms of "
            "tool call 'search' -1000000000.0, *",
        ]
    )


@pytest.mark.parametrize(
    ("trace", "shown"),
    [
        ({"llm_call_count": -4}, "llm_call_count -4"),
        ({"cost_usd": -1}, "cost_usd -1"),
        ({"token_usage": {"input": -9, "output": 1}}, "token_usage.input -9"),
    ],
)
def test_execution_metrics_refuses_what_is_not_a_metric(
    agentv_judge: AgentvJudge, trace: dict[str, Any], shown: str
) -> None:
    """The v4 kind reads the trace itself: a negative count or cost passed its limits."""
    from pytest_agentv.evaluators.execution_metrics import ExecutionMetricsEvaluator

    case = PreparedCase(id="c", question="q", input_messages=({"role": "user", "content": "q"},))
    entry = EvaluatorConfig(
        name="spent", type="execution-metrics", max_llm_calls=3, max_cost_usd=0.5, max_tokens=10
    )
    context = EvaluationContext(eval_case=case, candidate="x", trace_summary=trace, evaluator=entry)
    with pytest.raises(NotGradedError, match=re.escape(f"the trace summary reported {shown}")):
        ExecutionMetricsEvaluator().evaluate(context)
    with pytest.raises(NotGradedError, match=re.escape(f"trace=...) reported {shown}")):
        agentv_judge.evaluate(
            "x", evaluators=[{"type": "execution-metrics", "max_llm_calls": 3}], trace=trace
        )
