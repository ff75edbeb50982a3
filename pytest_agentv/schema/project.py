"""The project's own files: ``.agentv/config.yaml`` and calibration canaries."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
)

from .base import Model
from .rubrics import RubricItem, rubric_ids_unique, rubric_list, rubrics_shorthand


class ProjectConfig(Model):
    """``.agentv/config.yaml``: which referenced files are guidelines (micromatch-style globs,
    matched against the path from the rootdir)."""

    schema_: str | None = Field(None, alias="$schema")
    guideline_patterns: list[str] = Field(default_factory=list)


class Canary(BaseModel):
    """A calibration canary: an answer, what it is graded against, and the verdict a sane judge
    must give it. A format of pytest-agentv's own, so unknown keys are errors, not warnings."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    input: str
    answer: str
    expected_outcome: str
    rubrics: list[RubricItem] | None = Field(None, json_schema_extra=rubrics_shorthand)
    verdict: Literal["pass", "fail"]

    @field_validator("id", mode="before")
    @classmethod
    def _id(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value

    @field_validator("id")
    @classmethod
    def _id_text(cls, value: str) -> str:
        if not value.strip() or any(ord(c) < 32 for c in value):
            raise ValueError("a canary id must be a non-empty single line")
        return value

    @field_validator("rubrics", mode="before")
    @classmethod
    def _rubrics(cls, value: Any) -> Any:
        return rubric_list(value)

    _unique_rubrics = field_validator("rubrics")(rubric_ids_unique)


class CalibrationFile(BaseModel):
    """``.agentv/calibration.yaml``: the canaries a judge is checked against before a run."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    canaries: list[Canary] = Field(min_length=1)

    @field_validator("canaries")
    @classmethod
    def _unique_ids(cls, value: list[Canary]) -> list[Canary]:
        seen: set[str] = set()
        for canary in value:
            if canary.id in seen:
                raise ValueError(f"canary id '{canary.id}' is used twice")
            seen.add(canary.id)
        return value
