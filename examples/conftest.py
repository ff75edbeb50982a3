"""Example project configuration.

Some cases exist to show what a failure report looks like. They are marked as expected failures
so that the examples run stays green; see their reports with:

    pytest examples --runxfail -k showcase
"""

import pytest

SHOWCASE_FAILURES = {
    "showcase-wrong-policy",
    "showcase-composite-failure",
    "showcase-forgets-order",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("agentv") and item.name in SHOWCASE_FAILURES:
            item.add_marker(pytest.mark.xfail(reason="demonstrates a failure report", strict=True))
