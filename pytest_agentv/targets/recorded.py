"""``--agentv-answers``: recorded answers from a previous results file as every case's target."""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..answers import TargetResponse, checked_answer, response_from
from ..baseline import CaseKey, PreviousResults
from ..cases import PreparedCase, prompt_text
from ..errors import NotGradedError
from ..llm.usage import PlannedCall
from ..paths import MAX_FILE_BYTES, display_path, read_bounded
from ..reports.agentv_v4.rows import agent_messages
from ..resultrows import ReadRow


class RecordedTarget:
    """``--agentv-answers``: each case's answer comes from a previous results file (ours, or
    AgentV's: ``candidate_answer``, ``output_messages``, ``trace_summary``; v4's ``output`` and
    ``trace``; in a v4 run folder's ``index.jsonl``, the file its ``answer_path`` names),
    matched by dataset and eval id (``test_id`` in later AgentV rows), instead of
    calling the case's target. Rows are read as every results row is (``resultrows``: v4's
    camelCase aliases too).

    A case with no recorded answer, or whose recorded row was not graded itself (an error, a
    skip, a later AgentV ``execution_error``), is not graded, with the recorded reason; so is
    one whose row, or turn, was asked another input than the case asks now. When a file has
    several rows for one case, the last one is used.
    """

    judge_target: str | None = None
    timeout: float | None = None

    def __init__(self, path: Path, display: str, collected: Collection[CaseKey] = ()) -> None:
        """``collected``: the run's cases, which rows that name another file may belong to."""
        self.path = path
        self.display = display
        self.name = f"recorded:{path.name}"
        self.collected = collected
        self.results = PreviousResults(path, display, "--agentv-answers")

    def find(self, case: PreparedCase) -> ReadRow | None:
        file = display_path(case.eval_file, case.rootdir) if case.eval_file else None
        return self.results.find(case.dataset, case.id, file, self.collected, case.matrix_target)

    async def invoke(self, case: PreparedCase, attempt: int) -> TargetResponse:
        # The file is read once, off the loop: a large one must not hold up every other case.
        await asyncio.to_thread(self.results.rows)
        return self.answer(case)

    def planned(self, case: PreparedCase) -> tuple[TargetResponse, list[PlannedCall]]:
        return self.answer(case), []

    def answer(self, case: PreparedCase) -> TargetResponse:
        found = self.find(case)
        where = f"in {self.display} (--agentv-answers)"
        if found is None:
            raise NotGradedError(
                f"no recorded answer for dataset '{case.dataset}', eval_id '{case.id}' {where}"
            )
        if found.reason is not None:
            raise NotGradedError(
                f"the recorded answer for '{case.id}' {where} is not an answer: {found.reason}"
            )
        row = found.data
        if case.turn:
            return self._turn(row, case, where)
        _same_question(_asked(row, case), case.question, f"'{case.id}' {where}")
        value, text, trace = _recorded(row)
        if not value.get("output_messages") and not isinstance(text, str):
            text = self._answer_file(row, case, where)
        if not value.get("output_messages") and not isinstance(text, str):
            raise NotGradedError(
                f"the recorded row for '{case.id}' {where} has no 'candidate_answer', "
                "'output_messages' or 'output'"
            )
        if not value.get("output_messages"):
            value = {**value, "output_messages": None, "text": text}
        what = f"the recorded row for '{case.id}'"
        response = response_from(value, what)
        # The recorded answer is what was graded, whatever its messages would give today.
        recorded = replace(
            response,
            text=text if isinstance(text, str) else response.text,
            recorded_trace=trace if isinstance(trace, dict) else None,
        )
        return checked_answer(recorded, what)

    def _answer_file(self, row: dict[str, Any], case: PreparedCase, where: str) -> str | None:
        """The answer of an AgentV v4 run folder's ``index.jsonl`` row, which names the file
        holding it (``answer_path``, from the index's folder, and inside it) instead of
        carrying it."""
        named = row.get("answer_path")
        if not isinstance(named, str) or not named:
            return None
        folder = self.path.parent.resolve()
        file = (folder / named).resolve()
        whose = f"the recorded row for '{case.id}' {where}"
        if not file.is_relative_to(folder):
            raise NotGradedError(f"{whose} names answer_path {named!r}, outside its folder")
        try:
            data = read_bounded(file)
        except OSError as exc:
            raise NotGradedError(
                f"{whose} names answer_path {named!r}, which cannot be read: {exc.strerror or exc}"
            ) from None
        if data is None:
            raise NotGradedError(
                f"{whose}: its answer_path {named!r} is over {MAX_FILE_BYTES:,} bytes"
            )
        return data.decode("utf-8", "replace")

    def _turn(self, row: dict[str, Any], case: PreparedCase, where: str) -> TargetResponse:
        """A conversation's turn: the reply its recorded row gave that turn (our ``turns``)."""
        turns = row.get("turns")
        recorded = next(
            (
                turn
                for turn in (turns if isinstance(turns, list) else ())
                if isinstance(turn, dict) and turn.get("turn") == case.turn
            ),
            {},
        )
        said = recorded.get("answer")
        if not isinstance(said, str):
            raise NotGradedError(
                f"the recorded row for '{case.id}' {where} has no answer for turn {case.turn}"
            )
        asked = recorded.get("input")
        now = case.turns[case.turn - 1].input
        _same_question(asked if isinstance(asked, str) else None, now, f"'{case.id}' {where}")
        what = f"the recorded row for '{case.id}', turn {case.turn}"
        return checked_answer(response_from(said, what), what)


def _asked(row: dict[str, Any], case: PreparedCase) -> str | None:
    """The question a row's answer was given to, when the row says it in a way that can be
    compared: our ``question``, or v4's ``input`` messages when they are text and the case
    names no files (AgentV inlines a file where pytest-agentv's question names it)."""
    question = row.get("question")
    if isinstance(question, str):
        return question
    given = row.get("input")
    if case.input_files or not isinstance(given, list) or not given:
        return None
    if not all(isinstance(m, dict) and isinstance(m.get("content"), str) for m in given):
        return None
    return prompt_text(given)


def _same_question(asked: str | None, now: str, whose: str) -> None:
    """A recorded answer to another question says nothing about this one: not graded."""
    if asked is not None and asked != now:
        raise NotGradedError(
            f"the recorded answer for {whose} was given to another input: it was asked "
            f"{_shown(asked)}, the case now asks {_shown(now)}"
        )


def _shown(text: str) -> str:
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= 80 else flat[:77] + "...")


def _recorded(row: dict[str, Any]) -> tuple[dict[str, Any], Any, Any]:
    """What a results row recorded: the answer's messages (with the numbers it reported), its
    text, and its trace summary: ``candidate_answer``, ``output_messages`` and ``trace_summary``
    (ours, AgentV's up to v3), else AgentV v4's ``output`` (a list of messages before v4.42)
    with the messages in ``trace`` and the numbers beside them."""
    if "candidate_answer" in row or "output_messages" in row:
        messages = {"output_messages": row.get("output_messages")}
        return messages, row.get("candidate_answer"), row.get("trace_summary")
    output = row.get("output")
    numbers = {key: row.get(key) for key in ("token_usage", "cost_usd", "duration_ms")}
    text = output if isinstance(output, str) else None
    return {"output_messages": agent_messages(row), **numbers}, text, None
