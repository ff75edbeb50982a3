"""The target kinds built into pytest-agentv, by AgentV's provider names: a table of the module
that builds each, imported when a target of that kind is first built (a run imports only the
kinds its targets use). Plugins add kinds with the ``pytest_agentv_make_target`` hook, which is
asked first; these answer last."""

from __future__ import annotations

import importlib
from collections.abc import Iterable

from ..errors import ConfigError
from ..schema.targets import PROVIDER_ALIASES
from .base import Target, TargetDefinition, TargetServices
from .model import LLM_PROVIDERS

#: The coding agents (AgentV's provider names, and ``gemini-cli``: AgentV's ``gemini`` is the
#: model), each run through its own CLI by the module named.
AGENTS = {
    "claude-cli": "claude",
    "codex": "codex",
    "gemini-cli": "gemini",
    "copilot-cli": "copilot",
    "pi-cli": "pi",
}

#: Provider name → the module of ``targets/`` whose ``build(target, services)`` makes it. A
#: ``cli`` target with ``provider_batching: true`` is built by ``batch``.
TARGET_KINDS: dict[str, str] = {
    "mock": "mock",
    "cli": "cli",
    **dict.fromkeys(LLM_PROVIDERS, "model"),
    **AGENTS,
    **{alias: AGENTS[name] for alias, name in PROVIDER_ALIASES.items()},
    "copilot-log": "copilotlog",
    "replay": "replay",
}

#: The providers whose settings fall back on their defaults when their ``${{ VAR }}`` is unset.
AGENT_PROVIDERS = frozenset(
    name for name, module in TARGET_KINDS.items() if module in (*AGENTS.values(), "copilotlog")
)

_SDK = (
    "runs the agent through its TypeScript SDK inside AgentV's own Node process, which a "
    "Python test run does not have; use provider: {} (the same agent, through its CLI)"
)
#: AgentV providers pytest-agentv does not run, and why.
OUT_OF_SCOPE = {
    "claude-sdk": _SDK.format("claude-cli"),
    "copilot-sdk": _SDK.format("copilot-cli"),
    "pi-coding-agent": _SDK.format("pi-cli"),
    "pi": _SDK.format("pi-cli"),
    "vscode": "drives a VS Code window through a person's profile, which a test run cannot "
    "script; use provider: copilot-cli for Copilot's agent",
    "vscode-insiders": "drives a VS Code window through a person's profile, which a test run "
    "cannot script; use provider: copilot-cli for Copilot's agent",
    "cc-mirror": "looks up a Claude Code variant under ~/.cc-mirror; use provider: claude-cli "
    "with 'executable' naming the variant's program",
    "agentv": "is AgentV's own grader model (a 'provider:model' string run by AgentV's "
    "pi-ai); use an LLM provider (openai, anthropic, gemini, ...) with its model",
    "transcript": "is how AgentV replays imported transcripts, not a target a file names; use "
    "provider: replay",
}


def builtin_target(target: TargetDefinition, services: TargetServices) -> Target | None:
    """The built-in kind's target for this definition; None for a provider none of them is."""
    provider = target.provider.lower()
    module = TARGET_KINDS.get(provider)
    if module is None:
        return None
    if provider == "cli":
        batching = target.settings.get("provider_batching", False)
        if not isinstance(batching, bool):
            raise ConfigError(
                f"target '{target.name}' ({target.where('provider_batching')}): "
                "provider_batching must be true or false"
            )
        module = "batch" if batching else module
    built: Target = importlib.import_module(f".{module}", __package__).build(target, services)
    return built


def known_providers(added: Iterable[str] = ()) -> list[str]:
    """Every provider a targets file may name: the built-in ones and those hooks answered."""
    return sorted({*TARGET_KINDS, *added})
