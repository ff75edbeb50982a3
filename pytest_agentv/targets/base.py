"""What a target is: the ``Target`` protocol every kind follows, what a kind is built from
(``TargetDefinition``, also what the ``pytest_agentv_make_target`` hook is given), and what the
built-in kinds share from the run (``TargetServices``).

A target answers a case with a ``TargetResponse`` (``answers.py``: the text, the messages with
their tool calls, usage, cost, duration). A target that cannot answer raises ``NotGradedError``:
the case is then not graded, never a quality failure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..answers import TargetResponse, response_from
from ..cases import PreparedCase
from ..llm.usage import PlannedCall, unknown_answer

if TYPE_CHECKING:
    from ..llm.client import LlmClient
    from ..llm.transports import ModelSpec


@runtime_checkable
class Target(Protocol):
    """Anything with a ``name``, a ``judge_target`` (a target of the targets file whose model
    judges this target's cases, or None), a ``timeout`` and an async ``invoke``.

    A target may also have ``planned(case)``: the answer it would give as far as it is known
    without running anything, and the model calls it would make (``--agentv-estimate``);
    ``expect(spec)``: told, when the run is planned, of each case it will be sent (batching);
    and an async ``aclose()``: called when the run ends.
    """

    name: str
    judge_target: str | None

    @property
    def timeout(self) -> float | None:
        """Seconds the target enforces itself (a CLI target's ``timeout_seconds``); None: the
        run's ``--agentv-target-timeout`` applies."""

    async def invoke(self, case: PreparedCase, attempt: int) -> TargetResponse: ...


def _nowhere(*keys: str) -> str:
    return "the targets file"


@dataclass(frozen=True)
class TargetDefinition:
    """A target of a targets file as a kind builds it: its settings with ``${{ VAR }}``
    resolved, the folder of the eval file that uses it (relative paths, a ``cwd``, resolve from
    there) and ``where(key)``, the ``file:line`` of a setting, for errors."""

    name: str
    provider: str
    settings: Mapping[str, Any]
    folder: Path
    rootdir: Path
    judge_target: str | None = None
    #: The targets file that defines it.
    file: Path | None = None
    where: Callable[..., str] = field(default=_nowhere, compare=False)

    @property
    def what(self) -> str:
        """The target as errors name it."""
        return f"target '{self.name}' ({self.where()})"


class RunWide(Protocol):
    """Something a kind keeps for the whole run, ended with it."""

    async def aclose(self) -> None: ...


@dataclass
class TargetServices:
    """What the built-in kinds share across one run: model clients (one per model and
    endpoint) and CLI healthchecks (one per targets file and target, run once)."""

    clients: Callable[[ModelSpec], LlmClient]
    healthchecks: dict[tuple[Path | None, str], RunWide] = field(default_factory=dict)


def planned_answer(
    target: Target | None, case: PreparedCase
) -> tuple[TargetResponse, list[PlannedCall]]:
    """The answer a target would give without running anything, and the model calls it would
    make (its ``planned``); else one reply allowance of text and no calls."""
    planned = getattr(target, "planned", None)
    if callable(planned):
        answer: tuple[TargetResponse, list[PlannedCall]] = planned(case)
        return answer
    return response_from(unknown_answer(), ""), []
