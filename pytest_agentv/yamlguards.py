"""The limits that hold on a YAML file before anything recursive reads it, and what PyYAML lets
through silently or turns into tracebacks.

Nesting deeper than ``MAX_DEPTH`` is refused before PyYAML sees the text (flow brackets, counted
by a lexical scan that skips quoted scalars in linear time; libyaml's scanner reads flow
collections far ahead and has a nesting limit of its own) and then from the parser's event
stream (block nesting, an iterative pass) before the node tree is composed, because composing is
recursive: a 50 KB file nested 25,000 deep would overflow the C stack. The node tree is then
checked, iteratively, for duplicate keys, ``!!binary``/``!!set``/``!!omap``/``!!pairs`` values
(not JSON data), recursive aliases, and aliases that expand to more than ``MAX_ALIAS_EXPANSION``
nodes or ``MAX_EXPANDED_BYTES`` of text. ``yamlfile.parse_yaml`` runs these steps in order.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from .errors import EvalFileError
from .paths import MAX_FILE_BYTES

MAX_DEPTH = 100
#: How many nodes aliases may add on top of the nodes actually written in the file.
MAX_ALIAS_EXPANSION = 100_000
#: How much scalar text a document may hold once its aliases are expanded.
MAX_EXPANDED_BYTES = MAX_FILE_BYTES

#: libyaml's safe loader where PyYAML was built with it.
BaseLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

#: Where a node is in a document: mapping keys and sequence indexes (``yamlfile.Loc``).
_Loc = tuple[int | str, ...]


def children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


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


def check_flow_depth(text: str, display: str) -> None:
    """Refuse flow collections nested deeper than ``MAX_DEPTH`` before libyaml reads the text.

    A lexical scan finds files that may be too deep; only those are confirmed with PyYAML's
    pure-Python scanner, which is exact, iterative and has no limit of its own, so a bracket in
    a block scalar never refuses a file that is fine. The scanner reads the text up to the
    bracket the lexical scan stopped at first: it looks ahead for keys at every open level, so
    that reading the whole of 25,000 nested brackets took it a sixth of a second."""
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
    _confirm_flow_depth(text[:position], display)
    _confirm_flow_depth(text, display)


def _confirm_flow_depth(text: str, display: str) -> None:
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


def check_depth(text: str, display: str) -> None:
    """Refuse nesting deeper than ``MAX_DEPTH`` from the event stream, which is read without
    recursion, before anything recursive (composing, constructing) sees the document."""
    events: Any = BaseLoader(text)  # PyYAML's parser methods are untyped
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


def _check_tag(node: yaml.Node, loc: _Loc, display: str) -> None:
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


def check_tree(root: yaml.Node, display: str, may_alias: bool) -> None:
    """Reject duplicate keys, tags of non-JSON values (and, if the file has anchors, alias
    tricks)."""
    if may_alias:
        _check_aliases(root, display)
    _check_tag(root, (), display)
    stack: list[tuple[yaml.Node, _Loc]] = [(root, ())]
    while stack:
        node, loc = stack.pop()
        parts: list[tuple[yaml.Node, _Loc]] = []
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
            parts = children(node)
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
        stack.extend((part, False) for part in children(node))
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
