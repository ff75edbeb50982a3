"""Hooks pytest-agentv adds to pytest.

Implement them in a ``conftest.py`` (they then apply to eval files in that folder and below) or
in an installed plugin. A plugin that must also load without pytest-agentv installed should mark
its implementations ``@pytest.hookimpl(optionalhook=True)``, otherwise pytest rejects the unknown
hook name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from .evaluators.base import Evaluator


@pytest.hookspec(firstresult=True)
def pytest_agentv_make_evaluator(config: pytest.Config, kind: str) -> Evaluator | None:
    """Return the evaluator for an evaluator ``type`` used in an eval file, or None.

    Called through the hook proxy of the file being collected (once per kind and eval file), so
    a ``conftest.py`` adds kinds for its own folder; ``assert_judged`` asks it through the
    calling test's proxy, at each call. The first non-None result wins;
    pytest-agentv's built-in kinds (``EVALUATOR_KINDS``, and the aliases ``rubric`` and
    ``code``) are answered last, so an implementation may also replace them; kinds asked for
    include those of composite members. An evaluator
    is any object with a ``kind`` attribute and an ``evaluate(context)`` method returning an
    ``EvaluationScore``, sync or async; the entry's own settings are in ``context.evaluator``.
    A kind nobody answers is a collection error naming the file and line.
    """
