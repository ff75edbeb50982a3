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
    from .targets import Target, TargetDefinition


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


@pytest.hookspec(firstresult=True)
def pytest_agentv_make_target(config: pytest.Config, target: TargetDefinition) -> Target | None:
    """Return the target for a target of a targets file, or None when its ``provider`` is not
    yours.

    Called once collection has chosen the cases to run, through the hook proxy of the eval file
    whose selected cases use the target (once per target and folder of eval files), so a
    ``conftest.py`` adds providers for its own folder; a target only cases left out by ``-k`` or
    ``--deselect`` use is never built. ``target`` is a ``TargetDefinition``: ``name``,
    ``provider``, ``settings`` (with ``${{ VAR }}`` resolved), ``folder`` (the eval file's:
    resolve relative paths from it), ``rootdir``, ``judge_target``, ``file`` (the targets file)
    and ``where(key)`` (a setting's ``file:line:col``, for errors). The first non-None result
    wins; pytest-agentv's built-in providers (``TARGET_KINDS``: ``mock``, ``cli``, the LLM
    providers) answer last, so an implementation may also replace them. A provider nobody
    answers leaves the cases that use it not graded, naming the providers known.

    A target is any object with ``name``, ``judge_target`` (None, or the name of an LLM target
    whose model judges its cases), ``timeout`` (seconds it enforces itself, or None for
    ``--agentv-target-timeout``) and ``async invoke(case, attempt)`` returning a
    ``TargetResponse`` (or a string, a mapping or a list of messages); raising
    ``NotGradedError`` leaves the case not graded with the reason. It may also have
    ``planned(case)``, ``expect(spec)`` and ``async aclose()`` (see ``targets/base.py``). Raise
    ``ConfigError`` for bad settings: the cases using the target are not graded, with your
    message.
    """
