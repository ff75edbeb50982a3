"""Where candidate answers come from: mock, CLI, litellm and ``agentv_target`` fixture targets.

All targets share one async interface, ``invoke(case, attempt) -> TargetResponse``. A target that
cannot produce an answer raises ``NotGradedError``: the case is then reported as not graded,
never as a quality failure.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import re
import shlex
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from .cases import CaseSpec, PreparedCase
from .errors import ConfigError, NotGradedError
from .judge import LlmClient, ModelSpec
from .loader import LoadedTargets, load_targets_file
from .models import TargetConfig, render_content
from .paths import display_path, resolve_reference, search_roots
from .processes import run_process
from .redaction import redact

DEFAULT_MOCK_RESPONSE = "Mock target response. Set 'response' on the mock target to change it."
DEFAULT_CLI_TIMEOUT = 120.0
TARGETS_FILE_NAMES = (".agentv/targets.yaml", ".agentv/targets.yml", "targets.yaml", "targets.yml")
_ENV_REF = re.compile(r"^\$\{\{\s*([A-Za-z0-9_]+)\s*\}\}$")

#: AgentV providers that are LLM APIs, and the litellm prefix each maps onto.
LLM_PROVIDERS = {
    "litellm": "",
    "openai": "openai",
    "azure": "azure",
    "anthropic": "anthropic",
    "gemini": "gemini",
    "openrouter": "openrouter",
}


@dataclass(frozen=True)
class ToolCall:
    """One tool call an answer reports: AgentV's ``{tool, input, output, duration_ms}``, or an
    OpenAI-style ``{function: {name, arguments}}`` as Python agents often return them."""

    name: str
    args: Any = None
    duration_ms: float | None = None
    error: bool = False


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def tool_calls(messages: Iterable[Mapping[str, Any]]) -> list[ToolCall]:
    """The tool calls of ``output_messages``, in order."""
    found: list[ToolCall] = []
    for message in messages:
        calls = message.get("tool_calls") if isinstance(message, Mapping) else None
        for call in calls if isinstance(calls, list) else ():
            if not isinstance(call, Mapping):
                continue
            function = call.get("function")
            function = function if isinstance(function, Mapping) else {}
            name = call.get("tool", call.get("name", function.get("name", "unknown")))
            if "input" in call:
                args = call["input"]
            elif "args" in call or "arguments" in call:
                args = call.get("args", call.get("arguments"))
            else:
                args = function.get("arguments")
            if isinstance(args, str):
                try:
                    args = json.loads(args)
                except ValueError:
                    pass
            found.append(
                ToolCall(
                    name=str(name),
                    args=args,
                    duration_ms=_number(call.get("duration_ms")),
                    error=bool(call.get("error")),
                )
            )
    return found


@dataclass(frozen=True)
class TargetResponse:
    text: str
    output_messages: tuple[dict[str, Any], ...] = ()
    token_usage: dict[str, Any] | None = None
    cost_usd: float | None = None
    duration_ms: float | None = None

    def trace_summary(self) -> dict[str, Any] | None:
        """AgentV's ``trace_summary``: tool calls by name, errors, usage, cost and duration,
        and the durations of each tool's calls when the answer reports them."""
        calls = tool_calls(self.output_messages)
        if (
            not calls
            and self.token_usage is None
            and self.cost_usd is None
            and self.duration_ms is None
        ):
            return None
        by_name: dict[str, int] = {}
        durations: dict[str, list[float]] = {}
        for call in calls:
            by_name[call.name] = by_name.get(call.name, 0) + 1
            if call.duration_ms is not None:
                durations.setdefault(call.name, []).append(call.duration_ms)
        summary: dict[str, Any] = {
            "event_count": len(calls),
            "tool_names": sorted(by_name),
            "tool_calls_by_name": by_name,
            "error_count": sum(1 for call in calls if call.error),
        }
        if self.token_usage is not None:
            summary["token_usage"] = self.token_usage
        if self.cost_usd is not None:
            summary["cost_usd"] = self.cost_usd
        if self.duration_ms is not None:
            summary["duration_ms"] = self.duration_ms
        if durations:
            summary["tool_durations"] = durations
        return summary


class Target(Protocol):
    name: str
    judge_target: str | None

    async def invoke(self, case: PreparedCase, attempt: int) -> TargetResponse: ...


def _candidate(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") == "assistant":
            return render_content(message.get("content") or "")
    return render_content(messages[-1].get("content") or "") if messages else ""


def response_from(value: Any, what: str) -> TargetResponse:
    """Accept text, a list of messages, or ``{text}`` / ``{output_messages, token_usage, ...}``."""
    if isinstance(value, TargetResponse):
        return value
    if isinstance(value, str):
        return TargetResponse(
            text=value, output_messages=({"role": "assistant", "content": value},)
        )
    if isinstance(value, list) and all(isinstance(m, dict) for m in value):
        return TargetResponse(text=_candidate(value), output_messages=tuple(value))
    if isinstance(value, dict):
        messages = value.get("output_messages")
        if messages is not None and not (
            isinstance(messages, list) and all(isinstance(m, dict) for m in messages)
        ):
            raise NotGradedError(
                f"{what} returned 'output_messages' that is not a list of messages"
            )
        text = value.get("text")
        if text is None and messages is None:
            raise NotGradedError(f"{what} returned an object without 'text' or 'output_messages'")
        messages = messages or [{"role": "assistant", "content": text}]
        cost = value.get("cost_usd")
        duration = value.get("duration_ms")
        return TargetResponse(
            text=str(text) if text is not None else _candidate(messages),
            output_messages=tuple(messages),
            token_usage=value.get("token_usage")
            if isinstance(value.get("token_usage"), dict)
            else None,
            cost_usd=float(cost) if isinstance(cost, (int, float)) else None,
            duration_ms=float(duration) if isinstance(duration, (int, float)) else None,
        )
    raise NotGradedError(
        f"{what} returned {type(value).__name__}; return text, a list of messages, "
        "or a mapping with 'text' or 'output_messages'"
    )


def parse_output_text(text: str, what: str) -> TargetResponse:
    """CLI output: JSON ``{text}`` / ``{output_messages, ...}``, or plain text."""
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            data = json.loads(stripped)
        except ValueError:
            data = None
        if isinstance(data, dict) and ("text" in data or "output_messages" in data):
            return response_from(data, what)
    return response_from(text.rstrip("\n"), what)


class MockTarget:
    """Answers every case with the same canned ``response`` after an optional delay."""

    def __init__(
        self, name: str, settings: dict[str, Any], judge_target: str | None = None
    ) -> None:
        self.name = name
        self.judge_target = judge_target
        response = settings.get("response", DEFAULT_MOCK_RESPONSE)
        self.response = response if isinstance(response, (str, dict, list)) else str(response)
        delay = settings.get("delay_ms", 0)
        self.delay = float(delay) / 1000 if isinstance(delay, (int, float)) else 0.0

    async def invoke(self, case: PreparedCase, attempt: int) -> TargetResponse:
        if self.delay:
            await asyncio.sleep(self.delay)
        value = self.response
        if isinstance(value, dict) and not ("text" in value or "output_messages" in value):
            value = json.dumps(value)
        return response_from(value, f"mock target '{self.name}'")


class CliTarget:
    """Runs ``command_template`` through the shell with the case's values substituted.

    Placeholders: ``{PROMPT}``, ``{EVAL_ID}``, ``{ATTEMPT}``, ``{OUTPUT_FILE}``, ``{FILES}``, all
    shell-quoted. The answer is read from ``{OUTPUT_FILE}`` when the template uses it, else from
    stdout.
    """

    def __init__(
        self,
        name: str,
        settings: dict[str, Any],
        folder: Path,
        rootdir: Path,
        judge_target: str | None = None,
    ) -> None:
        self.name = name
        self.judge_target = judge_target
        template = settings.get("command_template")
        if not isinstance(template, str) or not template.strip():
            raise ConfigError(f"cli target '{name}' needs a 'command_template' string")
        self.template = template
        cwd = settings.get("cwd")
        self.cwd = (
            resolve_reference(str(cwd), start=folder, rootdir=rootdir, what="cwd")
            if cwd is not None
            else folder
        )
        timeout = settings.get("timeout_seconds", DEFAULT_CLI_TIMEOUT)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise ConfigError(f"cli target '{name}': timeout_seconds must be a number > 0")
        self.timeout = float(timeout)

    async def invoke(self, case: PreparedCase, attempt: int) -> TargetResponse:
        what = f"cli target '{self.name}'"
        with tempfile.TemporaryDirectory(prefix="agentv-") as scratch:
            output_file = Path(scratch) / "output.txt"
            values = {
                "PROMPT": case.question,
                "EVAL_ID": case.id,
                "ATTEMPT": str(attempt),
                "OUTPUT_FILE": str(output_file),
            }
            command = self.template
            for name, value in values.items():
                command = command.replace("{" + name + "}", shlex.quote(value))
            command = command.replace("{FILES}", " ".join(shlex.quote(f) for f in case.input_files))
            started = time.monotonic()
            result = await run_process(command, cwd=self.cwd, timeout=self.timeout)
            failure = result.failure(what, self.timeout)
            if failure:
                raise NotGradedError(redact(failure))
            if "{OUTPUT_FILE}" in self.template:
                if not output_file.exists():
                    raise NotGradedError(f"{what} exited 0 but wrote nothing to {{OUTPUT_FILE}}")
                text = output_file.read_text(encoding="utf-8", errors="replace")
            else:
                text = result.stdout.decode("utf-8", errors="replace")
        if not text.strip():
            raise NotGradedError(f"{what} exited 0 but produced an empty answer")
        response = parse_output_text(text, what)
        if response.duration_ms is None:
            elapsed = (time.monotonic() - started) * 1000
            response = TargetResponse(
                response.text,
                response.output_messages,
                response.token_usage,
                response.cost_usd,
                round(elapsed, 1),
            )
        return response


def chat_messages(case: PreparedCase) -> list[dict[str, str]]:
    return [{"role": m["role"], "content": str(m["content"])} for m in case.input_messages]


class LlmTarget:
    """Asks an LLM through litellm; replies go through the record/replay store like judges'."""

    def __init__(
        self,
        name: str,
        client: LlmClient,
        settings: dict[str, Any],
        judge_target: str | None = None,
    ) -> None:
        self.name = name
        self.client = client
        self.judge_target = judge_target
        temperature = settings.get("temperature")
        self.temperature = float(temperature) if isinstance(temperature, (int, float)) else None
        max_tokens = settings.get("max_tokens", settings.get("max_output_tokens"))
        self.max_tokens = int(max_tokens) if isinstance(max_tokens, int) else None

    def _accept(self, text: str) -> str:
        """An empty reply (a content filter, say) is no answer: never stored, not graded."""
        if not text.strip():
            raise NotGradedError(
                f"target '{self.name}' ({self.client.model}) returned an empty reply"
            )
        return text

    async def invoke(self, case: PreparedCase, attempt: int) -> TargetResponse:
        text, reply = await self.client.complete(
            chat_messages(case),
            accept=self._accept,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            trial=attempt,
            protocol="target",
            label=f"target '{self.name}' ({self.client.model})",
        )
        usage = {"input": reply.prompt_tokens, "output": reply.completion_tokens}
        return TargetResponse(
            text=text,
            output_messages=({"role": "assistant", "content": text},),
            token_usage=usage if not reply.cached else None,
            cost_usd=reply.cost_usd,
        )


TargetFunction = Callable[[PreparedCase], Any]


class FixtureTarget:
    """The callable returned by an ``agentv_target`` fixture (sync or async).

    A sync callable is called in pytest's own thread, like any test code; an async one is
    awaited on the plugin's event loop.
    """

    judge_target: str | None = None

    def __init__(self, function: TargetFunction) -> None:
        self.name = "agentv_target"
        self.function = function
        self.what = (
            f"agentv_target fixture ({getattr(function, '__name__', type(function).__name__)})"
        )

    @property
    def is_async(self) -> bool:
        method = type(self.function).__call__
        return inspect.iscoroutinefunction(self.function) or inspect.iscoroutinefunction(method)

    def _failed(self, exc: Exception) -> NotGradedError:
        return NotGradedError(f"{self.what} raised {type(exc).__name__}: {redact(str(exc))}")

    def call_sync(self, case: PreparedCase) -> TargetResponse:
        try:
            value = self.function(case)
        except NotGradedError:
            raise
        except Exception as exc:
            raise self._failed(exc) from exc
        if inspect.isawaitable(value):
            close = getattr(value, "close", None)
            if callable(close):
                close()
            raise NotGradedError(f"{self.what} returned an awaitable; define it with 'async def'")
        return response_from(value, self.what)

    async def invoke(self, case: PreparedCase, attempt: int) -> TargetResponse:
        try:
            value = self.function(case)
            if inspect.isawaitable(value):
                value = await value
        except NotGradedError:
            raise
        except Exception as exc:
            raise self._failed(exc) from exc
        return response_from(value, self.what)


def interpolate(target: TargetConfig, loaded: LoadedTargets) -> dict[str, Any]:
    """Resolve values that are entirely ``${{ VAR }}`` from the environment, at use time."""
    settings: dict[str, Any] = {}
    for key, value in target.settings.items():
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


def model_spec(provider: str, settings: dict[str, Any], what: str) -> ModelSpec:
    """Map AgentV's LLM providers (and plain litellm model strings) onto a litellm model."""
    model = settings.get("model") or settings.get("deployment")
    if not isinstance(model, str) or not model.strip():
        raise ConfigError(f"{what} needs a 'model'")
    prefix = LLM_PROVIDERS[provider]
    if prefix and not model.startswith(prefix + "/"):
        model = f"{prefix}/{model}"
    base = settings.get("api_base") or settings.get("endpoint") or settings.get("base_url")
    key = settings.get("api_key")
    version = settings.get("api_version") or settings.get("version")
    return ModelSpec(
        model=model,
        api_base=str(base) if base else None,
        api_key=str(key) if key else None,
        api_version=str(version) if version else None,
    )


def build_target(
    target: TargetConfig,
    loaded: LoadedTargets,
    *,
    folder: Path,
    rootdir: Path,
    llm_client: Callable[[ModelSpec], LlmClient],
) -> Target:
    what = f"target '{target.name}' ({loaded.where(target)})"
    provider = target.provider.lower()
    settings = interpolate(target, loaded)
    if provider == "mock":
        return MockTarget(target.name, settings, target.judge_target)
    if provider == "cli":
        return CliTarget(target.name, settings, folder, rootdir, target.judge_target)
    if provider in LLM_PROVIDERS:
        spec = model_spec(provider, settings, what)
        return LlmTarget(target.name, llm_client(spec), settings, target.judge_target)
    raise ConfigError(
        f"{what}: provider '{target.provider}' is not supported by pytest-agentv; use mock, cli, "
        f"an LLM provider ({', '.join(sorted(LLM_PROVIDERS))}) or an agentv_target fixture"
    )


class TargetCatalog:
    """Targets files found from an eval file's folder up to the rootdir (or named by
    ``--agentv-targets``), loaded once each, and the targets built from them, once per folder."""

    def __init__(
        self,
        rootdir: Path,
        clients: Callable[[ModelSpec], LlmClient],
        *,
        targets_file: Path | None = None,
        override: str | None = None,
    ) -> None:
        self.rootdir = rootdir
        self.clients = clients
        self.targets_file_option = targets_file
        self.override = override
        self._paths: dict[Path, Path | None] = {}
        self._loaded: dict[Path, LoadedTargets] = {}
        self._built: dict[tuple[str, Path], Target] = {}
        self._lock = threading.Lock()

    def _path(self, folder: Path) -> Path | None:
        if self.targets_file_option is not None:
            return self.targets_file_option
        if folder not in self._paths:
            self._paths[folder] = next(
                (
                    root / name
                    for root in search_roots(folder, self.rootdir)
                    for name in TARGETS_FILE_NAMES
                    if (root / name).is_file()
                ),
                None,
            )
        return self._paths[folder]

    def targets_file(self, folder: Path) -> LoadedTargets | None:
        path = self._path(folder)
        if path is None:
            return None
        with self._lock:
            if path not in self._loaded:
                self._loaded[path] = load_targets_file(path, display_path(path, self.rootdir))
            return self._loaded[path]

    def target_for(self, spec: CaseSpec) -> Target:
        """``--agentv-target`` > case ``execution.target`` > file target > ``default``."""
        name = self.override or spec.target_name or "default"
        folder = spec.loaded.path.parent
        built = self._built.get((name, folder))
        if built is None:
            built = self._built[(name, folder)] = self._build(spec, name, folder)
        return built

    def _build(self, spec: CaseSpec, name: str, folder: Path) -> Target:
        loaded = self.targets_file(folder)
        if loaded is None:
            raise ConfigError(
                f"no target for case '{spec.case.id}': define an 'agentv_target' fixture in a "
                f"conftest.py, or a target named '{name}' in .agentv/targets.yaml"
            )
        target = next((t for t in loaded.model.targets if t.name == name), None)
        if target is None:
            known = ", ".join(t.name for t in loaded.model.targets) or "none"
            raise ConfigError(
                f"target '{name}' is not defined in {loaded.display} (known: {known})"
            )
        return build_target(
            target, loaded, folder=folder, rootdir=self.rootdir, llm_client=self.clients
        )

    def judge_target(self, name: str, folder: Path) -> ModelSpec:
        """The model of a target's ``judge_target``, which must be an LLM target."""
        loaded = self.targets_file(folder)
        target = next((t for t in loaded.model.targets if t.name == name), None) if loaded else None
        if loaded is None or target is None:
            raise ConfigError(f"judge_target '{name}' is not defined in a targets file")
        provider = target.provider.lower()
        if provider not in LLM_PROVIDERS:
            raise ConfigError(
                f"{loaded.where(target)}: judge_target '{name}' must be an LLM target "
                f"({', '.join(sorted(LLM_PROVIDERS))}), not '{target.provider}'"
            )
        return model_spec(provider, interpolate(target, loaded), f"judge_target '{name}'")
