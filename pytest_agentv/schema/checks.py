"""The settings of the evaluator kinds that check what the agent did: tool trajectories, fields
of a JSON answer, latency, cost and token usage."""

from __future__ import annotations

from functools import partial
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from ..spellings import field_groups, spelled
from .base import Flag, Limit, Model, at_least_zero, choice, limit

TrajectoryMode = Literal["any_order", "in_order", "exact", "superset", "subset"]
TRAJECTORY_MODES: tuple[str, ...] = get_args(TrajectoryMode)

#: How a step's ``args`` are compared (AgentV v2.7.1): the default is ``exact`` in a file with
#: v4's names and ``superset`` (the listed keys) in a v2.5.8 file; a list names the fields.
ARGS_MATCH_MODES = ("exact", "superset", "subset", "ignore")


def args_match_mode(value: Any) -> Any:
    if value is None or (isinstance(value, str) and value in ARGS_MATCH_MODES):
        return value
    if isinstance(value, list) and value and all(isinstance(v, str) and v for v in value):
        return value
    raise ValueError(
        f"args_match must be exact, superset, subset, ignore or a list of field paths "
        f"(got {value!r})"
    )


ArgsMatch = Annotated[str | list[str] | None, BeforeValidator(args_match_mode)]

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
    args_match: ArgsMatch = Field(None, validation_alias=spelled("TrajectoryStep", "args_match"))
    #: What the call must have been given and have returned (the keys and items listed).
    input: Any = None
    output: Any = None

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
    args_match: ArgsMatch = Field(
        None, validation_alias=spelled("ToolTrajectorySpec", "args_match")
    )

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


def _metric(what: str) -> Any:
    return Field(None, validation_alias=spelled("ExecutionMetricsSpec", what))


Metric = Annotated[float, BeforeValidator(partial(limit, what="a threshold"))] | None


class ExecutionMetricsSpec(Model):
    """``execution-metrics`` (AgentV v2.10): limits on tool calls, model calls, tokens, cost
    and duration, and an exploration ratio to stay near; at least one."""

    max_tool_calls: Metric = _metric("max_tool_calls")
    max_llm_calls: Metric = _metric("max_llm_calls")
    max_tokens: Metric = _metric("max_tokens")
    max_cost_usd: Metric = _metric("max_cost_usd")
    max_duration_ms: Metric = _metric("max_duration_ms")
    target_exploration_ratio: Metric = _metric("target_exploration_ratio")
    exploration_tolerance: Metric = _metric("exploration_tolerance")

    @model_validator(mode="after")
    def _some_threshold(self) -> ExecutionMetricsSpec:
        limits = self.model_dump(exclude={"exploration_tolerance"}, exclude_none=True)
        if not limits:
            raise ValueError(
                "execution-metrics needs at least one of max_tool_calls, max_llm_calls, "
                "max_tokens, max_cost_usd, max_duration_ms, target_exploration_ratio"
            )
        return self


class SkillTriggerSpec(Model):
    """``skill-trigger`` (AgentV v3.1): whether the agent used a skill (or did not)."""

    skill: str = Field(min_length=1)
    should_trigger: bool = Field(True, strict=True)
