"""Results rows read back: ours (``--agentv-results``), AgentV v2.5.8's and v4's.

Every reader of a results file (``--agentv-baseline``, ``--agentv-answers``, ``python -m
pytest_agentv report`` and its HTML page) reads rows here, by one set of rules, so that a row
means the same to each of them:

- v4's camelCase aliases (``testId``, ``executionStatus``, ``tokenUsage``, ...) are read under
  their snake_case names, as v4's own reader reads them (``normalizeResultRow``,
  ``result-row-schema.ts`` in AgentV v4.42.4; the snake_case key wins when a row has both);
- a row was not graded when it says so (``not_graded_reason``): its ``error`` (ours,
  AgentV's), our ``status`` ``error`` or ``skipped``, or a v4 ``execution_status`` other than
  ``ok`` and ``quality_failure``;
- a graded row's score is a number from 0 to 1, which readers that compare or show scores
  require (``scored``); a row that was not graded has none, whatever it carries, but a number
  outside 0 to 1 is an error on any row;
- a field a reader uses that has the wrong type (an answer that is an object, ``hits`` that
  are not a list of strings) is an error at ``file:line``, never a traceback further on.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..errors import ConfigError
from .shapes import misfit, out_of_range, score_of, shown

#: Results files can be much larger than eval files: one line per case of a whole suite.
MAX_RESULTS_BYTES = 1024 * 1024 * 1024
#: A v4 row's ``execution_status`` when its case was graded (``quality_failure``: it scored
#: below the threshold); any other (``execution_error``) was not: AgentV v4.42.4's
#: ``ExecutionStatus`` in ``packages/core/src/evaluation/types.ts``.
GRADED_EXECUTION = ("ok", "quality_failure")
#: The ``failure_reason_code`` of a case skipped because it needed a judge and none was
#: configured (v4 has no skipped cases: our v4 row is an execution error, read back skipped).
JUDGE_NOT_CONFIGURED = "judge_not_configured"

RowStatus = Literal["graded", "error", "skipped"]

#: The camelCase keys v4's reader takes for snake_case ones (``result-row-schema.ts``): of a
#: row, of its ``trace``, of a message (in ``trace.messages`` and an ``output`` list) and of a
#: message's tool call.
_CALL_ALIASES = {"durationMs": "duration_ms", "endTime": "end_time", "startTime": "start_time"}
_MESSAGE_ALIASES = {**_CALL_ALIASES, "tokenUsage": "token_usage", "toolCalls": "tool_calls"}
_TRACE_ALIASES = {
    "costUsd": "cost_usd",
    "durationMs": "duration_ms",
    "errorCount": "error_count",
    "eventCount": "event_count",
    "llmCallCount": "llm_call_count",
    "tokenUsage": "token_usage",
    "toolCalls": "tool_calls",
    "toolDurations": "tool_durations",
}
_ROW_ALIASES = {
    **_CALL_ALIASES,
    "answerPath": "answer_path",
    "artifactDir": "artifact_dir",
    "conversationId": "conversation_id",
    "costUsd": "cost_usd",
    "evalPath": "eval_path",
    "executionStatus": "execution_status",
    "failureReasonCode": "failure_reason_code",
    "failureStage": "failure_stage",
    "filesPath": "files_path",
    "gradersPath": "graders_path",
    "gradingPath": "grading_path",
    "inputPath": "input_path",
    "outputPath": "output_path",
    "responsePath": "response_path",
    "targetsPath": "targets_path",
    "taskDir": "task_dir",
    "testId": "test_id",
    "timingPath": "timing_path",
    "tokenUsage": "token_usage",
    "transcriptPath": "transcript_path",
    "workspacePath": "workspace_path",
}


def _renamed(value: Any, aliases: Mapping[str, str]) -> Any:
    if not isinstance(value, dict) or not any(camel in value for camel in aliases):
        return value
    renamed = {key: item for key, item in value.items() if key not in aliases}
    for camel, snake in aliases.items():
        if renamed.get(snake) is None and value.get(camel) is not None:
            renamed[snake] = value[camel]
    return renamed


def _message(value: Any) -> Any:
    message = _renamed(value, _MESSAGE_ALIASES)
    calls = message.get("tool_calls") if isinstance(message, dict) else None
    if isinstance(calls, list):
        message = {**message, "tool_calls": [_renamed(call, _CALL_ALIASES) for call in calls]}
    return message


def snake_cased(row: dict[str, Any]) -> dict[str, Any]:
    """A row with v4's camelCase aliases under their snake_case names."""
    found: dict[str, Any] = _renamed(row, _ROW_ALIASES)
    trace = _renamed(found.get("trace"), _TRACE_ALIASES)
    if isinstance(trace, dict) and isinstance(trace.get("messages"), list):
        trace = {**trace, "messages": [_message(m) for m in trace["messages"]]}
    if trace is not None:
        found = {**found, "trace": trace}
    if isinstance(found.get("output"), list):
        found = {**found, "output": [_message(m) for m in found["output"]]}
    return found


def not_graded_reason(row: Mapping[str, Any]) -> str | None:
    """Why a (snake_cased) row is not a graded case, None when it is: its ``error``, our
    ``status`` ``error`` or ``skipped``, or a v4 ``execution_status`` other than ``ok`` and
    ``quality_failure``, with its ``execution_error.message``."""
    error = row.get("error")
    if error:
        return str(error)
    status = row.get("status")
    if status in ("error", "skipped"):
        return f"status {status}"
    execution = row.get("execution_status")
    if execution is None or execution in GRADED_EXECUTION:
        return None
    detail = row.get("execution_error")
    message = detail.get("message") if isinstance(detail, Mapping) else None
    said = f": {message}" if isinstance(message, str) and message else ""
    return f"execution_status {json.dumps(execution)}{said}"


@dataclass(frozen=True)
class ReadRow:
    """A results row as every reader takes it."""

    line: int
    case_id: str
    #: ``dataset``, or a v4 row's ``suite`` (then ``suite`` is set: AgentV may name a suite
    #: after the eval file's ``name``).
    dataset: str | None
    suite: bool
    file: str | None
    target: str | None
    status: RowStatus
    #: Why the row was not graded (None when it was).
    reason: str | None
    #: The score of a graded row (None when there is none).
    score: float | None
    #: The row itself, snake_cased; left out where only the above is kept (a baseline).
    data: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def brief(self) -> tuple[Any, ...]:
        """The row without its data, as plain builtins (``ReadRow(*brief)`` makes it again)."""
        return (self.line, self.case_id, self.dataset, self.suite, self.file, self.target,
                self.status, self.reason, self.score)  # fmt: skip


def read_row(data: Any, line: int, *, scored: bool, keep: bool = True) -> ReadRow:
    """One row of a results file. Raises ``ValueError`` saying what is wrong with it.

    ``scored``: the reader compares or shows scores, so a graded row needs one. ``keep``: keep
    the row itself (``ReadRow.data``), not only what every reader needs of it."""
    if not isinstance(data, dict):
        raise ValueError("a results row needs a string 'eval_id' (or 'test_id')")
    row = snake_cased(data)
    case_id = row.get("eval_id", row.get("test_id"))
    if not isinstance(case_id, str):
        raise ValueError("a results row needs a string 'eval_id' (or 'test_id')")
    if problem := misfit(row):
        raise ValueError(f"case '{case_id}': {problem}")
    reason = not_graded_reason(row)
    given = row.get("score")
    if reason is None and score_of(given) is None and (scored or given is not None):
        has = f"score {shown(given)}" if "score" in row else "no 'score'"
        raise ValueError(
            f"case '{case_id}' has {has}; a graded row needs a 'score' from 0 to 1 (a row that "
            "was not graded carries 'error', or status 'error' or 'skipped')"
        )
    if out_of_range(given):
        raise ValueError(f"case '{case_id}' has score {shown(given)}; a score is from 0 to 1")
    status: RowStatus = "graded"
    if reason is not None:
        skipped = row.get("status") == "skipped" or (
            row.get("failure_reason_code") == JUDGE_NOT_CONFIGURED
        )
        status = "skipped" if skipped else "error"
    suite = row.get("suite") if "dataset" not in row else None
    return ReadRow(
        line=line,
        case_id=case_id,
        dataset=row.get("dataset", suite),
        suite=suite is not None,
        file=row.get("file"),
        target=row.get("target"),
        status=status,
        reason=reason,
        score=None if reason is not None else score_of(given),
        data=row if keep else {},
    )


def read_rows(path: Path, display: str, *, scored: bool, keep: bool = True) -> Iterator[ReadRow]:
    """Every row of a results file, as ``read_row`` reads it. Raises ``EvalFileError`` (a file
    or a line that is no JSON) or ``ConfigError`` naming ``display:line`` of a bad row."""
    # Imported here: the verdicts read the baseline, and so this module, when the plugin loads.
    from ..jsonlines import json_lines
    from ..yamlfile import read_text

    text = read_text(path, display, MAX_RESULTS_BYTES)
    for line, data in json_lines(text, display, repair=True):
        try:
            yield read_row(data, line, scored=scored, keep=keep)
        except ValueError as exc:
            raise ConfigError(f"{display}:{line}: {exc}") from None
