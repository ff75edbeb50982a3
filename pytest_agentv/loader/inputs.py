"""A case's input as AgentV v4 builds it: ``{{ name }}`` placeholders filled from the case's
``vars``, the files of ``input_files`` attached to its text, and the suite's ``input`` (and
``input_files``) before its own, unless the case sets ``execution.skip_defaults``.

Placeholders are filled before the file is validated, in the fields AgentV v4 fills (the
criteria, input, input files, expected output and conversation turns), and in the suite's input
for each case with that case's vars: ``{{ name }}`` or a dotted path (``{{ expected.answer }}``);
a placeholder that is the whole text takes the value's own type; one naming no var is left as
written. The suite's input is then put before each case's validated messages, and each file
segment keeps the place it is written, for errors about the file it names.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import cache
from typing import Any

from pydantic import TypeAdapter, ValidationError

from ..schema.evalfile import EvalCase, EvalSuite
from ..schema.messages import ContentSegment, Message, as_messages
from ..spellings import FIELDS
from ..yamlfile import Loc
from .datasets import CASE_KEYS

_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_.]*)\s*\}\}")
_WHOLE = re.compile(r"^\{\{\s*([A-Za-z_][A-Za-z0-9_.]*)\s*\}\}$")
#: The case fields AgentV v4 fills placeholders in, under each of their spellings.
_FILLED = (
    *FIELDS["EvalCase"]["expected_outcome"],
    *FIELDS["EvalCase"]["input_messages"],
    *FIELDS["EvalCase"]["expected_messages"],
    "input_files",
)


@cache
def _messages() -> TypeAdapter[list[Message]]:
    """Built when a file's suite input has ``{{vars}}`` (rare), not at import."""
    return TypeAdapter(list[Message])


_UNSET = object()


def _lookup(names: dict[str, Any], path: str) -> Any:
    value: Any = names
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return _UNSET
        value = value[part]
    return value


def filled(value: Any, names: dict[str, Any]) -> Any:
    """``value`` with its placeholders filled from ``names`` (AgentV v4's
    ``interpolateTemplateVars``)."""
    if isinstance(value, str):
        whole = _WHOLE.match(value)
        if whole is not None:
            found = _lookup(names, whole.group(1))
            return value if found is _UNSET else found

        def one(match: re.Match[str]) -> str:
            found = _lookup(names, match.group(1))
            if found is _UNSET:
                return match.group(0)
            return found if isinstance(found, str) else json.dumps(found, separators=(",", ":"))

        return _PLACEHOLDER.sub(one, value)
    if isinstance(value, list):
        return [filled(item, names) for item in value]
    if isinstance(value, dict):
        return {key: filled(item, names) for key, item in value.items()}
    return value


def _case_vars(case: Any) -> dict[str, Any] | None:
    names = case.get("vars") if isinstance(case, dict) else None
    return names if isinstance(names, dict) else None


def with_vars(data: Any) -> Any:
    """The document with each case's placeholders filled from its own ``vars``."""
    if not isinstance(data, dict):
        return data
    key = next((k for k in CASE_KEYS if k in data), None)
    if key is None or not isinstance(data[key], list):
        return data
    cases = []
    for case in data[key]:
        names = _case_vars(case)
        if names is not None:
            case = {k: filled(v, names) if k in _FILLED else v for k, v in case.items()}
            if isinstance(case.get("turns"), list):
                case["turns"] = [_filled_turn(turn, names) for turn in case["turns"]]
        cases.append(case)
    return {**data, key: cases}


def _filled_turn(turn: Any, names: dict[str, Any]) -> Any:
    if not isinstance(turn, dict):
        return turn
    return {
        k: filled(v, names) if k in ("input", "expected_output") else v for k, v in turn.items()
    }


#: Where each segment of a case's merged input is written: by message, by segment.
SegmentPlaces = list[list[Loc]]
Fail = Callable[[Loc, str], Exception]


def with_suite_input(
    suite: EvalSuite, data: dict[str, Any], fail: Fail
) -> tuple[EvalSuite, list[SegmentPlaces]]:
    """The suite with each case's input as AgentV v4 builds it, and where each segment of it
    is written. ``data`` is the document as validated; ``fail`` makes the error at a place."""
    key = next(k for k in CASE_KEYS if k in data)
    places: list[SegmentPlaces] = []
    for index, case in enumerate(suite.evalcases):
        raw = data[key][index]
        names = _case_vars(raw) or {}
        skip = case.execution is not None and case.execution.skip_defaults
        here: Loc = ("evalcases", index)
        own, own_places = _own_input(case, raw, suite, data, names, skip, here, fail)
        prefix: list[Message] = []
        prefix_places: SegmentPlaces = []
        if suite.input is not None and not skip:
            prefix = suite.input
            if names:
                try:
                    prefix = _messages().validate_python(
                        as_messages(filled(data["input"], names), "user")
                    )
                except ValidationError as exc:
                    problem = exc.errors(include_url=False)[0]["msg"]
                    raise fail(
                        ("input",), f"with the vars of case '{case.id}': {problem}"
                    ) from None
            prefix_places = _written(prefix, ("input",))
        if prefix or own is not case.input_messages:
            merged = case.model_copy(update={"input_messages": [*prefix, *own]})
            suite.evalcases[index] = merged
        places.append([*prefix_places, *own_places])
    return suite, places


def _written(messages: list[Message], loc: Loc) -> SegmentPlaces:
    return [
        [(*loc, m, "content", s, "value") for s in range(len(message.content))]
        for m, message in enumerate(messages)
    ]


def _own_input(
    case: EvalCase,
    raw: dict[str, Any],
    suite: EvalSuite,
    data: dict[str, Any],
    names: dict[str, Any],
    skip: bool,
    here: Loc,
    fail: Fail,
) -> tuple[list[Message], SegmentPlaces]:
    """A case's own messages: its ``input``, or with ``input_files`` (its own, else the
    suite's) one user message of those files and the input's text."""
    if case.input_files is not None:
        files, at = case.input_files, (*here, "input_files")
    elif suite.input_files is not None and not skip:
        files = filled(data["input_files"], names) if names else suite.input_files
        at = ("input_files",)
        if not all(isinstance(path, str) and path.strip() for path in files):
            raise fail(at, f"with the vars of case '{case.id}', an entry is not a file's path")
    else:
        return case.input_messages, _written(case.input_messages, (*here, "input_messages"))
    text = next((raw[k] for k in FIELDS["EvalCase"]["input_messages"] if k in raw), None)
    if not isinstance(text, str):
        raise fail(
            at,
            "input_files attach files to a text input: give the case's 'input' as a string "
            "(AgentV v4 leaves a case whose input is messages out of the run)",
        )
    segments = [ContentSegment(type="file", value=path) for path in files]
    message = Message(role="user", content=[*segments, ContentSegment(type="text", value=text)])
    places = [(*at, n) for n in range(len(files))] + [(*here, "input_messages")]
    return [message], [places]
