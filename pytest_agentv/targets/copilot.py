"""``copilot-cli`` (also ``copilot``): GitHub's Copilot CLI, ``copilot --output-format json``
with the prompt on stdin, ``--allow-all-tools --yolo`` unless ``bypass_permissions: false``.
AgentV v4.42.4 drives it over ACP (JSON-RPC on stdio, through a TypeScript SDK); its JSON
output is the same session events that ``copilot-log`` reads from ``events.jsonl``, read here
by ``read_copilot`` for both.

The events: ``assistant.message`` (its text and ``toolRequests``), ``tool.execution_start`` /
``tool.execution_complete`` (each call's result; one ``rejected`` or ``denied`` was refused a
permission), ``skill.invoked``, ``session.usage_record`` (a model call's tokens and cost, in
``events.jsonl``), and the end: ``result`` on stdout, ``session.shutdown`` in a session's file.
``base_url`` is Copilot's bring-your-own-key provider (``COPILOT_PROVIDER_BASE_URL``, of
``subprovider`` type openai, azure or anthropic, ``api_format`` its wire API), which also turns
Copilot's offline mode on: no GitHub sign-in, telemetry or updates.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .agent import AgentProgram, AgentTarget, Ending
from .base import TargetDefinition, TargetServices
from .events import Event, Transcript, number

COPILOT = AgentProgram(
    provider="copilot-cli",
    program="copilot",
    package="@github/copilot",
    env_prefixes=("COPILOT_", "GH_TOKEN", "GITHUB_TOKEN", "GH_HOST"),
    final="result",
    skip=frozenset({"assistant.message_delta", "assistant.tool_call_delta"}),
    home_vars=("COPILOT_HOME",),
)

_WIRE = {"chat": "completions", "responses": "responses"}


class CopilotTarget(AgentTarget):
    program = COPILOT

    def __init__(self, target: TargetDefinition) -> None:
        super().__init__(target)
        self.subprovider = self.settings.get("subprovider")
        if self.subprovider not in (None, "openai", "azure", "anthropic"):
            raise self.invalid("subprovider", "openai, azure or anthropic (Copilot's providers)")
        self.api_format = self.settings.get("api_format")

    def arguments(self, prompt: str) -> tuple[list[str], str]:
        args = ["--output-format", "json", "--disable-client-telemetry"]
        if self.bypass:
            args += ["--allow-all-tools", "--yolo"]
        if self.model:
            args += ["--model", self.model]
        return args, self.with_system_prompt(prompt)

    def variables(self, home: Path | None) -> dict[str, str]:
        if not self.base_url:
            return {}
        found = {"COPILOT_PROVIDER_BASE_URL": self.base_url, "COPILOT_OFFLINE": "true"}
        if self.subprovider:
            found["COPILOT_PROVIDER_TYPE"] = str(self.subprovider)
        if self.api_key:
            found["COPILOT_PROVIDER_API_KEY"] = self.api_key
        if self.api_format:
            found["COPILOT_PROVIDER_WIRE_API"] = _WIRE[str(self.api_format)]
        return found

    def read(self, events: list[Event], transcript: Transcript) -> Ending:
        return read_copilot(events, transcript)


def read_copilot(events: list[Event], transcript: Transcript) -> Ending:
    """Copilot's session events (its JSON output, or a session's ``events.jsonl``)."""
    ending = Ending()
    names: dict[str, str] = {}
    for event in events:
        data = event.data.get("data")
        data = data if isinstance(data, dict) else {}
        kind = event.type
        if kind == "assistant.message":
            said_by = _str(data.get("messageId"))
            if isinstance(data.get("content"), str):
                transcript.say(data["content"], said_by)
            requests = data.get("toolRequests")
            for ask in requests if isinstance(requests, list) else ():
                if isinstance(ask, dict) and isinstance(ask.get("name"), str):
                    call_id = _str(ask.get("toolCallId"))
                    names[call_id or ""] = ask["name"]
                    transcript.call(ask["name"], ask.get("arguments"), event.at, call_id, said_by)
        elif kind == "tool.execution_start" and isinstance(data.get("toolName"), str):
            call_id = _str(data.get("toolCallId"))
            names[call_id or ""] = data["toolName"]
            if call_id is None or not transcript.made(call_id):
                transcript.call(data["toolName"], data.get("arguments"), event.at, call_id)
        elif kind == "tool.execution_complete":
            call_id = _str(data.get("toolCallId"))
            error = data.get("error")
            if isinstance(error, dict) and error.get("code") in ("rejected", "denied"):
                ending.refused.append(names.get(call_id or "", "a tool"))
            output = data.get("result", error)
            transcript.result(call_id, output, data.get("success") is not True, event.at)
        elif kind == "skill.invoked" and isinstance(data.get("name"), str):
            transcript.call("Skill", {"skill": data["name"]}, event.at, None)
        elif kind == "session.usage_record":
            _usage(data.get("usage"), transcript)
        elif kind == "session.shutdown":
            ending.finished = True
            if transcript.usage is None:
                _metrics(data.get("modelMetrics"), transcript)
        elif kind == "result":
            ending.finished = True
            code = number(event.data.get("exitCode"))
            if code:
                ending.error = f"its result says exit code {code:g}"
            usage = event.data.get("usage")
            if isinstance(usage, dict):
                transcript.duration_ms = number(usage.get("sessionDurationMs"))
        elif kind.endswith(".error"):
            ending.error = str(data.get("message") or kind)
    return ending


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _usage(usage: Any, transcript: Transcript) -> None:
    """One model call's tokens and cost (``session.usage_record``)."""
    if not isinstance(usage, dict):
        return
    names = {"input": "inputTokens", "output": "outputTokens", "cached": "cacheReadTokens"}
    transcript.add_usage(usage, **names)
    transcript.add_cost(usage.get("cost"))
    transcript.model_calls = (transcript.model_calls or 0) + 1


def _metrics(metrics: Any, transcript: Transcript) -> None:
    """The session's tokens by model (``session.shutdown``), as AgentV reads them."""
    for entry in metrics.values() if isinstance(metrics, dict) else ():
        usage = entry.get("usage") if isinstance(entry, dict) else None
        transcript.add_usage(usage, input="inputTokens", output="outputTokens")


def build(target: TargetDefinition, services: TargetServices) -> CopilotTarget:
    return CopilotTarget(target)
