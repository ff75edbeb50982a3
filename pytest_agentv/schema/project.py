"""The project's own files: ``.agentv/config.yaml`` and calibration canaries."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .base import DEFER_BUILD, WHOLE, Flag, Model, Text, named_once
from .rubrics import Rubrics, rubrics_shorthand

#: Text with something in it, never a number or a boolean.
_Words = Annotated[str, Field(strict=True, pattern=r"\S")]
#: AgentV v4's ``eval_patterns`` when a config file sets none.
DEFAULT_EVAL_GLOBS = ("**/evals/**/*.eval.yaml", "**/evals/**/eval.yaml")


class ExecutionDefaults(Model):
    """``execution:`` of AgentV v4's config: run-wide defaults of ``agentv eval``'s flags."""

    verbose: Flag | None = None
    keep_workspaces: Flag | None = None
    trace_file: _Words | None = None
    otel_file: _Words | None = None
    export_otel: Flag | None = None
    otel_backend: _Words | None = None
    otel_capture_content: Flag | None = None
    otel_group_turns: Flag | None = None
    pool_workspaces: Flag | None = None
    pool_slots: Annotated[int, Field(strict=True, ge=1, le=50), WHOLE] | None = None


class SessionHooks(Model):
    before_session: _Words | None = None


class ProjectConfig(Model):
    """``.agentv/config.yaml``: which referenced files are guidelines and which files are eval
    files (micromatch-style globs), AgentV v4's run defaults, version range and hooks."""

    schema_: str | None = Field(None, alias="$schema")
    guideline_patterns: list[str] = Field(default_factory=list)
    eval_patterns: list[_Words] | None = None
    required_version: Annotated[str, Field(strict=True)] | None = None
    execution: ExecutionDefaults | None = None
    results: dict[str, Any] | None = None
    hooks: SessionHooks | None = None

    @property
    def eval_globs(self) -> tuple[str, ...]:
        """AgentV's defaults stand in for a list that is missing or empty, as in v4."""
        return tuple(self.eval_patterns or DEFAULT_EVAL_GLOBS)


class Canary(BaseModel):
    """A calibration canary: an answer, what it is graded against, and the verdict a sane judge
    must give it. A format of pytest-agentv's own, so unknown keys are errors, not warnings."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=DEFER_BUILD)

    id: Text
    input: str
    answer: str
    expected_outcome: str
    rubrics: Rubrics | None = Field(None, json_schema_extra=rubrics_shorthand)
    verdict: Literal["pass", "fail"]

    @field_validator("id")
    @classmethod
    def _id_text(cls, value: str) -> str:
        if not value.strip() or any(ord(c) < 32 for c in value):
            raise ValueError("a canary id must be a non-empty single line")
        return value


class CalibrationFile(BaseModel):
    """``.agentv/calibration.yaml``: the canaries a judge is checked against before a run."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=DEFER_BUILD)

    canaries: Annotated[list[Canary], named_once("id", "canary id '{}' is used twice")] = Field(
        min_length=1
    )
