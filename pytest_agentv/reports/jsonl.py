"""``--agentv-results``: one JSON line per case (and per ``assert_judged`` call), with AgentV's
field names (v2.5.8's and ours, or with ``--agentv-results-format agentv-v4`` AgentV v4's rows:
``agentv_v4.py``), written as the run goes so that an interrupted run keeps what it graded.

The file is written in place (symlinks, modes and an interrupted run's rows survive). Opening
it empties it, so it is refused when it is a file this run reads (``--agentv-answers``,
``--agentv-baseline``) or a file that does not hold results (an eval or targets file named by
mistake). A write that fails during the run (a full disk) stops the file, not the run.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import pytest

from ..results.numbers import json_text

if TYPE_CHECKING:
    from ..results import ResultRow
    from ..settings import Settings
    from .agentv_v4.run_folder import RunFolder


_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


def compact_json(value: Any) -> str:
    return json_text(value, separators=(",", ":"))


#: Row keys a results-file line carries, in AgentV's order.
_AGENTV_KEYS = (
    "timestamp",
    "eval_id",
    "dataset",
    "conversation_id",
    "score",
    "verdict",
    "hits",
    "misses",
    "candidate_answer",
    "target",
    "reasoning",
)


#: What else a case's row carries that a report of the file shows (``python -m pytest_agentv
#: report``): the line of the case, what it asked and expected, its latency and tool calls,
#: the turns of a conversation, and its metadata (governance tags...).
_REPORTED_KEYS = (
    "line",
    "question",
    "expected_outcome",
    "duration_ms",
    "tool_calls",
    "turns",
    "metadata",
)


def results_line(row: ResultRow) -> dict[str, Any]:
    """A results-file line with AgentV's field names: listed evaluators are written under
    ``evaluator_results`` (one or several, with their details); the default judge's request
    stands at the top level."""
    line: dict[str, Any] = {key: row[key] for key in _AGENTV_KEYS}  # type: ignore[literal-required]
    evaluators = row["evaluator_results"]
    if row["evaluators_listed"]:
        line["evaluator_results"] = evaluators
    elif evaluators:
        line["evaluator_provider_request"] = evaluators[0]["evaluator_provider_request"]
    line["error"] = row["error"]
    line["file"] = row["file"]
    line["trace_summary"] = row["trace_summary"]
    line["status"] = row["status"]
    if row["trials"] is not None:
        line["trials"] = row["trials"]
        line["aggregation"] = row["aggregation"]
    if "baseline_score" in row:
        line["baseline_score"] = row["baseline_score"]
        line["delta"] = row.get("delta")
    line["gate_failed"] = row["gate_failed"]
    line["usage"] = row["usage"]
    for key in _REPORTED_KEYS:
        if key in row:
            line[key] = row[key]  # type: ignore[literal-required]
    return line


#: The keys of a results row's case id: ours and AgentV v2.5.8's, v4's, and v4's alias of it.
_ID_KEYS = ("eval_id", "test_id", "testId")


def _holds_results(path: Path) -> bool:
    """Whether a file is empty or starts like a results file (``_ID_KEYS``): never empty an eval
    file (JSONL rows have an ``id``), a targets file or anything else given by mistake. A file
    that cannot be read is left to ``open``."""
    limit = 64 * 1024
    try:
        with path.open("rb") as stream:
            head = stream.read(limit).lstrip()
    except OSError:
        return True
    first = head.split(b"\n", 1)[0].strip()
    if not first:
        return True
    if not first.startswith(b"{"):
        return False
    try:
        row = json.loads(first)
    except ValueError:  # a first row longer than what was read
        return any(f'"{key}"'.encode() in first for key in _ID_KEYS)
    return isinstance(row, dict) and any(key in row for key in _ID_KEYS)


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and a.samefile(b))
    except OSError:
        return False


class ResultsFile:
    """The results file of a run (controller only, like pytest's own junitxml)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        #: Why the file could not be written to the end (see ``failed``).
        self.error: str | None = None
        self._stream: IO[str] | None = None
        self._line: Callable[[ResultRow], dict[str, Any]] = results_line
        self._run: RunFolder | None = None
        #: Under ``--agentv-shard``, every row says which shard of how many ran it, so that the
        #: report that merges the shards' files can tell when one is missing.
        self._shard = f"{settings.shard[0]}/{settings.shard[1]}" if settings.shard else None
        if settings.results_format == "agentv-v4":
            # Not when the plugin loads: v4's kind names come with the eval files' schema.
            from .agentv_v4.rows import v4_row
            from .agentv_v4.run_folder import INDEX_NAME, RunFolder

            self._line = v4_row
            if settings.results is not None and Path(settings.results).name == INDEX_NAME:
                self._run = RunFolder(Path(settings.results).parent)
        if settings.results is not None:
            path = Path(settings.results)
            try:
                self._stream = self._open(path)
            except OSError as exc:
                problem = (
                    "it is a FIFO (named pipe) that nothing reads"
                    if exc.errno == errno.ENXIO
                    else exc.strerror or exc
                )
                raise pytest.UsageError(
                    f"--agentv-results={path} cannot be written: {problem}; "
                    "give the path of a file in a folder that exists or can be created"
                ) from None

    def _open(self, path: Path) -> IO[str]:
        """Opening the results file empties it, so it must not be a file this run reads (the
        answers or baseline: pytest-xdist workers read them after the controller opened this
        file) nor anything else a mistyped path can name (an eval file, a targets file)."""
        for flag, given in (
            ("--agentv-answers", self.settings.answers),
            ("--agentv-baseline", self.settings.baseline),
        ):
            if given is not None and _same_file(path, given):
                raise pytest.UsageError(
                    f"--agentv-results={path} is also the {flag} file, which the run reads while "
                    "it writes its results; write them to another path (and replace the old file "
                    "with it afterwards)"
                )
        if path.is_file() and not _holds_results(path):
            raise pytest.UsageError(
                f"--agentv-results={path} is a file that does not hold results (its first line "
                "is not a results row with an eval_id) and would be emptied; give another path"
            )
        path.parent.mkdir(parents=True, exist_ok=True)
        # Opened without blocking, so that a FIFO nothing reads is refused (ENXIO), not waited
        # for; a FIFO something reads (``/dev/stdout`` into a pipe) is written as a file is.
        handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _NONBLOCK, 0o666)
        os.set_blocking(handle, True)
        return os.fdopen(handle, "w", encoding="utf-8")

    def write(self, rows: list[ResultRow]) -> None:
        if self._stream is None or not rows:
            return
        try:
            for row in rows:
                line = self._line(row)
                if self._shard is not None:
                    line["shard"] = self._shard
                if self._run is not None:
                    line.update(self._run.add(line, row["file"]))
                self._stream.write(compact_json(line) + "\n")
            self._stream.flush()
        except OSError as exc:
            self.failed(exc)

    def failed(self, exc: OSError) -> None:
        """The results file could not be written (a full disk, ``/dev/full``): it stops being
        written, and the run goes on, so the JUnit XML, the summary and the other reports are
        still written. As for an unwritable ``--agentv-results`` path found at start, a run
        that would have passed then ends as a usage error (exit code 4; a run whose tests
        failed keeps its 1, see ``plugin.pytest_sessionfinish``), and the summary's last line
        names the option and the OS error, once, instead of pytest's INTERNALERROR."""
        if self.error is None:
            self.error = (
                f"--agentv-results={self.settings.results} could not be written: {exc}; "
                "the results file is incomplete"
            )
        stream, self._stream = self._stream, None
        if stream is not None:
            with contextlib.suppress(OSError):  # the same error, flushing what is left
                stream.close()

    def close(self) -> None:
        if self._run is not None and self._stream is not None:
            try:
                self._run.close()
            except OSError as exc:
                self.failed(exc)
        if self._stream is not None:
            try:
                self._stream.close()
            except OSError as exc:
                self.failed(exc)
            self._stream = None
