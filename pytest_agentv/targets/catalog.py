"""The targets files of a run and the targets built from them: each eval file's folder has the
targets file collection found for it (or why it has none); a case's target is found by name
(``--agentv-target`` > the case's > the file's > ``default``), followed through ``use_target``,
its ``${{ VAR }}`` settings resolved, and built once per folder by the ``make`` it is given
(the ``pytest_agentv_make_target`` hook, the built-in kinds answering last). The files are
read at collection and a selected case's target is resolved before it runs: a running case never
goes back to a targets file.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from ..cases import CaseSpec
from ..errors import AgentvError, ConfigError
from ..llm.transports import ModelSpec
from ..loader.validation import FileWarning
from ..projectfiles import LoadedTargets
from ..schema.suite import MatrixEntry
from ..schema.targets import TargetConfig
from .base import Target, TargetDefinition
from .kinds import AGENT_PROVIDERS, OUT_OF_SCOPE, TARGET_KINDS, known_providers
from .model import LLM_PROVIDERS, model_spec
from .recorded import RecordedTarget

#: A setting that is entirely ``${{ VAR }}``: the value of an environment variable.
ENV_REF = re.compile(r"^\$\{\{\s*([A-Za-z0-9_]+)\s*\}\}$")

#: How many ``use_target`` hops a target may take (AgentV's limit).
MAX_DELEGATION = 10

#: Builds a target from its definition: the hook's answer, None when nobody knows its provider.
Make = Callable[[TargetDefinition], "Target | None"]


def interpolate(
    target: TargetConfig, loaded: LoadedTargets, only: str | None = None
) -> dict[str, Any]:
    """Resolve values that are entirely ``${{ VAR }}`` from the environment, when the target is
    used (all settings, or ``only`` one). A coding agent's setting whose variable is not set is
    as if it were not written (AgentV's agents fall back on their defaults)."""
    settings: dict[str, Any] = {}
    optional = target.provider.lower() in AGENT_PROVIDERS
    for key, value in target.settings.items():
        if only is not None and key != only:
            continue
        if isinstance(value, str) and (match := ENV_REF.match(value.strip())):
            variable = match.group(1)
            resolved = os.environ.get(variable, "")
            if not resolved and optional:
                continue
            if not resolved:
                raise ConfigError(
                    f"{loaded.where(target, key)}: targets.{target.name}.{key}: environment "
                    f"variable {variable} is not set (the file says {value.strip()})"
                )
            value = resolved
        settings[key] = value
    return settings


def delegated(loaded: LoadedTargets, name: str) -> TargetConfig:
    """The target ``name`` stands for, following ``use_target`` (AgentV v4: a target name, or
    ``${{ VAR }}`` naming one from the environment) to a target with a provider."""
    by_name = {t.name: t for t in loaded.model.targets}
    seen: list[str] = []
    while len(seen) <= MAX_DELEGATION:
        target = by_name.get(name)
        if target is None:
            via = f" (use_target of '{seen[-1]}')" if seen else ""
            known = ", ".join(by_name) or "none"
            raise ConfigError(
                f"target '{name}'{via} is not defined in {loaded.display} (known: {known})"
            )
        if name in seen:
            raise ConfigError(f"use_target goes round in a circle: {' -> '.join([*seen, name])}")
        seen.append(name)
        if "use_target" not in target.settings:
            return target
        name = str(interpolate(target, loaded, only="use_target").get("use_target", "")).strip()
        if not name:
            raise ConfigError(f"{loaded.where(target, 'use_target')}: use_target is empty")
    raise ConfigError(f"use_target: more than {MAX_DELEGATION} hops from '{seen[0]}'")


def _entry_target(entry: MatrixEntry) -> str:
    """The target a matrix entry's ``use_target`` names (``${{ VAR }}``: from the environment)."""
    value = (entry.use_target or "").strip()
    match = ENV_REF.match(value)
    if match is None:
        return value
    resolved = os.environ.get(match.group(1), "").strip()
    if not resolved:
        raise ConfigError(
            f"matrix target '{entry.name}': use_target says {value}, but the "
            f"environment variable {match.group(1)} is not set; set it to a target's name"
        )
    return resolved


class TargetCatalog:
    """The targets file of each eval file's folder (read at collection and handed over with
    ``know``), and the targets built from them, once per folder."""

    def __init__(
        self,
        rootdir: Path,
        *,
        override: str | None = None,
        answers: RecordedTarget | None = None,
    ) -> None:
        self.rootdir = rootdir
        self.override = override
        self.answers = answers
        self._files: dict[Path, LoadedTargets | AgentvError | None] = {}
        self._built: dict[tuple[str, Path], Target | AgentvError] = {}
        self._warned: set[tuple[Path, str]] = set()
        #: Providers the hook answered that are not built in, for errors about unknown ones.
        self.added: set[str] = set()

    def know(self, folder: Path, found: LoadedTargets | AgentvError | None) -> None:
        """The targets file of a folder of eval files, as collection read it (or why it could
        not): its cases use it, or are not graded for that reason."""
        self._files[folder] = found

    def targets_file(self, folder: Path) -> LoadedTargets | None:
        found = self._files.get(folder)
        if isinstance(found, AgentvError):
            raise ConfigError(str(found))
        return found

    def target_name(self, spec: CaseSpec) -> str:
        """``--agentv-target`` > case ``execution.target`` > file target > ``default``."""
        return self.override or spec.target_name or "default"

    def target_for(self, spec: CaseSpec, make: Make) -> Target:
        """The case's target (recorded answers under ``--agentv-answers``), built once per
        folder; raises ``AgentvError`` for one that cannot be had, every time it is asked."""
        if self.answers is not None:
            return self.answers
        name = self.target_name(spec)
        if spec.matrix_entry is not None and self.override is None:
            name = (spec.matrix_entry.use_target and _entry_target(spec.matrix_entry)) or name
        folder = spec.loaded.path.parent
        built = self._built.get((name, folder))
        if built is None:
            try:
                built = self._build(spec, name, folder, make)
            except AgentvError as exc:
                built = exc
            self._built[(name, folder)] = built
        if isinstance(built, AgentvError):
            raise built
        return built

    def built(self) -> list[Target]:
        """The targets built so far, each once."""
        found = {id(t): t for t in self._built.values() if not isinstance(t, AgentvError)}
        return list(found.values())

    def setting_notes(self, spec: CaseSpec) -> list[tuple[str, FileWarning]]:
        """Warnings, the first time a case uses a built-in provider's target, about its
        settings: those pytest-agentv ignores (AgentV settings it does not implement, or keys
        nobody knows) and placeholders written inside quotes."""
        if self.answers is not None:
            return []
        try:
            loaded = self.targets_file(spec.loaded.path.parent)
        except AgentvError:
            return []
        name = self.target_name(spec)
        if loaded is None or (loaded.path, name) in self._warned:
            return []
        self._warned.add((loaded.path, name))
        provider = next((t.provider for t in loaded.model.targets if t.name == name), "")
        if provider and provider.lower() not in TARGET_KINDS:
            return []  # a plugin's provider: its settings are the plugin's to read
        return [(str(loaded.path), warning) for warning in loaded.notes.get(name, ())]

    def _build(self, spec: CaseSpec, name: str, folder: Path, make: Make) -> Target:
        loaded = self.targets_file(folder)
        if loaded is None:
            raise ConfigError(
                f"no target for case '{spec.case.id}': define an 'agentv_target' fixture in a "
                f"conftest.py, or a target named '{name}' in .agentv/targets.yaml"
            )
        target = delegated(loaded, name)
        definition = TargetDefinition(
            name=target.name,
            provider=target.provider,
            settings=interpolate(target, loaded),
            folder=folder,
            rootdir=self.rootdir,
            judge_target=target.judge_target,
            file=loaded.path,
            where=partial(loaded.where, target),
        )
        built = make(definition)
        if built is None:
            raise ConfigError(f"{definition.what}: {self.unknown(definition.provider)}")
        if definition.provider.lower() not in TARGET_KINDS:
            self.added.add(definition.provider)
        return built

    def unknown(self, provider: str) -> str:
        reason = OUT_OF_SCOPE.get(provider.lower())
        if reason is not None:
            return f"AgentV's provider '{provider}' {reason}"
        known = ", ".join(known_providers(self.added))
        return (
            f"provider '{provider}' is not supported by pytest-agentv; known: {known} (or an "
            "agentv_target fixture; plugins add providers with the pytest_agentv_make_target "
            "hook)"
        )

    def judge_spec(self, name: str, folder: Path) -> ModelSpec:
        """The model of a target's ``judge_target``, which must be an LLM target."""
        loaded = self.targets_file(folder)
        if loaded is None or all(t.name != name for t in loaded.model.targets):
            raise ConfigError(f"judge_target '{name}' is not defined in a targets file")
        target = delegated(loaded, name)
        provider = target.provider.lower()
        if provider not in LLM_PROVIDERS:
            raise ConfigError(
                f"{loaded.where(target)}: judge_target '{name}' must be an LLM target "
                f"({', '.join(sorted(LLM_PROVIDERS))}), not '{target.provider}'"
            )
        return model_spec(provider, interpolate(target, loaded), f"judge_target '{name}'")
