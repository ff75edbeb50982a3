"""``copilot-log``: a Copilot CLI session already recorded, read from its ``events.jsonl``
instead of running anything, as AgentV v4.42.4's ``CopilotLogProvider`` reads it: the session
named by ``session_dir``, or ``session_id`` under ``session_state_dir`` (default
``~/.copilot/session-state``), or ``discover: latest``, the session last written there (of the
working folder ``cwd``, when given). Every case gets that session's answer, whatever it asks;
its events are Copilot's own (``copilot.read_copilot``), timed by their timestamps.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from ..answers import TargetResponse
from ..cases import PreparedCase
from ..errors import ConfigError, NotGradedError
from .agent import MAX_STREAM_BYTES
from .base import TargetDefinition, TargetServices
from .copilot import read_copilot
from .events import Event, EventStream, Transcript


class CopilotLogTarget:
    timeout: float | None = None

    def __init__(self, target: TargetDefinition) -> None:
        settings, where = target.settings, target.where
        self.name = target.name
        self.judge_target = target.judge_target
        self.what = f"copilot-log target '{target.name}'"
        for key in ("session_dir", "session_id", "session_state_dir", "cwd"):
            if settings.get(key) is not None and not isinstance(settings[key], str):
                raise ConfigError(f"{self.what} ({where(key)}): {key} must be a string")
        discover = settings.get("discover")
        if discover not in (None, "latest"):
            raise ConfigError(f"{self.what} ({where('discover')}): discover must be 'latest'")
        self.session_dir: str | None = settings.get("session_dir")
        self.session_id: str | None = settings.get("session_id")
        self.discover = discover is not None
        if not (self.session_dir or self.session_id or self.discover):
            raise ConfigError(
                f"{self.what} ({where()}): name the session with session_dir, session_id or "
                "discover: latest"
            )
        state = settings.get("session_state_dir") or "~/.copilot/session-state"
        self.state_dir = Path(state).expanduser()
        self.cwd: str | None = settings.get("cwd")

    def _session(self) -> Path:
        if self.session_dir:
            return Path(self.session_dir).expanduser()
        if self.session_id:
            return self.state_dir / self.session_id
        found: list[tuple[float, Path]] = []
        for folder in self.state_dir.glob("*/"):
            events = folder / "events.jsonl"
            if not events.is_file():
                continue
            if self.cwd is not None and _cwd(folder / "workspace.yaml") != self.cwd:
                continue
            found.append((events.stat().st_mtime, folder))
        if not found:
            of = f" of cwd {self.cwd}" if self.cwd else ""
            raise NotGradedError(f"{self.what}: no Copilot CLI session{of} in {self.state_dir}")
        return max(found, key=lambda entry: entry[0])[1]

    def _read(self) -> TargetResponse:
        path = self._session() / "events.jsonl"
        try:
            if path.stat().st_size > MAX_STREAM_BYTES:
                raise NotGradedError(f"{self.what}: {path} is larger than the events it may hold")
            data = path.read_bytes()
        except OSError as exc:
            raise NotGradedError(f"{self.what}: cannot read {path}: {exc.strerror}") from None
        stream = EventStream()
        stream.feed(data)
        events = [_stamped(event) for event in stream.close()]
        if stream.problem is not None:
            raise NotGradedError(f"{self.what}: {path} {stream.problem}")
        transcript = Transcript("copilot-log")
        ending = read_copilot(events, transcript)
        if ending.error is not None:
            raise NotGradedError(
                f"{self.what}: the session in {path} ended in an error: {ending.error}"
            )
        spent = (events[-1].at - events[0].at) * 1000 if events else 0.0
        return transcript.response(self.what, spent)

    async def invoke(self, case: PreparedCase, attempt: int) -> TargetResponse:
        return await asyncio.to_thread(self._read)


def _cwd(workspace: Path) -> Any:
    """The working folder a session's ``workspace.yaml`` names."""
    try:
        data = yaml.safe_load(workspace.read_text(encoding="utf-8")[:65536])
    except (OSError, yaml.YAMLError):
        return None
    return data.get("cwd") if isinstance(data, dict) else None


def _stamped(event: Event) -> Event:
    """An event at the moment its own timestamp says (a session's events were read later)."""
    stamp = event.data.get("timestamp")
    try:
        at = datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return event
    return Event(event.line, at, event.data)


def build(target: TargetDefinition, services: TargetServices) -> CopilotLogTarget:
    return CopilotLogTarget(target)
