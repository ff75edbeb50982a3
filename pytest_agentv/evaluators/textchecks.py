"""AgentV v4's deterministic checks on the answer text (``graders/assertions.ts``): ``contains``,
``contains-any``, ``contains-all``, their case-insensitive ``icontains`` twins, ``starts-with``,
``ends-with``, ``equals``, ``regex`` and ``is-json``. Each scores 1 or 0 with one assertion whose
text is AgentV's.

Bounds on a hostile answer: a ``regex`` search stops after ``REGEX_TIMEOUT`` seconds (the case is
then not graded, never failed or passed by a guess), and ``is-json`` refuses to judge text nested
deeper than ``MAX_JSON_DEPTH`` (JSON.parse reads any depth; Python's parser would recurse).
"""

from __future__ import annotations

import json
from collections.abc import Callable

from ..errors import NotGradedError
from ..results import AssertionRow
from ..schema.jsregex import subject
from ..schema.textchecks import TextCheckSpec
from .base import NEEDS_SETTINGS, EvaluationContext, EvaluationScore, entry_settings

#: Seconds one ``regex`` search may take before the case is reported as not graded.
REGEX_TIMEOUT = 2.0

#: The deepest nesting of arrays and objects ``is-json`` reads.
MAX_JSON_DEPTH = 400

#: JavaScript's ``String.prototype.trim`` set: WhiteSpace and LineTerminator (Python's
#: ``str.strip`` differs: it keeps U+FEFF and strips U+001C to U+001F).
JS_SPACE = "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
JS_SPACE += "\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"


class CheckError(NotGradedError):
    """A check that cannot conclude on this answer (a search over its time limit)."""


def js_trim(text: str) -> str:
    return text.strip(JS_SPACE)


def _quoted(values: list[str]) -> str:
    return ", ".join(f'"{v}"' for v in values)


def _contains(answer: str, spec: TextCheckSpec, fold: bool) -> tuple[bool, str]:
    value = spec.values[0]
    found = value.lower() in answer.lower() if fold else value in answer
    said = f'Output contains "{value}"' if found else f'Output does not contain "{value}"'
    return found, said + (" (case-insensitive)" if fold else "")


def _any(answer: str, spec: TextCheckSpec, fold: bool) -> tuple[bool, str]:
    text = answer.lower() if fold else answer
    matched = [v for v in spec.values if (v.lower() if fold else v) in text]
    tail = " (case-insensitive)" if fold else ""
    if matched:
        return True, f'Output contains "{matched[0]}"{tail}'
    return False, f"Output does not contain any of: {_quoted(spec.values)}{tail}"


def _all(answer: str, spec: TextCheckSpec, fold: bool) -> tuple[bool, str]:
    text = answer.lower() if fold else answer
    missing = [v for v in spec.values if (v.lower() if fold else v) not in text]
    if not missing:
        tail = " (case-insensitive)" if fold else ""
        return True, f"Output contains all {len(spec.values)} expected strings{tail}"
    label = "Output missing (case-insensitive): " if fold else "Output missing: "
    return False, label + _quoted(missing)


def _starts(answer: str, spec: TextCheckSpec, _: bool) -> tuple[bool, str]:
    value = spec.values[0]
    ok = js_trim(answer).startswith(js_trim(value))
    return ok, f'Output starts with "{value}"' if ok else f'Output does not start with "{value}"'


def _ends(answer: str, spec: TextCheckSpec, _: bool) -> tuple[bool, str]:
    value = spec.values[0]
    ok = js_trim(answer).endswith(js_trim(value))
    return ok, f'Output ends with "{value}"' if ok else f'Output does not end with "{value}"'


def _equals(answer: str, spec: TextCheckSpec, _: bool) -> tuple[bool, str]:
    value = spec.values[0]
    ok = js_trim(answer) == js_trim(value)
    return ok, f'Output equals "{value}"' if ok else f'Output does not equal "{value}"'


def _regex(answer: str, spec: TextCheckSpec, _: bool) -> tuple[bool, str]:
    pattern = spec.pattern
    assert pattern is not None  # compiled when the entry loaded
    search = pattern.match if spec.sticky else pattern.search
    try:
        found = search(subject(answer, spec.flags or ""), timeout=REGEX_TIMEOUT)
    except TimeoutError:
        raise CheckError(
            f"regex /{spec.value}/ did not finish within {REGEX_TIMEOUT:g}s on this answer "
            f"({len(answer)} characters): the case cannot be graded"
        ) from None
    ok = found is not None
    flags = spec.flags or ""
    label = f"/{spec.value}/{flags}" + (f" (flags: {flags})" if flags else "")
    return ok, f"Output matches pattern {label}" if ok else f"Output does not match pattern {label}"


def json_depth(text: str) -> int:
    """The deepest nesting of ``[`` and ``{`` outside strings, read in one pass."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def _no_constants(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


def _is_json(answer: str, spec: TextCheckSpec, _: bool) -> tuple[bool, str]:
    if json_depth(answer) > MAX_JSON_DEPTH:
        raise CheckError(
            f"is-json: the answer nests arrays or objects deeper than {MAX_JSON_DEPTH} levels, "
            "which pytest-agentv does not read: the case cannot be graded"
        )
    try:
        # Numbers are not converted: JSON.parse reads any number of digits, int() does not.
        json.loads(answer, parse_constant=_no_constants, parse_int=len, parse_float=len)
    except ValueError:
        return False, "Output is not valid JSON"
    return True, "Output is valid JSON"


Check = Callable[[str, TextCheckSpec, bool], tuple[bool, str]]

#: Each kind's check and whether it folds case.
CHECKS: dict[str, tuple[Check, bool]] = {
    "contains": (_contains, False),
    "icontains": (_contains, True),
    "contains_any": (_any, False),
    "icontains_any": (_any, True),
    "contains_all": (_all, False),
    "icontains_all": (_all, True),
    "starts_with": (_starts, False),
    "ends_with": (_ends, False),
    "equals": (_equals, False),
    "regex": (_regex, False),
    "is_json": (_is_json, False),
}


class TextCheckEvaluator:
    """One deterministic kind: score 1 when its check holds, else 0."""

    entry_needs = NEEDS_SETTINGS

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.check, self.fold = CHECKS[kind]

    def evaluate(self, context: EvaluationContext) -> EvaluationScore:
        spec = entry_settings(context, TextCheckSpec)
        if spec.kind != self.kind:  # settings a hook's kind of another name did not check
            spec = spec.for_kind(self.kind)
        passed, text = self.check(context.candidate, spec, self.fold)
        return EvaluationScore.graded(
            1.0 if passed else 0.0,
            assertions=(AssertionRow(text=text, passed=passed),),
            expected_aspect_count=1,
        )
