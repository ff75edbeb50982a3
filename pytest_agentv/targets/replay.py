"""``replay``: the answers of an earlier run of an agent, graded again without running it, as
AgentV v4.42.4's ``ReplayProvider`` does: each case's answer is the one record of exactly one
source (``fixtures``: ``agentv.replay_fixture.v1`` JSON Lines; ``execution_traces``: v4 trace
envelopes, ``outputs/trace.json`` of a run folder, one or many) that matches the case: its
suite (``suite``, else the eval file's), eval file (``eval_path`` as recorded, when the record
names one), test id, ``source_target`` (the target that was recorded), attempt and ``variant``.
No record, or two, leaves the case not graded, saying which.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import PurePosixPath
from typing import Any

from ..answers import TargetResponse, response_from
from ..cases import PreparedCase
from ..errors import ConfigError, EvalFileError, NotGradedError
from ..jsonlines import json_decoder, json_lines
from ..paths import resolve_reference
from ..reports.agentv_v4.transcript import transcript
from .base import TargetDefinition, TargetServices

FIXTURE_SCHEMA = "agentv.replay_fixture.v1"
TRACE_SCHEMA = "agentv.trace.v1"
#: A message's keys as a transcript line holds them.
_MESSAGE = ("role", "name", "content", "tool_calls", "start_time", "end_time", "duration_ms")


def _identity(record: dict[str, Any]) -> dict[str, Any]:
    """What a record answers for: suite, eval path, test id, source target, attempt, variant."""
    evaluation = record.get("eval") if record.get("schema_version") == TRACE_SCHEMA else record
    evaluation = evaluation if isinstance(evaluation, dict) else {}
    replay = record.get("replay")
    key = replay.get("lookup_key") if isinstance(replay, dict) else None
    key = key if isinstance(key, dict) else {}
    return {
        "suite": evaluation.get("suite") or key.get("suite"),
        "eval_path": evaluation.get("eval_path") or key.get("eval_path"),
        "test_id": evaluation.get("test_id"),
        "source_target": evaluation.get("source_target")
        or key.get("source_target")
        or evaluation.get("target"),
        "attempt": evaluation.get("attempt", key.get("attempt")) or 0,
        "variant": evaluation.get("variant") or key.get("variant"),
    }


def _same_path(recorded: str, asked: str) -> bool:
    def clean(path: str) -> str:
        return str(PurePosixPath(path.replace("\\", "/"))).removeprefix("./")

    return clean(recorded) == clean(asked) or clean(asked).endswith("/" + clean(recorded))


class ReplayTarget:
    timeout: float | None = None

    def __init__(self, target: TargetDefinition) -> None:
        settings, where = target.settings, target.where
        self.name = target.name
        self.judge_target = target.judge_target
        self.what = what = f"replay target '{target.name}'"
        for key in ("fixtures", "execution_traces", "source_target", "suite", "eval_path"):
            if settings.get(key) is not None and not isinstance(settings[key], str):
                raise ConfigError(f"{what} ({where(key)}): {key} must be a string")
        sources = [key for key in ("fixtures", "execution_traces") if settings.get(key)]
        if len(sources) != 1:
            raise ConfigError(
                f"{what} ({where()}): give exactly one replay source, 'fixtures' or "
                "'execution_traces'"
            )
        self.kind = sources[0]
        self.path = resolve_reference(
            settings[self.kind],
            start=target.folder,
            rootdir=target.rootdir,
            what=f"{what} {self.kind}",
        )
        self.display = settings[self.kind]
        if not settings.get("source_target"):
            raise ConfigError(f"{what} ({where()}): name the recorded target with 'source_target'")
        self.source_target: str = settings["source_target"]
        self.suite: str | None = settings.get("suite")
        self.eval_path: str | None = settings.get("eval_path")
        self.variant = settings.get("variant")
        self._records: list[tuple[int, dict[str, Any]]] | None = None
        self._lock = threading.Lock()

    def _read(self) -> list[tuple[int, dict[str, Any]]]:
        """The source's records with their lines, read once (a fixtures file is JSON Lines; a
        traces file one envelope, a list of them, or one per line)."""
        with self._lock:
            if self._records is None:
                try:
                    text = self.path.read_text(encoding="utf-8")
                except OSError as exc:
                    raise NotGradedError(
                        f"{self.what}: cannot read {self.display}: {exc.strerror}"
                    ) from None
                self._records = self._parse(text)
            return self._records

    def _parse(self, text: str) -> list[tuple[int, dict[str, Any]]]:
        if self.kind == "execution_traces" and text.lstrip()[:1] in ("{", "["):
            try:
                whole = json_decoder().decode(text)
            except ValueError:
                whole = None  # one envelope per line
            if whole is not None:
                found = whole if isinstance(whole, list) else [whole]
                return [(1, record) for record in found if isinstance(record, dict)]
        try:
            found_lines = list(json_lines(text, self.display, repair=True))
        except EvalFileError as exc:
            raise NotGradedError(f"{self.what}: {exc}") from None
        schema = FIXTURE_SCHEMA if self.kind == "fixtures" else TRACE_SCHEMA
        records = []
        for line, record in found_lines:
            if not isinstance(record, dict) or record.get("schema_version") != schema:
                raise NotGradedError(
                    f"{self.what}: {self.display}:{line} is not an {schema} record"
                )
            records.append((line, record))
        return records

    def answer(self, case: PreparedCase) -> TargetResponse:
        eval_path = self.eval_path
        if eval_path is None and case.eval_file is not None:
            eval_path = case.eval_file.resolve().relative_to(case.rootdir.resolve()).as_posix()
        asked = {
            "suite": self.suite or case.dataset,
            "test_id": case.id,
            "source_target": self.source_target,
            "attempt": case.attempt,
            "variant": self.variant,
        }
        matches = []
        for line, record in self._read():
            found = _identity(record)
            if any(found[key] != value for key, value in asked.items()):
                continue
            if found["eval_path"] and not (eval_path and _same_path(found["eval_path"], eval_path)):
                continue
            matches.append((line, record))
        key = " ".join(f"{name}={value}" for name, value in asked.items())
        if len(matches) != 1:
            lines = ", ".join(str(line) for line, _ in matches)
            problem = "no record" if not matches else f"{len(matches)} records (lines {lines})"
            raise NotGradedError(f"{self.what}: {self.display} has {problem} for {key}")
        line, record = matches[0]
        what = f"{self.what} ({self.display}:{line})"
        try:
            value = _fixture(record) if self.kind == "fixtures" else _trace(record)
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise NotGradedError(f"{what}: the record cannot be read ({exc!r})") from None
        return response_from(value, what)

    async def invoke(self, case: PreparedCase, attempt: int) -> TargetResponse:
        return await asyncio.to_thread(self.answer, case)


def _fixture(record: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(record["output"], list):
        raise TypeError("'output' is not a list of messages")
    found = {key: record.get(key) for key in ("token_usage", "cost_usd", "duration_ms")}
    return {"output_messages": record["output"], **found}


def _trace(record: dict[str, Any]) -> dict[str, Any]:
    """A trace envelope's messages (projected as v4 projects its transcript), usage, cost and
    duration."""
    lines = transcript(record)
    if not lines:
        raise ValueError("the envelope holds no messages")
    messages = [{key: line[key] for key in _MESSAGE if key in line} for line in lines]
    first = lines[0]
    return {
        "output_messages": [m for m in messages if m.get("role") != "user"],
        "token_usage": first.get("transcript_token_usage"),
        "cost_usd": first.get("transcript_cost_usd"),
        "duration_ms": first.get("transcript_duration_ms"),
    }


def build(target: TargetDefinition, services: TargetServices) -> ReplayTarget:
    return ReplayTarget(target)
