"""A toy customer-support agent: the system under test in these examples.

It answers from a tiny policy table, the way a retrieval-backed bot would, and records the tool
calls it made so that evals can check its trajectory as well as its answer.
"""

from __future__ import annotations

import json

POLICIES = {
    "refund": (
        "You can return any item within 30 days of delivery for a full refund. "
        "Refunds go back to the original payment method within 5 business days."
    ),
    "shipping": "Standard shipping takes 3 to 5 business days; express takes 1 to 2.",
    "warranty": "Electronics carry a 1-year limited warranty covering manufacturing defects.",
}

FALLBACK = "I'm not sure about that. Let me connect you with a human agent."


def lookup(topic: str) -> str | None:
    return POLICIES.get(topic)


def answer(question: str) -> dict[str, object]:
    """Answer a customer question; returns the text and the messages of the run."""
    lowered = question.lower()
    topic = next((t for t in POLICIES if t in lowered), None)
    if topic is None and ("return" in lowered or "money back" in lowered):
        topic = "refund"
    tool_call = {"tool": "policy_lookup", "input": {"topic": topic}, "output": None}
    text = FALLBACK
    if topic is not None:
        tool_call["output"] = lookup(topic)
        text = f"Thanks for asking! {tool_call['output']}"
    return {
        "text": text,
        "output_messages": [
            {"role": "assistant", "tool_calls": [tool_call]},
            {"role": "assistant", "content": text},
        ],
    }


def answer_text(question: str) -> str:
    return str(answer(question)["text"])


if __name__ == "__main__":
    import sys

    print(json.dumps(answer(" ".join(sys.argv[1:])), indent=2))
