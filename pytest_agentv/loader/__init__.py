"""Eval files (YAML, or JSONL with its YAML sidecar, ``jsonl``) into models, by AgentV's rules.

Errors read ``path:line:col: field.path: problem``: pydantic's error locations are walked down
the YAML node tree (``yamlfile``) to the place the file says it; a JSONL case's node tree is
marked at its line. Unknown keys are warnings that name the closest known key; evaluator kinds
are checked against the registry the caller passes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import yaml

from ..errors import AgentvDeprecationWarning, AgentvWarning, ConfigError, EvalFileError
from ..schema.evalfile import EvalCase, EvalSuite, listed_evaluators
from ..schema.evaluators import EvaluatorConfig
from ..spellings import generations, key_at, locate
from ..yamlfile import Loc, child_at, file_of, line_col, parse_yaml
from .datasets import Datasets
from .dependencies import check_dependencies
from .inputs import with_suite_input, with_vars
from .jsonl import jsonl_document
from .validation import FileWarning, unknown_key_warnings, validate
from .workspacefile import WorkspaceFile, read_workspace_file


@dataclass(frozen=True)
class EntryProblem:
    """What an evaluator kind finds wrong with one of its entries when the file loads: an error
    (the file does not load) or a warning, at ``loc`` inside the entry."""

    loc: Loc
    message: str
    warning: bool = False


class KindRules(Protocol):
    """The evaluator registry as the loader asks it: whether a kind can be used, and what each
    kind checks in its entries when the file loads (a prompt file, weights...)."""

    def problem(self, kind: str) -> str | None: ...

    def entry_needs(self, kind: str) -> str | None: ...

    def check_entry(
        self, entry: EvaluatorConfig, folder: Path, rootdir: Path
    ) -> Iterable[EntryProblem]: ...


@dataclass(frozen=True)
class LoadedFile:
    """A validated eval file plus the positions later errors and reports need."""

    path: Path
    display: str
    suite: EvalSuite
    #: 0-based line of each case's mapping, for ``reportinfo`` and failure headlines.
    case_lines: tuple[int, ...]
    #: ``(line, col)`` of places a runtime error may need to point at (file references...).
    positions: dict[Loc, tuple[int, int]]
    warnings: tuple[FileWarning, ...]
    #: ``.agentv/config.yaml`` globs: referenced files matching one are guidelines.
    guideline_patterns: tuple[str, ...] = ()
    #: The file each case is written in (a dataset the eval file names), as shown and its path;
    #: empty when every case is the eval file's own.
    case_files: tuple[tuple[str, Path], ...] = ()
    #: The file of each position written in another file than the eval file.
    position_files: dict[Loc, str] = field(default_factory=dict)
    #: The workspace files the file and its cases name, by the reference as written.
    workspace_files: dict[str, WorkspaceFile] = field(default_factory=dict)

    def case_file(self, index: int) -> tuple[str, Path]:
        """The file case ``index`` is written in, as shown and its path."""
        return self.case_files[index] if self.case_files else (self.display, self.path)

    def error_at(self, loc: Loc, problem: str, case_index: int | None = None) -> EvalFileError:
        """``path:line:col: field.path: problem`` for something found after loading: where
        ``loc`` is written, else at the case's line (or line 1)."""
        file, line, col = self.display, 1, 1
        if case_index is not None:
            file, line = self.case_file(case_index)[0], self.case_lines[case_index] + 1
        if loc in self.positions:
            file = self.position_files.get(loc, self.display)
            line, col = self.positions[loc]
        return EvalFileError(file, line, col, f"{'.'.join(map(str, loc))}: {problem}")


def _used_key(case_node: yaml.Node, field_name: str) -> str:
    """The spelling (name or alias) a case used for a field, so locations match the file."""
    info = EvalCase.model_fields[field_name]
    for choice in getattr(info.validation_alias, "choices", ()):
        if child_at(case_node, str(choice)) is not None:
            return str(choice)
    return field_name


def load_eval_file(path: Path, display: str, kinds: KindRules, rootdir: Path) -> LoadedFile:
    """Load and validate one eval file (YAML, or ``.jsonl`` with its sidecar); raise
    ``EvalFileError`` on the first problem. ``kinds`` is the evaluator registry's view."""
    warnings: list[FileWarning] = []
    side: tuple[str, Path] | None = None
    datasets = Datasets(path, display, rootdir)
    if path.suffix == ".jsonl":
        root, data, warnings, side = jsonl_document(path, display)
    else:
        root, data = parse_yaml(path, display)
        root, data = datasets.expand(root, data)
        warnings.extend(datasets.warnings)
    data = with_vars(data)
    suite = validate(EvalSuite, data, display, root)

    def written_in(loc: Loc) -> tuple[str, Path | None]:
        """The file ``loc`` is written in: a JSONL dataset's file-level keys are its sidecar's."""
        return side if side is not None and loc[:1] != ("evalcases",) else (display, None)

    def warn(loc: Loc, message: str, category: type[Warning] = AgentvWarning) -> None:
        node, _ = locate(root, loc)
        key = key_at(locate(root, loc[:-1])[0], loc[-1]) if loc else None
        line = line_col(key or node)[0]
        shown, file = written_in(loc)
        warnings.append(FileWarning(line, f"{shown}:{line}: {message}", category, file))

    def problem_at(loc: Loc, message: str, *, at_key: bool = False) -> EvalFileError:
        node, _ = locate(root, loc)
        key = key_at(locate(root, loc[:-1])[0], loc[-1]) if at_key and loc else None
        line, col = line_col(key or node)
        shown = file_of(node, written_in(loc)[0])
        return EvalFileError(shown, line, col, f"{'.'.join(map(str, loc))}: {message}")

    def fail(loc: Loc, message: str, *, at_key: bool = False) -> None:
        raise problem_at(loc, message, at_key=at_key)

    suite, input_places = with_suite_input(suite, data, problem_at)
    warnings.extend(unknown_key_warnings(suite, root, display, files=datasets.files))
    classic, later = generations(data)
    if path.suffix == ".jsonl":  # its `evalcases` is ours, not a name the file wrote
        classic = [(loc, name) for loc, name in classic if loc != ("evalcases",)]
    if classic and later:
        (old_loc, old), (new_loc, new) = classic[0], later[0]
        old_line = line_col(locate(root, old_loc)[0])[0]
        warn(
            new_loc,
            f"this file mixes AgentV generations: classic (v2.5.8) '{old}' at line {old_line} "
            f"and later '{new}' here; pytest-agentv reads both, but AgentV itself reads only "
            "one generation's names",
        )

    first_line: dict[str, str] = {}
    case_lines: list[int] = []
    case_files: list[tuple[str, Path]] = []
    positions: dict[Loc, tuple[int, int]] = {}
    position_files: dict[Loc, str] = {}

    def place(loc: Loc, written: Loc) -> None:
        node, _ = locate(root, written)
        positions[loc] = line_col(node)
        if (shown := file_of(node, display)) != display:
            position_files[loc] = shown

    for index, case in enumerate(suite.evalcases):
        case_node, _ = locate(root, ("evalcases", index))
        case_lines.append(case_node.start_mark.line)
        shown = file_of(case_node, display)
        case_files.append((shown, datasets.files.get(shown, path)))
        id_node, _ = locate(root, ("evalcases", index, "id"))
        if case.id in first_line:
            fail(
                ("evalcases", index, "id"),
                f"duplicate case id '{case.id}' (first defined at {first_line[case.id]})",
            )
        id_line = id_node.start_mark.line + 1
        first_line[case.id] = f"line {id_line}" if shown == display else f"{shown}:{id_line}"
        for m_index, message_model in enumerate(case.input_messages):
            for s_index, segment in enumerate(message_model.content):
                if segment.type == "file":
                    tail = ("input_messages", m_index, "content", s_index, "value")
                    place(("evalcases", index, *tail), input_places[index][m_index][s_index])
        written = ("evalcases", index, _used_key(case_node, "expected_messages"))
        for m_index, message_model in enumerate(case.expected_messages):
            for s_index, segment in enumerate(message_model.content):
                if segment.type == "file":
                    at: Loc = (m_index, "content", s_index, "value")
                    place(("evalcases", index, "expected_messages", *at), (*written, *at))
        for t_index, turn in enumerate(case.turns or ()):
            here: Loc = ("evalcases", index, "turns", t_index)
            for s_index, segment in enumerate(turn.input):
                if segment.type == "file":
                    place((*here, "input", s_index, "value"), (*here, "input", s_index, "value"))
        if case.turns is not None and not (
            case.rubrics or listed_evaluators(case, suite) or any(t.checked for t in case.turns)
        ):
            fail(
                ("evalcases", index, "turns"),
                "nothing grades this conversation: give a turn 'assertions' or an "
                "'expected_output', or the case 'assertions'",
            )
    check_dependencies(suite, fail)
    for index, preprocessor in enumerate(suite.preprocessors or ()):
        try:
            preprocessor.argv(path.parent, rootdir)
        except ConfigError as exc:
            fail(("preprocessors", index, "command"), str(exc))
    placed: list[Loc] = [("execution", "trials")] if suite.execution else []
    placed += [
        ("evalcases", i, "execution", "trials")
        for i, case in enumerate(suite.evalcases)
        if case.execution and case.execution.trials
    ]
    # A workspace given as a file is read at collection (``collect``), its errors placed here.
    placed += [("workspace",)] if isinstance(suite.workspace, str) else []
    placed += [
        ("evalcases", i, "workspace")
        for i, case in enumerate(suite.evalcases)
        if isinstance(case.workspace, str)
    ]
    for loc in placed:
        node, matched = locate(root, loc)
        if matched == len(loc):
            positions[loc] = line_col(node)
    graders: list[tuple[Loc, EvalSuite | EvalCase]] = [(("grader",), suite)]
    graders += [(("evalcases", i, "grader"), case) for i, case in enumerate(suite.evalcases)]
    for loc, owner in graders:
        if owner.grader is not None:
            message = "'grader' is deprecated; use 'evaluator'"
            if owner.evaluator is not None:
                message += " ('evaluator' wins, as both are given)"
            warn(loc, message, AgentvDeprecationWarning)

    found: list[tuple[Loc, EntryProblem]] = []
    for loc, entry in evaluator_locs(suite):
        problem = kinds.problem(entry.type)
        if problem is not None:
            fail((*loc, "type"), problem)
        if entry.type == "rubric":
            warn(
                (*loc, "type"),
                "evaluator type 'rubric' is deprecated; use 'llm_judge' with 'rubrics'",
                AgentvDeprecationWarning,
            )
        found += [(loc, problem) for problem in kinds.check_entry(entry, path.parent, rootdir)]
        weights = (item.weight for item in entry.rubrics or ())
        zero = zero_weights(("rubrics",), "item", weights)
        found += [(loc, zero)] if zero else []
    found += _always_zero(suite)
    for index, case in enumerate(suite.evalcases):
        default_kind = case.evaluator or case.grader or suite.evaluator or suite.grader
        if default_kind is None:
            continue
        if case.evaluator or case.grader:
            where: Loc = ("evalcases", index, "evaluator" if case.evaluator else "grader")
        else:
            where = ("evaluator",) if suite.evaluator else ("grader",)
        problem = kinds.problem(default_kind)
        if problem is not None:
            fail(where, problem)
        needs = kinds.entry_needs(default_kind)
        defaulted = (
            any(turn.expected_output and not turn.assertions for turn in case.turns)
            if case.turns is not None
            else not (case.rubrics or listed_evaluators(case, suite))
        )
        if needs is not None and defaulted:
            fail(where, f"'{default_kind}' as the default kind needs {needs}")
    warned: set[Loc] = set()
    for loc, found_here in found:
        where = (*loc, *found_here.loc)
        if not found_here.warning:
            fail(where, found_here.message)
        elif where not in warned:
            warned.add(where)
            warn(where, f"{'.'.join(map(str, where))}: {found_here.message}")
    workspace_files: dict[str, WorkspaceFile] = {}
    references: list[tuple[Loc, object]] = [(("workspace",), suite.workspace)]
    references += [
        (("evalcases", index, "workspace"), case.workspace)
        for index, case in enumerate(suite.evalcases)
    ]
    for loc, ref in references:
        if isinstance(ref, str) and ref not in workspace_files:
            try:
                workspace_files[ref] = read_workspace_file(ref, path.parent, rootdir)
            except ConfigError as exc:  # no such file (its own errors name their place in it)
                fail(loc, str(exc))
            warnings.extend(workspace_files[ref].warnings)
    return LoadedFile(
        path=path,
        display=display,
        suite=suite,
        case_lines=tuple(case_lines),
        positions=positions,
        warnings=tuple(warnings),
        case_files=tuple(case_files) if datasets.files else (),
        position_files=position_files,
        workspace_files=workspace_files,
    )


def zero_weights(loc: Loc, what: str, weights: Iterable[float]) -> EntryProblem | None:
    """The warning for a weighted list whose weights are all 0. A total weight of 0 scores 0 in
    AgentV, and pytest-agentv keeps AgentV's scores, so such a list fails whatever its items
    earn: the file gets a warning instead of a silent fail."""
    listed = list(weights)
    if not listed or any(listed):
        return None
    return EntryProblem(
        loc,
        f"every {what} has weight 0, so the score is always 0 (as in AgentV); give at least one "
        f"{what} a weight > 0",
        warning=True,
    )


def _always_zero(suite: EvalSuite) -> list[tuple[Loc, EntryProblem]]:
    """The cases' weighted lists (inline rubrics, the evaluators a case uses) whose weights are
    all 0; evaluator entries' own lists are their kinds' to check."""
    found: list[tuple[Loc, EntryProblem | None]] = []
    for index, case in enumerate(suite.evalcases):
        here: Loc = ("evalcases", index)
        rubrics = (item.weight for item in case.rubrics or ())
        found.append((here, zero_weights(("rubrics",), "item", rubrics)))
        if case.rubrics:  # the inline rubric judge weighs 1 among the case's evaluators
            continue
        if case.execution and case.execution.evaluators:
            used: Loc = (*here, "execution", "evaluators")
        elif case.evaluators:
            used = (*here, "evaluators")
        else:
            used = ("execution", "evaluators")
        weights = (entry.weight for entry in listed_evaluators(case, suite))
        found.append(((), zero_weights(used, "evaluator", weights)))
    return [(loc, problem) for loc, problem in found if problem is not None]


def _with_members(loc: Loc, entry: EvaluatorConfig) -> Iterator[tuple[Loc, EvaluatorConfig]]:
    yield loc, entry
    for index, member in enumerate(entry.members):
        yield from _with_members((*loc, "evaluators", index), member)


def evaluator_locs(suite: EvalSuite) -> Iterator[tuple[Loc, EvaluatorConfig]]:
    """Every evaluator entry written in the file (composite members too), with where it was
    written."""
    if suite.execution and suite.execution.evaluators:
        for index, entry in enumerate(suite.execution.evaluators):
            yield from _with_members(("execution", "evaluators", index), entry)
    for index, entry in enumerate(suite.assertions or ()):
        yield from _with_members(("assertions", index), entry)
    for c_index, case in enumerate(suite.evalcases):
        if case.execution and case.execution.evaluators:
            for index, entry in enumerate(case.execution.evaluators):
                loc: Loc = ("evalcases", c_index, "execution", "evaluators", index)
                yield from _with_members(loc, entry)
        for index, entry in enumerate(case.evaluators or ()):
            yield from _with_members(("evalcases", c_index, "evaluators", index), entry)
        for t_index, turn in enumerate(case.turns or ()):
            for index, entry in enumerate(turn.assertions or ()):
                loc = ("evalcases", c_index, "turns", t_index, "assertions", index)
                yield from _with_members(loc, entry)
