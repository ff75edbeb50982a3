"""AgentV v4's suite settings, by the field types eval files give them: a matrix of targets
(``execution.targets``, each with its ``use_target`` and hooks), the pass bar
(``execution.threshold``), the suite's budget (``execution.budget_usd``) and cap on cases in
flight (``execution.workers``), dependencies between cases (``depends_on``), per-case ``vars``
and the files an input attaches (``input_files``)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field, model_validator

from .base import FINITE, NOT_BLANK, WHOLE, Model, Text, first_repeat
from .workspace import HOOK_NAMES, HookConfig

#: The pass bar: a case passes at or above it (AgentV's ``execution.threshold``, 0 to 1).
Threshold = Annotated[float, Field(ge=0, le=1, strict=True, allow_inf_nan=False), FINITE]
#: A suite's budget in US dollars (more than 0).
Budget = Annotated[float, Field(gt=0, strict=True, allow_inf_nan=False), FINITE]
#: How many of a file's cases may be in flight at once (AgentV v4 accepts 1 to 50).
Workers = Annotated[int, WHOLE, Field(ge=1, le=50, strict=True)]

#: What a failed dependency does to a case: AgentV v4's ``on_dependency_failure``.
DependencyPolicy = Literal["skip", "fail", "run"]

#: A file a case's input attaches, by its path.
FilePath = Annotated[str, Field(strict=True), NOT_BLANK]


class TargetHooks(Model):
    """A matrix target's hooks (AgentV v4): commands run around the workspace's own for that
    target's cases: its ``before_all`` after the workspace's, its ``before_each`` after the
    workspace's, its ``after_each`` and ``after_all`` before the workspace's."""

    before_all: HookConfig | None = None
    before_each: HookConfig | None = None
    after_each: HookConfig | None = None
    after_all: HookConfig | None = None

    @model_validator(mode="after")
    def _commands_only(self) -> TargetHooks:
        for name in HOOK_NAMES:
            hook = getattr(self, name)
            if hook is not None and hook.reset is not None:
                raise ValueError(
                    f"{name}: a target's hooks run commands; 'reset' belongs to the "
                    f"workspace's (workspace.hooks.{name}.reset)"
                )
        return self


class MatrixEntry(Model):
    """A target of a matrix: its name, and AgentV v4's ``use_target`` (the target that answers
    under this name: a target's name, or ``${{ VAR }}`` naming one) and ``hooks``."""

    name: Text
    use_target: Text | None = None
    hooks: TargetHooks | None = None


_TargetName = Annotated[str, Field(pattern=r"\S")]


def _entry(value: Any) -> Any:
    """A matrix entry written as a target's name is ``{name: ...}``."""
    return {"name": value} if isinstance(value, str) else value


def _once(entries: list[MatrixEntry]) -> list[MatrixEntry]:
    repeated = first_repeat([entry.name for entry in entries])
    if repeated is not None:
        raise ValueError(f"target '{repeated}' is listed twice")
    return entries


#: ``execution.targets``: run each case once per target.
Matrix = Annotated[
    list[
        Annotated[
            MatrixEntry,
            BeforeValidator(_entry, json_schema_input_type=_TargetName | MatrixEntry),
        ]
    ],
    Field(min_length=1),
    AfterValidator(_once),
]

#: ``depends_on``: ids of cases of the same file that run first.
DependsOn = Annotated[list[Text], Field(min_length=1)]
