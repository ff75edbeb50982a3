"""``pi-cli``: the Pi coding agent, ``pi --mode json --print --no-session`` with the prompt on
stdin, as AgentV v4.42.4's ``pi-cli.ts`` runs it (``subprovider`` is its ``--provider``,
``model``, ``tools``, ``thinking``; ``system_prompt`` is appended to Pi's own). The API key
goes in the subprovider's variable (``OPENAI_API_KEY``...), never on the command line, where
AgentV puts it. ``base_url`` makes a provider of its own in Pi's ``models.json`` (in the fresh
``HOME``), speaking the subprovider's API (``anthropic-messages``, ``google-generative-ai``,
or OpenAI's completions, ``api_format: responses`` for its Responses API).

Its stream: ``message_end`` events (each message whole: an assistant's text, its
``toolCall`` parts, usage and cost), ``tool_execution_end`` with each call's result and
``isError``, and ``agent_end``, the end of the run. Its ``message_update`` events repeat the
message so far on every delta and are read and dropped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .agent import AgentProgram, AgentTarget, Ending
from .base import TargetDefinition, TargetServices
from .events import Event, Transcript

PI = AgentProgram(
    provider="pi-cli",
    program="pi",
    package="@mariozechner/pi-coding-agent",
    env_prefixes=(
        *("PI_", "ANTHROPIC_", "OPENAI_", "AZURE_OPENAI_", "GEMINI_", "GOOGLE_", "OPENROUTER_"),
        *("GROQ_", "XAI_", "MISTRAL_", "DEEPSEEK_", "CEREBRAS_"),
    ),
    final="agent_end",
    quiet={"PI_OFFLINE": "1", "PI_TELEMETRY": "0", "PI_SKIP_VERSION_CHECK": "1"},
    skip=frozenset({"message_update"}),
    home_vars=("PI_CODING_AGENT_DIR",),
)

#: AgentV's subprovider names that are another in Pi, and each one's API for ``base_url``.
_PROVIDERS = {"azure": "azure-openai-responses", "gemini": "google"}
_APIS = {"anthropic": "anthropic-messages", "google": "google-generative-ai"}


class PiTarget(AgentTarget):
    program = PI

    def __init__(self, target: TargetDefinition) -> None:
        super().__init__(target)
        sub = self.settings.get("subprovider")
        if sub is not None and not isinstance(sub, str):
            raise self.invalid("subprovider", "a provider name (openai, anthropic, google, ...)")
        self.subprovider = _PROVIDERS.get(sub.lower(), sub.lower()) if sub else None
        self.tools = self.settings.get("tools")
        self.thinking = self.settings.get("thinking")
        self.api_format = self.settings.get("api_format", "chat")
        if self.base_url and not self.fresh_home:
            raise self.invalid(
                "base_url",
                "left out with home: inherit (it becomes a provider "
                "in Pi's models.json, which is then the user's)",
            )
        if self.base_url and not self.model:
            raise self.invalid("model", "given with base_url (the model the server serves)")

    def arguments(self, prompt: str) -> tuple[list[str], str]:
        args = ["--mode", "json", "--print", "--no-session"]
        provider = "agentv" if self.base_url else self.subprovider
        if provider:
            args += ["--provider", provider]
        if self.model:
            args += ["--model", self.model]
        if self.tools:
            args += ["--tools", str(self.tools)]
        if self.thinking:
            args += ["--thinking", str(self.thinking)]
        if self.system_prompt:
            args += ["--append-system-prompt", self.system_prompt]
        return args, prompt

    def _key_variable(self) -> str:
        sub = self.subprovider or "openai"
        if sub.startswith("azure"):
            return "AZURE_OPENAI_API_KEY"
        return "GEMINI_API_KEY" if sub == "google" else f"{sub.upper().replace('-', '_')}_API_KEY"

    def variables(self, home: Path | None) -> dict[str, str]:
        key = self._key_variable()
        if self.base_url and home is not None:
            sub = self.subprovider or "openai"
            api = _APIS.get(sub, "openai-responses" if self.api_format == "responses" else "")
            provider = {
                "baseUrl": self.base_url,
                "api": api or "openai-completions",
                "apiKey": key,
                "models": [{"id": self.model}],
            }
            folder = home / ".pi" / "agent"
            folder.mkdir(parents=True)
            models = {"providers": {"agentv": provider}}
            (folder / "models.json").write_text(json.dumps(models), encoding="utf-8")
        return {key: self.api_key} if self.api_key else {}

    def read(self, events: list[Event], transcript: Transcript) -> Ending:
        ending = Ending()
        turns = 0
        for event in events:
            message = event.data.get("message")
            if event.type == "message_end" and isinstance(message, dict):
                if message.get("role") == "assistant":
                    turns += 1
                    _assistant(message, event, transcript, ending)
            elif event.type == "tool_execution_end":
                call_id = event.data.get("toolCallId")
                transcript.result(
                    call_id if isinstance(call_id, str) else None,
                    event.data.get("result"),
                    event.data.get("isError") is True,
                    event.at,
                )
            elif event.type == "agent_end":
                ending.finished = True
        transcript.model_calls = turns
        return ending


def _assistant(message: dict[str, Any], event: Event, transcript: Transcript, end: Ending) -> None:
    """A model's turn: its text, its tool calls, usage and cost; an error ends the run."""
    content = message.get("content")
    for part in content if isinstance(content, list) else ():
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text" and isinstance(part.get("text"), str):
            transcript.say(part["text"])
        elif part.get("type") in ("toolCall", "tool_use") and isinstance(part.get("name"), str):
            call_id = part.get("id") if isinstance(part.get("id"), str) else None
            args = part.get("arguments", part.get("input"))
            transcript.call(part["name"], args, event.at, call_id)
    usage = message.get("usage")
    transcript.add_usage(usage, input="input", output="output", cached="cacheRead")
    cost = usage.get("cost") if isinstance(usage, dict) else None
    transcript.add_cost(cost.get("total") if isinstance(cost, dict) else None)
    stopped = message.get("stopReason")
    failed = stopped in ("error", "aborted")
    end.error = str(message.get("errorMessage") or f"the model call {stopped}") if failed else None


def build(target: TargetDefinition, services: TargetServices) -> PiTarget:
    return PiTarget(target)
