"""External datasets, as AgentV v4 reads them: ``tests:`` naming a file (a YAML list of cases,
JSON Lines, or CSV: ``csvcases``) or a folder of case folders (each a ``case.yaml``, its id the
folder's name unless it gives one, a ``workspace/`` in it its workspace template), and
``file://`` entries among a ``tests:`` list (a path or a glob: ``file://cases/**/*.yaml``).

The cases found take the place of the reference, in order (a glob's files sorted), and keep
their node trees, marked with the file they were read from: an error about a case names the
file, line and column where it is written. Every path follows the rootdir policy
(``paths.resolve_reference``): none may lead outside the rootdir.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError, EvalFileError
from ..jsonlines import json_lines, json_node, value_node
from ..paths import display_path, glob_match, resolve_reference
from ..yamlfile import child_at, line_col, mark_file, parse_yaml, read_text
from .csvcases import csv_cases
from .validation import FileWarning

CASE_KEYS = ("evalcases", "tests", "eval_cases")
FILE_PROTOCOL = "file://"
_GLOB = ("*", "?", "{")
_CASE_FILES = ("case.yaml", "case.yml")
Case = tuple[Any, yaml.Node]


@dataclass
class Datasets:
    """What expanding a file's dataset references found: the files read (by how errors name
    them) and the warnings (a glob that matched nothing, an empty file, a folder without a
    ``case.yaml``)."""

    path: Path
    display: str
    rootdir: Path
    files: dict[str, Path] = field(default_factory=dict)
    warnings: list[FileWarning] = field(default_factory=list)

    def expand(self, root: yaml.Node, data: Any) -> tuple[yaml.Node, Any]:
        """The document with its dataset references replaced by the cases they name."""
        if not isinstance(data, dict):
            return root, data
        key = next((k for k in CASE_KEYS if k in data), None)
        node = child_at(root, key) if key is not None else None
        if key is None or node is None:
            return root, data
        value = data[key]
        if isinstance(value, str):
            cases = self._reference(value, node, key, folders=True)
        elif isinstance(value, list) and any(_is_reference(item) for item in value):
            cases = []
            for index, (item, item_node) in enumerate(zip(value, node.value, strict=True)):
                if _is_reference(item):
                    ref = item[len(FILE_PROTOCOL) :]
                    cases += self._reference(ref, item_node, f"{key}.{index}", folders=False)
                else:
                    cases.append((item, item_node))
        else:
            return root, data
        sequence = yaml.SequenceNode(
            "tag:yaml.org,2002:seq", [n for _, n in cases], node.start_mark, node.end_mark
        )
        pairs = [(k, sequence if v is node else v) for k, v in root.value]
        mapping = yaml.MappingNode("tag:yaml.org,2002:map", pairs, root.start_mark, root.end_mark)
        return mapping, {**data, key: [value for value, _ in cases]}

    def _error(self, node: yaml.Node, where: str, problem: str) -> EvalFileError:
        return EvalFileError(self.display, *line_col(node), f"{where}: {problem}")

    def _warn(self, node: yaml.Node, where: str, problem: str) -> None:
        line = line_col(node)[0]
        self.warnings.append(FileWarning(line, f"{self.display}:{line}: {where}: {problem}"))

    def _reference(self, ref: str, node: yaml.Node, where: str, *, folders: bool) -> list[Case]:
        """The cases a reference names, in order."""
        if any(char in ref for char in _GLOB):
            found = self._glob(ref, node, where)
            if not found:
                self._warn(node, where, f"'{ref}' matches no file; it adds no cases")
            return [case for file in found for case in self._file(file, node, where)]
        try:
            target = resolve_reference(
                ref, start=self.path.parent, rootdir=self.rootdir, what="dataset"
            )
        except ConfigError as exc:
            raise self._error(node, where, str(exc)) from None
        if target.is_dir():
            if not folders:
                raise self._error(node, where, f"'{ref}' is a folder; a file:// entry names files")
            return self._folders(target, node, where)
        return self._file(target, node, where)

    def _glob(self, pattern: str, node: yaml.Node, where: str) -> list[Path]:
        """The files a glob matches under its fixed leading folders, sorted; a match (or the
        folder searched) outside the rootdir is refused."""
        parts = Path(os.path.normpath(self.path.parent / pattern)).parts
        fixed = next(i for i, part in enumerate(parts) if any(c in part for c in _GLOB))
        base, rest = Path(*parts[:fixed]), "/".join(parts[fixed:])
        root = self.rootdir.resolve()
        outside = f"dataset reference '{pattern}' resolves outside the rootdir; refused"
        if not Path(os.path.realpath(base)).is_relative_to(root):
            raise self._error(node, where, outside)
        matches: list[Path] = []
        for folder, _, names in os.walk(base):
            for name in names:
                file = Path(folder, name)
                if glob_match(rest, file.relative_to(base).as_posix()):
                    if not Path(os.path.realpath(file)).is_relative_to(root):
                        raise self._error(node, where, outside)
                    matches.append(file)
        return sorted(matches)

    def _file(self, file: Path, node: yaml.Node, where: str) -> list[Case]:
        """The cases of one dataset file, by its suffix."""
        shown = display_path(Path(os.path.realpath(file)), self.rootdir.resolve())
        suffix = file.suffix.lower()
        if suffix not in (".yaml", ".yml", ".jsonl", ".csv"):
            raise self._error(
                node,
                where,
                f"'{shown}' is not a dataset AgentV reads: use .yaml, .yml, .jsonl (or .csv)",
            )
        self.files[shown] = file
        text = read_text(file, shown)
        if not text.strip():
            self._warn(node, where, f"'{shown}' is empty; it adds no cases")
            return []
        if suffix == ".csv":
            return list(csv_cases(text, shown))
        if suffix == ".jsonl":
            cases = []
            for line, value in json_lines(text, shown):
                if not isinstance(value, dict):
                    raise EvalFileError(shown, line, 1, "each line must be a JSON object (a case)")
                cases.append((value, json_node(value, line - 1, shown)))
            return cases
        root, data = parse_yaml(file, shown)
        mark_file(root, shown)
        if not isinstance(data, list):
            kind = "a mapping" if isinstance(data, dict) else type(data).__name__
            raise EvalFileError(
                shown, *line_col(root), f"a dataset holds a list of cases, not {kind}"
            )
        for item, item_node in zip(data, root.value, strict=True):
            if not isinstance(item, dict):
                raise EvalFileError(shown, *line_col(item_node), "each case must be a mapping")
        return list(zip(data, root.value, strict=True))

    def _folders(self, folder: Path, node: yaml.Node, where: str) -> list[Case]:
        """A folder of case folders, by name: each ``case.yaml`` is one case."""
        cases: list[Case] = []
        for sub in sorted(p for p in folder.iterdir() if p.is_dir()):
            found = next((sub / n for n in _CASE_FILES if (sub / n).is_file()), None)
            if found is None:
                self._warn(node, where, f"folder '{sub.name}' has no case.yaml; it is skipped")
                continue
            shown = display_path(Path(os.path.realpath(found)), self.rootdir.resolve())
            self.files[shown] = found
            root, data = parse_yaml(found, shown)
            mark_file(root, shown)
            if not isinstance(data, dict):
                raise EvalFileError(
                    shown, *line_col(root), "a case.yaml holds one case (a mapping)"
                )
            added: dict[str, Any] = {"id": sub.name} if data.get("id") is None else {}
            if data.get("workspace") is None and (sub / "workspace").is_dir():
                template = os.path.relpath(sub / "workspace", self.path.parent)
                added["workspace"] = {"template": Path(template).as_posix()}
            for key, value in added.items():
                extra = value_node({key: value}, root.start_mark)
                root.value = [p for p in root.value if p[0].value != key] + extra.value
            cases.append(({**data, **added}, root))
        return cases


def _is_reference(item: Any) -> bool:
    return isinstance(item, str) and item.startswith(FILE_PROTOCOL)
