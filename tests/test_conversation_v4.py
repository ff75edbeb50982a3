"""AgentV v4.42.4's own conversation example (``examples/features/multi-turn-conversation-live``)
run with a mock target and the loopback judge: every turn runs the assertions v4's
``runConversationMode`` attaches to it (plain strings: one ``llm-grader`` named ``turn-rubrics``
with criteria ``criterion-1``..., none required; entries after it), the case's own assertions
grade the transcript once, and the scores aggregate as v4's ``aggregateConversationScores``
does. Where we differ on purpose: a gate fails the case (v4 looks at the aggregate only)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.fake_openai import FakeOpenAI, Request, checklist
from tests.helpers import judge_ini, write

#: v4.42.4's examples/features/multi-turn-conversation-live/evals/dataset.eval.yaml, verbatim.
EXAMPLE = """\
# Multi-turn conversation evaluation (live turn-by-turn)
# Each turn generates a fresh LLM call; per-turn assertions grade each response.
# This is different from multi-turn-conversation/ which scripts intermediate turns.

description: Live multi-turn conversation evaluation with per-turn grading

execution:
  target: llm

tests:
  # Test 1: Basic context retention across turns
  - id: context-retention
    mode: conversation
    criteria: Agent maintains context and provides relevant responses across turns
    aggregation: mean
    input:
      - role: system
        content: |-
          You are a helpful math tutor. Be concise and accurate.
          Always show your work step by step.
    turns:
      - input: What is 15% of 200?
        assertions:
          - Correctly calculates 15% of 200 as 30
          - Shows the calculation steps
      - input: Now double that result.
        assertions:
          - References the previous answer of 30
          - Correctly calculates double as 60
      - input: What were the original numbers I asked about?
        assertions:
          - Recalls that the user asked about 15% and 200
          - Demonstrates memory of the conversation context

  # Test 2: With aggregation: min (weakest-link scoring)
  - id: weakest-link-scoring
    mode: conversation
    criteria: Agent provides accurate, well-structured responses
    aggregation: min
    input:
      - role: system
        content: You are a concise geography expert. Answer in 1-2 sentences.
    turns:
      - input: What is the capital of France?
        assertions:
          - Correctly identifies Paris as the capital of France
      - input: What country is it in?
        assertions:
          - Recognizes the question refers to Paris from the previous turn
          - Confirms Paris is in France

  # Test 3: With on_turn_failure: stop
  - id: stop-on-failure
    mode: conversation
    on_turn_failure: stop
    criteria: Agent follows instructions precisely
    input:
      - role: system
        content: You are a helpful assistant. Be precise and accurate.
    turns:
      - input: What is 2 + 2?
        assertions:
          - Answers with 4
      - input: Multiply that by 3.
        assertions:
          - References the previous answer
          - Calculates 12 correctly

  # Test 4: Mixed string and structured assertions
  - id: mixed-assertions
    mode: conversation
    criteria: Agent writes correct, well-formed Python code
    input:
      - role: system
        content: You are a helpful coding assistant.
    turns:
      - input: Write a Python function that adds two numbers.
        assertions:
          - Contains a Python function definition
          - type: contains
            value: def
      - input: Now add type hints to the function.
        assertions:
          - Includes type hints (int, float, or similar)
          - type: contains
            value: "->"

  # Test 5: Conversation-level assertions
  - id: conversation-coherence
    mode: conversation
    criteria: Agent maintains a coherent, helpful conversation
    input:
      - role: system
        content: You are a helpful travel advisor. Be concise.
    turns:
      - input: I want to visit somewhere warm in December.
        assertions:
          - Suggests at least one warm destination
      - input: I prefer beaches over cities.
        assertions:
          - Adjusts recommendations toward beach destinations
          - Does not suggest purely urban destinations
    assertions:
      - Agent maintains consistency — later suggestions align with earlier preferences
      - Agent does not contradict its own prior recommendations
"""

TARGETS = """\
targets:
  - name: llm
    provider: mock
    responses:
      - "def add(a, b): return a + b  # 15% of 200 = 0.15 * 200 = 30; Paris; 4; Cancun"
      - "def add(a: int, b: int) -> int: return a + b  # 60; France; 12; Tulum beaches"
      - "You asked about 15% of 200."
"""


def judge(request: Request) -> str:
    """Every criterion asked about is met, except: turn 2 of the min-aggregated case meets one
    of its two, turn 1 of the stop case none, and the transcript of the last case one of two."""
    text = json.dumps(request.body)
    ids = sorted(set(re.findall(r"criterion-\d+|rubric-\d+", text)))
    unmet: set[str] = set()
    if "What country is it in?" in text:
        unmet = {"criterion-2"}
    elif "What is 2 + 2?" in text:
        unmet = {"criterion-1"}
    elif "rubric-1" in text:
        unmet = {"rubric-2"}
    return checklist(**{i.replace("-", "_"): i not in unmet for i in ids})


def shape(entry: dict[str, Any]) -> tuple[str, float, list[str]]:
    return (
        entry["name"],
        round(entry["score"], 4),
        [member["name"] for member in entry.get("evaluator_results", ())],
    )


# Serially only: results crossing pytest-xdist workers are tests/test_integrity.py's.
@pytest.mark.parametrize("run_args", [[]], ids=["serial"])
def test_v4_live_conversation_example(
    project: pytest.Pytester, fake_llm: FakeOpenAI, run_args: list[str]
) -> None:
    fake_llm.responder = judge
    project.makeini(judge_ini(fake_llm))
    write(project, ".agentv/targets.yaml", TARGETS)
    write(project, "dataset.eval.yaml", EXAMPLE)
    result = project.runpytest(*run_args, "--agentv-results=r.jsonl", "-p", "no:randomly")
    result.assert_outcomes(passed=2, failed=3)
    rows = {
        row["eval_id"]: row
        for row in map(json.loads, (project.path / "r.jsonl").read_text().splitlines())
    }
    got = {key: [shape(e) for e in row["evaluator_results"]] for key, row in rows.items()}
    assert got == {
        "context-retention": [
            ("turn-1", 1.0, ["turn-rubrics"]),
            ("turn-2", 1.0, ["turn-rubrics"]),
            ("turn-3", 1.0, ["turn-rubrics"]),
        ],
        "weakest-link-scoring": [
            ("turn-1", 1.0, ["turn-rubrics"]),
            ("turn-2", 0.5, ["turn-rubrics"]),
        ],
        # Turn 1 scored below the pass bar: turn 2 was not sent and scores 0.
        "stop-on-failure": [("turn-1", 0.0, ["turn-rubrics"]), ("turn-2", 0.0, [])],
        "mixed-assertions": [
            ("turn-1", 1.0, ["turn-rubrics", "contains-def"]),
            ("turn-2", 1.0, ["turn-rubrics", "contains-->"]),
        ],
        "conversation-coherence": [
            ("turn-1", 1.0, ["turn-rubrics"]),
            ("turn-2", 1.0, ["turn-rubrics"]),
            ("conversation", 0.5, ["rubrics"]),
        ],
    }
    scores = {key: round(row["score"], 4) for key, row in rows.items()}
    assert scores == {
        "context-retention": 1.0,
        "weakest-link-scoring": 0.5,  # min(1, 0.5)
        "stop-on-failure": 0.0,  # mean(0, 0)
        "mixed-assertions": 1.0,
        "conversation-coherence": round((1 + 1 + 0.5) / 3, 4),  # the transcript: one more term
    }
    # v4 reads a case's plain-string assertions as required criteria: one unmet is a gate,
    # which fails the case whatever the aggregate (v4 passes it on the score alone).
    assert [key for key, row in rows.items() if row["gate_failed"]] == ["conversation-coherence"]
    result.stdout.fnmatch_lines(
        ["conversation of 2 turns; every turn passed; the conversation's own assertions did not"]
    )
    # One judge call per turn with string assertions (turn 2 of the stop case was not sent),
    # and one for the transcript of the last case.
    assert len(fake_llm.requests) == 3 + 2 + 1 + 2 + 3
