"""A coding agent's event stream and what it becomes, whichever agent wrote it.

``EventStream`` reads the stream as it arrives: one JSON object per line, each stamped with the
moment it arrived, bounded like JSON Lines files (line size, nesting depth) and in the number of
events it keeps. A line that is not a JSON object, or a last line cut short, is a broken stream:
the agent's answer is not graded, never made from the part that could be read.

``Transcript`` is what an agent module makes of its events: the answer's messages with their
tool calls (AgentV's ``{tool, input, output, id, status, start_time, end_time, duration_ms}``,
the names normalised as AgentV v4.42.4's ``normalize-tool-call.ts`` does, so that one
trajectory holds under any agent), its usage, cost, duration and model calls.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any

from ..answers import TargetResponse, response_from
from ..errors import EvalFileError
from ..jsonlines import MAX_LINE_BYTES, parse_json_line

#: Events kept of one run: far more than any agent's run has, far less than would exhaust memory.
MAX_EVENTS = 100_000

#: Each agent's tool names that are Claude Code's (AgentV's canonical names); others pass as
#: they are. AgentV's table, with what it lacks: the Gemini CLI's names, the Copilot CLI's in
#: its JSON output (AgentV reads its ACP titles), and Pi's ``write`` and ``edit``.
_COPILOT = {
    "Skill": "Skill",
    "skill": "Skill",
    "Read File": "Read",
    "readFile": "Read",
    "Read": "Read",
    "readTextFile": "Read",
    "writeTextFile": "Write",
    "Write File": "Write",
    "editFile": "Edit",
    "Edit File": "Edit",
    "runTerminalCommand": "Bash",
    "view": "Read",
    "create": "Write",
    "edit": "Edit",
    "bash": "Bash",
}
TOOL_NAMES: dict[str, dict[str, str]] = {
    "claude-cli": {name: name for name in ("Skill", "Read", "Write", "Edit", "Bash")},
    "copilot-cli": _COPILOT,
    "copilot-log": _COPILOT,
    "codex": {"command_execution": "Bash", "file_change": "Edit"},
    "pi-cli": {"read": "Read", "bash": "Bash", "write": "Write", "edit": "Edit"},
    "gemini-cli": {
        "read_file": "Read",
        "write_file": "Write",
        "replace": "Edit",
        "run_shell_command": "Bash",
        "activate_skill": "Skill",
    },
}
#: Name prefixes that say which tool it is (and, for a skill, which skill).
_PREFIXES: dict[str, tuple[tuple[str, str, bool], ...]] = {
    "copilot-cli": (("Using skill: ", "Skill", True), ("Viewing ", "Read", False)),
    "copilot-log": (("Using skill: ", "Skill", True), ("Viewing ", "Read", False)),
    "codex": (("mcp:", "Skill", True),),
}
#: The canonical tools whose path argument is ``file_path`` (AgentV renames it for ``Read``;
#: writes and edits get the same, so that one ``args`` holds under any agent).
_FILE_TOOLS = ("Read", "Write", "Edit")


def canonical_tool(provider: str, name: str, args: Any) -> tuple[str, Any]:
    """A tool call's name and input in Claude Code's words (``normalizeToolCall``)."""
    canonical = TOOL_NAMES.get(provider, {}).get(name)
    if canonical is None:
        for prefix, tool, names_skill in _PREFIXES.get(provider, ()):
            if name.startswith(prefix):
                canonical, rest = tool, name[len(prefix) :]
                if names_skill and rest:
                    args = {**(args if isinstance(args, dict) else {}), "skill": rest}
                break
    if canonical is None:
        return name, args
    if canonical in _FILE_TOOLS and isinstance(args, dict) and "file_path" not in args:
        path = args.get("path", args.get("filePath", args.get("absolute_path")))
        if path is not None:
            args = {**args, "file_path": path}
    return canonical, args


@dataclass(frozen=True)
class Event:
    """One event of the stream: its line, when it arrived (seconds since the epoch), its data."""

    line: int
    at: float
    data: dict[str, Any]

    @property
    def type(self) -> str:
        kind = self.data.get("type")
        return kind if isinstance(kind, str) else ""


class EventStream:
    """Reads stdout as it arrives (``feed``, a ``run_process`` reader) into events, keeping
    those whose ``type`` is not in ``skip`` (partial-message deltas, which repeat the message
    so far on every line) and copying every line to ``copy`` (the stream log)."""

    def __init__(self, skip: frozenset[str] = frozenset(), copy: Any = None) -> None:
        self.skip = skip
        self.copy = copy
        self.events: list[Event] = []
        self.lines = 0
        #: Why the stream cannot be read (the first problem; what follows it is not read).
        self.problem: str | None = None
        self._pending = bytearray()

    def feed(self, data: bytes) -> None:
        if self.problem is not None:
            return
        self._pending.extend(data)
        start = 0
        while (end := self._pending.find(b"\n", start)) >= 0 and self.problem is None:
            self._line(bytes(self._pending[start:end]))
            start = end + 1
        del self._pending[:start]
        if len(self._pending) > MAX_LINE_BYTES and self.problem is None:
            self.problem = (
                f"line {self.lines + 1} of its output is longer than {MAX_LINE_BYTES:,} bytes"
            )

    def close(self) -> list[Event]:
        """The events, once the agent has exited; a last line without its newline counts if it
        is whole, and is a stream cut short if it is not."""
        rest = bytes(self._pending).strip()
        self._pending.clear()
        if rest and self.problem is None:
            self._line(rest, last=True)
        return self.events

    def _line(self, raw: bytes, last: bool = False) -> None:
        self.lines += 1
        if self.copy is not None:
            self.copy(raw)
        text = raw.decode("utf-8", "replace").strip()
        if not text:
            return
        try:
            data = parse_json_line(text, "output", self.lines, repair=True)
        except EvalFileError as exc:
            cut = "ends in a line cut short" if last else f"has a line ({self.lines}) that is"
            what = "" if last else f" not a JSON event ({exc.message})"
            self.problem = f"printed a stream that {cut}{what}: {_preview(text)}"
            return
        if not isinstance(data, dict):
            self.problem = (
                f"printed {type(data).__name__} on line {self.lines}, not a JSON event object"
            )
            return
        event = Event(self.lines, time.time(), data)
        if event.type in self.skip:
            return
        if len(self.events) >= MAX_EVENTS:
            self.problem = f"printed more than {MAX_EVENTS:,} events"
            return
        self.events.append(event)


def _preview(text: str, most: int = 120) -> str:
    return repr(text if len(text) <= most else text[:most] + "...")


def iso(at: float) -> str:
    """A moment as AgentV writes one (``2026-01-01T12:00:00.000Z``)."""
    moment = datetime.fromtimestamp(at, tz=timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def number(value: Any) -> float | None:
    """A count or amount as the stream gives it; anything else is no number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value


class Transcript:
    """What an agent said and did, in order: its messages with their tool calls, usage and
    cost; ``response()`` makes the answer of it.

    A message an agent names (``message_id``) collects what it says under that name; one it
    does not name ends where text follows tool calls (a model's turn says, then calls).
    """

    def __init__(self, provider: str) -> None:
        self.provider = provider
        self.messages: list[dict[str, Any]] = []
        self._ids: list[str | None] = []
        self._calls: dict[str, dict[str, Any]] = {}
        self._started: dict[str, float] = {}
        self.usage: dict[str, float] | None = None
        self.cost_usd: float | None = None
        self.duration_ms: float | None = None
        self.model_calls: int | None = None

    def _message(self, message_id: str | None, text: bool) -> dict[str, Any]:
        last = self.messages[-1] if self.messages else None
        if last is not None and message_id is not None and self._ids[-1] == message_id:
            return last
        if last is not None and message_id is None and self._ids[-1] is None:
            if not (text and last.get("tool_calls")):
                return last
        message: dict[str, Any] = {"role": "assistant"}
        self.messages.append(message)
        self._ids.append(message_id)
        return message

    def say(self, text: str, message_id: str | None = None) -> None:
        """Text of the agent's reply (a part of it, when the agent streams its reply)."""
        if not text:
            return
        message = self._message(message_id, text=True)
        message["content"] = message.get("content", "") + text

    def call(
        self, name: str, args: Any, at: float, call_id: str | None, message_id: str | None = None
    ) -> None:
        """A tool call the agent made (its result may follow: ``result``)."""
        tool, args = canonical_tool(self.provider, name, args)
        call: dict[str, Any] = {"tool": tool, "input": args}
        if call_id is not None:
            call["id"] = call_id
            self._calls[call_id] = call
            self._started[call_id] = at
        call["start_time"] = iso(at)
        self._message(message_id, text=False).setdefault("tool_calls", []).append(call)

    def result(self, call_id: str | None, output: Any, failed: bool, at: float) -> None:
        """What a tool call returned; a result for no call the agent made is not one."""
        call = self._calls.get(call_id) if call_id is not None else None
        if call is None or call_id is None:
            return
        if output is not None:
            call["output"] = output
        call["status"] = "error" if failed else "ok"
        call["end_time"] = iso(at)
        call["duration_ms"] = round(max(0.0, at - self._started[call_id]) * 1000, 1)

    def made(self, call_id: str) -> bool:
        """Whether the agent made the call of that id."""
        return call_id in self._calls

    def add_usage(self, source: Any, **names: str) -> None:
        """Token counts (``input``, ``output``, ``cached``, ``reasoning``) read from ``source``
        under the agent's names for them (``input="input_tokens"``), added to those before; a
        source that is not an object adds none."""
        if not isinstance(source, Mapping):
            return
        total = dict(self.usage or {})
        for key, name in names.items():
            if (count := number(source.get(name))) is not None:
                total[key] = total.get(key, 0) + count
        self.usage = total

    def add_cost(self, value: Any) -> None:
        """A model call's cost in dollars, added to those before (none: not a number)."""
        if (cost := number(value)) is not None:
            self.cost_usd = (self.cost_usd or 0.0) + cost

    def response(self, what: str, duration_ms: float) -> TargetResponse:
        """The answer: the last assistant text, the messages, usage, cost, duration (the
        agent's own when it reports one, else ``duration_ms``) and model calls."""
        reply: dict[str, Any] = {
            "output_messages": self.messages,
            "token_usage": self.usage,
            "cost_usd": self.cost_usd,
            "duration_ms": self.duration_ms if self.duration_ms is not None else duration_ms,
        }
        if not self.messages:  # it said nothing (what it changed may be what counts)
            reply["text"] = ""
        return replace(response_from(reply, what), llm_call_count=self.model_calls)
