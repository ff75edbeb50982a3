"""A previous results file (ours or AgentV's) as a baseline: per-case deltas, the comparison block.

``PreviousResults`` reads a results file once: ours (``--agentv-results``), AgentV v2.5.8's
(``eval_id``, ``dataset``, ``score``, ``error``) or a later AgentV's (rows that carry only
``test_id``, and v4's ``suite`` for the dataset). Rows are matched to cases by dataset and eval
id; a row without a dataset matches the id in any dataset, and a v4 row the id of a dataset
that is no suite of the file when it is the id's only row (AgentV may name a suite after the
file's ``name``). Our rows also name their eval file: two files may hold the same dataset and
id (AgentV's layout has an ``evals/dataset.yaml`` in every folder), and then a case matches
only the row of its own file. A row of another file matches when that file's case is not one
this run collected (the file was renamed): the file a row names is data, compared as text with
the cases the run collected, never looked up on disk. When a file has several rows for one
case, the last one counts.
The same reader serves ``--agentv-answers`` (the recorded answers of a previous run).

A baseline score exists only for a row that was graded: not an error row, not a skip, not a
later AgentV row whose ``execution_status`` is other than ``ok`` and ``quality_failure``
(``not_graded_reason``). Such a row must carry a score from 0 to 1: one that does not
would silently leave its case out of the regression gate, so the baseline is refused. A delta
exists only when both runs graded the case; under trials both are the case's aggregate score.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

#: Results files can be much larger than eval files: one line per case of a whole suite.
MAX_RESULTS_BYTES = 1024 * 1024 * 1024
#: A score that moved by less than this is unchanged.
UNCHANGED = 0.05
#: How many cases each list of the comparison block names (every regression is named).
LISTED = 10

Key = tuple[str | None, str]
#: A collected case: its eval file (as results rows name it), dataset and eval id.
CaseKey = tuple[str, str, str]


class PreviousResults:
    """The rows of a previous results file, by dataset and eval id; read on first use."""

    def __init__(
        self,
        path: Path,
        display: str,
        option: str,
        *,
        scored: bool = False,
    ) -> None:
        """``scored``: a graded row without a usable score is an error (a baseline's rows are
        compared by score; recorded answers are not)."""
        self.path = path
        self.display = display
        self.option = option
        self.scored = scored
        self._lock = threading.Lock()
        self._rows: dict[Key, dict[str, Any]] | None = None
        #: The rows that name their eval file, and the files each case's rows name.
        self._filed: dict[tuple[str, str | None, str], dict[str, Any]] = {}
        self._files: dict[Key, set[str]] = {}
        #: The v4 rows of each id, and their suites: a case of a dataset that is no suite of
        #: the file (AgentV named it after the file's ``name``) matches the one row of its id.
        self._suites: dict[str, set[Key]] = {}
        self._suite_names: set[str] = set()
        #: The rows that name their target: a matrix runs a case once per target.
        self._targeted: dict[tuple[str | None, str, str], dict[str, Any]] = {}

    def rows(self) -> dict[Key, dict[str, Any]]:
        """Raises ``ConfigError`` naming the option, the file and the line of a bad row."""
        with self._lock:
            if self._rows is None:
                self._rows = self._read()
            return self._rows

    def _read(self) -> dict[Key, dict[str, Any]]:
        # Imported here: the verdicts read this module when the plugin loads.
        from .errors import ConfigError, EvalFileError
        from .jsonlines import json_lines
        from .yamlfile import read_text

        rows: dict[Key, dict[str, Any]] = {}
        try:
            text = read_text(self.path, self.display, MAX_RESULTS_BYTES)
            for line, row in json_lines(text, self.display, repair=True):
                case_id = row.get("eval_id", row.get("test_id")) if isinstance(row, dict) else None
                if not isinstance(case_id, str):
                    raise ConfigError(
                        f"{self.option}: {self.display}:{line}: a results row needs a string "
                        "'eval_id' (or 'test_id')"
                    )
                if self.scored and not_graded_reason(row) is None and _score(row) is None:
                    has = f"score {json.dumps(row['score'])}" if "score" in row else "no 'score'"
                    raise ConfigError(
                        f"{self.option}: {self.display}:{line}: case '{case_id}' has {has}; a "
                        "graded row needs a 'score' from 0 to 1 (a row that was not graded "
                        "carries 'error', or status 'error' or 'skipped')"
                    )
                dataset = row.get("dataset", row.get("suite"))  # v4 renamed it ``suite``
                key = (dataset if isinstance(dataset, str) else None, case_id)
                rows[key] = row
                if "dataset" not in row and key[0] is not None:
                    self._suites.setdefault(case_id, set()).add(key)
                    self._suite_names.add(key[0])
                if isinstance(target := row.get("target"), str):
                    self._targeted[(*key, target)] = row
                file = row.get("file")
                if isinstance(file, str):
                    self._filed[(file, *key)] = row
                    self._files.setdefault(key, set()).add(file)
        except EvalFileError as exc:
            raise ConfigError(f"{self.option}: {exc}") from None
        return rows

    def find(
        self,
        dataset: str,
        case_id: str,
        file: str | None = None,
        collected: Collection[CaseKey] = (),
        target: str | None = None,
    ) -> dict[str, Any] | None:
        """The row of a case (of eval file ``file``, as results rows name it, when known; on
        ``target``, the pair of a target matrix, when its rows name their targets).

        Rows that name other files are another file's cases when that file's case is among the
        ``collected`` ones, or when several files claim it; otherwise the file was renamed and
        keeps its baseline."""
        rows = self.rows()
        if target is not None and (paired := self._targeted.get((dataset, case_id, target))):
            return paired
        if file is not None:
            own = self._filed.get((file, dataset, case_id))
            if own is not None:
                return own
            named = self._files.get((dataset, case_id), set())
            if len(named) > 1 or any((other, dataset, case_id) in collected for other in named):
                return None
        found = rows.get((dataset, case_id)) or rows.get((None, case_id))
        if found is not None or dataset in self._suite_names:
            return found
        suites = self._suites.get(case_id, set())
        return rows[next(iter(suites))] if len(suites) == 1 else None

    def gone(self, collected: Collection[CaseKey]) -> list[str]:
        """Rows whose case this run did not collect although it collected where they were: the
        row's eval file (rows that name one) or else its dataset (a row without a dataset: when
        no collected case has its id). A case deselected with ``-k`` was collected."""
        rows = self.rows()
        files = {file for file, _, _ in collected}
        datasets = {dataset for _, dataset, _ in collected}
        ids = {case_id for _, _, case_id in collected}
        cases = {(dataset, case_id) for _, dataset, case_id in collected}
        found: list[str] = []
        for dataset, case_id in rows:
            named = self._files.get((dataset, case_id))
            if named:
                found += [
                    f"{file}::{case_id}"
                    for file in sorted(named & files)
                    if (file, dataset, case_id) not in collected
                ]
            elif (dataset, case_id) not in cases and (
                case_id not in ids if dataset is None else dataset in datasets
            ):
                found.append(f"{dataset}::{case_id}" if dataset is not None else case_id)
        return found


#: A later AgentV row's ``execution_status`` when its case was graded (``quality_failure``: it
#: scored below the threshold). Any other (``execution_error``) was not: AgentV v4.42.4's
#: ``ExecutionStatus`` in ``packages/core/src/evaluation/types.ts``.
GRADED_EXECUTION = ("ok", "quality_failure")


def not_graded_reason(row: Mapping[str, Any]) -> str | None:
    """Why a results row is not a graded case (None when it is): its ``error`` (ours, AgentV's),
    our ``status`` ``error`` or ``skipped``, or a later AgentV ``execution_status`` other than
    ``ok`` and ``quality_failure``, with its ``execution_error.message``. The one reading for
    baselines and recorded answers."""
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


def _score(row: Mapping[str, Any]) -> float | None:
    """The row's score, if it is a number from 0 to 1."""
    from .schema.base import finite_number  # not when the plugin loads (see ``_read``)

    score = finite_number(row.get("score"))
    return score if score is not None and 0 <= score <= 1 else None


def graded_score(row: Mapping[str, Any] | None) -> float | None:
    """A results row's score, if that run graded the case."""
    return None if row is None or not_graded_reason(row) is not None else _score(row)


def regressed_by(row: Mapping[str, Any], max_regression: float | None) -> float | None:
    """How far a graded case's score dropped from its baseline, when by more than allowed."""
    delta = row.get("delta")
    if max_regression is None or not isinstance(delta, (int, float)):
        return None
    return -float(delta) if -delta > max_regression else None


def _fmt(score: float | None) -> str:
    return "-" if score is None else f"{score:.2f}"


def _where(case: Mapping[str, Any]) -> str:
    return f"{case['file']}::{case['eval_id']}" if case.get("file") else str(case["eval_id"])


def _listed(label: str, names: Sequence[str], most: int | None = LISTED) -> list[str]:
    if not names:
        return []
    shown = names if most is None else names[:most]
    lines = [f"  {label}:", *(f"    {name}" for name in shown)]
    if len(shown) < len(names):
        lines.append(f"    ... and {len(names) - len(shown)} more")
    return lines


def comparison_lines(
    baseline: PreviousResults,
    cases: Iterable[Mapping[str, Any]],
    collected: Collection[CaseKey],
    max_regression: float | None = None,
) -> list[str]:
    """The comparison block: improved, regressed, unchanged, new and gone cases, every
    regression named, the largest first.

    ``cases`` are this run's eval-case rows (with ``baseline_score`` and ``delta``);
    ``collected`` every case the run collected, deselected ones included (see
    ``PreviousResults.gone``). A regression beyond ``max_regression`` says that it failed its
    case.
    """
    improved: list[tuple[float, str]] = []
    regressed: list[tuple[float, str]] = []
    unchanged = uncompared = 0
    new: list[str] = []
    for case in cases:
        delta = case.get("delta")
        if isinstance(delta, (int, float)):
            moved = f"{_where(case)}  {_fmt(case.get('baseline_score'))} -> {_fmt(case['score'])}"
            if delta >= UNCHANGED:
                improved.append((delta, f"{moved}  (+{delta:.2f})"))
            elif delta <= -UNCHANGED:
                over = regressed_by(case, max_regression) is not None
                gate = f", more than --agentv-max-regression {max_regression:g}" if over else ""
                regressed.append((delta, f"{moved}  ({delta:.2f}{gate})"))
            else:
                unchanged += 1
        elif (
            baseline.find(
                str(case.get("dataset") or ""), str(case["eval_id"]), case.get("file"), collected
            )
            is None
        ):
            new.append(_where(case))
        else:
            uncompared += 1
    gone = baseline.gone(collected)
    counts = [
        f"{len(improved)} improved",
        f"{len(regressed)} regressed",
        f"{unchanged} unchanged (|delta| < {UNCHANGED:g})",
        f"{len(new)} new",
        f"{len(gone)} gone",
    ]
    if uncompared:
        counts.append(f"{uncompared} not compared (not graded in one of the runs)")
    lines = [f"agentv baseline {baseline.display}: {', '.join(counts)}"]
    regressed.sort()
    lines += _listed("regressed", [text for _, text in regressed], most=None)
    improved.sort(key=lambda item: (-item[0], item[1]))
    lines += _listed("improved", [text for _, text in improved])
    lines += _listed("new", new)
    lines += _listed("gone", gone)
    return lines
