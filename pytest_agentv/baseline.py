"""A previous results file (ours or AgentV's) as a baseline: per-case deltas, the comparison block.

``PreviousResults`` reads a results file once, through ``resultrows`` (ours, AgentV v2.5.8's
or v4's rows, v4's camelCase aliases included). Rows are matched to cases by dataset and eval
id; a row without a dataset matches the id in any dataset, and a v4 row the id of a dataset
that is no suite of the file when it is the id's only row (AgentV may name a suite after the
file's ``name``). Our rows also name their eval file: two files may hold the same dataset and
id (AgentV's layout has an ``evals/dataset.yaml`` in every folder), and then a case matches
only the row of its own file. A row of another file matches when that file's case is not one
this run collected (the file was renamed): the file a row names is data, compared as text with
the cases the run collected, never looked up on disk. When a file has several rows for one
case, the last one counts.
The same matching serves ``--agentv-answers`` (the recorded answers of a previous run).

A baseline score exists only for a row that was graded (``resultrows.not_graded_reason``),
and such a row must carry a score from 0 to 1: one that does not would silently leave its case
out of the regression gate, so the baseline is refused. A baseline keeps only what matching
and scores need of each row, which is what pytest-xdist workers get from the controller: the
file is read once per run. A delta exists only when both runs graded the case; under trials
both are the case's aggregate score.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .resultrows import ReadRow, read_rows

#: A score that moved by less than this is unchanged.
UNCHANGED = 0.05
#: How many cases each list of the comparison block names (every regression is named).
LISTED = 10

Key = tuple[str | None, str]
#: A collected case: its eval file (as results rows name it), dataset and eval id.
CaseKey = tuple[str, str, str]
#: What a pytest-xdist worker gets of a baseline: its name and each row's fields but ``data``.
Shared = tuple[str, list[tuple[Any, ...]]]


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
        """``scored``: a baseline, whose rows are compared by score (a graded row without a
        usable score is an error) and of which nothing else is kept; recorded answers are
        not."""
        self.path = path
        self.display = display
        self.option = option
        self.scored = scored
        self._lock = threading.Lock()
        self._rows: dict[Key, ReadRow] | None = None
        #: Every row read, in the file's order (``_rows`` keeps the last of each case).
        self._found: list[ReadRow] = []
        #: The rows that name their eval file, and the files each case's rows name.
        self._filed: dict[tuple[str, str | None, str], ReadRow] = {}
        self._files: dict[Key, set[str]] = {}
        #: The v4 rows of each id, and their suites: a case of a dataset that is no suite of
        #: the file (AgentV named it after the file's ``name``) matches the one row of its id.
        self._suites: dict[str, set[Key]] = {}
        self._suite_names: set[str] = set()
        #: The rows that name their target: a matrix runs a case once per target.
        self._targeted: dict[tuple[str | None, str, str], ReadRow] = {}

    def rows(self) -> dict[Key, ReadRow]:
        """Raises ``ConfigError`` naming the option, the file and the line of a bad row."""
        with self._lock:
            if self._rows is None:
                self._rows = self._index(self._read())
            return self._rows

    def _read(self) -> list[ReadRow]:
        from .errors import AgentvError, ConfigError

        try:
            found = read_rows(self.path, self.display, scored=self.scored, keep=not self.scored)
            return list(found)
        except AgentvError as exc:
            raise ConfigError(f"{self.option}: {exc}") from None

    def shared(self) -> Shared:
        """The rows as plain builtins, for a pytest-xdist worker (``received``)."""
        self.rows()
        return self.display, [row.brief() for row in self._found]

    @classmethod
    def received(cls, shared: Shared) -> PreviousResults:
        """The controller's baseline in a pytest-xdist worker, without reading the file."""
        display, rows = shared
        baseline = cls(Path(display), display, "--agentv-baseline", scored=True)
        baseline._rows = baseline._index([ReadRow(*fields) for fields in rows])
        return baseline

    def _index(self, found: list[ReadRow]) -> dict[Key, ReadRow]:
        self._found = found
        rows: dict[Key, ReadRow] = {}
        for row in found:
            key = (row.dataset, row.case_id)
            rows[key] = row
            if row.suite and row.dataset is not None:
                self._suites.setdefault(row.case_id, set()).add(key)
                self._suite_names.add(row.dataset)
            if row.target is not None:
                self._targeted[(*key, row.target)] = row
            if row.file is not None:
                self._filed[(row.file, *key)] = row
                self._files.setdefault(key, set()).add(row.file)
        return rows

    def find(
        self,
        dataset: str,
        case_id: str,
        file: str | None = None,
        collected: Collection[CaseKey] = (),
        target: str | None = None,
    ) -> ReadRow | None:
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


def graded_score(row: ReadRow | None) -> float | None:
    """A results row's score, if that run graded the case."""
    return None if row is None else row.score


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
