"""AgentV v4's ``workspace``: the folder a coding agent works in (a template copied, a static
path, repositories checked out), its lifecycle hooks and its preflight requirements, as a suite,
a case or a workspace file writes it (``WorkspaceConfig``).

Keys v4 removed (``static_path``, ``pool``, ``static``; a repo's ``source``, ``checkout``,
``clone``) are errors with v4's advice, and ``docker`` is refused: pytest-agentv assumes no
container engine.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    PlainValidator,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from ..spellings import spelled
from .base import Flag, Model, Number

#: Text that is not blank.
Words = Annotated[str, Field(pattern=r"\S")]
#: A git ref or path that git could read as an option: never starting with ``-``.
GitOperand = Annotated[str, Field(pattern=r"^[^-\s]\S*$")]
#: A Python module as ``import`` names it (dotted identifiers: nothing else reaches the check).
Module = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")]

#: Keys AgentV v4 removed, and what it says to write instead.
_REMOVED = {
    "static_path": "was removed in AgentV v4: use 'path' with 'mode: static'",
    "pool": "was removed in AgentV v4: use 'mode: pooled' or 'mode: temp'",
    "static": "was removed in AgentV v4: use 'mode: static'",
    "docker": (
        "(a Docker workspace, AgentV v4) is not supported: pytest-agentv assumes no container "
        "engine; run this suite with AgentV, or remove 'docker' to run its graders on the host"
    ),
}
_REMOVED_REPO_KEYS = {
    "source": "was removed in AgentV v4: use 'repo'",
    "checkout": "was removed in AgentV v4: use 'commit', 'base_commit' and 'ancestor'",
    "clone": "was removed in AgentV v4: use 'sparse' if needed",
}


def _refuse(value: Any, removed: dict[str, str]) -> Any:
    """A ``ValidationError`` at the first removed key ``value`` holds, naming what to write."""
    if isinstance(value, dict):
        for key, advice in removed.items():
            if key in value:
                problem = PydanticCustomError(
                    "removed", "'{key}' {advice}", {"key": key, "advice": advice}
                )
                raise ValidationError.from_exception_data(
                    "workspace", [InitErrorDetails(type=problem, loc=(key,), input=value)]
                )
    return value


def _argv(value: Any) -> Any:
    """A command as v4 reads it: a list of words, or a string split on whitespace (no shell)."""
    return value.split() if isinstance(value, str) else value


class HookConfig(Model):
    """One lifecycle hook: a command (its stdin is v4's JSON context) and/or a ``reset``."""

    command: Annotated[list[Words], Field(min_length=1)] | None = Field(
        None, validation_alias=spelled("HookConfig", "command")
    )
    timeout_ms: Annotated[Number, Field(gt=0)] | None = Field(
        None, validation_alias=spelled("HookConfig", "timeout_ms")
    )
    cwd: Words | None = None
    reset: Literal["none", "fast", "strict"] | None = None

    @field_validator("command", mode="before")
    @classmethod
    def _words(cls, value: Any) -> Any:
        return _argv(value)


#: The hooks, in the order of a suite's lifecycle.
HOOK_NAMES = ("before_all", "before_each", "after_each", "after_all")


class WorkspaceHooks(Model):
    enabled: Flag = True
    before_all: HookConfig | None = None
    before_each: HookConfig | None = None
    after_each: HookConfig | None = None
    after_all: HookConfig | None = None


def _inside(value: str) -> str:
    parts = re.split(r"[\\/]", value)
    if value.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", value) or ".." in parts:
        raise ValueError(f"'{value}' must be a relative path inside the workspace")
    return value


def _refused_keys(removed: dict[str, str]) -> Any:
    """The JSON Schema of ``_refuse``: none of the removed keys."""

    def extra(schema: dict[str, Any]) -> None:
        schema["not"] = {"anyOf": [{"required": [key]} for key in removed]}

    return extra


class RepoConfig(Model):
    """A repository checked out into the workspace: where, from where, at which commit."""

    model_config = ConfigDict(json_schema_extra=_refused_keys(_REMOVED_REPO_KEYS))

    path: Words
    repo: GitOperand
    commit: GitOperand | None = None
    base_commit: GitOperand | None = None
    ancestor: Annotated[int, Field(strict=True, ge=0)] = 0
    sparse: list[GitOperand] | None = None

    @model_validator(mode="before")
    @classmethod
    def _removed(cls, value: Any) -> Any:
        return _refuse(value, _REMOVED_REPO_KEYS)

    @field_validator("path")
    @classmethod
    def _relative(cls, value: str) -> str:
        return _inside(value)

    @model_validator(mode="after")
    def _one_commit(self) -> RepoConfig:
        if self.commit and self.base_commit and self.commit != self.base_commit:
            raise ValueError("'commit' and 'base_commit' must match (base_commit is its alias)")
        return self

    @property
    def ref(self) -> str:
        """What to check out: ``commit``, else ``base_commit``, else the default branch."""
        return self.commit or self.base_commit or "HEAD"


class WorkspaceEnv(Model):
    """What must be installed before the workspace's first hook runs (checked once)."""

    required_commands: list[Words] = Field(default_factory=list)
    required_python_modules: list[Module] = Field(default_factory=list)


def _mode_rules(schema: dict[str, Any]) -> None:
    """The JSON Schema of the checks in ``WorkspaceConfig._mode``, and of the keys refused."""
    _refused_keys(_REMOVED)(schema)
    per_test = {"properties": {"isolation": {"const": "per_test"}}, "required": ["isolation"]}
    schema["allOf"] = [
        {"if": {"required": ["path"]}, "then": {"properties": {"mode": {"const": "static"}}}},
        {"not": {"allOf": [per_test, {"required": ["path"]}]}},
        {
            "not": {
                "allOf": [
                    per_test,
                    {"properties": {"mode": {"const": "static"}}, "required": ["mode"]},
                ]
            }
        },
    ]


class WorkspaceConfig(Model):
    """A ``workspace:`` mapping (or a workspace file's contents)."""

    model_config = ConfigDict(json_schema_extra=_mode_rules)

    template: Words | None = None
    isolation: Literal["shared", "per_test"] | None = None
    repos: list[RepoConfig] | None = None
    hooks: WorkspaceHooks | None = None
    mode: Literal["pooled", "temp", "static"] | None = None
    path: Words | None = None
    env: WorkspaceEnv | None = None

    @model_validator(mode="before")
    @classmethod
    def _removed(cls, value: Any) -> Any:
        return _refuse(value, _REMOVED)

    @model_validator(mode="after")
    def _mode(self) -> WorkspaceConfig:
        check_mode(self.mode, self.path, self.isolation)
        return self


def check_mode(mode: str | None, path: str | None, isolation: str | None) -> None:
    """v4's rules between ``mode``, ``path`` and ``isolation`` (a ``ValueError`` if broken)."""
    if path is not None and mode not in (None, "static"):
        raise ValueError(f"'path' needs 'mode: static' (mode is {mode!r})")
    if isolation == "per_test" and (mode == "static" or path is not None):
        raise ValueError("a static workspace cannot have 'isolation: per_test'")


def _mapping_or_path(value: Any) -> WorkspaceConfig | str | None:
    """One validator rather than a union, so that an error inside the mapping is reported at
    its own key (a union's errors name its members instead)."""
    if value is None or isinstance(value, WorkspaceConfig):
        return value
    if isinstance(value, str):
        if not value.strip():
            raise ValueError("a workspace file's path must not be blank")
        return value
    return WorkspaceConfig.model_validate(value)


#: ``workspace:`` in an eval file: a mapping, or the path of a workspace file.
WorkspaceField = Annotated[
    WorkspaceConfig | str | None,
    PlainValidator(_mapping_or_path, json_schema_input_type=WorkspaceConfig | Words | None),
]
