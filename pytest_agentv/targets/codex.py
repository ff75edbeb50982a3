"""``codex`` (also ``codex-cli``): OpenAI's Codex CLI, ``codex exec --json`` with the prompt on
stdin, as AgentV v4.42.4's ``codex-cli.ts`` runs it (its ``codex.ts`` drives the same program
through ``@openai/codex-sdk``, which reads the same events). ``bypass_permissions`` (the
default) runs it with ``--dangerously-bypass-approvals-and-sandbox``, as Claude Code skips its
permissions; ``false`` keeps Codex's ``workspace-write`` sandbox.

Its stream: ``item.started`` / ``item.completed`` events of ``agent_message`` (the answer),
``command_execution`` (a ``Bash`` call: the command, its output and exit code),
``file_change`` (an ``Edit``) and ``mcp_tool_call`` items; ``turn.completed`` with the usage,
or ``turn.failed`` with the error. ``base_url`` makes a model provider of its own for Codex
(the Responses API over HTTP, the key from ``OPENAI_API_KEY`` or ``api_key``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .agent import AgentProgram, AgentTarget, Ending
from .base import TargetDefinition, TargetServices
from .events import Event, Transcript, number

CODEX = AgentProgram(
    provider="codex",
    program="codex",
    package="@openai/codex",
    env_prefixes=("OPENAI_", "CODEX_", "AZURE_OPENAI_"),
    final="turn.completed",
    home_vars=("CODEX_HOME",),
)

_EFFORTS = ("minimal", "low", "medium", "high", "xhigh")


def _toml(value: Any) -> str:
    """A ``-c key=value`` value as TOML reads it (a JSON string is a TOML string)."""
    return json.dumps(value)


class CodexTarget(AgentTarget):
    program = CODEX

    def __init__(self, target: TargetDefinition) -> None:
        super().__init__(target)
        effort = self.settings.get("model_reasoning_effort")
        if effort is not None and str(effort).lower() not in _EFFORTS:
            raise self.invalid("model_reasoning_effort", f"one of {', '.join(_EFFORTS)}")
        self.effort = str(effort).lower() if effort is not None else None

    def arguments(self, prompt: str) -> tuple[list[str], str]:
        args = ["exec", "--json", "--color", "never", "--skip-git-repo-check", "--ephemeral"]
        args += ["-c", "check_for_update_on_startup=false", "-c", "analytics.enabled=false"]
        if self.bypass:
            args.append("--dangerously-bypass-approvals-and-sandbox")
        else:
            args += ["--sandbox", "workspace-write"]
        if self.model:
            args += ["--model", self.model]
        if self.effort:
            args += ["-c", f"model_reasoning_effort={_toml(self.effort)}"]
        if self.base_url:
            provider = "model_providers.agentv"
            args += ["-c", 'model_provider="agentv"', "-c", f'{provider}.name="agentv"']
            args += ["-c", f"{provider}.base_url={_toml(self.base_url)}"]
            args += ["-c", f'{provider}.env_key="OPENAI_API_KEY"']
            args += ["-c", f'{provider}.wire_api="responses"']
            args += ["-c", f"{provider}.supports_websockets=false"]
        return args, self.with_system_prompt(prompt)

    def variables(self, home: Path | None) -> dict[str, str]:
        return {"OPENAI_API_KEY": self.api_key} if self.api_key else {}

    def read(self, events: list[Event], transcript: Transcript) -> Ending:
        ending = Ending()
        last_error: str | None = None
        for event in events:
            item = event.data.get("item")
            if event.type in ("item.started", "item.completed") and isinstance(item, dict):
                _item(item, event, transcript)
            elif event.type == "turn.completed":
                ending.finished = True
                transcript.add_usage(
                    event.data.get("usage"),
                    input="input_tokens",
                    output="output_tokens",
                    cached="cached_input_tokens",
                    reasoning="reasoning_output_tokens",
                )
            elif event.type == "turn.failed":
                error = event.data.get("error")
                said = error.get("message") if isinstance(error, dict) else None
                ending.error = str(said or "the turn failed")
            elif event.type == "error":  # reconnecting, or what ended it
                last_error = str(event.data.get("message", ""))
        if not ending.finished and ending.error is None:
            ending.error = last_error
        return ending


def _item(item: dict[str, Any], event: Event, transcript: Transcript) -> None:
    """A Codex item: its text, or a tool call (started, then completed with its result)."""
    kind, item_id = item.get("type"), item.get("id")
    item_id = item_id if isinstance(item_id, str) else None
    if kind == "agent_message":
        if event.type == "item.completed" and isinstance(item.get("text"), str):
            transcript.say(item["text"])
        return
    args: Any
    if kind == "command_execution":
        name, args = "command_execution", {"command": item.get("command")}
        output: Any = item.get("aggregated_output")
        exit_code = number(item.get("exit_code"))
        failed = item.get("status") in ("failed", "declined") or bool(exit_code)
    elif kind == "file_change":
        name, args, output = "file_change", item.get("changes"), None
        failed = item.get("status") == "failed"
    elif kind == "mcp_tool_call":
        name = f"mcp:{item.get('server')}/{item.get('tool')}"
        args, output = item.get("arguments"), item.get("result") or item.get("error")
        failed = item.get("status") == "failed" or item.get("error") is not None
    else:  # reasoning, plans, web searches, warnings: not calls of a tool
        return
    if item_id is None or not transcript.made(item_id):  # a change may come completed
        transcript.call(name, args, event.at, item_id)
    if event.type == "item.completed":
        transcript.result(item_id, output, failed, event.at)


def build(target: TargetDefinition, services: TargetServices) -> CodexTarget:
    return CodexTarget(target)
