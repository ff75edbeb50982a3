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

_NAMES = {"type": "array", "items": _STRING}

#: Settings only some providers read (``PROVIDER_SETTINGS`` says which: mostly the coding
#: agents and the providers that read recorded runs), with their JSON Schema: the loader warns
#: about a key the target's provider does not read; the targets-file JSON Schema has them all.
OWN_SETTINGS: dict[str, dict[str, Any]] = {
    "verbose": {"type": "boolean"},
    "api_format": {"enum": ["chat", "responses"]},
    "executable": _STRING,
    "binary": _STRING,
    "args": _NAMES,
    "arguments": _NAMES,
    "system_prompt": _STRING,
    "env": {"type": "object", "additionalProperties": _STRING},
    "home": _STRING,
    "stream_log": {"enum": [False, "false", "raw", "summary"]},
    "log_format": {"enum": ["summary", "json"]},
    "log_dir": _STRING,
    "log_directory": _STRING,
    "bypass_permissions": {"type": "boolean"},
    "max_turns": {"type": "integer", "minimum": 1},
    "max_budget_usd": _POSITIVE,
    "model_reasoning_effort": {"enum": ["minimal", "low", "medium", "high", "xhigh"]},
    "subprovider": _STRING,
    "tools": _STRING,
    "thinking": _STRING,
    "fixtures": _STRING,
    "execution_traces": _STRING,
    "source_target": _STRING,
    "suite": _STRING,
    "eval_path": _STRING,
    "variant": _STRING,
    "session_dir": _STRING,
    "session_id": _STRING,
    "session_state_dir": _STRING,
    "discover": {"const": "latest"},
}
_AGENT: tuple[str, ...] = ("executable", "binary", "model", "cwd", "timeout_seconds", "args")
_AGENT += ("arguments", "system_prompt", "env", "home", "stream_log", "log_format", "log_dir")
_AGENT += ("log_directory", "base_url", "endpoint", "api_key", "bypass_permissions", "verbose")
#: Each provider's own settings (its aliases are in ``PROVIDER_ALIASES``).
PROVIDER_SETTINGS: dict[str, tuple[str, ...]] = {
    "cli": ("verbose",),
    "openai": ("api_format",),
    "azure": ("api_format",),
    "claude-cli": (*_AGENT, "max_turns", "max_budget_usd"),
    "codex": (*_AGENT, "model_reasoning_effort"),
    "gemini-cli": (*_AGENT, "max_turns"),
    "copilot-cli": (*_AGENT, "subprovider", "api_format"),
    "pi-cli": (*_AGENT, "subprovider", "api_format", "tools", "thinking"),
    "replay": ("fixtures", "execution_traces", "source_target", "suite", "eval_path", "variant"),
    "copilot-log": ("session_dir", "session_id", "discover", "session_state_dir", "cwd"),
}
#: AgentV's other names of these providers.
PROVIDER_ALIASES = {
    "claude": "claude-cli",
    "claude-code": "claude-cli",
    "codex-cli": "codex",
    "copilot": "copilot-cli",
}


def provider_settings(provider: str) -> tuple[str, ...]:
    """The settings of ``OWN_SETTINGS`` a provider reads (none for the others)."""
    name = provider.lower()
    return PROVIDER_SETTINGS.get(PROVIDER_ALIASES.get(name, name), ())


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
