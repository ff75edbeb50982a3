"""tool_trajectory: AgentV v2.5.8's modes, argument matching and per-step latency, from Python
(``agentv_judge.evaluate``, ``assert_judged``) and from eval files run against a CLI agent."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_agentv import AgentvJudge, EvaluationScore, JudgedAssertionError, assert_judged
from tests.helpers import write


def calls(*names: str | tuple[str, dict[str, Any]] | tuple[str, dict[str, Any], float]) -> Any:
    """An answer whose one assistant message made these tool calls."""
    made = []
    for name in names:
        if isinstance(name, str):
            made.append({"tool": name})
        else:
            call: dict[str, Any] = {"tool": name[0], "input": name[1]}
            if len(name) == 3:
                call["duration_ms"] = name[2]
            made.append(call)
    return [{"role": "assistant", "content": "done", "tool_calls": made}]


def grade(judge: AgentvJudge, answer: Any, trace: Any = None, **entry: Any) -> EvaluationScore:
    entry = {"name": "trajectory", "type": "tool_trajectory", **entry}
    return judge.evaluate(answer, evaluators=[entry], trace=trace).evaluator_results[0].score


def test_any_order_counts_minimums(agentv_judge: AgentvJudge) -> None:
    answer = calls("search", "search", "search", "analyze")
    met = grade(agentv_judge, answer, mode="any_order", minimums={"search": 3, "analyze": 1})
    assert (met.score, met.verdict, len(met.hits), met.misses) == (1.0, "pass", 2, ())
    short = grade(
        agentv_judge,
        calls("search", "analyze"),
        mode="any_order",
        minimums={"search": 3, "analyze": 1},
    )
    assert (short.score, short.verdict) == (0.5, "fail")
    assert short.misses == ("search: called 1 times (required ≥3)",)
    assert short.hits == ("analyze: called 1 times (required ≥1)",)
    assert short.details is not None and short.details["minimums"][0] == {
        "tool": "search",
        "required": 3.0,
        "calls": 1,
        "met": False,
    }
    nothing = grade(agentv_judge, answer, mode="any_order", minimums={})
    assert (nothing.score, nothing.hits) == (1.0, ("No tool requirements specified",))


def test_any_order_falls_back_to_the_trace_summary(agentv_judge: AgentvJudge) -> None:
    trace = {"tool_calls_by_name": {"search": 2}, "duration_ms": 10}
    score = grade(agentv_judge, "plain text", trace, mode="any_order", minimums={"search": 2})
    assert (score.score, score.hits) == (1.0, ("search: called 2 times (required ≥2)",))
    assert score.details is not None and score.details["source"] == "trace_summary"


@pytest.mark.parametrize("mode", ["any_order", "in_order", "exact"])
def test_no_trace_scores_zero_with_agentv_reason(agentv_judge: AgentvJudge, mode: str) -> None:
    settings: dict[str, Any] = (
        {"minimums": {"search": 1}} if mode == "any_order" else {"expected": [{"tool": "search"}]}
    )
    score = grade(agentv_judge, [], mode=mode, **settings)
    assert (score.score, score.verdict) == (0.0, "fail")
    assert score.misses == ("No trace available for evaluation",)


@pytest.mark.parametrize(
    ("mode", "misses"),
    [
        ("any_order", ("search: called 0 times (required ≥1)",)),
        ("in_order", ("Expected search at position 0, not found in remaining trace",)),
        ("exact", ("Expected 1 tool calls, got 0", "Position 0: expected search, got nothing")),
    ],
)
def test_a_text_answer_has_a_trace_without_tool_calls(
    agentv_judge: AgentvJudge, mode: str, misses: tuple[str, ...]
) -> None:
    """As in AgentV, whose targets always return messages: a text answer made no calls."""
    settings: dict[str, Any] = (
        {"minimums": {"search": 1}} if mode == "any_order" else {"expected": [{"tool": "search"}]}
    )
    score = grade(agentv_judge, "I answered without tools.", mode=mode, **settings)
    assert (score.score, score.misses) == (0.0, misses)
    none: dict[str, Any] = {"minimums": {}} if mode == "any_order" else {"expected": []}
    nothing_asked = grade(agentv_judge, "I answered without tools.", mode=mode, **none)
    assert (nothing_asked.score, nothing_asked.verdict) == (1.0, "pass")


def test_in_order_is_a_greedy_subsequence(agentv_judge: AgentvJudge) -> None:
    steps = [{"tool": "search"}, {"tool": "analyze"}, {"tool": "report"}]
    gaps = grade(
        agentv_judge, calls("init", "search", "analyze", "report"), mode="in_order", expected=steps
    )
    assert (gaps.score, gaps.hits[0]) == (1.0, "Found search at position 1")
    missing = grade(agentv_judge, calls("search", "report"), mode="in_order", expected=steps)
    assert missing.score == pytest.approx(1 / 3)
    assert missing.misses == (
        "Expected analyze at position 1, not found in remaining trace",
        "Expected report at position 2, not found in remaining trace",
    )
    backwards = grade(
        agentv_judge,
        calls("report", "search"),
        mode="in_order",
        expected=[{"tool": "search"}, {"tool": "report"}],
    )
    assert backwards.score == 0.5


def test_exact_compares_position_by_position(agentv_judge: AgentvJudge) -> None:
    steps = [{"tool": "search"}, {"tool": "analyze"}]
    same = grade(agentv_judge, calls("search", "analyze"), mode="exact", expected=steps)
    assert (same.score, same.hits) == (1.0, ("Position 0: search", "Position 1: analyze"))
    extra = grade(agentv_judge, calls("search", "analyze", "extra"), mode="exact", expected=steps)
    # AgentV's rule: the extra call is a miss, but the expected steps all matched.
    assert (extra.score, extra.misses) == (1.0, ("Expected 2 tool calls, got 3",))
    wrong = grade(agentv_judge, calls("search", "wrong"), mode="exact", expected=steps)
    assert (wrong.score, wrong.misses) == (0.5, ("Position 1: expected analyze, got wrong",))
    short = grade(agentv_judge, calls("search"), mode="exact", expected=steps)
    assert short.misses == (
        "Expected 2 tool calls, got 1",
        "Position 1: expected analyze, got nothing",
    )


def test_args_match_listed_keys_by_deep_equality(agentv_judge: AgentvJudge) -> None:
    answer = calls(("search", {"query": "test", "limit": 10, "tags": ["a", "b"]}))
    for args, expected_score in [
        ({"query": "test", "limit": 10}, 1.0),
        ({"tags": ["a", "b"]}, 1.0),
        ({"tags": ["b", "a"]}, 0.0),
        ({"query": "wrong"}, 0.0),
        ({"limit": True}, 0.0),
        ({"absent": None}, 0.0),
        ("any", 1.0),
    ]:
        score = grade(
            agentv_judge, answer, mode="exact", expected=[{"tool": "search", "args": args}]
        )
        assert score.score == expected_score, args
    mismatch = grade(
        agentv_judge,
        calls(("search", {"query": "wrong"}), ("analyze", {"format": "json"})),
        mode="in_order",
        expected=[{"tool": "search", "args": {"query": "test"}}, {"tool": "analyze"}],
    )
    assert mismatch.score == 0.5
    assert mismatch.misses == ("Expected search at position 0: tool found at 0 but args mismatch",)


def test_openai_style_tool_calls_are_read_too(agentv_judge: AgentvJudge) -> None:
    answer = [
        {
            "role": "assistant",
            "tool_calls": [
                {"type": "function", "function": {"name": "lookup", "arguments": '{"id": 7}'}}
            ],
        }
    ]
    score = grade(
        agentv_judge, answer, mode="exact", expected=[{"tool": "lookup", "args": {"id": 7}}]
    )
    assert score.score == 1.0
    # Arguments that give a key twice are no object: they match no expected arguments.
    answer[0]["tool_calls"][0]["function"]["arguments"] = '{"id": 1, "id": 7}'
    twice = grade(
        agentv_judge, answer, mode="exact", expected=[{"tool": "lookup", "args": {"id": 7}}]
    )
    assert twice.score == 0.0


def test_max_duration_ms_is_one_more_check_per_step(agentv_judge: AgentvJudge) -> None:
    def timed(duration: float | None, limit: float, mode: str = "in_order") -> EvaluationScore:
        call: dict[str, Any] = {"tool": "Read"}
        if duration is not None:
            call["duration_ms"] = duration
        answer = [{"role": "assistant", "tool_calls": [call]}]
        step = {"tool": "Read", "max_duration_ms": limit}
        return grade(agentv_judge, answer, mode=mode, expected=[step])

    fast = timed(45, 100)
    assert (fast.score, fast.hits[-1]) == (1.0, "Read completed in 45ms (max: 100ms)")
    at_limit = timed(100, 100, "exact")
    assert (at_limit.score, at_limit.hits[-1]) == (1.0, "Read completed in 100ms (max: 100ms)")
    slow = timed(120, 50)
    assert (slow.score, slow.misses) == (0.5, ("Read took 120ms (max: 50ms)",))
    untimed = timed(None, 100)
    assert (untimed.score, untimed.misses) == (1.0, ())
    assert untimed.reasoning == "No duration data for Read; latency assertion skipped"
    mixed = grade(
        agentv_judge,
        [
            {
                "role": "assistant",
                "tool_calls": [
                    {"tool": "Read", "duration_ms": 45},
                    {"tool": "Edit"},
                    {"tool": "Write", "duration_ms": 600},
                ],
            }
        ],
        mode="in_order",
        expected=[
            {"tool": "Read", "max_duration_ms": 100},
            {"tool": "Edit"},
            {"tool": "Write", "maxDurationMs": 500},
        ],
    )
    assert (mixed.expected_aspect_count, mixed.score) == (5, 0.8)
    assert mixed.misses == ("Write took 600ms (max: 500ms)",)
    wrong_tool = grade(
        agentv_judge,
        [{"role": "assistant", "tool_calls": [{"tool": "Write", "duration_ms": 10}]}],
        mode="exact",
        expected=[{"tool": "Read", "max_duration_ms": 100}],
    )
    assert (wrong_tool.score, wrong_tool.misses) == (0.0, ("Position 0: expected Read, got Write",))


def test_assert_judged_checks_tool_calls() -> None:
    steps = [{"tool": "search"}, {"tool": "report"}]
    entry = {"name": "flow", "type": "tool_trajectory", "mode": "in_order", "expected": steps}
    score = assert_judged(calls("search", "report"), evaluators=[entry])
    assert score.verdict == "pass"
    with pytest.raises(JudgedAssertionError) as failed:
        assert_judged(calls("report"), evaluators=[entry])
    report = str(failed.value)
    assert "flow       tool_trajectory       1   0.00  fail" in report
    assert "✗ Expected search at position 0, not found in remaining trace" in report


def test_assert_judged_rejects_bad_settings() -> None:
    with pytest.raises(ValueError, match=r"evaluators\[0\] is invalid: mode: unknown mode"):
        assert_judged("x", evaluators=[{"name": "t", "type": "tool_trajectory", "mode": "sorted"}])


AGENT = """\
import json, sys
question, out = sys.argv[1], sys.argv[2]
steps = [{"tool": "search", "input": {"q": question}, "duration_ms": 40}]
if "weather" in question:
    steps.append({"tool": "get_weather", "input": {"city": "Paris"}, "duration_ms": 900})
steps.append({"tool": "answer", "duration_ms": 5})
json.dump({"output_messages": [
    {"role": "assistant", "tool_calls": steps},
    {"role": "assistant", "content": "done"},
], "duration_ms": 950}, open(out, "w"))
"""


def test_eval_file_against_a_cli_agent(pytester: pytest.Pytester) -> None:
    write(pytester, "agent.py", AGENT)
    write(
        pytester,
        ".agentv/targets.yaml",
        """
        targets:
          - name: default
            provider: cli
            command_template: python agent.py {PROMPT} {OUTPUT_FILE}
        """,
    )
    write(
        pytester,
        "flow.eval.yaml",
        """
        evalcases:
          - id: weather
            input: What is the weather in Paris?
            execution:
              evaluators:
                - name: flow
                  type: tool_trajectory
                  mode: exact
                  expected:
                    - tool: search
                    - {tool: get_weather, args: {city: Paris}, max_duration_ms: 1000}
                    - tool: answer
          - id: too-slow
            input: What is the weather in Paris?
            execution:
              evaluators:
                - name: flow
                  type: tool_trajectory
                  mode: in_order
                  expected:
                    - {tool: get_weather, max_duration_ms: 500}
          - id: no-weather
            input: Tell me a joke
            execution:
              evaluators:
                - {name: used, type: tool_trajectory, mode: any_order, minimums: {get_weather: 1}}
        """,
    )
    result = pytester.runpytest("--agentv-results=out.jsonl")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*eval 'too-slow' failed: score 0.50 (fail)",
            "*✓ Found get_weather at position 1",
            "*✗ get_weather took 900ms (max: 500ms)",
            "*✗ get_weather: called 0 times (required ≥1)",
        ]
    )
    rows = {
        row["eval_id"]: row
        for row in map(json.loads, (pytester.path / "out.jsonl").read_text().splitlines())
    }
    trace = rows["weather"]["trace_summary"]
    assert trace["tool_calls_by_name"] == {"search": 1, "get_weather": 1, "answer": 1}
    assert trace["tool_durations"] == {"search": [40], "get_weather": [900], "answer": [5]}
    assert trace["duration_ms"] == 950


def test_tool_calls_from_a_mock_target_and_an_agentv_target_fixture(
    pytester: pytest.Pytester,
) -> None:
    messages = [{"role": "assistant", "content": "ok", "tool_calls": [{"tool": "search"}]}]
    write(
        pytester,
        "mock/.agentv/targets.yaml",
        f"targets:\n  - name: default\n    provider: mock\n"
        f"    response: {json.dumps({'output_messages': messages})}\n",
    )
    write(
        pytester,
        "fixture/conftest.py",
        f"""
        import pytest

        @pytest.fixture
        def agentv_target():
            return lambda case: {messages!r}
        """,
    )
    entry = "{name: t, type: tool_trajectory, mode: exact, expected: [{tool: search}]}"
    for folder in ("mock", "fixture"):
        write(
            pytester,
            f"{folder}/t.eval.yaml",
            f"evalcases:\n  - id: {folder}\n    input: q\n    evaluators: [{entry}]\n",
        )
    pytester.runpytest().assert_outcomes(passed=2)
