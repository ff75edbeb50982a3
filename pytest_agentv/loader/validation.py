"""A YAML document validated against a model, with the errors and warnings every file reader
gives: ``path:line:col: field.path: problem``, where pydantic's error location is walked down the
node tree to the key the file wrote (under whichever of its spellings), and a warning for each
unknown key that names the closest known key.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from ..errors import AgentvWarning, EvalFileError, did_you_mean
from ..schema.base import problem_text
from ..schema.evaluators import EvaluatorConfig
from ..schema.targets import TargetConfig
from ..spellings import SPELLED_TWICE, key_at, locate
from ..yamlfile import Loc, aliased, file_of, line_col, only_anchors

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class FileWarning:
    line: int
    message: str
    category: type[Warning] = AgentvWarning
    #: The file the warning is about, when it is not the eval file (a sidecar, a config file).
    path: Path | None = None


def _validation_error(display: str, root: yaml.Node, exc: ValidationError) -> EvalFileError:
    described: dict[str, tuple[str, int, int, str]] = {}
    for err in exc.errors(include_url=False):
        loc = tuple(err["loc"])
        node, matched = locate(root, loc)
        if err["type"] == SPELLED_TWICE and matched == len(loc):
            node = key_at(locate(root, loc[:-1])[0], loc[-1]) or node
        named = loc[:matched] + (loc[matched : matched + 1] if err["type"] == "missing" else ())
        message = problem_text(err)
        field_path = ".".join(map(str, named)) or "(top level)"
        described.setdefault(field_path, (file_of(node, display), *line_col(node), message))
    first_path, (file, line, col, message) = next(iter(described.items()))
    more = f" (+{len(described) - 1} more)" if len(described) > 1 else ""
    return EvalFileError(file, line, col, f"{first_path}: {message}{more}")


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


def validate(model: type[M], data: Any, display: str, root: yaml.Node) -> M:
    if not isinstance(data, dict):
        kind = "a list" if isinstance(data, list) else type(data).__name__
        line, col = line_col(root)
        raise EvalFileError(display, line, col, f"expected a mapping at the top level, got {kind}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise _validation_error(display, root, exc) from None


def unknown_key_warnings(
    model: BaseModel,
    root: yaml.Node,
    display: str,
    path: Path | None = None,
    files: dict[str, Path] | None = None,
) -> Iterator[FileWarning]:
    """A warning for each unknown key, in the file it is written in (``files``: the datasets
    an eval file's cases were read from, by how they are shown); not for one that only holds
    what the file uses through YAML aliases (``only_anchors``)."""
    twice: set[int] | None = None
    for loc, key, known in _unknown_keys(model, (), (EvaluatorConfig, TargetConfig)):
        node, matched = locate(root, loc)
        twice = aliased(root) if twice is None else twice
        if matched == len(loc) and only_anchors(node, twice):
            continue
        key_node = key_at(locate(root, loc[:-1])[0], loc[-1])
        line = line_col(key_node or node)[0]
        message = (
            f"{'.'.join(map(str, loc))}: unknown key '{key}' is ignored{did_you_mean(key, known)}"
        )
        shown = file_of(key_node or node, display)
        where = (files or {}).get(shown, path)
        yield FileWarning(line, f"{shown}:{line}: {message}", path=where)
