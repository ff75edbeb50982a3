"""YAML → models, with ``path:line:col: field.path: problem`` errors and contained file references.

YAML is parsed once into a node tree (which keeps line marks) and constructed from it with a safe
loader. Before construction the tree is checked for what PyYAML lets through silently or turns
into tracebacks: duplicate keys, nesting deeper than ``MAX_DEPTH``, alias bombs and recursive
aliases. Files larger than ``MAX_FILE_BYTES`` are refused before they are read.
"""

from __future__ import annotations

import difflib
import os
import re
import stat
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from .errors import AgentvDeprecationWarning, AgentvWarning, ConfigError, EvalFileError
from .models import (
    EvalCase,
    EvalSuite,
    EvaluatorConfig,
    TargetConfig,
    TargetsFile,
    canonical_kind,
)

MAX_FILE_BYTES = 10 * 1024 * 1024
MAX_DEPTH = 100
#: How many nodes aliases may add on top of the nodes actually written in the file.
MAX_ALIAS_EXPANSION = 100_000

_BaseLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_BaseLoader):  # type: ignore[valid-type,misc]
    """Safe loader that keeps YAML timestamps as the strings they were written as."""


_Loader.add_constructor("tag:yaml.org,2002:timestamp", yaml.SafeLoader.construct_yaml_str)

Loc = tuple[int | str, ...]
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


def display_path(path: Path, rootdir: Path) -> str:
    try:
        return path.relative_to(rootdir).as_posix()
    except ValueError:
        return str(path)


def parse_yaml(path: Path, display: str) -> tuple[yaml.Node, Any]:
    """Parse a YAML file safely into ``(node tree, data)`` or raise ``EvalFileError``."""
    try:
        info = path.stat()
    except OSError as exc:
        raise EvalFileError(display, 1, 1, f"cannot read file: {exc.strerror}") from None
    if info.st_size > MAX_FILE_BYTES:
        raise EvalFileError(
            display,
            1,
            1,
            f"file is {info.st_size:,} bytes; eval files are limited to {MAX_FILE_BYTES:,} bytes",
        )
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise EvalFileError(display, line, 1, "file is not valid UTF-8 text") from None
    loader = _Loader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            raise EvalFileError(display, 1, 1, "file is empty; expected a mapping")
        _check_tree(root, display, may_alias="&" in text or "*" in text)
        data = loader.construct_document(root)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        problem = exc.problem or exc.context or "invalid YAML"
        raise EvalFileError(display, line, col, f"invalid YAML: {problem}") from None
    except yaml.YAMLError as exc:
        raise EvalFileError(display, 1, 1, f"invalid YAML: {exc}") from None
    except RecursionError:
        raise EvalFileError(
            display, 1, 1, f"YAML is nested too deeply (the limit is {MAX_DEPTH} levels)"
        ) from None
    except (ValueError, OverflowError) as exc:
        raise EvalFileError(display, 1, 1, f"a YAML value cannot be read: {exc}") from None
    finally:
        loader.dispose()
    return root, data


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_tree(root: yaml.Node, display: str, may_alias: bool) -> None:
    """Reject duplicate keys and deep nesting (and, if the file has anchors, alias tricks)."""
    if may_alias:
        _check_aliases(root, display)
    stack: list[tuple[yaml.Node, int]] = [(root, 0)]
    while stack:
        node, depth = stack.pop()
        if depth >= MAX_DEPTH:
            _fail(display, node, f"YAML is nested deeper than {MAX_DEPTH} levels")
        if isinstance(node, yaml.MappingNode):
            _check_duplicate_keys(node, display)
        stack.extend(
            (child, depth + 1)
            for child in _children(node)
            if not isinstance(child, yaml.ScalarNode)
        )


def _check_aliases(root: yaml.Node, display: str) -> None:
    """Reject recursive aliases and alias bombs: count expanded nodes, sharing the counts."""
    size: dict[int, int] = {}
    on_stack: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    cap = MAX_ALIAS_EXPANSION * 10
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_stack.discard(key)
            size[key] = min(cap, 1 + sum(size[id(k)] for k in _children(node)))
            continue
        if key in size:
            continue
        if key in on_stack:
            _fail(display, node, "recursive alias: a node refers to itself")
        on_stack.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node))
    if size[id(root)] > len(size) + MAX_ALIAS_EXPANSION:
        _fail(
            display,
            root,
            "YAML aliases expand to too many nodes (alias bomb?); "
            f"at most {MAX_ALIAS_EXPANSION:,} nodes may come from aliases",
        )


def _check_duplicate_keys(node: yaml.MappingNode, display: str) -> None:
    seen: dict[str, yaml.Node] = {}
    for key_node, _ in node.value:
        if not isinstance(key_node, yaml.ScalarNode) or key_node.tag.endswith(":merge"):
            continue
        first = seen.setdefault(key_node.value, key_node)
        if first is not key_node:
            _fail(
                display,
                key_node,
                f"duplicate key '{key_node.value}' (first defined at line "
                f"{first.start_mark.line + 1}); YAML would silently keep only the last one",
            )


def _fail(display: str, node: yaml.Node, message: str) -> None:
    raise EvalFileError(display, node.start_mark.line + 1, node.start_mark.column + 1, message)


def _child(node: yaml.Node, part: int | str) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.value == str(part):
                found: yaml.Node = value_node
                return found
        return None
    if isinstance(node, yaml.SequenceNode) and isinstance(part, int):
        items: list[yaml.Node] = node.value
        return items[part] if 0 <= part < len(items) else None
    return None


def _key_node(node: yaml.Node, part: int | str) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.value == str(part):
                return key_node
    return None


def locate(root: yaml.Node, loc: Loc) -> tuple[yaml.Node, int]:
    """Walk ``loc`` down the node tree; return the deepest node found and how many parts matched."""
    node = root
    for matched, part in enumerate(loc):
        child = _child(node, part)
        if child is None:
            return node, matched
        node = child
    return node, len(loc)


def _mark(node: yaml.Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


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
        described.setdefault(field_path, (*_mark(node), message))
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
    model: BaseModel, loc: Loc, skip: tuple[type[BaseModel], ...]
) -> Iterator[tuple[Loc, str, list[str]]]:
    """Yield ``(loc, key, known keys)`` for every unknown key in a validated model tree."""
    if not isinstance(model, skip):
        for key in model.model_extra or ():
            yield (*loc, key), key, _known_names(type(model))
    for name, info in type(model).model_fields.items():
        value = getattr(model, name)
        part = info.alias or name
        if isinstance(value, BaseModel):
            yield from _unknown_keys(value, (*loc, part), skip)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                if isinstance(item, BaseModel):
                    yield from _unknown_keys(item, (*loc, part, index), skip)


def _suggest(key: str, known: Sequence[str]) -> str:
    close = difflib.get_close_matches(key, known, n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _validate(model: type[M], data: Any, display: str, root: yaml.Node) -> M:
    if not isinstance(data, dict):
        kind = "a list" if isinstance(data, list) else type(data).__name__
        line, col = _mark(root)
        raise EvalFileError(display, line, col, f"expected a mapping at the top level, got {kind}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise _validation_error(display, root, exc) from None


def _used_key(case_node: yaml.Node, field_name: str) -> str:
    """The spelling (name or alias) a case used for a field, so locations match the file."""
    info = EvalCase.model_fields[field_name]
    for choice in getattr(info.validation_alias, "choices", ()):
        if _child(case_node, str(choice)) is not None:
            return str(choice)
    return field_name


def load_eval_file(
    path: Path,
    display: str,
    is_known_kind: Callable[[str], bool],
    known_kinds: Callable[[], list[str]],
) -> LoadedFile:
    """Load and validate one eval file; raise ``EvalFileError`` on the first problem."""
    root, data = parse_yaml(path, display)
    suite = _validate(EvalSuite, data, display, root)
    warnings: list[FileWarning] = []

    def warn(loc: Loc, message: str, category: type[Warning] = AgentvWarning) -> None:
        node, _ = locate(root, loc)
        key = _key_node(locate(root, loc[:-1])[0], loc[-1]) if loc else None
        line = _mark(key or node)[0]
        warnings.append(FileWarning(line, f"{display}:{line}: {message}", category))

    def fail(loc: Loc, message: str, *, at_key: bool = False) -> None:
        node, _ = locate(root, loc)
        key = _key_node(locate(root, loc[:-1])[0], loc[-1]) if at_key and loc else None
        line, col = _mark(key or node)
        raise EvalFileError(display, line, col, f"{'.'.join(map(str, loc))}: {message}")

    for loc, key, known in _unknown_keys(suite, (), (EvaluatorConfig, TargetConfig)):
        warn(
            loc, f"{'.'.join(map(str, loc))}: unknown key '{key}' is ignored{_suggest(key, known)}"
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
                        positions[("evalcases", index, field_name, *tail)] = _mark(node)
    graders: list[tuple[Loc, EvalSuite | EvalCase]] = [(("grader",), suite)]
    graders += [(("evalcases", i, "grader"), case) for i, case in enumerate(suite.evalcases)]
    for loc, owner in graders:
        if owner.grader is not None:
            message = "'grader' is deprecated; use 'evaluator'"
            if owner.evaluator is not None:
                message += " ('evaluator' wins, as both are given)"
            warn(loc, message, AgentvDeprecationWarning)

    for loc, entry in evaluator_locs(suite):
        if not is_known_kind(entry.type):
            known = known_kinds()
            fail(
                (*loc, "type"),
                f"unknown evaluator type '{entry.type}'{_suggest(entry.type, known)}; known: "
                f"{', '.join(known)}. Add kinds with the pytest_agentv_make_evaluator hook",
            )
        if entry.type == "rubric":
            warn(
                (*loc, "type"),
                "evaluator type 'rubric' is deprecated; use 'llm_judge' with 'rubrics'",
                AgentvDeprecationWarning,
            )
        for key in ("prompt", "cwd", "script"):
            if getattr(entry, key) is not None:
                node, _ = locate(root, (*loc, key))
                positions[(*loc, key)] = _mark(node)
    for index, case in enumerate(suite.evalcases):
        default_kind = case.evaluator or case.grader or suite.evaluator or suite.grader
        if default_kind is None:
            continue
        if case.evaluator or case.grader:
            where: Loc = ("evalcases", index, "evaluator" if case.evaluator else "grader")
        else:
            where = ("evaluator",) if suite.evaluator else ("grader",)
        if not is_known_kind(default_kind):
            kinds = ", ".join(known_kinds())
            fail(where, f"unknown evaluator kind '{default_kind}'; known: {kinds}")
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
    return LoadedFile(
        path=path,
        display=display,
        suite=suite,
        case_lines=tuple(case_lines),
        positions=positions,
        warnings=tuple(warnings),
    )


def evaluator_locs(suite: EvalSuite) -> Iterator[tuple[Loc, EvaluatorConfig]]:
    """Every evaluator entry written in the file, with where it was written."""
    if suite.execution and suite.execution.evaluators:
        for index, entry in enumerate(suite.execution.evaluators):
            yield ("execution", "evaluators", index), entry
    for c_index, case in enumerate(suite.evalcases):
        if case.execution and case.execution.evaluators:
            for index, entry in enumerate(case.execution.evaluators):
                yield ("evalcases", c_index, "execution", "evaluators", index), entry
        for index, entry in enumerate(case.evaluators or ()):
            yield ("evalcases", c_index, "evaluators", index), entry


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
        positions[target.name] = _mark(node)
        for key in target.settings:
            key_node = _child(node, key)
            if key_node is not None:
                positions[f"{target.name}.{key}"] = _mark(key_node)
    return LoadedTargets(path=path, display=display, model=model, positions=positions)


def search_roots(start: Path, rootdir: Path) -> list[Path]:
    """The folder itself, then each ancestor up to and including the rootdir."""
    roots = [start]
    if start == rootdir or rootdir not in start.parents:
        return roots
    for parent in start.parents:
        roots.append(parent)
        if parent == rootdir:
            break
    return roots


_ENCODED_DOTS = re.compile(r"%2e", re.IGNORECASE)


def resolve_reference(ref: str, *, start: Path, rootdir: Path, what: str = "file") -> Path:
    """Find a referenced file inside the rootdir, or raise ``ConfigError`` saying why not.

    Relative paths are tried against ``start`` and each ancestor up to the rootdir. Whatever the
    spelling (``..``, an absolute path, a symlink), the real path must stay inside the rootdir.
    The message names the path as written, never the resolved absolute path.
    """
    if "\x00" in ref or not ref.strip():
        raise ConfigError(f"{what} reference {ref!r} is not a valid path")
    if _ENCODED_DOTS.search(ref):
        raise ConfigError(f"{what} reference '{ref}' contains URL-encoded dots; write a plain path")
    root = rootdir.resolve()
    written = Path(ref)
    candidates = (
        [written] if written.is_absolute() else [d / written for d in search_roots(start, root)]
    )
    for candidate in candidates:
        real = Path(os.path.realpath(candidate))
        if not real.exists():
            continue
        if not real.is_relative_to(root):
            raise ConfigError(f"{what} reference '{ref}' resolves outside the rootdir; refused")
        mode = real.stat().st_mode
        if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
            raise ConfigError(f"{what} reference '{ref}' is not a regular file")
        return real
    if all(not Path(os.path.realpath(c)).is_relative_to(root) for c in candidates):
        raise ConfigError(f"{what} reference '{ref}' resolves outside the rootdir; refused")
    raise ConfigError(
        f"{what} '{ref}' not found (searched from the eval file's folder up to the rootdir)"
    )


def read_reference(path: Path, ref: str) -> str:
    if path.is_dir():
        raise ConfigError(f"file reference '{ref}' is a directory, not a file")
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise ConfigError(
            f"file reference '{ref}' is {size:,} bytes; the limit is {MAX_FILE_BYTES:,}"
        )
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"file reference '{ref}' is not UTF-8 text") from None
