"""A small eval suite with every kind of case a report shows: pass, borderline, fail, not
graded, a rubric graded by the (fake) LLM judge, trials, tool calls, governance tags, and a
baseline to compare with. The report tests and the browser test run it; so does the docs'
screenshot.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import TARGETS as CONFTEST_TARGETS
from tests.fake_openai import FakeOpenAI, checklist
from tests.helpers import judge_ini, write

#: The keyword judge most cases use: does the answer give the 30-day window?
WINDOW = (
    "{name: window, type: code_judge, script: [python, ../keywords.py], "
    "config: {keywords: [30 days]}}"
)

SUITE = """\
description: The support bot's refund answers
dataset: support
evalcases:
  - id: refund-window
    expected_outcome: Gives the 30-day refund window
    input: How long do I have to return an item?
    execution:
      evaluators:
        - $WINDOW
  - id: refund-details
    expected_outcome: Gives the window, how refunds are paid and what to bring
    input: What is your refund policy, in detail?
    execution:
      evaluators:
        - name: details
          type: code_judge
          script: [python, ../keywords.py]
          config: {keywords: [30 days, refunds, accepted, receipt, store credit]}
  - id: wrong-policy
    expected_outcome: Gives the 30-day refund window
    input: Can I get my money back?
    execution:
      target: wrong
      evaluators:
        - $WINDOW
  - id: agent-crashes
    expected_outcome: Gives the 30-day refund window
    input: Is the agent working?
    execution:
      target: crashing
      evaluators:
        - $WINDOW
  - id: tone-rubric
    expected_outcome: A friendly and complete refund answer
    input: I want a refund for my broken kettle.
    rubrics:
      - States the 30-day window
      - {id: tone, expected_outcome: Is friendly}
      - {id: channel, expected_outcome: Says where the money goes, required: false}
  - id: steady
    expected_outcome: Gives the 30-day refund window
    input: When does the refund window close?
    execution:
      trials: {count: 3, strategy: mean}
      evaluators:
        - $WINDOW
""".replace("$WINDOW", WINDOW)

TOOLS = """\
governance:
  owasp_llm_top_10_2025: [LLM06]
evalcases:
  - id: looks-up-order
    expected_outcome: Looks the order up before answering
    input: Where is order 42?
    execution:
      evaluators:
        - name: trajectory
          type: tool_trajectory
          mode: any_order
          minimums: {lookup_order: 1}
"""

TOOLS_CONFTEST = """\
import pytest


@pytest.fixture
def agentv_target():
    def answer(case):
        return {
            "output_messages": [
                {
                    "role": "assistant",
                    "tool_calls": [
                        {"tool": "lookup_order", "input": {"order": 42}, "duration_ms": 12}
                    ],
                },
                {"role": "assistant", "content": "Order 42 left the warehouse today."},
            ],
            "duration_ms": 86400000,
        }

    return answer
"""

TARGETS = (
    CONFTEST_TARGETS
    + """\
  - name: crashing
    provider: cli
    command_template: python ../crash.py
"""
)

CRASH = "import sys\n\nsys.exit('the agent crashed')\n"

#: The judge must grade this canary as a pass before its verdicts count.
CANARIES = """\
canaries:
  - id: friendly-refund
    input: Can I return my shoes?
    answer: Yes, within 30 days, and the money goes back to your card!
    expected_outcome: A friendly and complete refund answer
    rubrics:
      - States the 30-day window
      - {id: tone, expected_outcome: Is friendly}
      - {id: channel, expected_outcome: Says where the money goes, required: false}
    verdict: pass
"""

#: What a previous run scored (``--agentv-baseline``): wrong-policy used to pass.
BASELINE = [
    {"eval_id": "refund-window", "dataset": "support", "score": 1.0},
    {"eval_id": "refund-details", "dataset": "support", "score": 0.6},
    {"eval_id": "wrong-policy", "dataset": "support", "score": 1.0},
    {"eval_id": "tone-rubric", "dataset": "support", "score": 0.9},
]


def make_suite(project: pytest.Pytester, fake_llm: FakeOpenAI) -> list[str]:
    """Write the suite into ``project`` (the ``judged`` fixture's); return the run's options."""
    fake_llm.responder = lambda request: checklist(
        rubric_1=True, tone="kettle" not in request.user, channel=True
    )
    write(project, ".agentv/calibration.yaml", CANARIES)
    write(project, "evals/support.eval.yaml", SUITE)
    write(project, "evals/agent/tools.eval.yaml", TOOLS)
    write(project, "evals/agent/conftest.py", TOOLS_CONFTEST)
    write(project, ".agentv/targets.yaml", TARGETS)
    write(project, "crash.py", CRASH)
    # A model with a price at the fake's endpoint: the run's budget counts what the judge spent.
    project.makeini(
        judge_ini(fake_llm, model="openai/gpt-4o-mini", model_prices="openai/gpt-4o-mini 0.15 0.6")
    )
    lines = "".join(json.dumps(row) + "\n" for row in BASELINE)
    write(project, "baseline.jsonl", lines)
    return ["--agentv-baseline=baseline.jsonl", "--agentv-budget-usd=5"]
