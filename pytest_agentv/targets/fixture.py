"""The ``agentv_target`` fixture's callable as a target (sync or async), and how an agent
written in Python ends a case when it raises."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

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
