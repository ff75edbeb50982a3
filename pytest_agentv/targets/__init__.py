"""Where candidate answers come from, and the catalog that finds and builds each case's target.

All targets share one async interface, ``invoke(case, attempt) -> TargetResponse``. A target that
cannot produce an answer raises ``NotGradedError``: the case is then reported as not graded,
never as a quality failure. The kinds: ``cli`` (one case at a time, or one batch for a whole eval
file), ``model`` (LLM providers), ``python`` (mock, the ``agentv_target`` fixture, recorded
answers).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, Protocol

from ..answers import TargetResponse, response_from
from ..cases import CaseSpec, PreparedCase
from ..errors import AgentvError, ConfigError
from ..llm.client import LlmClient
from ..llm.transports import ModelSpec
from ..llm.usage import PlannedCall, prompt_tokens, unknown_answer
from ..loader.validation import FileWarning
from ..projectfiles import LoadedTargets, Where
from ..schema.suite import MatrixEntry
from ..schema.targets import TargetConfig
from .batch import BatchCliTarget
from .cli import CliTarget, Healthcheck, cli_timeout
from .model import LLM_PROVIDERS, LlmTarget, chat_messages, model_spec
from .python import MockTarget, RecordedTarget

_ENV_REF = re.compile(r"^\$\{\{\s*([A-Za-z0-9_]+)\s*\}\}$")


class Target(Protocol):
    name: str
    judge_target: str | None

    @property
    def timeout(self) -> float | None:
        """Seconds the target enforces itself (a CLI target's ``timeout_seconds``); None: the
        run's ``--agentv-target-timeout`` applies."""

    async def invoke(self, case: PreparedCase, attempt: int) -> TargetResponse: ...


def planned_answer(target: Target, case: PreparedCase) -> tuple[TargetResponse, list[PlannedCall]]:
    """The answer a target would give, as far as it is known without running anything, and the
    model calls it would make (``--agentv-estimate``). A mock's or a recorded answer is known; a
    model target's is known when its reply is in the store; any other answer (a CLI agent's, a
    fixture's) stands in as one reply allowance of text."""
    if isinstance(target, MockTarget):
        return target.answer(case.turn), []
    if isinstance(target, RecordedTarget):
        return target.answer(case), []
    if isinstance(target, LlmTarget):
        messages = chat_messages(case)
        stored = target.client.stored_reply(
            messages,
            temperature=target.temperature,
            max_tokens=target.max_tokens,
            trial=case.attempt,
            protocol="target",
        )
        call = PlannedCall(
            target.client.model, prompt_tokens(messages), stored is not None, target.max_tokens
        )
        return response_from(stored if stored is not None else unknown_answer(), ""), [call]
    return response_from(unknown_answer(), ""), []


def interpolate(
    target: TargetConfig, loaded: LoadedTargets, only: str | None = None
) -> dict[str, Any]:
    """Resolve values that are entirely ``${{ VAR }}`` from the environment, at use time (all
    settings, or ``only`` one)."""
    settings: dict[str, Any] = {}
    for key, value in target.settings.items():
        if only is not None and key != only:
            continue
        if isinstance(value, str) and (match := _ENV_REF.match(value.strip())):
            variable = match.group(1)
            resolved = os.environ.get(variable, "")
            if not resolved:
                raise ConfigError(
                    f"{loaded.where(target, key)}: targets.{target.name}.{key}: environment "
                    f"variable {variable} is not set (the file says {value.strip()})"
                )
            value = resolved
        settings[key] = value
    return settings


def build_target(
    target: TargetConfig,
    loaded: LoadedTargets,
    *,
    folder: Path,
    rootdir: Path,
    llm_client: Callable[[ModelSpec], LlmClient],
    healthchecks: dict[tuple[Path, str], Healthcheck] | None = None,
) -> Target:
    """Build a target; a CLI target's healthcheck is shared through ``healthchecks`` (by targets
    file and name), so that it runs once per run whichever folder builds the target."""
    what = f"target '{target.name}' ({loaded.where(target)})"
    where: Where = partial(loaded.where, target)
    provider = target.provider.lower()
    settings = interpolate(target, loaded)
    if provider == "mock":
        return MockTarget(target.name, settings, where, target.judge_target)
    if provider == "cli":
        checks = {} if healthchecks is None else healthchecks
        check = checks.get((loaded.path, target.name))
        if check is None and settings.get("healthcheck") is not None:
            timeout = cli_timeout(target.name, settings, where)
            check = checks[(loaded.path, target.name)] = Healthcheck(
                target.name, settings["healthcheck"], folder, rootdir, timeout, where
            )
        batching = settings.get("provider_batching", False)
        if not isinstance(batching, bool):
            raise ConfigError(
                f"target '{target.name}' ({where('provider_batching')}): provider_batching "
                "must be true or false"
            )
        kind = BatchCliTarget if batching else CliTarget
        return kind(target.name, settings, folder, rootdir, where, target.judge_target, check)
    if provider in LLM_PROVIDERS:
        spec = model_spec(provider, settings, what)
        return LlmTarget(target.name, llm_client(spec), settings, target.judge_target)
    raise ConfigError(
        f"{what}: provider '{target.provider}' is not supported by pytest-agentv; use mock, cli, "
        f"an LLM provider ({', '.join(sorted(LLM_PROVIDERS))}) or an agentv_target fixture"
    )


#: How many ``use_target`` hops a target may take (AgentV's limit).
MAX_DELEGATION = 10


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


def _entry_target(entry: MatrixEntry, spec: CaseSpec) -> str:
    """The target a matrix entry's ``use_target`` names (``${{ VAR }}``: from the environment)."""
    value = (entry.use_target or "").strip()
    match = _ENV_REF.match(value)
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
        clients: Callable[[ModelSpec], LlmClient],
        *,
        override: str | None = None,
        answers: RecordedTarget | None = None,
    ) -> None:
        self.rootdir = rootdir
        self.clients = clients
        self.override = override
        self.answers = answers
        self._files: dict[Path, LoadedTargets | AgentvError | None] = {}
        self._built: dict[tuple[str, Path], Target] = {}
        self._healthchecks: dict[tuple[Path, str], Healthcheck] = {}
        self._warned: set[tuple[Path, str]] = set()
        self._build_lock = threading.Lock()

    async def aclose(self) -> None:
        """End what the targets still run for the run as a whole (their healthchecks)."""
        for check in list(self._healthchecks.values()):
            await check.aclose()

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

    def target_for(self, spec: CaseSpec) -> Target:
        """The case's target (recorded answers under ``--agentv-answers``), built once per
        folder: pytest's thread (planning) and the plugin's loop may ask at the same time."""
        if self.answers is not None:
            return self.answers
        name = self.target_name(spec)
        folder = spec.loaded.path.parent
        built = self._built.get((name, folder))
        if built is None:
            with self._build_lock:
                built = self._built.get((name, folder))
                if built is None:
                    built = self._built[(name, folder)] = self._build(spec, name, folder)
        return built

    def expect(self, spec: CaseSpec) -> None:
        """Tell a batching target about a case this run will run; a case whose target cannot be
        built is left alone (it reports that itself when it runs)."""
        try:
            target = self.target_for(spec)
        except AgentvError:
            return
        if isinstance(target, BatchCliTarget):
            target.expect(spec)

    def setting_notes(self, spec: CaseSpec) -> list[tuple[str, FileWarning]]:
        """Warnings, the first time a case uses a target, about its settings: those pytest-agentv
        ignores (AgentV settings it does not implement, or keys nobody knows) and placeholders
        written inside quotes."""
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
        return [(str(loaded.path), warning) for warning in loaded.notes.get(name, ())]

    def _build(self, spec: CaseSpec, name: str, folder: Path) -> Target:
        loaded = self.targets_file(folder)
        if loaded is None:
            raise ConfigError(
                f"no target for case '{spec.case.id}': define an 'agentv_target' fixture in a "
                f"conftest.py, or a target named '{name}' in .agentv/targets.yaml"
            )
        entry = spec.matrix_entry if self.override is None else None
        if entry is not None and entry.use_target:
            target = delegated(loaded, _entry_target(entry, spec))
        else:
            target = delegated(loaded, name)
        return build_target(
            target,
            loaded,
            folder=folder,
            rootdir=self.rootdir,
            llm_client=self.clients,
            healthchecks=self._healthchecks,
        )

    def judge_target(self, name: str, folder: Path) -> ModelSpec:
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
