"""A conversation in a unit test: `assert_conversation` plays the turns with the agent (called
with the messages so far) and grades each reply, as a `mode: conversation` eval case does."""

from pytest_agentv import assert_conversation


def chat_agent(messages: list[dict[str, str]]) -> str:
    """Remembers the customer's name for as long as the conversation lasts."""
    said = " ".join(m["content"] for m in messages if m["role"] == "user")
    name = "Ada" if "Ada" in said else "there"
    return f"Hello {name}! Damaged items are refunded within 30 days."


def test_the_agent_keeps_the_customers_name() -> None:
    score = assert_conversation(
        chat_agent,
        input=[{"role": "system", "content": "You are a support agent. Be brief."}],
        turns=[
            "Hi, I am Ada.",  # a turn may be just its message: nothing grades its reply
            {
                "input": "My kettle arrived damaged.",
                "assertions": [{"type": "contains", "value": "30 days"}],
            },
            {"input": "What is my name?", "assertions": [{"type": "contains", "value": "Ada"}]},
        ],
        aggregation="min",
    )
    assert score.score == 1.0
