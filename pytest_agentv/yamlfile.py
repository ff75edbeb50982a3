"""Safe YAML with line marks, and the limits that hold before anything recursive runs.

Files larger than their limit (``MAX_FILE_BYTES`` unless said otherwise), and anything that is
not a regular file (a FIFO, a device: reading one may never end), are refused before they are
read. Nesting deeper than ``MAX_DEPTH`` is refused before PyYAML sees the text (flow brackets,
counted by a lexical scan that skips quoted scalars in linear time; libyaml's scanner reads flow
collections far ahead and has a nesting limit of its own) and then from the parser's event
stream (block nesting, an iterative pass) before the node tree is composed, because composing is
recursive: a 50 KB file nested 25,000 deep would overflow the C stack. The node tree (which keeps
line marks) is then checked for what PyYAML lets through silently or turns into tracebacks —
duplicate keys, ``!!binary``/``!!set``/``!!omap``/``!!pairs`` values (not JSON data), recursive
aliases, and aliases that expand to more than ``MAX_ALIAS_EXPANSION`` nodes or
``MAX_EXPANDED_BYTES`` of text — and only then constructed with a safe loader.

JSON Lines get the same limits in ``jsonlines``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from .errors import EvalFileError
from .paths import MAX_FILE_BYTES
from .settings import special_file

MAX_DEPTH = 100
#: How many nodes aliases may add on top of the nodes actually written in the file.
MAX_ALIAS_EXPANSION = 100_000
#: How much scalar text a document may hold once its aliases are expanded.
MAX_EXPANDED_BYTES = MAX_FILE_BYTES

_BaseLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_BaseLoader):  # type: ignore[valid-type,misc]
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
    _check_flow_depth(text, display)
    loader = _Loader(text)
    try:
        _check_depth(text, display)
        root = loader.get_single_node()
        if root is None:
            raise EvalFileError(display, 1, 1, "file is empty; expected a mapping")
        _check_tree(root, display, may_alias="&" in text or "*" in text)
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


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


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
        stack.extend(_children(node))
    return twice


def only_anchors(node: yaml.Node, twice: set[int]) -> bool:
    """Whether all ``node`` holds is used elsewhere through aliases (``twice``: ``aliased``):
    it is aliased itself, or each of its entries holds an aliased node. Such a key (v4's
    autoresearch example's ``defaults:``) is a place for anchors, not a setting."""

    def holds_alias(part: yaml.Node) -> bool:
        return id(part) in twice or any(holds_alias(child) for child in _children(part))

    if id(node) in twice:
        return True
    entries = [value for _, value in node.value] if isinstance(node, yaml.MappingNode) else []
    entries += node.value if isinstance(node, yaml.SequenceNode) else []
    return bool(entries) and all(holds_alias(entry) for entry in entries)


#: Flow brackets, and what can hide them: the opening quote of a quoted scalar (where a node can
#: start; ``_double_quoted_end`` and ``_single_quoted_end`` find its end) or a comment.
_FLOW_SCAN = re.compile(
    r"""(?:^|(?<=[\s\[{,:?-]))["']|(?:^|(?<=[ \t]))#|[\[\]{}]""",
    re.MULTILINE,
)


def _double_quoted_end(text: str, start: int) -> int:
    """Where the double-quoted YAML scalar whose opening quote is just before ``start`` ends
    (past its closing quote; the end of the text if it is not closed): the first quote after
    an even run of backslashes. Linear time, nothing allocated per quote, and no regex state
    per character (``"(?:[^"\\]|\\.)*"`` keeps about 125 bytes per character of the scalar)."""
    while (quote := text.find('"', start)) >= 0:
        before = quote
        while before > start and text[before - 1] == "\\":
            before -= 1
        if (quote - before) % 2 == 0:
            return quote + 1
        start = quote + 1
    return len(text)


def _single_quoted_end(text: str, start: int) -> int:
    """``_double_quoted_end`` for a YAML single-quoted scalar, where ``''`` is a quote."""
    while (quote := text.find("'", start)) >= 0:
        if not text.startswith("'", quote + 1):
            return quote + 1
        start = quote + 2
    return len(text)


def _check_flow_depth(text: str, display: str) -> None:
    """Refuse flow collections nested deeper than ``MAX_DEPTH`` before libyaml reads the text.

    A lexical scan finds files that may be too deep; only those are confirmed with PyYAML's
    pure-Python scanner, which is exact, iterative and has no limit of its own, so a bracket in
    a block scalar never refuses a file that is fine."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return
    depth = position = 0
    while (found := _FLOW_SCAN.search(text, position)) is not None:
        char, position = found.group(), found.end()
        if char == '"':
            position = _double_quoted_end(text, position)
        elif char == "'":
            position = _single_quoted_end(text, position)
        elif char == "#":
            line_end = text.find("\n", position)
            position = len(text) if line_end < 0 else line_end
        elif char in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                break
        else:
            depth = max(depth - 1, 0)
    else:
        return
    depth = 0
    try:
        for token in yaml.scan(text, Loader=yaml.SafeLoader):
            if isinstance(token, (yaml.FlowSequenceStartToken, yaml.FlowMappingStartToken)):
                depth += 1
                if depth > MAX_DEPTH:
                    at = token.start_mark
                    raise EvalFileError(
                        display,
                        at.line + 1,
                        at.column + 1,
                        f"YAML is nested deeper than {MAX_DEPTH} levels",
                    )
            elif isinstance(token, (yaml.FlowSequenceEndToken, yaml.FlowMappingEndToken)):
                depth -= 1
    except yaml.YAMLError:
        return


def _check_depth(text: str, display: str) -> None:
    """Refuse nesting deeper than ``MAX_DEPTH`` from the event stream, which is read without
    recursion, before anything recursive (composing, constructing) sees the document."""
    events = _Loader(text)
    depth = 0
    try:
        while events.check_event():
            event = events.get_event()
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    at = event.start_mark
                    line, col = (at.line + 1, at.column + 1) if at else (1, 1)
                    raise EvalFileError(
                        display, line, col, f"YAML is nested deeper than {MAX_DEPTH} levels"
                    )
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    finally:
        events.dispose()


#: Tags the safe loader turns into values JSON cannot hold (bytes, sets, lists of pairs), which
#: would load and then fail when a judge or a report serialises them; and what to write instead.
_NON_JSON_TAGS = {
    "tag:yaml.org,2002:binary": "a string",
    "tag:yaml.org,2002:set": "a list",
    "tag:yaml.org,2002:omap": "a mapping",
    "tag:yaml.org,2002:pairs": "a mapping",
}


def _check_tag(node: yaml.Node, loc: Loc, display: str) -> None:
    instead = _NON_JSON_TAGS.get(node.tag)
    if instead is not None:
        name = node.tag.rsplit(":", 1)[-1]
        where = f"{'.'.join(map(str, loc))}: " if loc else ""
        _fail(
            display,
            node,
            f"{where}!!{name} is not supported: values must be JSON data (strings, numbers, "
            f"booleans, null, lists and mappings); write this one as {instead}",
        )


def _check_tree(root: yaml.Node, display: str, may_alias: bool) -> None:
    """Reject duplicate keys, tags of non-JSON values (and, if the file has anchors, alias
    tricks)."""
    if may_alias:
        _check_aliases(root, display)
    _check_tag(root, (), display)
    stack: list[tuple[yaml.Node, Loc]] = [(root, ())]
    while stack:
        node, loc = stack.pop()
        parts: list[tuple[yaml.Node, Loc]] = []
        if isinstance(node, yaml.MappingNode):
            _check_duplicate_keys(node, display)
            for key, value in node.value:
                here = (*loc, key.value if isinstance(key, yaml.ScalarNode) else "?")
                parts += [(key, here), (value, here)]
        elif isinstance(node, yaml.SequenceNode):
            parts = [(item, (*loc, index)) for index, item in enumerate(node.value)]
        for part, here in parts:
            _check_tag(part, here, display)
            if not isinstance(part, yaml.ScalarNode):
                stack.append((part, here))


def _check_aliases(root: yaml.Node, display: str) -> None:
    """Reject recursive aliases and alias bombs: count the nodes and the scalar text each node
    expands to, sharing the counts between the places an anchor is used."""
    size: dict[int, int] = {}
    text: dict[int, int] = {}
    on_stack: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    cap = MAX_ALIAS_EXPANSION * 10
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_stack.discard(key)
            parts = _children(node)
            size[key] = min(cap, 1 + sum(size[id(k)] for k in parts))
            own = len(node.value) if isinstance(node, yaml.ScalarNode) else 0
            text[key] = min(MAX_EXPANDED_BYTES + 1, own + sum(text[id(k)] for k in parts))
            continue
        if key in size:
            continue
        if key in on_stack:
            _fail(display, node, "recursive alias: a node refers to itself")
        on_stack.add(key)
        stack.append((node, True))
        stack.extend((part, False) for part in _children(node))
    if size[id(root)] > len(size) + MAX_ALIAS_EXPANSION:
        _fail(
            display,
            root,
            "YAML aliases expand to too many nodes (alias bomb?); "
            f"at most {MAX_ALIAS_EXPANSION:,} nodes may come from aliases",
        )
    if text[id(root)] > MAX_EXPANDED_BYTES:
        _fail(
            display,
            root,
            "YAML aliases expand to more than "
            f"{MAX_EXPANDED_BYTES:,} bytes of text (alias bomb?); repeat less, or use a file "
            "reference for large content",
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
