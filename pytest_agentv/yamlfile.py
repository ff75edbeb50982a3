"""Safe YAML with line marks: a file read within its limits into a node tree, then data.

Files larger than their limit (``MAX_FILE_BYTES`` unless said otherwise), and anything that is
not a regular file (a FIFO, a device: reading one may never end), are refused before they are
read. The text then passes ``yamlguards`` (nesting, before anything recursive runs), is composed
into a node tree (which keeps line marks), passes ``yamlguards`` again (duplicate keys, non-JSON
tags, alias bombs), and only then is constructed with a safe loader. The node tree is how errors
find their line: ``child_at``, ``line_col``, ``file_of``.

JSON Lines get the same limits in ``jsonlines``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from .errors import EvalFileError
from .paths import MAX_FILE_BYTES
from .settings import special_file
from .yamlguards import (
    MAX_DEPTH,
    BaseLoader,
    check_depth,
    check_flow_depth,
    check_tree,
    children,
)


class _Loader(BaseLoader):  # type: ignore[valid-type,misc]
    """Safe loader that keeps YAML timestamps as the strings they were written as."""


_Loader.add_constructor("tag:yaml.org,2002:timestamp", yaml.SafeLoader.construct_yaml_str)

#: A path into a YAML document: mapping keys and sequence indexes.
Loc = tuple[int | str, ...]


def read_text(path: Path, display: str, limit: int = MAX_FILE_BYTES) -> str:
    """A file's UTF-8 text, refused before it is read if it is larger than ``limit`` or is not
    a regular file (a FIFO or a device: reading one may never end)."""
    try:
        info = path.stat()
        kind = special_file(info.st_mode)
        if kind is not None:
            raise EvalFileError(display, 1, 1, f"{kind}, not a regular file")
        if info.st_size > limit:
            raise EvalFileError(
                display, 1, 1, f"the file is {info.st_size:,} bytes; the limit is {limit:,}"
            )
        raw = path.read_bytes()
    except OSError as exc:
        raise EvalFileError(display, 1, 1, f"cannot read file: {exc.strerror}") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise EvalFileError(display, line, 1, "file is not valid UTF-8 text") from None


def parse_yaml(path: Path, display: str) -> tuple[yaml.Node, Any]:
    """Parse a YAML file safely into ``(node tree, data)`` or raise ``EvalFileError``."""
    text = read_text(path, display)
    check_flow_depth(text, display)
    loader = _Loader(text)
    try:
        check_depth(text, display)
        root = loader.get_single_node()
        if root is None:
            raise EvalFileError(display, 1, 1, "file is empty; expected a mapping")
        check_tree(root, display, may_alias="&" in text or "*" in text)
        data = loader.construct_document(root)
    except yaml.MarkedYAMLError as exc:
        at = exc.problem_mark or exc.context_mark
        line, col = (at.line + 1, at.column + 1) if at else (1, 1)
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


def aliased(root: yaml.Node) -> set[int]:
    """The nodes (by ``id``) a document uses in more than one place: anchors with aliases."""
    seen: set[int] = set()
    twice: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            twice.add(id(node))
            continue
        seen.add(id(node))
        stack.extend(children(node))
    return twice


def only_anchors(node: yaml.Node, twice: set[int]) -> bool:
    """Whether all ``node`` holds is used elsewhere through aliases (``twice``: ``aliased``):
    it is aliased itself, or each of its entries holds an aliased node. Such a key (v4's
    autoresearch example's ``defaults:``) is a place for anchors, not a setting."""

    def holds_alias(part: yaml.Node) -> bool:
        return id(part) in twice or any(holds_alias(child) for child in children(part))

    if id(node) in twice:
        return True
    entries = [value for _, value in node.value] if isinstance(node, yaml.MappingNode) else []
    entries += node.value if isinstance(node, yaml.SequenceNode) else []
    return bool(entries) and all(holds_alias(entry) for entry in entries)


def child_at(node: yaml.Node, part: int | str) -> yaml.Node | None:
    """The value under a mapping key or at a sequence index, if there is one."""
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


def mark_file(root: yaml.Node, name: str) -> yaml.Node:
    """``root`` with every node's marks naming the file it was read from (``name``), so that an
    error about a case read from another file than the eval file names that file. (The C
    loader's marks ignore a loader's name.)"""
    stack = [root]
    while stack:
        node = stack.pop()
        node.start_mark, node.end_mark = (
            yaml.Mark(name, m.index, m.line, m.column, None, 0)
            for m in (node.start_mark, node.end_mark)
        )
        if isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
        elif isinstance(node, yaml.MappingNode):
            stack.extend(part for pair in node.value for part in pair)
    return root


def file_of(node: yaml.Node, default: str) -> str:
    """The file a node was read from, as errors name it (``default``: a node made in code)."""
    name = node.start_mark.name
    return name if name and not name.startswith("<") else default


def line_col(node: yaml.Node) -> tuple[int, int]:
    """1-based line and column where a node starts."""
    return node.start_mark.line + 1, node.start_mark.column + 1
