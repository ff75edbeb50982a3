"""A CLI target with ``provider_batching: true``: one run of its command answers every case of
an eval file, one JSON line per case (AgentV's batch targets)."""

from __future__ import annotations

import asyncio
import tempfile
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..answers import TargetResponse, response_from
from ..casefiles import prepare_case
from ..cases import CaseSpec, PreparedCase
from ..errors import AgentvError, EvalFileError, NotGradedError
from ..jsonlines import json_lines
from .base import TargetDefinition, TargetServices
from .cli import CliTarget, command_values, healthcheck


class BatchCliTarget(CliTarget):
    """``provider_batching: true``: one run of the command answers every case of an eval file.

    The cases are the ones this run may send it (``expect``, called when the run is planned, so
    deselected cases are never sent; a case an ``agentv_target`` fixture may answer is one of
    them). The first case that needs an answer starts the batch for all of them; the others
    wait for it. ``{FILES}`` lists every case's files, ``{EVAL_ID}`` is ``batch`` and the output
    (``{OUTPUT_FILE}`` or stdout) is JSON Lines, one object with an ``id`` per case, each shaped
    like a single CLI answer. A case whose id has no line is not graded. Cases that arrive after
    a batch started (pytest-xdist hands a worker its share piece by piece) go into the next one.
    A case the run did not announce (one that runs several times, for trials) is answered by a
    run of the command for that case alone, with its own values, and its answer is still the
    line with its id: the output of a batch command is never one case's answer as a whole.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lock = threading.Lock()
        self._expected: dict[Path, dict[str, CaseSpec]] = {}
        self._answers: dict[tuple[Path | None, str], asyncio.Future[TargetResponse | str]] = {}

    def expect(self, spec: CaseSpec) -> None:
        with self._lock:
            self._expected.setdefault(spec.loaded.path, {})[spec.case.id] = spec

    async def invoke(self, case: PreparedCase, attempt: int) -> TargetResponse:
        key = (case.eval_file, case.id)
        if key not in self._answers:
            with self._lock:
                expected = (
                    case.id in self._expected.get(case.eval_file, {}) if case.eval_file else False
                )
            if not expected:
                # Not part of a batch (a case run several times, for trials): the command
                # answers this case alone, as AgentV runs trials without batching.
                values = (case.question, case.guidelines, case.id, attempt)
                alone = (await self._answers_of([case], *values))[case.id]
                if isinstance(alone, str):
                    raise NotGradedError(alone)
                return alone
            await self._batch(case)
        outcome = await asyncio.shield(self._answers[key])
        if isinstance(outcome, str):
            raise NotGradedError(outcome)
        return outcome

    def _members(self, case: PreparedCase) -> list[PreparedCase]:
        with self._lock:
            specs = self._expected.pop(case.eval_file, {}) if case.eval_file else {}
        members = [case]
        for spec in specs.values():
            if spec.case.id == case.id or (case.eval_file, spec.case.id) in self._answers:
                continue
            try:
                members.append(prepare_case(spec, self.rootdir))
            except AgentvError:
                continue  # the case reports its own problem when it runs
        return members

    async def _batch(self, case: PreparedCase) -> None:
        members = self._members(case)
        loop = asyncio.get_running_loop()
        futures = {m.id: loop.create_future() for m in members}
        for member in members:
            self._answers[(case.eval_file, member.id)] = futures[member.id]
        try:
            try:
                answers = await self._answers_of(members, "", "", "batch", 0)
            except (AgentvError, OSError) as exc:
                answers = {m.id: str(exc) for m in members}
            for member_id, future in futures.items():
                future.set_result(answers[member_id])
        finally:
            for future in futures.values():
                if not future.done():
                    future.set_result(f"the batch of {self.what} did not finish")

    async def _answers_of(
        self,
        members: list[PreparedCase],
        prompt: str,
        guidelines: str,
        eval_id: str,
        attempt: int,
    ) -> dict[str, TargetResponse | str]:
        """Run the command for ``members`` (with these values and their files) in the first
        member's workspace, as AgentV's batches run (a batch's cases share their file's
        workspace): each member's answer is the output line with its id, or why it has none."""
        with tempfile.TemporaryDirectory(prefix="agentv-") as scratch:
            output_file = Path(scratch) / "output.jsonl"
            files = self._files(members)
            values = command_values(
                prompt, guidelines, eval_id, attempt, files, Path(scratch), output_file.name
            )
            text, elapsed = await self._run(values, output_file, members[0].workspace_path)
        records = self._records(text)
        share = round(elapsed / len(members), 1)
        answers: dict[str, TargetResponse | str] = {}
        for member in members:
            record = records.get(member.id)
            if record is None:
                answers[member.id] = (
                    f"the batch output of {self.what} has no line with id '{member.id}'"
                )
                continue
            try:
                response = response_from(record, f"{self.what} (batch line '{member.id}')")
            except NotGradedError as exc:
                answers[member.id] = str(exc)
                continue
            if response.duration_ms is None:
                response = replace(response, duration_ms=share)
            answers[member.id] = response
        return answers

    def _records(self, text: str) -> dict[str, dict[str, Any]]:
        shown = f"batch output of {self.what}"
        records: dict[str, dict[str, Any]] = {}
        try:
            for line, value in json_lines(text, shown, repair=True):
                record_id = value.get("id") if isinstance(value, dict) else None
                if not isinstance(record_id, str) or not record_id:
                    raise NotGradedError(
                        f"{shown}, line {line}: each line must be a JSON object with a string 'id'"
                    )
                if record_id in records:
                    raise NotGradedError(f"{shown}, line {line}: id '{record_id}' is given twice")
                records[record_id] = {k: v for k, v in value.items() if k != "id"}
        except EvalFileError as exc:
            raise NotGradedError(str(exc)) from None
        return records


def build(target: TargetDefinition, services: TargetServices) -> BatchCliTarget:
    return BatchCliTarget(
        target.name,
        dict(target.settings),
        target.folder,
        target.rootdir,
        target.where,
        target.judge_target,
        healthcheck(target, services),
    )
