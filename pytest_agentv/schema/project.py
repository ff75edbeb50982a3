"""The project's own files: ``.agentv/config.yaml`` and calibration canaries."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .base import DEFER_BUILD, Model, Text, named_once
from .rubrics import Rubrics, rubrics_shorthand


class ProjectConfig(Model):
    """``.agentv/config.yaml``: which referenced files are guidelines (micromatch-style globs,
    matched against the path from the rootdir)."""

    schema_: str | None = Field(None, alias="$schema")
    guideline_patterns: list[str] = Field(default_factory=list)


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
