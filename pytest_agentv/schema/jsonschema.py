"""The JSON Schema of eval files, JSONL sidecars and targets files, made from the models on every
call: what the loader checks is written once, in the models' field types (``Field(ge=0)``,
``Literal``, ``strict``) and in the ``json_schema_extra`` rules beside the validators they mirror.

What a schema cannot say stays the loader's alone: the file's syntax (duplicate keys, YAML tags,
encoding, nesting), ids and names used twice, arithmetic between values (score ranges that
overlap or leave a gap, ``min`` above ``max``), evaluator kinds (a plugin may add any) and the
files an entry names.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from ..spellings import TARGET_SETTING_ALIASES
from .checks import FieldSpec, TrajectoryStep
from .conversation import ConversationTurn
from .evalfile import EvalCase, EvalSuite, Execution, JsonlSidecar, SuiteExecution
from .evaluators import KIND_SPECS, AggregatorSpec, EvaluatorConfig, PromptScript
from .messages import ContentSegment, Message
from .rubrics import RubricItem, ScoreRange
from .suite import MatrixEntry, TargetHooks
from .targets import OWN_SETTINGS, TARGET_SETTINGS, TargetConfig, TargetsFile
from .trials import TrialsConfig
from .workspace import HookConfig

SchemaKind = Literal["eval", "sidecar", "targets"]
SCHEMA_KINDS: tuple[SchemaKind, ...] = ("eval", "sidecar", "targets")

_ROOTS: dict[SchemaKind, tuple[type[BaseModel], str]] = {
    "eval": (EvalSuite, "AgentV eval file"),
    "sidecar": (JsonlSidecar, "Sidecar of an AgentV JSONL dataset"),
    "targets": (TargetsFile, "AgentV targets file"),
}

#: Models whose unknown keys are meaningful (an evaluator entry's become its ``config``, and a
#: kind's settings sit beside the entry's own keys); every other object in the JSON Schema is
#: closed, so editors flag a typo'd key as the loader does.
_OPEN_MODELS: tuple[type[BaseModel], ...] = (EvaluatorConfig, *KIND_SPECS.values())

_MODELS: dict[str, type[BaseModel]] = {
    model.__name__: model
    for model in (
        EvalSuite,
        JsonlSidecar,
        EvalCase,
        ConversationTurn,
        Execution,
        SuiteExecution,
        TrialsConfig,
        EvaluatorConfig,
        PromptScript,
        AggregatorSpec,
        TrajectoryStep,
        FieldSpec,
        RubricItem,
        ScoreRange,
        Message,
        ContentSegment,
        TargetsFile,
        TargetConfig,
        MatrixEntry,
        TargetHooks,
        HookConfig,
        *KIND_SPECS.values(),
    )
}

#: Required in the models but filled in by their ``before`` validators when a file leaves them
#: out (rubric ``id`` from the position, evaluator ``name`` from the type).
_DEFAULTED = {RubricItem: "id", EvaluatorConfig: "name"}


def _spell_aliases(node: dict[str, Any], model: type[BaseModel]) -> None:
    """List every spelling a field accepts: a required field needs any one of them, and no
    two of them may be given together."""
    properties = node.get("properties", {})
    required: list[str] = node.get("required", [])
    for info in model.model_fields.values():
        choices = [str(c) for c in getattr(info.validation_alias, "choices", ())]
        if len(choices) < 2 or choices[0] not in properties:
            continue
        for choice in choices[1:]:
            properties[choice] = properties[choices[0]]
        rules = node.setdefault("allOf", [])
        rules += [{"not": {"required": list(pair)}} for pair in combinations(choices, 2)]
        if choices[0] in required:
            required.remove(choices[0])
            rules.append({"anyOf": [{"required": [choice]} for choice in choices]})
    if "required" in node and not required:
        del node["required"]


def _definitions(root: type[BaseModel]) -> dict[str, Any]:
    """The schemas of ``root`` and of every model it uses; in files with evaluator entries, the
    kinds' settings too (they are read from an entry's own keys: no field names their models)."""
    models = [root, *(KIND_SPECS.values() if root is not TargetsFile else ())]
    _, found = models_json_schema(
        [(model, "validation") for model in models], by_alias=True, title=None
    )
    definitions: dict[str, Any] = found["$defs"]
    for name, node in definitions.items():
        model = _MODELS.get(name)
        if model is None or "properties" not in node:
            continue
        if model in _DEFAULTED:
            node["required"].remove(_DEFAULTED[model])
        _spell_aliases(node, model)
        if model in _OPEN_MODELS:
            node.pop("additionalProperties", None)
        else:
            node["additionalProperties"] = False
    return definitions


def json_schema(kind: SchemaKind) -> dict[str, Any]:
    """The JSON Schema of eval files, JSONL sidecars or targets files, made from these models on
    every call, so it can never drift from what the loader accepts. Shorthands (a string for a
    message, a map of score ranges...) and every alias are included; unknown keys are flagged
    except in evaluator entries, where they are the judge's ``config``."""
    root, title = _ROOTS[kind]
    definitions = _definitions(root)
    body = definitions.pop(root.__name__)
    body.pop("title", None)
    schema: dict[str, Any] = {**body, "$defs": definitions}
    if kind == "targets":
        target = definitions["TargetConfig"]
        target["properties"].update({**OWN_SETTINGS, **TARGET_SETTINGS})
        for alias, key in TARGET_SETTING_ALIASES.items():
            target["properties"][alias] = TARGET_SETTINGS[key]
        schema = {
            "$defs": definitions,
            "anyOf": [body, {"type": "array", "items": {"$ref": "#/$defs/TargetConfig"}}],
        }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"{title} (pytest-agentv)",
        **schema,
    }
