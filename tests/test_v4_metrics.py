"""AgentV v4's ``execution-metrics`` and ``skill-trigger`` kinds, checked against AgentV
v4.42.4's graders on the same inputs (texts and scores)."""

from __future__ import annotations

import json

import pytest

from tests.helpers import assert_load_error, cli_agent, write

AGENT = """\
import json
calls = [
    {"tool": "Skill", "input": {"skill": "pdf"}},
    {"tool": "read", "input": {"file_path": "src/a.py"}},
    {"tool": "bash", "input": {"cmd": "ls"}},
]
print(json.dumps({
    "output": [
        {"role": "assistant", "content": "", "tool_calls": calls},
        {"role": "assistant", "content": "done"},
    ],
    "token_usage": {"input": 700, "output": 200},
    "cost_usd": 0.00123,
    "duration_ms": 4500.5,
}))
"""


def test_execution_metrics_and_skill_trigger(project: pytest.Pytester) -> None:
    cli_agent(project, AGENT)
    write(
        project,
        "m.eval.yaml",
        """
        tests:
          - id: m
            input: q
            assertions:
              - type: execution-metrics
                max_tool_calls: 2
                maxLlmCalls: 3
                max_tokens: 1000
                max_cost_usd: 0.1
                max_duration_ms: 5000
                target_exploration_ratio: 0.5
              - {type: skill-trigger, skill: pdf}
              - {type: skill-trigger, skill: xlsx, should_trigger: false}
        """,
    )
    project.runpytest("--agentv-results", "out.jsonl").assert_outcomes(passed=1)
    [row] = map(json.loads, (project.path / "out.jsonl").read_text().splitlines())
    metrics, pdf, xlsx = row["evaluator_results"]
    assert metrics["score"] == pytest.approx(5 / 6)
    assert [a["text"] for a in metrics["assertions"]] == [
        "Tool calls 3 > 2 max",
        "LLM calls 2 <= 3 max",
        "Total tokens 900 <= 1000 max",
        "Cost $0.0012 <= $0.1000 max",
        "Duration 4500.5ms <= 5000ms max",
        "Exploration ratio 0.33 within tolerance of target 0.5",
    ]
    assert (pdf["name"], pdf["score"]) == ("skill-trigger-pdf", 1)
    assert pdf["assertions"] == [{"text": 'Skill tool invoked with skill="pdf"', "passed": True}]
    assert xlsx["assertions"] == [
        {"text": 'Skill "xlsx" correctly did not trigger', "passed": True}
    ]


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ("{type: execution-metrics}", "*needs at least one of max_tool_calls*"),
        ("{type: execution-metrics, max_tokens: -1}", "*max_tokens: a threshold must be*"),
        ("{type: skill-trigger}", "*skill: required field is missing*"),
        ("{type: skill-trigger, skill: a, should_trigger: 'no'}", "*must be true or false*"),
    ],
)
def test_bad_settings(project: pytest.Pytester, entry: str, problem: str) -> None:
    assert_load_error(project, entry, problem)
