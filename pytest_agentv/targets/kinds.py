"""The target kinds built into pytest-agentv, by AgentV's provider names: a table of the module
that builds each, imported when a target of that kind is first built (a run imports only the
kinds its targets use). Plugins add kinds with the ``pytest_agentv_make_target`` hook, which is
asked first; these answer last."""

from __future__ import annotations

import importlib
from collections.abc import Iterable

from ..errors import ConfigError
from .base import Target, TargetDefinition, TargetServices
from .model import LLM_PROVIDERS

#: Provider name → the module of ``targets/`` whose ``build(target, services)`` makes it. A
#: ``cli`` target with ``provider_batching: true`` is built by ``batch``.
TARGET_KINDS: dict[str, str] = {
    "mock": "mock",
    "cli": "cli",
    **dict.fromkeys(LLM_PROVIDERS, "model"),
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
