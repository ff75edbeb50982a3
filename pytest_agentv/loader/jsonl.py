"""A JSONL dataset as one eval-file document: its sidecar's file-level keys, and one case per
line, each with a node tree marked at its line so that errors about it point there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ..errors import EvalFileError
from ..jsonlines import json_lines, json_node
from ..paths import sidecar_of
from ..schema.evalfile import JsonlSidecar
from ..spellings import key_at
from ..yamlfile import line_col, parse_yaml, read_text
from .validation import FileWarning, unknown_key_warnings, validate


def jsonl_document(
    path: Path, display: str
) -> tuple[yaml.Node, dict[str, Any], list[FileWarning], tuple[str, Path] | None]:
    """A JSONL dataset as one eval-file document: the sidecar's keys, and one case per line;
    and the sidecar as it is shown and its path, if there is one.

    The sidecar is validated on its own first, so that its problems name the sidecar; a case's
    problems name its line of the ``.jsonl`` file.
    """
    data: dict[str, Any] = {}
    pairs: list[tuple[yaml.Node, yaml.Node]] = []
    warnings: list[FileWarning] = []
    sidecar = sidecar_of(path)
    side: tuple[str, Path] | None = None
    if sidecar is not None:
        shown = str(Path(display).with_name(sidecar.name))
        side = (shown, sidecar)
        side_root, side_data = parse_yaml(sidecar, shown)
        model = validate(JsonlSidecar, side_data, shown, side_root)
        for key in ("evalcases", "tests", "eval_cases"):
            if key in side_data:
                line, col = line_col(key_at(side_root, key) or side_root)
                raise EvalFileError(
                    shown,
                    line,
                    col,
                    f"{key}: a JSONL sidecar holds file-level defaults only; the cases are the "
                    f"lines of {path.name}",
                )
        warnings.extend(unknown_key_warnings(model, side_root, shown, sidecar))
        for key_node, value_node in side_root.value:
            if key_node.value in JsonlSidecar.model_fields or key_node.value == "$schema":
                data[key_node.value] = side_data[key_node.value]
                pairs.append((key_node, value_node))
    cases: list[yaml.Node] = []
    rows: list[Any] = []
    for line, value in json_lines(read_text(path, display), display):
        if not isinstance(value, dict):
            kind = "an array" if isinstance(value, list) else type(value).__name__
            raise EvalFileError(
                display, line, 1, f"each line must be a JSON object (one eval case), got {kind}"
            )
        rows.append(value)
        cases.append(json_node(value, line - 1))
    if not rows:
        raise EvalFileError(display, 1, 1, "no eval cases: every line of the file is blank")
    data["evalcases"] = rows
    cases_key = yaml.ScalarNode("tag:yaml.org,2002:str", "evalcases", cases[0].start_mark)
    sequence = yaml.SequenceNode("tag:yaml.org,2002:seq", cases, cases[0].start_mark)
    mark = yaml.Mark("", 0, 0, 0, None, 0)
    root = yaml.MappingNode("tag:yaml.org,2002:map", [*pairs, (cases_key, sequence)], mark, mark)
    return root, data, warnings, side
