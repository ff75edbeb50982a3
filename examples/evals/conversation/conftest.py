"""Answer the conversations in this folder with a Python agent that forgets.

In a conversation case the `agentv_target` fixture's callable is called once per turn; the
case's `input_messages` hold the messages so far (the system prompt, every earlier user turn
and the agent's own earlier replies) and `case.turn` is the turn being asked (1, 2...).
"""

import re

import pytest


def forgetful_agent(messages):
    """A support agent whose memory holds two user turns: from the third on it sees only the
    latest message, so it loses the customer's name and order number."""
    said = [m["content"] for m in messages if m["role"] == "user"]
    remembered = " ".join(said if len(said) < 3 else said[-1:])
    name = re.search(r"name is (\w+)", remembered)
    order = re.search(r"order (?:number )?(?:is )?#?(\d+)", remembered)
    who = name.group(1) if name else "there"
    if order is None:
        return f"Sorry {who}, which order do you mean?"
    return f"Thanks {who}, I have order {order.group(1)}. Damaged items are refunded in 30 days."


@pytest.fixture
def agentv_target():
    return lambda case: forgetful_agent(case.input_messages)
