"""Evaluator entries (any kind; unknown keys are the kind's ``config``), composites and their
aggregators, and the evaluators a case is graded by."""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    Strict,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails

from ..errors import did_you_mean
from ..paths import resolve_reference
from ..spellings import (
    AGGREGATOR_ALIASES,
    KIND_ALIASES,
    LATER_KINDS,
    RUBRIC_KINDS,
    canonical_kind,
    spelled,
)
from .base import (
    NOT_BLANK,
    NOT_EMPTY,
    Limit,
    Model,
    Schema,
    Seconds,
    Weight,
    choice,
    limit,
    named_once,
)
from .checks import (
    CostSpec,
    ExecutionMetricsSpec,
    FieldAccuracySpec,
    LatencySpec,
    SkillTriggerSpec,
    TokenUsageSpec,
    ToolTrajectorySpec,
)
from .entries import named, v4_entries
from .rubrics import Rubrics, rubrics_shorthand
from .textchecks import LIST_VALUE_KINDS, ONE_VALUE_KINDS, TextCheckSpec


class Preprocessor(Model):
    """AgentV v4's content preprocessor: a command that turns a file of one media type
    (``xlsx``, ``application/pdf``...) into the text an LLM judge reads."""

    type: Annotated[str, Field(strict=True), NOT_BLANK]
    #: Its argv; the last word is the script file, found from the eval file's folder up.
    command: list[Annotated[str, Field(strict=True), NOT_BLANK]] = Field(min_length=1)

    def argv(self, start: Path, rootdir: Path) -> list[str]:
        """The command with its script file's path resolved (inside the rootdir), as AgentV v4
        resolves it; ``ConfigError`` when there is no such file."""
        *program, script = self.command
        found = resolve_reference(script, start=start, rootdir=rootdir, what="preprocessor script")
        return [*program, str(found)]


class PromptScript(Model):
    """An executable prompt template: a script that prints the judge's user prompt."""

    script: list[str] | str = Field(validation_alias=spelled("PromptScript", "script"))
    config: dict[str, Any] = Field(default_factory=dict)


def kind_names(kind: str) -> list[str]:
    """A kind and every other spelling of it."""
    return [kind, *(name for name, canonical in KIND_ALIASES.items() if canonical == kind)]


def _typed(names: Sequence[str]) -> dict[str, Any]:
    """``if`` of an entry whose ``type`` is one of ``names``."""
    return {"required": ["type"], "properties": {"type": {"enum": list(names)}}}


def _needs(*keys: str) -> dict[str, Any]:
    """Any one of ``keys`` (spellings of one setting), given and not empty."""
    return {"anyOf": [{"required": [key], "properties": {key: NOT_EMPTY.extra}} for key in keys]}


def _entry_rules(schema: dict[str, Any]) -> None:
    """What ``_kind_fields`` checks, in the JSON Schema: the script a code judge needs, the
    criteria of a rubric kind, and the settings of each kind that has them (unless the entry
    puts its settings under ``config:``, which the schema does not look into)."""
    rules: list[dict[str, Any]] = [
        {"if": _typed(kind_names("code_judge")), "then": _needs("script", "command")},
        {"if": _typed(RUBRIC_KINDS), "then": _needs("rubrics", "criteria")},
    ]
    rules += [
        {
            "if": _typed(kind_names(kind)),
            "then": {"anyOf": [{"$ref": f"#/$defs/{spec.__name__}"}, {"required": ["config"]}]},
        }
        for kind, spec in KIND_SPECS.items()
    ]
    schema["allOf"] = rules


#: What no entry's ``type`` may be: a kind of a later AgentV that has no classic equivalent.
_NOT_LATER = Schema(
    {"not": {"anyOf": [{"enum": sorted(LATER_KINDS)}, {"pattern": "^(not-)?trajectory:"}]}}
)


class EvaluatorConfig(Model):
    """An entry of an ``evaluators`` list. Keys we do not know become its ``config``."""

    model_config = ConfigDict(json_schema_extra=_entry_rules)

    name: str = Field(validation_alias=spelled("EvaluatorConfig", "name"))
    type: Annotated[str, _NOT_LATER]
    weight: Weight = 1.0
    script: Annotated[list[str] | str, NOT_EMPTY] | None = Field(
        None, validation_alias=spelled("EvaluatorConfig", "script")
    )
    cwd: str | None = None
    timeout_seconds: Seconds | None = None
    prompt: str | PromptScript | None = None
    model: str | None = None
    rubrics: Rubrics | None = Field(
        None,
        validation_alias=spelled("EvaluatorConfig", "rubrics"),
        json_schema_extra=rubrics_shorthand,
    )
    config: dict[str, Any] = Field(default_factory=dict)
    #: AgentV v4's gates: the score inverted; a minimum the score must reach, or the case
    #: scores 0 (``required: true`` is the pass threshold, a number is its own minimum).
    negate: bool = Field(False, strict=True)
    required: Annotated[bool, Strict()] | Annotated[float, Field(gt=0, le=1)] = Field(
        False, union_mode="left_to_right"
    )
    min_score: float | None = Field(None, gt=0, le=1)
    #: AgentV v4: how an LLM judge reads files of the answer, over the file's own.
    preprocessors: list[Preprocessor] | None = None
    _spec: KindSpec | None = PrivateAttr(None)
    _v4: bool = PrivateAttr(False)

    @model_validator(mode="before")
    @classmethod
    def _later_shape(cls, value: Any) -> Any:
        """AgentV v4 entries may leave out ``name`` (the type names them)."""
        if isinstance(value, dict) and not named(value) and isinstance(value.get("type"), str):
            value = {**value, "name": value["type"]}
        return value

    @field_validator("required", "min_score", mode="before")
    @classmethod
    def _gate_number(cls, value: Any, info: ValidationInfo) -> Any:
        number = not isinstance(value, bool) and isinstance(value, (int, float))
        if isinstance(value, str) or (number and not (math.isfinite(value) and 0 < value <= 1)):
            what = "true/false or a number" if info.field_name == "required" else "a number"
            raise ValueError(f"must be {what} above 0 and at most 1 (got {value!r})")
        return value

    @field_validator("script")
    @classmethod
    def _script(cls, value: list[str] | str | None) -> list[str] | str | None:
        if value is not None and not (value.strip() if isinstance(value, str) else value):
            raise ValueError("script must not be empty")
        return value

    @model_validator(mode="after")
    def _kind_fields(self) -> EvaluatorConfig:
        if self.kind == "code_judge" and self.script is None:
            raise ValueError(
                f"code_judge evaluator '{self.name}' needs a 'script' "
                "(an argv list, or a string run through the shell)"
            )
        if self.type in RUBRIC_KINDS and not self.rubrics:
            raise ValueError(
                f"{self.type} evaluator '{self.name}' needs a non-empty 'rubrics' "
                "(or 'criteria') list"
            )
        if self.preprocessors is not None and self.kind != "llm_judge":
            raise ValueError(
                f"'preprocessors' turn the answer's files into text for LLM judges only; "
                f"AgentV v4.42.4 reads them on a {self.type} entry and never runs them"
            )
        spec = KIND_SPECS.get(self.kind)
        if spec is not None:
            # Errors inside keep their place: pydantic prefixes them with this entry's location.
            self._spec = spec.model_validate(self.options)
        if isinstance(self._spec, TextCheckSpec):
            self._spec = self._spec.for_kind(self.kind)
        return self

    @property
    def kind(self) -> str:
        return canonical_kind(self.type)

    @property
    def options(self) -> dict[str, Any]:
        """The evaluator's ``config``: the explicit mapping plus every unknown key."""
        return {**self.config, **(self.model_extra or {})}

    @property
    def spec(self) -> KindSpec | None:
        """The validated settings of a built-in kind that has them (``tool_trajectory``,
        ``field_accuracy``, ``latency``, ``cost``, ``token_usage``, ``composite``)."""
        return self._spec

    @property
    def v4(self) -> bool:
        """Written in a file with AgentV v4's names (its prompt is read as v4 reads it)."""
        return self._v4

    def in_v4_file(self) -> None:
        """Mark this entry and its members as written with AgentV v4's names."""
        self._v4 = True
        for member in self.members:
            member.in_v4_file()

    @property
    def members(self) -> tuple[EvaluatorConfig, ...]:
        """A composite's member entries; none for other kinds."""
        return tuple(self._spec.evaluators) if isinstance(self._spec, CompositeSpec) else ()


_ONCE = named_once("name", "evaluator name '{}' is used twice; names must be unique")

#: An ``evaluators`` list (``assertions`` in later AgentV): each name is used once; AgentV v4's
#: plain-string criteria and unnamed entries are read as it reads them (``entries``).
Entries = Annotated[list[EvaluatorConfig], BeforeValidator(v4_entries), _ONCE]

#: A composite's members: entries, each named, never plain strings.
Members = Annotated[
    list[EvaluatorConfig], BeforeValidator(partial(v4_entries, strings=False)), _ONCE
]


Aggregator = Literal["weighted_average", "code_judge", "llm_judge", "threshold"]
AGGREGATORS: tuple[str, ...] = get_args(Aggregator)


def _aggregator_rules(schema: dict[str, Any]) -> None:
    """What ``_script`` checks, in the JSON Schema."""
    code = ["code_judge", *(name for name, to in AGGREGATOR_ALIASES.items() if to == "code_judge")]
    schema["allOf"] = [{"if": _typed(code), "then": _needs("path", "script")}]


class AggregatorSpec(Model):
    """How a composite turns its members' results into one score."""

    model_config = ConfigDict(json_schema_extra=_aggregator_rules)

    type: Annotated[Aggregator, Schema({"enum": [*AGGREGATORS, *AGGREGATOR_ALIASES]})]
    weights: dict[str, Limit] | None = None
    path: list[str] | str | None = Field(None, validation_alias=spelled("AggregatorSpec", "path"))
    cwd: str | None = None
    timeout_seconds: Seconds | None = None
    prompt: str | None = None
    model: str | None = None
    #: ``threshold`` (AgentV v2.7.1): the share of members that must pass, 0 to 1.
    threshold: float | None = Field(None, ge=0, le=1)

    @field_validator("type", mode="before")
    @classmethod
    def _type(cls, value: Any) -> str:
        value = AGGREGATOR_ALIASES.get(value, value) if isinstance(value, str) else value
        return choice(value, AGGREGATORS, "aggregator type")

    @field_validator("weights", mode="before")
    @classmethod
    def _weights(cls, value: Any) -> Any:
        if value is None:
            return None
        if not isinstance(value, dict):
            raise ValueError("weights must map member names to numbers >= 0")
        return {str(name): limit(w, f"weight of '{name}'") for name, w in value.items()}

    @model_validator(mode="after")
    def _script(self) -> AggregatorSpec:
        if self.type == "code_judge" and not (
            self.path.strip() if isinstance(self.path, str) else self.path
        ):
            raise ValueError(
                "a code_judge aggregator needs a 'path': the command that reads "
                '{"results": {...}} on stdin and prints {"score": ...}'
            )
        if (self.type == "threshold") != (self.threshold is not None):
            raise ValueError(
                "a threshold aggregator needs 'threshold' (the share of members that must "
                "pass, 0 to 1), and only it takes one"
            )
        return self


class CompositeSpec(Model):
    """``composite``: member evaluators (composites nest) and their aggregator."""

    #: ``assertions`` is AgentV v3's name for the members.
    evaluators: Members = Field(
        min_length=1, validation_alias=spelled("CompositeSpec", "evaluators")
    )
    aggregator: AggregatorSpec

    @field_validator("evaluators")
    @classmethod
    def _no_member_gates(cls, members: list[EvaluatorConfig]) -> list[EvaluatorConfig]:
        """AgentV v4.42.4 applies gates to a case's own entries only and ignores them on a
        composite's members: refused, so that a gate never silently does nothing."""
        for member in members:
            for gate in ("negate", "required", "min_score"):
                if gate in member.model_fields_set:
                    raise ValueError(
                        f"member '{member.name}': '{gate}' on a composite member is ignored by "
                        "AgentV v4.42.4; put it on the composite itself"
                    )
        return members

    @model_validator(mode="after")
    def _weights_name_members(self) -> CompositeSpec:
        names = [member.name for member in self.evaluators]
        unknown = [name for name in self.aggregator.weights or {} if name not in names]
        if unknown:
            raise ValidationError.from_exception_data(
                "CompositeSpec",
                [
                    InitErrorDetails(
                        type="value_error",
                        loc=("aggregator", "weights", name),
                        input=name,
                        ctx={
                            "error": ValueError(
                                f"weights name '{name}', which is not a member of this "
                                f"composite{did_you_mean(name, names)}; members: "
                                f"{', '.join(names)}"
                            )
                        },
                    )
                    for name in unknown
                ],
            )
        return self


KindSpec = (
    ToolTrajectorySpec
    | FieldAccuracySpec
    | LatencySpec
    | CostSpec
    | TokenUsageSpec
    | CompositeSpec
    | TextCheckSpec
    | ExecutionMetricsSpec
    | SkillTriggerSpec
)

#: The built-in kinds whose settings are checked when the file loads.
KIND_SPECS: dict[str, type[KindSpec]] = {
    "tool_trajectory": ToolTrajectorySpec,
    "field_accuracy": FieldAccuracySpec,
    "latency": LatencySpec,
    "cost": CostSpec,
    "token_usage": TokenUsageSpec,
    "composite": CompositeSpec,
    **dict.fromkeys((*ONE_VALUE_KINDS, *LIST_VALUE_KINDS, "is_json"), TextCheckSpec),
    "execution_metrics": ExecutionMetricsSpec,
    "skill_trigger": SkillTriggerSpec,
}
