"""``claude-cli`` (also ``claude``, ``claude-code``): Claude Code, as AgentV v4.42.4's
``ClaudeCliProvider`` runs it: ``claude -p --output-format stream-json --verbose``, the prompt
on stdin, ``--dangerously-skip-permissions`` unless ``bypass_permissions: false``.

Its stream: ``assistant`` events (one per content block, grouped by their message's id) with
text and ``tool_use`` parts, ``user`` events with each ``tool_result`` (its output and
``is_error``), and a final ``result`` with the answer's cost, duration, usage, model turns and
the tools it was refused (``permission_denials``). ``base_url`` and ``api_key`` become
``ANTHROPIC_BASE_URL`` and ``ANTHROPIC_API_KEY``; ``system_prompt`` is appended to Claude
Code's own (AgentV's CLI provider drops it). As root, Claude Code skips permissions only when
``IS_SANDBOX=1`` says the machine is a sandbox.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .agent import AgentProgram, AgentTarget, Ending
from .base import TargetDefinition, TargetServices
from .events import Event, Transcript, number

CLAUDE = AgentProgram(
    provider="claude-cli",
    program="claude",
    package="@anthropic-ai/claude-code",
    env_prefixes=("ANTHROPIC_", "CLAUDE_CODE_", "IS_SANDBOX"),
    final="result",
    quiet={
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
    },
    skip=frozenset({"stream_event"}),
    dropped=("CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT", "CLAUDE_CODE_SSE_PORT"),
    home_vars=("CLAUDE_CONFIG_DIR",),
)


class ClaudeTarget(AgentTarget):
    program = CLAUDE

    def __init__(self, target: TargetDefinition) -> None:
        super().__init__(target)
        self.max_turns = self.settings.get("max_turns")
        if self.max_turns is not None and (
            not isinstance(self.max_turns, int) or isinstance(self.max_turns, bool)
        ):
            raise self.invalid("max_turns", "a whole number")
        self.budget = self.settings.get("max_budget_usd")

    def arguments(self, prompt: str) -> tuple[list[str], str]:
        args = ["-p", "--output-format", "stream-json", "--verbose"]
        if self.bypass:
            args.append("--dangerously-skip-permissions")
        if self.model:
            args += ["--model", self.model]
        if self.max_turns is not None:
            args += ["--max-turns", str(self.max_turns)]
        if self.budget is not None:
            args += ["--max-budget-usd", str(self.budget)]
        if self.system_prompt:
            args += ["--append-system-prompt", self.system_prompt]
        return args, prompt

    def variables(self, home: Path | None) -> dict[str, str]:
        found = {}
        if self.base_url:
            found["ANTHROPIC_BASE_URL"] = self.base_url
        if self.api_key:
            found["ANTHROPIC_API_KEY"] = self.api_key
        return found

    def read(self, events: list[Event], transcript: Transcript) -> Ending:
        ending = Ending()
        for event in events:
            message = event.data.get("message")
            content = message.get("content") if isinstance(message, dict) else None
            if event.type == "assistant" and isinstance(content, list) and message:
                said_by = message.get("id") if isinstance(message.get("id"), str) else None
                for part in content:
                    if not isinstance(part, dict):
                        continue
                    if part.get("type") == "text" and isinstance(part.get("text"), str):
                        transcript.say(part["text"], said_by)
                    elif part.get("type") == "tool_use" and isinstance(part.get("name"), str):
                        transcript.call(
                            part["name"], part.get("input"), event.at, _id(part), said_by
                        )
            elif event.type == "user" and isinstance(content, list):
                for part in content:
                    if isinstance(part, dict) and part.get("type") == "tool_result":
                        transcript.result(
                            _id(part, "tool_use_id"),
                            part.get("content"),
                            part.get("is_error") is True,
                            event.at,
                        )
            elif event.type == "result":
                _result(event.data, transcript, ending)
        return ending


def _id(part: dict[str, Any], key: str = "id") -> str | None:
    value = part.get(key)
    return value if isinstance(value, str) else None


def _result(data: dict[str, Any], transcript: Transcript, ending: Ending) -> None:
    """The final event: cost, duration, usage (cache reads and writes are input, as AgentV
    counts them), turns, refusals, and the agent's own error."""
    ending.finished = True
    transcript.cost_usd = number(data.get("total_cost_usd"))
    transcript.duration_ms = number(data.get("duration_ms"))
    turns = number(data.get("num_turns"))
    transcript.model_calls = int(turns) if turns is not None else None
    usage = data.get("usage")
    if isinstance(usage, dict):
        inputs = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
        counts = {"input": sum(number(usage.get(key)) or 0 for key in inputs), **usage}
        names = {"output": "output_tokens", "cached": "cache_read_input_tokens"}
        transcript.add_usage(counts, input="input", **names)
    denied = data.get("permission_denials")
    for refusal in denied if isinstance(denied, list) else ():
        if isinstance(refusal, dict):
            ending.refused.append(str(refusal.get("tool_name", "a tool")))
    if data.get("is_error") is True:
        errors = data.get("errors")
        said = "; ".join(map(str, errors)) if isinstance(errors, list) and errors else None
        ending.error = said or str(data.get("result") or data.get("subtype") or "an error")


def build(target: TargetDefinition, services: TargetServices) -> ClaudeTarget:
    return ClaudeTarget(target)
