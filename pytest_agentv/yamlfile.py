"""Safe YAML and JSON Lines with line marks, and the limits that hold before anything recursive
runs.

Files larger than ``MAX_FILE_BYTES`` are refused before they are read. Nesting deeper than
``MAX_DEPTH`` is refused before PyYAML sees the text (flow brackets, counted by a lexical scan;
libyaml's scanner reads flow collections far ahead and has a nesting limit of its own) and then
from the parser's event stream (block nesting, an iterative pass) before the node tree is
composed, because composing is recursive: a 50 KB file nested 25,000 deep would overflow the C
stack. The node tree (which keeps line marks) is then checked for what PyYAML lets through
silently or turns into tracebacks — duplicate keys, ``!!binary``/``!!set``/``!!omap``/``!!pairs``
values (not JSON data), recursive aliases, and aliases that expand to more than
``MAX_ALIAS_EXPANSION`` nodes or ``MAX_EXPANDED_BYTES`` of text — and only then constructed with
a safe loader.

A JSON line gets the same limits: its nesting depth is counted before ``json`` recurses into it,
duplicate keys and ``NaN``/``Infinity`` are refused, and every problem names ``file:line:col``.
A line's value can be given a node tree of its own (``json_node``), so that errors about it point
at its line like errors about YAML do.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from .errors import DuplicateKeyError, EvalFileError
from .paths import MAX_FILE_BYTES
from .redaction import has_surrogate, valid_data

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
    """A file's UTF-8 text, refused before it is read if it is larger than ``limit``."""
    try:
        info = path.stat()
    except OSError as exc:
        raise EvalFileError(display, 1, 1, f"cannot read file: {exc.strerror}") from None
    if info.st_size > limit:
        raise EvalFileError(
            display,
            1,
            1,
            f"file is {info.st_size:,} bytes; eval files are limited to {limit:,} bytes",
        )
    try:
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


#: Flow brackets, and what can hide them: a quoted scalar (where a node can start) or a comment.
_FLOW_SCAN = re.compile(
    r"""(?:^|(?<=[\s\[{,:?-]))(?:"(?:[^"\\]|\\.)*"?|'(?:[^']|'')*'?)"""
    r"|(?:^|(?<=[ \t]))#[^\n]*|[\[\]{}]",
    re.MULTILINE | re.DOTALL,
)


def _check_flow_depth(text: str, display: str) -> None:
    """Refuse flow collections nested deeper than ``MAX_DEPTH`` before libyaml reads the text.

    A lexical scan at C speed finds files that may be too deep; only those are confirmed with
    PyYAML's pure-Python scanner, which is exact, iterative and has no limit of its own, so a
    bracket in a block scalar never refuses a file that is fine."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return
    depth = 0
    for match in _FLOW_SCAN.finditer(text):
        bracket = match.group()
        if bracket in ("[", "{"):
            depth += 1
            if depth > MAX_DEPTH:
                break
        elif bracket in ("]", "}"):
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


def line_col(node: yaml.Node) -> tuple[int, int]:
    """1-based line and column where a node starts."""
    return node.start_mark.line + 1, node.start_mark.column + 1


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_HIGH, _LOW = r"\\u[dD][89abAB][0-9a-fA-F]{2}", r"\\u[dD][c-fC-F][0-9a-fA-F]{2}"
_LONE_SURROGATE_ESCAPE = re.compile(f"{_HIGH}(?!{_LOW})|(?<!{_HIGH}){_LOW}")
_JSON_BRACKET = re.compile(r"[\[\]{}]")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for key, value in pairs:
        if key in data:
            raise DuplicateKeyError(
                f"duplicate key '{key}'; JSON would silently keep only the last one"
            )
        data[key] = value
    return data


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def json_decoder(*, nan: bool = False) -> json.JSONDecoder:
    """The one way JSON data is read (files, replies, outputs): a key given twice is refused
    (``DuplicateKeyError``), not left to the last one; ``NaN``/``Infinity`` are too, unless
    ``nan`` (a reader that checks its numbers, to say what is wrong with one)."""
    constant = None if nan else _no_constant
    return json.JSONDecoder(object_pairs_hook=_no_duplicates, parse_constant=constant)


def parse_json_line(text: str, display: str, line: int, *, repair: bool = False) -> Any:
    """One JSON value from one line, bounded like YAML: depth counted before ``json`` recurses,
    no duplicate keys, no ``NaN``; errors name ``display:line:col``. A lone surrogate escape is
    refused in what people write (eval files), or, with ``repair``, replaced in what programs
    wrote (results files, a batch's output: JavaScript writes one as ``\\ud800``)."""
    depth = deepest = 0
    for match in _JSON_BRACKET.finditer(_JSON_STRING.sub('""', text)):
        depth += 1 if match.group() in "[{" else -1
        if depth > deepest:
            deepest = depth
            if deepest >= MAX_DEPTH:
                raise EvalFileError(
                    display, line, 1, f"JSON is nested deeper than {MAX_DEPTH} levels"
                )
    try:
        value = json_decoder().decode(text)
    except json.JSONDecodeError as exc:
        raise EvalFileError(display, line, exc.colno, f"invalid JSON: {exc.msg}") from None
    except (ValueError, RecursionError) as exc:
        raise EvalFileError(display, line, 1, f"invalid JSON: {exc}") from None
    if "\\u" in text and has_surrogate(value):
        if repair:
            return valid_data(value)
        found = _LONE_SURROGATE_ESCAPE.search(text)
        raise EvalFileError(
            display,
            line,
            found.start() + 1 if found else 1,
            "invalid JSON: a \\uD800-\\uDFFF escape without its pair is not Unicode text; "
            "remove it or give the whole pair",
        )
    return value


def json_lines(text: str, display: str, *, repair: bool = False) -> Iterator[tuple[int, Any]]:
    """``(1-based line, value)`` for every non-blank line of a JSON Lines text."""
    for index, raw in enumerate(text.split("\n")):
        if raw.strip():
            yield index + 1, parse_json_line(raw, display, index + 1, repair=repair)


def json_node(value: Any, line: int) -> yaml.Node:
    """A node tree for a value read from one JSON line (0-based ``line``): every part of it is
    marked at that line, so locating a field in it finds the line the value came from."""
    mark = yaml.Mark("", 0, line, 0, None, 0)
    if isinstance(value, dict):
        return yaml.MappingNode(
            "tag:yaml.org,2002:map",
            [
                (yaml.ScalarNode("tag:yaml.org,2002:str", str(k), mark, mark), json_node(v, line))
                for k, v in value.items()
            ],
            mark,
            mark,
        )
    if isinstance(value, list):
        return yaml.SequenceNode(
            "tag:yaml.org,2002:seq", [json_node(v, line) for v in value], mark, mark
        )
    return yaml.ScalarNode("tag:yaml.org,2002:str", str(value), mark, mark)
