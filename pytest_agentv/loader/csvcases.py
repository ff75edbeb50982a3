"""A CSV dataset's rows as eval cases, the way the first AgentV loader that reads CSV does
(5.x-next, commit 7a3bdaaf1, promptfoo's columns; AgentV v4.42.4 itself refuses ``.csv``).

Columns: ``id`` (else ``row-N``); ``input``, with ``__prefix`` and ``__suffix`` around it;
``__expected``, ``__expected2``... (one assertion each, in promptfoo's short form, see
``_assertion``); ``__description`` (the criteria); ``__provider_output`` (the expected output);
``__metric`` (the assertions' name); ``__threshold`` (the case's pass bar, ``execution.threshold``);
``__config:__expectedN:threshold`` (that assertion's ``min_score``); ``__metadata:key`` (metadata,
``key[]`` a comma-separated list). Every other column is one of the case's ``vars``.

Stricter than AgentV, which pads a short row and drops a long row's extra cells: a row must have
one cell per column, and a file must have an ``input`` column; each refusal names the line and
column.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from ..errors import EvalFileError
from ..jsonlines import value_node

#: The assertion kinds the short form names (``contains:x``, ``not-regex:y``, ``latency(500)``).
_KINDS = (
    "contains",
    "contains-any",
    "contains-all",
    "icontains",
    "icontains-any",
    "icontains-all",
    "starts-with",
    "ends-with",
    "regex",
    "is-json",
    "equals",
    "latency",
    "cost",
)
_LISTS = ("contains-any", "contains-all", "icontains-any", "icontains-all")
_SHORT = re.compile(r"^((?:not-)?[a-z][a-z0-9-]*)(?:\((\d+(?:\.\d+)?)\))?(?::([\s\S]*))?$")
_CONFIG = re.compile(r"^__config:(__expected(\d*)):(.*)$")

Cell = tuple[str, int, int]  # text, 1-based line and column


def _rows(text: str, display: str) -> list[list[Cell]]:
    """The rows of a CSV text, each cell with where it starts; a quoted cell may hold commas,
    doubled quotes and line breaks. Blank lines are no rows."""
    rows: list[list[Cell]] = []
    row: list[Cell] = []
    cell, quoted, line, col = "", False, 1, 1
    start = (1, 1)
    i = 0
    while i < len(text):
        char = text[i]
        if quoted:
            if char == '"' and text[i + 1 : i + 2] == '"':
                cell += '"'
                i, col = i + 2, col + 2
                continue
            if char == '"':
                quoted = False
            else:
                cell += char
            line, col = (line + 1, 1) if char == "\n" else (line, col + 1)
            i += 1
            continue
        if char == '"' and cell == "":
            quoted = True
        elif char == ",":
            row.append((cell, *start))
            cell, start = "", (line, col + 1)
        elif char in "\r\n":
            if char == "\r" and text[i + 1 : i + 2] == "\n":
                i += 1
            row.append((cell, *start))
            if len(row) > 1 or row[0][0]:
                rows.append(row)
            row, cell, line, col = [], "", line + 1, 0
            start = (line, 1)
        else:
            cell += char
        col += 1
        i += 1
    if quoted:
        raise EvalFileError(display, *start, "a quoted cell is never closed")
    if row or cell:
        rows.append([*row, (cell, *start)])
    return rows


def _fail(display: str, cell: Cell, column: str, problem: str) -> EvalFileError:
    return EvalFileError(display, cell[1], cell[2], f"{column}: {problem}")


def _assertion(text: str, cell: Cell, column: str, display: str) -> dict[str, Any]:
    """One ``__expected`` cell as an assertion entry: ``grade:``/``llm-rubric:`` criteria for
    the judge, ``javascript:``/``fn:``/``eval:`` code (refused when the file loads, as AgentV's
    ``inline-assert`` is), ``python:path`` or ``file://x.py`` a code grader, ``[not-]kind[(n)][:
    value]`` a check (``n``: ``latency``'s milliseconds, ``cost``'s dollars, else ``min_score``),
    and any other text ``equals`` that text."""
    for prefix in ("grade:", "llm-rubric:"):
        if text.startswith(prefix):
            criterion = text[len(prefix) :].strip()
            return {"type": "llm-grader", "rubrics": [{"id": "rubric", "outcome": criterion}]}
    for prefix in ("javascript:", "fn:", "eval:"):
        if text.startswith(prefix):
            return {"type": "inline-assert", "code": text[len(prefix) :].strip()}
    if text.startswith(("python:", "file://")):
        script = text.split(":", 1)[1].removeprefix("//").strip()
        if text.startswith("file://") and not script.endswith(".py"):
            raise _fail(display, cell, column, f"'{text}': only file://*.py scripts are graders")
        return {"type": "code-grader", "command": ["uv", "run", "python", script]}
    match = _SHORT.match(text)
    if match is None:
        return {"type": "equals", "value": text}
    written, number, value = match.groups()
    kind = written.removeprefix("not-")
    if kind not in _KINDS:
        if value is None and number is None:
            return {"type": "equals", "value": text}
        raise _fail(
            display, cell, column, f"unknown assertion '{kind}'; known: {', '.join(_KINDS)}"
        )
    entry: dict[str, Any] = {"type": kind}
    if written.startswith("not-"):
        entry["negate"] = True
    if value is not None:
        value = value.strip()
        entry["value"] = [v.strip() for v in value.split(",")] if kind in _LISTS else value
    limit = float(number) if number is not None else (0.75 if kind == "starts-with" else None)
    if kind in ("latency", "cost"):
        if limit is None:
            raise _fail(display, cell, column, f"'{kind}' needs a limit, e.g. {kind}(1)")
        entry["threshold" if kind == "latency" else "budget"] = limit
    elif limit is not None:
        entry["min_score"] = limit
    return entry


def _metadata(key: str, value: str) -> Any:
    if key.endswith("[]"):
        items = re.split(r"(?<!\\),", value)
        return [item.strip().replace("\\,", ",") for item in items if item.strip()]
    return value


def csv_cases(text: str, display: str) -> list[tuple[dict[str, Any], yaml.Node]]:
    """Each row of a CSV dataset as a case and its node tree, each field marked at its cell."""
    rows = _rows(text, display)
    if not rows:
        return []
    header = [(name.strip(), line, col) for name, line, col in rows[0]]
    names = [name for name, _, _ in header]
    for index, (name, line, col) in enumerate(header):
        if name and name in names[:index]:
            raise EvalFileError(display, line, col, f"column '{name}' appears twice")
    if "input" not in names:
        raise EvalFileError(display, 1, 1, "input: the CSV has no 'input' column")
    return [_case(row, header, n, display) for n, row in enumerate(rows[1:], start=1)]


def _case(
    row: list[Cell], header: list[Cell], number: int, display: str
) -> tuple[dict[str, Any], yaml.Node]:
    if len(row) != len(header):
        last = row[-1]
        if len(row) > len(header):
            extra = row[len(header)]
            raise EvalFileError(
                display,
                extra[1],
                extra[2],
                f"this row has {len(row)} cells for {len(header)} columns",
            )
        missing = header[len(row)][0]
        column = last[2] + len(last[0]) + 1
        raise EvalFileError(
            display, last[1], column, f"column '{missing}' is missing from this row"
        )
    fields: dict[str, tuple[Any, Cell]] = {}
    vars_: dict[str, tuple[Any, Cell]] = {}
    metadata: dict[str, tuple[Any, Cell]] = {}
    checks: list[tuple[dict[str, Any], Cell]] = []
    settings: dict[int, float] = {}
    prefix = suffix = metric = ""
    for (name, _, _), cell in zip(header, row, strict=True):
        value = cell[0]
        if name == "id" and value.strip():
            fields["id"] = (value, cell)
        elif name == "input":
            fields["input"] = (value, cell)
        elif name.startswith("__expected"):
            if value.strip():
                checks.append((_assertion(value.strip(), cell, name, display), cell))
        elif name in ("__prefix", "__suffix", "__metric"):
            prefix, suffix, metric = (
                value if name == "__prefix" else prefix,
                value if name == "__suffix" else suffix,
                value if name == "__metric" else metric,
            )
        elif name == "__description" and value:
            fields["criteria"] = (value, cell)
        elif name in ("__provider_output", "__providerOutput") and value:
            fields["expected_output"] = (value, cell)
        elif name == "__threshold" and value.strip():
            fields["execution"] = ({"threshold": _number(value, cell, name, display)}, cell)
        elif name.startswith("__metadata:") and value.strip():
            key = name.removeprefix("__metadata:")
            metadata[key.removesuffix("[]")] = (_metadata(key, value), cell)
        elif match := _CONFIG.match(name):
            if match.group(3) != "threshold":
                raise _fail(display, cell, name, f"unknown setting '{match.group(3)}'")
            index = int(match.group(2) or 1) - 1
            settings[index] = _number(value, cell, name, display)
        elif name:
            vars_[name] = (value, cell)
    if "input" in fields:
        text, cell = fields["input"]
        fields["input"] = (f"{prefix}{text}{suffix}", cell)
    for index, (entry, _) in enumerate(checks):
        if metric:
            entry["metric"] = metric
            entry["name"] = metric if len(checks) == 1 else f"{metric}-{index + 1}"
        if index in settings:
            entry["min_score"] = settings[index]
    if checks:
        fields["assertions"] = ([entry for entry, _ in checks], row[0])
    for key, found in (("vars", vars_), ("metadata", metadata)):
        if found:
            fields[key] = ({k: v for k, (v, _) in found.items()}, row[0])
    case = {"id": f"row-{number}", **{key: value for key, (value, _) in fields.items()}}
    return case, _node(case, fields, vars_, metadata, checks, display, row[0])


def _number(value: str, cell: Cell, column: str, display: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise _fail(display, cell, column, f"'{value}' is not a number") from None


def _mark(display: str, cell: Cell) -> yaml.Mark:
    return yaml.Mark(display, 0, cell[1] - 1, cell[2] - 1, None, 0)


def _node(
    case: dict[str, Any],
    fields: dict[str, tuple[Any, Cell]],
    vars_: dict[str, tuple[Any, Cell]],
    metadata: dict[str, tuple[Any, Cell]],
    checks: list[tuple[dict[str, Any], Cell]],
    display: str,
    first: Cell,
) -> yaml.Node:
    """The case's node tree: each field, var, metadata key and assertion marked at its cell."""

    def mapping(items: dict[str, tuple[Any, Cell]]) -> yaml.Node:
        pairs = []
        for key, (value, cell) in items.items():
            mark = _mark(display, cell)
            key_node = yaml.ScalarNode("tag:yaml.org,2002:str", key, mark, mark)
            pairs.append((key_node, value_node(value, mark)))
        mark = _mark(display, first)
        return yaml.MappingNode("tag:yaml.org,2002:map", pairs, mark, mark)

    root = mapping({**fields, "id": (case["id"], fields["id"][1] if "id" in fields else first)})
    for key_node, value_node_ in root.value:
        if key_node.value == "vars":
            value_node_.value = mapping(vars_).value
        elif key_node.value == "metadata":
            value_node_.value = mapping(metadata).value
        elif key_node.value == "assertions":
            value_node_.value = [value_node(entry, _mark(display, cell)) for entry, cell in checks]
    return root
