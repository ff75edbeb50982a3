"""A toy customer-support agent: the system under test in these examples.

It answers from a tiny policy table, the way a retrieval-backed bot would, and records the tool
calls it made (with their arguments and how long each took) so that evals can check its
trajectory as well as its answer. Asked for JSON, it answers with the policy's facts instead.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

POLICIES = {
    "refund": (
        "You can return any item within 30 days of delivery for a full refund. "
        "Refunds go back to the original payment method within 5 business days."
    ),
    "shipping": "Standard shipping takes 3 to 5 business days; express takes 1 to 2.",
    "warranty": "Electronics carry a 1-year limited warranty covering manufacturing defects.",
}

FACTS = {
    "refund": {"topic": "refund", "window_days": 30, "refund_to": "original payment method"},
    "shipping": {"topic": "shipping", "standard_days": "3-5", "express_days": "1-2"},
    "warranty": {"topic": "warranty", "months": 12, "covers": "manufacturing defects"},
}

FALLBACK = "I'm not sure about that. Let me connect you with a human agent."


def classify(question: str) -> str | None:
    lowered = question.lower()
    topic = next((t for t in POLICIES if t in lowered), None)
    if topic is None and ("return" in lowered or "money back" in lowered):
        topic = "refund"
    return topic


def lookup(topic: str) -> str | None:
    return POLICIES.get(topic)


def _call(
    made: list[dict[str, Any]], tool: str, args: dict[str, Any], run: Callable[[], Any]
) -> Any:
    """Run one tool and record the call AgentV's way: tool, input, output, duration_ms."""
    started = time.monotonic()
    output = run()
    took = round((time.monotonic() - started) * 1000, 3)
    made.append({"tool": tool, "input": args, "output": output, "duration_ms": took})
    return output


def answer(question: str, *, structured: bool = False) -> dict[str, object]:
    """Answer a customer question; returns the text and the messages of the run."""
    made: list[dict[str, Any]] = []
    topic = _call(made, "classify", {"question": question}, lambda: classify(question))
    text = FALLBACK
    if topic is not None:
        policy = _call(made, "policy_lookup", {"topic": topic}, lambda: lookup(topic))
        text = json.dumps(FACTS[topic]) if structured else f"Thanks for asking! {policy}"
    return {
        "text": text,
        "output_messages": [
            {"role": "assistant", "tool_calls": made},
            {"role": "assistant", "content": text},
        ],
    }


def answer_text(question: str) -> str:
    return str(answer(question)["text"])


if __name__ == "__main__":
    import sys

    print(json.dumps(answer(" ".join(sys.argv[1:])), indent=2))
