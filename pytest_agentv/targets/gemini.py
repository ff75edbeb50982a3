"""``gemini-cli``: Google's Gemini CLI, ``gemini -p "" --output-format stream-json`` with the
prompt on stdin, in ``--yolo`` approval mode unless ``bypass_permissions: false``, its folder
trusted for the run (``--skip-trust``). AgentV has no provider for it (its ``gemini`` is the
model, as ours is): this one is pytest-agentv's own, with the settings of the other agents.

Its stream: ``message`` events (the assistant's reply in ``delta`` parts), ``tool_use`` and
``tool_result`` events paired by ``tool_id``, ``error`` events, and a final ``result`` with the
run's status and stats (tokens, duration). Its tools' names map onto Claude Code's
(``read_file`` is ``Read``, ``write_file`` ``Write``, ``replace`` ``Edit``,
``run_shell_command`` ``Bash``). ``base_url`` and ``api_key`` become ``GOOGLE_GEMINI_BASE_URL``
and ``GEMINI_API_KEY``; with a fresh ``HOME`` its settings say which key it uses, turn its
telemetry off and hold ``max_turns``.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..settings import environment
from .agent import AgentProgram, AgentTarget, Ending
from .base import TargetDefinition, TargetServices
from .events import Event, Transcript, number

GEMINI = AgentProgram(
    provider="gemini-cli",
    program="gemini",
    package="@google/gemini-cli",
    env_prefixes=("GEMINI_", "GOOGLE_"),
    final="result",
    home_vars=("GEMINI_CLI_HOME", "GEMINI_CLI_SYSTEM_SETTINGS_PATH"),
)


class GeminiTarget(AgentTarget):
    program = GEMINI

    def __init__(self, target: TargetDefinition) -> None:
        super().__init__(target)
        self.max_turns = self.settings.get("max_turns")
        if self.max_turns is not None:
            if not isinstance(self.max_turns, int) or isinstance(self.max_turns, bool):
                raise self.invalid("max_turns", "a whole number")
            if not self.fresh_home:
                raise self.invalid(
                    "max_turns",
                    "left out with home: inherit (it is a setting "
                    "of the Gemini CLI's settings file, which is then the user's)",
                )

    def arguments(self, prompt: str) -> tuple[list[str], str]:
        args = ["-p", "", "--output-format", "stream-json", "--skip-trust"]
        args += ["--yolo"] if self.bypass else ["--approval-mode", "default"]
        if self.model:
            args += ["--model", self.model]
        return args, self.with_system_prompt(prompt)

    def variables(self, home: Path | None) -> dict[str, str]:
        found = {}
        if self.base_url:
            found["GOOGLE_GEMINI_BASE_URL"] = self.base_url
        if self.api_key:
            found["GEMINI_API_KEY"] = self.api_key
        if home is not None:
            vertex = environment().get("GOOGLE_GENAI_USE_VERTEXAI", "").lower() == "true"
            settings: dict[str, object] = {
                "security": {"auth": {"selectedType": "vertex-ai" if vertex else "gemini-api-key"}},
                "privacy": {"usageStatisticsEnabled": False},
                "telemetry": {"enabled": False},
                "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
            }
            if self.max_turns is not None:
                settings["model"] = {"maxSessionTurns": self.max_turns}
            folder = home / ".gemini"
            folder.mkdir()
            (folder / "settings.json").write_text(json.dumps(settings), encoding="utf-8")
        return found

    def read(self, events: list[Event], transcript: Transcript) -> Ending:
        ending = Ending()
        for event in events:
            data = event.data
            if event.type == "message" and data.get("role") == "assistant":
                if isinstance(data.get("content"), str):
                    transcript.say(data["content"])
            elif event.type == "tool_use" and isinstance(data.get("tool_name"), str):
                call_id = data.get("tool_id") if isinstance(data.get("tool_id"), str) else None
                transcript.call(data["tool_name"], data.get("parameters"), event.at, call_id)
            elif event.type == "tool_result":
                error = data.get("error")
                output = data.get(
                    "output", error.get("message") if isinstance(error, dict) else None
                )
                call_id = data.get("tool_id") if isinstance(data.get("tool_id"), str) else None
                transcript.result(call_id, output, data.get("status") != "success", event.at)
            elif event.type == "result":
                ending.finished = True
                _stats(data.get("stats"), transcript)
                if data.get("status") != "success":
                    error = data.get("error")
                    said = error.get("message") if isinstance(error, dict) else None
                    ending.error = str(said or data.get("status") or "the run failed")
        return ending


def _stats(stats: object, transcript: Transcript) -> None:
    if not isinstance(stats, dict):
        return
    transcript.add_usage(stats, input="input_tokens", output="output_tokens", cached="cached")
    transcript.duration_ms = number(stats.get("duration_ms"))


def build(target: TargetDefinition, services: TargetServices) -> GeminiTarget:
    return GeminiTarget(target)
