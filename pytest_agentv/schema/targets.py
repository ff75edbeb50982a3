"""Targets files: each target's name, provider and settings (any provider's keys are kept)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, model_validator

from ..options import STRUCTURED_CHOICES
from ..spellings import TARGET_SETTING_ALIASES, spelled
from .base import Model, named_once

_STRING = {"type": "string"}

_POSITIVE = {"type": "number", "exclusiveMinimum": 0}

_HEALTHCHECK = {
    "anyOf": [
        {
            "type": "object",
            "properties": {
                "type": {"const": "http"},
                "url": _STRING,
                "timeout_seconds": _POSITIVE,
            },
            "required": ["url"],
            "additionalProperties": False,
        },
        {
            "type": "object",
            "properties": {
                "type": {"const": "command"},
                "command_template": _STRING,
                "command": _STRING,
                "cwd": _STRING,
                "timeout_seconds": _POSITIVE,
            },
            "oneOf": [{"required": ["command_template"]}, {"required": ["command"]}],
            "additionalProperties": False,
        },
    ]
}

#: Target settings pytest-agentv reads (any provider), with their JSON Schema. The loader warns
#: about every other key, and the targets-file JSON Schema is made from this table.
TARGET_SETTINGS: dict[str, dict[str, Any]] = {
    "response": {},
    "responses": {"type": "array", "minItems": 1},
    "delay_ms": {"type": "number", "minimum": 0},
    "command_template": _STRING,
    "cwd": _STRING,
    "timeout_seconds": _POSITIVE,
    "files_format": _STRING,
    "healthcheck": _HEALTHCHECK,
    "provider_batching": {"type": "boolean"},
    "use_target": _STRING,
    "model": _STRING,
    "deployment": _STRING,
    "api_key": _STRING,
    "endpoint": _STRING,
    "api_base": _STRING,
    "base_url": _STRING,
    "version": _STRING,
    "api_version": _STRING,
    "temperature": {"type": "number"},
    "max_tokens": {"type": "integer"},
    "max_output_tokens": {"type": "integer"},
    "structured": {"enum": list(STRUCTURED_CHOICES)},
    "input_cost_per_million": {"type": "number", "minimum": 0},
    "output_cost_per_million": {"type": "number", "minimum": 0},
}


#: What a CLI target's ``command_template`` fills in, each value one shell-quoted argument.
CLI_PLACEHOLDERS = (
    *("PROMPT", "PROMPT_FILE", "GUIDELINES", "EVAL_ID", "ATTEMPT", "FILES", "OUTPUT_FILE"),
    "WORKSPACE_PATH",
)


class TargetConfig(Model):
    """A target entry of ``.agentv/targets.yaml``; provider settings are extra keys."""

    name: str
    #: A target that only delegates (``use_target``, AgentV v4) names no provider.
    provider: str = ""
    judge_target: str | None = Field(None, validation_alias=spelled("TargetConfig", "judge_target"))
    _more_spellings = tuple(
        (key, *(alias for alias, name in TARGET_SETTING_ALIASES.items() if name == key))
        for key in sorted(set(TARGET_SETTING_ALIASES.values()))
    )

    @model_validator(mode="after")
    def _provider_or_delegate(self) -> TargetConfig:
        if not self.provider and not self.settings.get("use_target"):
            raise ValueError(
                f"target '{self.name}' needs a 'provider' (or 'use_target' naming another target)"
            )
        return self

    @property
    def settings(self) -> dict[str, Any]:
        """Provider settings, with AgentV's camelCase and legacy spellings under our names."""
        return {TARGET_SETTING_ALIASES.get(k, k): v for k, v in (self.model_extra or {}).items()}


class TargetsFile(Model):
    schema_: str | None = Field(None, alias="$schema")
    targets: Annotated[list[TargetConfig], named_once("name", "target name '{}' is defined twice")]
