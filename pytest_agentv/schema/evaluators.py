"""Evaluator entries (any kind; unknown keys are the kind's ``config``), composites and their
aggregators, and the evaluators a case is graded by."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails

from ..errors import did_you_mean
from ..spellings import (
    AGGREGATOR_ALIASES,
    KIND_ALIASES,
    LATER_AGGREGATORS,
    LATER_EVALUATOR_GATES,
    LATER_KINDS,
    RUBRIC_KINDS,
    canonical_kind,
    spelled,
)
from .base import (
    NOT_EMPTY,
    Limit,
    Model,
    Schema,
    Seconds,
    Weight,
    choice,
    limit,
    named_once,
    problems,
)
from .checks import CostSpec, FieldAccuracySpec, LatencySpec, TokenUsageSpec, ToolTrajectorySpec
from .rubrics import RubricItem, Rubrics, rubric_items, rubrics_shorthand


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
    """What ``_later_shape`` and ``_kind_fields`` check, in the JSON Schema: later AgentV score
    gates, the script a code judge needs, the criteria of a rubric kind, and the settings of
    each kind that has them (unless the entry puts its settings under ``config:``, which the
    schema does not look into)."""
    schema["properties"].update(
        {key: {"type": ["null", "array", "object", "string"]} for key in LATER_EVALUATOR_GATES}
    )
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

    name: str
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
    _spec: KindSpec | None = PrivateAttr(None)

    @model_validator(mode="before")
    @classmethod
    def _later_shape(cls, value: Any) -> Any:
        """AgentV v4 entries may leave out ``name`` (the type names them), and may carry score
        gates pytest-agentv cannot honour yet: those are refused, never passed on as config."""
        if not isinstance(value, dict):
            return value
        for key, version in LATER_EVALUATOR_GATES.items():
            gate = value.get(key)
            if gate is None or isinstance(gate, (list, dict, str)):
                continue
            raise ValueError(
                f"'{key}' on an evaluator is a score gate introduced in AgentV {version}; "
                "pytest-agentv cannot apply it yet (put it under 'config:' if it is meant for "
                "the judge script)"
            )
        if "name" not in value and isinstance(value.get("type"), str):
            value = {**value, "name": value["type"]}
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
        spec = KIND_SPECS.get(self.kind)
        if spec is not None:
            # Errors inside keep their place: pydantic prefixes them with this entry's location.
            self._spec = spec.model_validate(self.options)
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
    def members(self) -> tuple[EvaluatorConfig, ...]:
        """A composite's member entries; none for other kinds."""
        return tuple(self._spec.evaluators) if isinstance(self._spec, CompositeSpec) else ()


#: An ``evaluators`` list (``assertions`` in later AgentV): each name is used once.
Entries = Annotated[
    list[EvaluatorConfig],
    named_once("name", "evaluator name '{}' is used twice; names must be unique"),
]


Aggregator = Literal["weighted_average", "code_judge", "llm_judge"]
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

    @field_validator("type", mode="before")
    @classmethod
    def _type(cls, value: Any) -> str:
        value = AGGREGATOR_ALIASES.get(value, value) if isinstance(value, str) else value
        if value in LATER_AGGREGATORS:
            raise ValueError(
                f"aggregator type {value!r} was introduced in AgentV {LATER_AGGREGATORS[value]} "
                f"and is not supported by pytest-agentv; use {', '.join(AGGREGATORS)}"
            )
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
        return self


class CompositeSpec(Model):
    """``composite``: member evaluators (composites nest) and their aggregator."""

    #: ``assertions`` is AgentV v3's name for the members.
    evaluators: Entries = Field(
        min_length=1, validation_alias=spelled("CompositeSpec", "evaluators")
    )
    aggregator: AggregatorSpec

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
    ToolTrajectorySpec | FieldAccuracySpec | LatencySpec | CostSpec | TokenUsageSpec | CompositeSpec
)

#: The built-in kinds whose settings are checked when the file loads.
KIND_SPECS: dict[str, type[KindSpec]] = {
    "tool_trajectory": ToolTrajectorySpec,
    "field_accuracy": FieldAccuracySpec,
    "latency": LatencySpec,
    "cost": CostSpec,
    "token_usage": TokenUsageSpec,
    "composite": CompositeSpec,
}


def evaluator_entries(
    listed: Sequence[EvaluatorConfig], rubrics: Sequence[RubricItem] | None, default_kind: str
) -> tuple[EvaluatorConfig, ...]:
    """The evaluators that grade an answer: inline ``rubrics`` become an ``llm_judge`` named
    ``rubric`` placed first (``inline-rubric`` when that name is taken); with none at all, the
    default kind."""
    entries = list(listed)
    if rubrics:
        name = "rubric" if all(entry.name != "rubric" for entry in entries) else "inline-rubric"
        entries.insert(0, EvaluatorConfig(name=name, type="llm_judge", rubrics=list(rubrics)))
    if not entries:
        entries.append(
            EvaluatorConfig.model_construct(
                name=default_kind, type=default_kind, weight=1.0, config={}
            )
        )
    return tuple(entries)


def python_entries(
    evaluators: Iterable[Mapping[str, Any] | EvaluatorConfig] | None,
    rubrics: Iterable[str | Mapping[str, Any] | RubricItem] | None,
) -> tuple[EvaluatorConfig, ...]:
    """The entries that grade an ``assert_judged`` answer, given in Python like an eval file's
    (inline rubrics become an ``llm_judge``); an invalid one is a ``ValueError`` naming it."""
    entries: list[EvaluatorConfig] = []
    for index, entry in enumerate(evaluators or ()):
        if isinstance(entry, EvaluatorConfig):
            entries.append(entry)
            continue
        try:
            entries.append(EvaluatorConfig.model_validate(dict(entry)))
        except ValidationError as exc:
            raise ValueError(f"evaluators[{index}] is invalid: {problems(exc)}") from None
    items = [dict(item) if isinstance(item, Mapping) else item for item in rubrics or ()]
    return evaluator_entries(entries, rubric_items(items), "llm_judge")
