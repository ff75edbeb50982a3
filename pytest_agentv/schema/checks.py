"""The settings of the evaluator kinds that check what the agent did: tool trajectories, fields
of a JSON answer, latency, cost and token usage."""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import ConfigDict, Field, field_validator, model_validator

from ..spellings import field_groups, spelled
from .base import Flag, Limit, Model, at_least_zero, choice, limit

TrajectoryMode = Literal["any_order", "in_order", "exact"]
TRAJECTORY_MODES: tuple[str, ...] = get_args(TrajectoryMode)

FieldMatch = Literal["exact", "numeric_tolerance", "date"]
FIELD_MATCHES: tuple[str, ...] = get_args(FieldMatch)

FieldAggregation = Literal["weighted_average", "all_or_nothing"]
FIELD_AGGREGATIONS: tuple[str, ...] = get_args(FieldAggregation)


def _trajectory_rules(schema: dict[str, Any]) -> None:
    """What ``_mode_needs`` checks, in the JSON Schema."""
    schema["allOf"] = [
        {
            "if": {"properties": {"mode": {"const": "any_order"}}},
            "then": {"required": ["minimums"]},
            "else": {"required": ["expected"]},
        }
    ]


def _token_rules(schema: dict[str, Any]) -> None:
    """What ``_some_limit`` checks, in the JSON Schema (a limit under any of its spellings)."""
    spellings = [name for group in field_groups(TokenUsageSpec) for name in group]
    schema["anyOf"] = [{"required": [name]} for name in spellings]


class TrajectoryStep(Model):
    """One expected tool call of an ``in_order`` or ``exact`` trajectory."""

    tool: str = Field(min_length=1)
    args: Literal["any"] | dict[str, Any] | None = None
    max_duration_ms: Annotated[float, at_least_zero("max_duration_ms")] | None = Field(
        None, validation_alias=spelled("TrajectoryStep", "max_duration_ms")
    )

    @field_validator("args", mode="before")
    @classmethod
    def _args(cls, value: Any) -> Any:
        if value is not None and value != "any" and not isinstance(value, dict):
            raise ValueError(f"args must be 'any' or a mapping of argument values (got {value!r})")
        return value


class ToolTrajectorySpec(Model):
    """``tool_trajectory``: which tools the agent called, in what order, with which arguments."""

    model_config = ConfigDict(json_schema_extra=_trajectory_rules)

    mode: TrajectoryMode
    minimums: dict[str, Limit] | None = None
    expected: list[TrajectoryStep] | None = None

    @field_validator("mode", mode="before")
    @classmethod
    def _mode(cls, value: Any) -> str:
        return choice(value, TRAJECTORY_MODES, "mode")

    @field_validator("minimums", mode="before")
    @classmethod
    def _minimums(cls, value: Any) -> Any:
        if value is None:
            return None
        if not isinstance(value, dict):
            raise ValueError("minimums must map tool names to minimum call counts")
        return {str(tool): limit(count, f"minimum for '{tool}'") for tool, count in value.items()}

    @model_validator(mode="after")
    def _mode_needs(self) -> ToolTrajectorySpec:
        if self.mode == "any_order" and self.minimums is None:
            raise ValueError("mode any_order needs 'minimums' (tool name: minimum number of calls)")
        if self.mode != "any_order" and self.expected is None:
            raise ValueError(f"mode {self.mode} needs 'expected' (a list of {{tool, args?}} steps)")
        return self


class FieldSpec(Model):
    """One field ``field_accuracy`` compares, by its ``a.b[0].c`` path."""

    path: str = Field(min_length=1)
    match: FieldMatch
    required: Flag = True
    weight: Annotated[float, at_least_zero("weight")] = 1.0
    tolerance: Annotated[float, at_least_zero("tolerance")] = 0.0
    relative: Flag = False
    formats: list[str] | None = None

    @field_validator("match", mode="before")
    @classmethod
    def _match(cls, value: Any) -> str:
        hint = "; for fuzzy matching use a code_judge evaluator"
        return choice(value, FIELD_MATCHES, "match", hint)


class FieldAccuracySpec(Model):
    """``field_accuracy``: fields of a JSON answer against the expected output."""

    fields: list[FieldSpec] = Field(min_length=1)
    aggregation: FieldAggregation = "weighted_average"

    @field_validator("aggregation", mode="before")
    @classmethod
    def _aggregation(cls, value: Any) -> str:
        return choice(value, FIELD_AGGREGATIONS, "aggregation")


class LatencySpec(Model):
    """``latency``: the case's duration (ms) is at most ``threshold``."""

    threshold: Annotated[float, at_least_zero("threshold (milliseconds)")]


class CostSpec(Model):
    """``cost``: the case's cost (USD) is at most ``budget``."""

    budget: Annotated[float, at_least_zero("budget (USD)")]


class TokenUsageSpec(Model):
    """``token_usage``: input, output and total tokens within their limits."""

    model_config = ConfigDict(json_schema_extra=_token_rules)

    max_total: Annotated[float, at_least_zero("max_total")] | None = Field(
        None, validation_alias=spelled("TokenUsageSpec", "max_total")
    )
    max_input: Annotated[float, at_least_zero("max_input")] | None = Field(
        None, validation_alias=spelled("TokenUsageSpec", "max_input")
    )
    max_output: Annotated[float, at_least_zero("max_output")] | None = Field(
        None, validation_alias=spelled("TokenUsageSpec", "max_output")
    )

    @model_validator(mode="after")
    def _some_limit(self) -> TokenUsageSpec:
        if self.max_total is None and self.max_input is None and self.max_output is None:
            raise ValueError("token_usage needs at least one of max_total, max_input, max_output")
        return self
