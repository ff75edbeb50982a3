"""Unit tests of the toy agent: ordinary assertions next to judged ones.

`assert_judged` grades an answer with the session's evaluators and judge: code judges run
offline; LLM-judged checks skip until a judge is configured (AGENTV_JUDGE_MODEL).
"""

import asyncio

import pytest
from agent.support_bot import FALLBACK, answer, answer_text

from pytest_agentv import assert_judged, assert_judged_async

# Scripts of code judges run from this file's folder.
KEYWORDS = ["python", "../judges/keywords.py"]


def test_refund_answer_with_a_code_judge() -> None:
    text = answer_text("How do refunds work?")
    assert "30 days" in text  # an ordinary assertion...
    # ...and a judged one: same evaluator entries as in YAML, so code judges work offline.
    score = assert_judged(
        text,
        evaluators=[
            {
                "name": "keywords",
                "type": "code_judge",
                "script": KEYWORDS,
                "keywords": ["30 days", "original payment method"],
            }
        ],
    )
    assert score.score == 1.0


def test_refund_looks_the_policy_up() -> None:
    # Pass the whole run (text and messages with their tool calls) to grade what the agent did.
    run = answer("Can I return these shoes?")
    assert_judged(
        run,
        evaluators=[
            {
                "name": "steps",
                "type": "tool_trajectory",
                "mode": "in_order",
                "expected": [
                    {"tool": "classify"},
                    {"tool": "policy_lookup", "args": {"topic": "refund"}},
                ],
            }
        ],
    )


def test_refund_answer_is_helpful() -> None:
    question = "Can I get my money back for shoes I bought last week?"
    assert_judged(
        answer_text(question),
        question=question,
        expected_outcome="Confirms the refund and gives the 30-day window",
        rubrics=[
            "Says a refund is possible",
            {"id": "window", "expected_outcome": "Mentions the 30-day window", "weight": 2},
            {"id": "friendly", "expected_outcome": "Friendly tone", "required": False},
        ],
    )


@pytest.mark.asyncio
async def test_many_answers_judged_at_once() -> None:
    questions = ["How long does shipping take?", "Do electronics have a warranty?"]
    await asyncio.gather(
        *(
            assert_judged_async(
                answer_text(q), question=q, expected_outcome="Answers the question correctly"
            )
            for q in questions
        )
    )


def test_fallback_graded_without_asserting(agentv_judge) -> None:  # type: ignore[no-untyped-def]
    if agentv_judge.model is None:
        pytest.skip("no judge configured (AGENTV_JUDGE_MODEL)")
    text = answer_text("Can I pay with cryptocurrency?")
    assert text == FALLBACK
    result = agentv_judge.evaluate(text, expected_outcome="Offers a human instead of guessing")
    score = result.score
    # A judge that was down or answered outside its contract gave no score: say so.
    if score.error:
        print(f"fallback not graded: {score.error}")
    else:
        print(f"fallback score {score.score:.2f}: {score.reasoning}")
