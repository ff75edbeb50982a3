"""The ``agentv_target`` fixture: whether a conftest defines one for an eval file, its callable
as a target (sync or async), and how an agent written in Python ends a case when it raises."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from ..answers import TargetResponse, response_from
from ..cases import PreparedCase
from ..errors import NotGradedError
from ..redaction import redact

TargetFunction = Callable[[PreparedCase], Any]


def callable_name(function: Callable[..., Any]) -> str:
    return getattr(function, "__name__", type(function).__name__)


@contextmanager
def agent_call(what: str) -> Iterator[None]:
    """Where an agent written in Python runs (``agentv_target``, ``assert_judged``'s callable):
    its exception ends the case as not graded with the redacted reason, as a CLI agent's exit
    code does. pytest's outcomes (``pytest.skip``...) and interrupts are not exceptions of it."""
    try:
        yield
    except NotGradedError:
        raise
    except (Exception, SystemExit) as exc:
        raise NotGradedError(f"{what} raised {type(exc).__name__}: {redact(str(exc))}") from exc


class FixtureTarget:
    """The callable returned by an ``agentv_target`` fixture (sync or async).

    A sync callable is called in pytest's own thread, like any test code; an async one is
    awaited on the plugin's event loop. It is called once per trial, with the case whose
    ``attempt`` is that trial's index.
    """

    judge_target: str | None = None
    timeout: float | None = None

    def __init__(self, function: TargetFunction) -> None:
        self.name = "agentv_target"
        self.function = function
        self.what = f"agentv_target fixture ({callable_name(function)})"

    @property
    def is_async(self) -> bool:
        method = type(self.function).__call__
        return inspect.iscoroutinefunction(self.function) or inspect.iscoroutinefunction(method)

    def call_sync(self, case: PreparedCase) -> TargetResponse:
        with agent_call(self.what):
            value = self.function(case)
        if inspect.isawaitable(value):
            close = getattr(value, "close", None)
            if callable(close):
                close()
            raise NotGradedError(f"{self.what} returned an awaitable; define it with 'async def'")
        return response_from(value, self.what)

    async def invoke(self, case: PreparedCase, attempt: int) -> TargetResponse:
        with agent_call(self.what):
            value = self.function(case)
            if inspect.isawaitable(value):
                value = await value
        return response_from(value, self.what)


@pytest.fixture
def _probe() -> None:
    """Never requested: its decorated form shows what pytest's fixture decorator returns."""


#: What ``@pytest.fixture`` turns a function into. pytest has no public name for this type, nor
#: a public way to ask, before items run, whether a conftest overrides a fixture (which decides
#: whether a case may start early); the type comes from the public decorator, and ``name`` is
#: the name a fixture is registered under. ``test_target_fixture_under_another_function_name`` in
#: tests/test_targets.py fails if this stops working.
_FIXTURE_TYPE = type(_probe)


def _defines_target_fixture(plugin: object) -> bool:
    """Whether a plugin or conftest module defines a fixture named ``agentv_target``, also
    through ``@pytest.fixture(name="agentv_target")`` on a function with another name."""
    if getattr(plugin, "agentv_target", None) is not None:
        return True
    try:
        values = vars(plugin).values()
    except TypeError:
        return False
    return any(
        isinstance(value, _FIXTURE_TYPE) and getattr(value, "name", None) == "agentv_target"
        for value in values
    )


def target_fixture_defined(config: pytest.Config, path: Path) -> bool:
    """Whether a conftest.py above ``path`` (or a plugin) defines its own ``agentv_target``.

    Only then do eval items request that fixture; the plugin's default returns None anyway.
    """
    for plugin in config.pluginmanager.get_plugins():
        if getattr(plugin, "__name__", "") == "pytest_agentv.plugin":
            continue
        if not _defines_target_fixture(plugin):
            continue
        file = getattr(plugin, "__file__", None)
        if not (file and Path(file).name == "conftest.py"):
            return True
        if path.is_relative_to(Path(file).parent):
            return True
    return False
