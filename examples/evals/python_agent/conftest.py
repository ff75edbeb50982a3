"""Answer the eval cases in this folder with the agent's Python function, no targets file needed.

The `agentv_target` fixture returns a callable that takes the prepared case and returns the
answer: text, a list of messages, or {"text": ..., "output_messages": [...]}. Async callables work
too. It applies to eval files in this folder and below, and wins over .agentv/targets.yaml.
"""

import pytest
from agent.support_bot import answer


@pytest.fixture
def agentv_target():
    return lambda case: answer(case.question)
