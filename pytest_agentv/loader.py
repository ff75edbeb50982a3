"""Eval files, targets files and ``.agentv`` config into models, by AgentV's rules.

Errors read ``path:line:col: field.path: problem``: pydantic's error locations are walked down
the YAML node tree (``yamlfile``) to the place the file says it. Unknown keys are warnings that
name the closest known key; evaluator kinds are checked against the registry the caller passes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from .errors import AgentvDeprecationWarning, AgentvWarning, EvalFileError, did_you_mean
from .models import (
    KIND_SPECS,
    CompositeSpec,
    EvalCase,
    EvalSuite,
    EvaluatorConfig,
    TargetConfig,
    TargetsFile,
    canonical_kind,
)
from .yamlfile import Loc, child_at, key_at, line_col, locate, parse_yaml

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class FileWarning:
    line: int
    message: str
    category: type[Warning] = AgentvWarning


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

    def position(self, loc: Loc, case_index: int) -> tuple[int, int]:
        return self.positions.get(loc, (self.case_lines[case_index] + 1, 1))


@dataclass(frozen=True)
class LoadedTargets:
    path: Path
    display: str
    model: TargetsFile
    positions: dict[str, tuple[int, int]] = field(default_factory=dict)

    def where(self, target: TargetConfig, key: str | None = None) -> str:
        line, col = self.positions.get(
            f"{target.name}.{key}" if key else target.name,
            self.positions.get(target.name, (1, 1)),
        )
        return f"{self.display}:{line}:{col}"


def _validation_error(display: str, root: yaml.Node, exc: ValidationError) -> EvalFileError:
    described: dict[str, tuple[int, int, str]] = {}
    for err in exc.errors(include_url=False):
        loc = tuple(err["loc"])
        node, matched = locate(root, loc)
        shown = loc[:matched] + (loc[matched : matched + 1] if err["type"] == "missing" else ())
        message = str(err["msg"])
        if err["type"] == "missing":
            message = "required field is missing"
        elif message.startswith(("Value error, ", "Assertion failed, ")):
            message = message.split(", ", 1)[1]
        field_path = ".".join(map(str, shown)) or "(top level)"
        described.setdefault(field_path, (*line_col(node), message))
    first_path, (line, col, message) = next(iter(described.items()))
    more = f" (+{len(described) - 1} more)" if len(described) > 1 else ""
    return EvalFileError(display, line, col, f"{first_path}: {message}{more}")


def _known_names(model: type[BaseModel]) -> list[str]:
    names: list[str] = []
    for name, info in model.model_fields.items():
        names.append(info.alias or name)
        choices = getattr(info.validation_alias, "choices", None)
        if choices:
            names.extend(str(choice) for choice in choices)
    return names


def _unknown_keys(
    model: BaseModel,
    loc: Loc,
    skip: tuple[type[BaseModel], ...],
    also_known: Sequence[str] = (),
) -> Iterator[tuple[Loc, str, list[str]]]:
    """Yield ``(loc, key, known keys)`` for every unknown key in a validated model tree.

    A built-in kind's settings sit in its evaluator entry: their unknown keys are the entry's.
    """
    if not isinstance(model, skip):
        for key in model.model_extra or ():
            yield (*loc, key), key, [*_known_names(type(model)), *also_known]
    if isinstance(model, EvaluatorConfig) and model.spec is not None:
        yield from _unknown_keys(model.spec, loc, skip, _known_names(EvaluatorConfig))
    for name, info in type(model).model_fields.items():
        value = getattr(model, name)
        part = info.alias or name
        if isinstance(value, BaseModel):
            yield from _unknown_keys(value, (*loc, part), skip)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                if isinstance(item, BaseModel):
                    yield from _unknown_keys(item, (*loc, part, index), skip)


def _validate(model: type[M], data: Any, display: str, root: yaml.Node) -> M:
    if not isinstance(data, dict):
        kind = "a list" if isinstance(data, list) else type(data).__name__
        line, col = line_col(root)
        raise EvalFileError(display, line, col, f"expected a mapping at the top level, got {kind}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise _validation_error(display, root, exc) from None


def _used_key(case_node: yaml.Node, field_name: str) -> str:
    """The spelling (name or alias) a case used for a field, so locations match the file."""
    info = EvalCase.model_fields[field_name]
    for choice in getattr(info.validation_alias, "choices", ()):
        if child_at(case_node, str(choice)) is not None:
            return str(choice)
    return field_name


def load_eval_file(
    path: Path,
    display: str,
    check_kind: Callable[[str], str | None],
) -> LoadedFile:
    """Load and validate one eval file; raise ``EvalFileError`` on the first problem.

    ``check_kind`` is the evaluator registry's rule: the problem with a kind, or None.
    """
    root, data = parse_yaml(path, display)
    suite = _validate(EvalSuite, data, display, root)
    warnings: list[FileWarning] = []

    def warn(loc: Loc, message: str, category: type[Warning] = AgentvWarning) -> None:
        node, _ = locate(root, loc)
        key = key_at(locate(root, loc[:-1])[0], loc[-1]) if loc else None
        line = line_col(key or node)[0]
        warnings.append(FileWarning(line, f"{display}:{line}: {message}", category))

    def fail(loc: Loc, message: str, *, at_key: bool = False) -> None:
        node, _ = locate(root, loc)
        key = key_at(locate(root, loc[:-1])[0], loc[-1]) if at_key and loc else None
        line, col = line_col(key or node)
        raise EvalFileError(display, line, col, f"{'.'.join(map(str, loc))}: {message}")

    for loc, key, known in _unknown_keys(suite, (), (EvaluatorConfig, TargetConfig)):
        warn(
            loc,
            f"{'.'.join(map(str, loc))}: unknown key '{key}' is ignored{did_you_mean(key, known)}",
        )

    first_line: dict[str, int] = {}
    case_lines: list[int] = []
    positions: dict[Loc, tuple[int, int]] = {}
    for index, case in enumerate(suite.evalcases):
        case_node, _ = locate(root, ("evalcases", index))
        case_lines.append(case_node.start_mark.line)
        id_node, _ = locate(root, ("evalcases", index, "id"))
        if case.id in first_line:
            fail(
                ("evalcases", index, "id"),
                f"duplicate case id '{case.id}' (first defined at line {first_line[case.id]})",
            )
        first_line[case.id] = id_node.start_mark.line + 1
        for field_name in ("input_messages", "expected_messages"):
            written = ("evalcases", index, _used_key(case_node, field_name))
            for m_index, message_model in enumerate(getattr(case, field_name)):
                for s_index, segment in enumerate(message_model.content):
                    if segment.type == "file":
                        tail = (m_index, "content", s_index, "value")
                        node, _ = locate(root, (*written, *tail))
                        positions[("evalcases", index, field_name, *tail)] = line_col(node)
    graders: list[tuple[Loc, EvalSuite | EvalCase]] = [(("grader",), suite)]
    graders += [(("evalcases", i, "grader"), case) for i, case in enumerate(suite.evalcases)]
    for loc, owner in graders:
        if owner.grader is not None:
            message = "'grader' is deprecated; use 'evaluator'"
            if owner.evaluator is not None:
                message += " ('evaluator' wins, as both are given)"
            warn(loc, message, AgentvDeprecationWarning)

    for loc, entry in evaluator_locs(suite):
        problem = check_kind(entry.type)
        if problem is not None:
            fail((*loc, "type"), problem)
        if entry.type == "rubric":
            warn(
                (*loc, "type"),
                "evaluator type 'rubric' is deprecated; use 'llm_judge' with 'rubrics'",
                AgentvDeprecationWarning,
            )
        for key in ("prompt", "cwd", "script"):
            if getattr(entry, key) is not None:
                node, _ = locate(root, (*loc, key))
                positions[(*loc, key)] = line_col(node)
        if isinstance(entry.spec, CompositeSpec) and entry.spec.aggregator.prompt:
            node, _ = locate(root, (*loc, "aggregator", "prompt"))
            positions[(*loc, "aggregator", "prompt")] = line_col(node)
    for index, case in enumerate(suite.evalcases):
        default_kind = case.evaluator or case.grader or suite.evaluator or suite.grader
        if default_kind is None:
            continue
        if case.evaluator or case.grader:
            where: Loc = ("evalcases", index, "evaluator" if case.evaluator else "grader")
        else:
            where = ("evaluator",) if suite.evaluator else ("grader",)
        problem = check_kind(default_kind)
        if problem is not None:
            fail(where, problem)
        listed = bool(
            case.rubrics
            or case.evaluators
            or (case.execution and case.execution.evaluators)
            or (suite.execution and suite.execution.evaluators)
        )
        if canonical_kind(default_kind) == "code_judge" and not listed:
            fail(
                where,
                f"'{default_kind}' as the default kind needs a script: list the code judge under "
                "'evaluators' with its 'script'",
            )
        if canonical_kind(default_kind) in KIND_SPECS and not listed:
            fail(
                where,
                f"'{default_kind}' as the default kind needs its settings: list it under "
                "'evaluators' with them",
            )
    return LoadedFile(
        path=path,
        display=display,
        suite=suite,
        case_lines=tuple(case_lines),
        positions=positions,
        warnings=tuple(warnings),
    )


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
    for c_index, case in enumerate(suite.evalcases):
        if case.execution and case.execution.evaluators:
            for index, entry in enumerate(case.execution.evaluators):
                loc: Loc = ("evalcases", c_index, "execution", "evaluators", index)
                yield from _with_members(loc, entry)
        for index, entry in enumerate(case.evaluators or ()):
            yield from _with_members(("evalcases", c_index, "evaluators", index), entry)


def load_targets_file(path: Path, display: str) -> LoadedTargets:
    root, data = parse_yaml(path, display)
    if isinstance(data, list):
        data = {"targets": data}
        root_for_errors: yaml.Node = yaml.MappingNode(
            "tag:yaml.org,2002:map",
            [(yaml.ScalarNode("tag:yaml.org,2002:str", "targets"), root)],
            start_mark=root.start_mark,
            end_mark=root.end_mark,
        )
    else:
        root_for_errors = root
    model = _validate(TargetsFile, data, display, root_for_errors)
    positions: dict[str, tuple[int, int]] = {}
    for index, target in enumerate(model.targets):
        node, _ = locate(root_for_errors, ("targets", index))
        positions[target.name] = line_col(node)
        for key in target.settings:
            key_node = child_at(node, key)
            if key_node is not None:
                positions[f"{target.name}.{key}"] = line_col(key_node)
    return LoadedTargets(path=path, display=display, model=model, positions=positions)
