"""The JSON Schema of eval files and targets files, made from the models on every call."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
)

from ..spellings import TARGET_SETTING_ALIASES
from .evalfile import EvalCase, EvalSuite, Execution
from .evaluators import EvaluatorConfig, PromptScript
from .messages import ContentSegment, Message
from .rubrics import RubricItem, ScoreRange
from .targets import TARGET_SETTINGS, TargetConfig, TargetsFile
from .trials import TrialsConfig

#: Models whose unknown keys are meaningful (an evaluator entry's become its ``config``); every
#: other object in the JSON Schema is closed, so editors flag a typo'd key as the loader does.
_OPEN_MODELS = (EvaluatorConfig,)

#: The models of an eval file's keys (messages aside).
EVAL_FILE_MODELS: tuple[type[BaseModel], ...] = (
    EvalSuite,
    EvalCase,
    Execution,
    TrialsConfig,
    EvaluatorConfig,
    PromptScript,
    RubricItem,
    ScoreRange,
)

_SCHEMA_MODELS: tuple[type[BaseModel], ...] = (
    *EVAL_FILE_MODELS,
    Message,
    ContentSegment,
    TargetsFile,
    TargetConfig,
)

#: Required in the models but filled in by their ``before`` validators when a file leaves them
#: out (rubric ``id`` from the position, evaluator ``name`` from the type).
_DEFAULTED = {RubricItem: "id", EvaluatorConfig: "name"}


def _spell_aliases(node: dict[str, Any], model: type[BaseModel]) -> None:
    """List every spelling a field accepts; a required field needs any one of them."""
    properties = node.get("properties", {})
    required: list[str] = node.get("required", [])
    for info in model.model_fields.values():
        choices = [str(c) for c in getattr(info.validation_alias, "choices", ())]
        if len(choices) < 2 or choices[0] not in properties:
            continue
        for choice in choices[1:]:
            properties[choice] = properties[choices[0]]
        if choices[0] in required:
            required.remove(choices[0])
            node.setdefault("allOf", []).append(
                {"anyOf": [{"required": [choice]} for choice in choices]}
            )
    if "required" in node and not required:
        del node["required"]


def json_schema(kind: Literal["eval", "targets"]) -> dict[str, Any]:
    """The JSON Schema of eval files or targets files, made from these models on every call, so
    it can never drift from what the loader accepts. Shorthands (a string for a message, a map
    of score ranges...) and every alias are included; unknown keys are flagged except in
    evaluator entries, where they are the judge's ``config``."""
    root: type[BaseModel] = EvalSuite if kind == "eval" else TargetsFile
    schema = root.model_json_schema(by_alias=True, mode="validation")
    definitions: dict[str, Any] = schema.get("$defs", {})
    for model in _SCHEMA_MODELS:
        node = schema if model is root else definitions.get(model.__name__)
        if node is None:
            continue
        if model in _DEFAULTED:
            node["required"].remove(_DEFAULTED[model])
        _spell_aliases(node, model)
        node["additionalProperties"] = model in _OPEN_MODELS
    if kind == "targets":
        target = definitions["TargetConfig"]
        target["properties"].update(TARGET_SETTINGS)
        for alias, key in TARGET_SETTING_ALIASES.items():
            target["properties"][alias] = TARGET_SETTINGS[key]
        body = {key: value for key, value in schema.items() if key != "$defs"}
        schema = {
            "$defs": definitions,
            "anyOf": [body, {"type": "array", "items": {"$ref": "#/$defs/TargetConfig"}}],
        }
    title = "AgentV eval file" if kind == "eval" else "AgentV targets file"
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"{title} (pytest-agentv)",
        **{key: value for key, value in schema.items() if key != "title"},
    }
