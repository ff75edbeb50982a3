"""The judge's reply contract: what each grading mode asks for (its system prompt, and the JSON
Schema sent as a structured-output format where the model takes one) and how a reply is read.

Every contract asks the judge to echo the call's nonce as the ``"nonce"`` field of one JSON
object: shown with its value in the system prompt and as a ``const`` in the schema. Objects
without the nonce (quoted from the candidate, which was written before the nonce existed) never
count. A reply outside the contract — on another scale, a check missing or unknown, two objects
carrying the nonce, a key given twice — raises ``ReplyError``: it is asked for again, and never
becomes a grade.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard, TypeVar

from ..errors import DuplicateKeyError
from ..llm.client import ReplyError
from ..schema.base import finite_number, weighted_average
from ..schema.rubrics import RubricItem
from .base import EvaluationScore
from .prompts import data_rules
from .text import json_objects

#: Bumped whenever a prompt or contract changes, so stored replies of the old wording miss.
PROTOCOL_VERSION = "agentv-judge/2"
MAX_HITS = 4

T = TypeVar("T")


def contract_object(text: str, nonce: str) -> dict[str, Any]:
    """The JSON object of a reply that carries this call's nonce as its ``"nonce"`` field.

    Every outermost object in the reply is read (the whole reply, a fenced block, or objects
    inside prose); objects without the nonce — quoted from the candidate, say — never count, and
    two different objects that both carry it are a reply outside the contract, as is an object
    that gives a key twice (``{"score": 0.1, "score": 0.95}``: which score?).
    """
    carrying: list[dict[str, Any]] = []
    others = 0
    try:
        for value in json_objects(text):
            if isinstance(value, dict) and value.get("nonce") == nonce:
                if value not in carrying:
                    carrying.append(value)
            else:
                others += 1
    except DuplicateKeyError as exc:
        raise ReplyError(f"a JSON object in the reply has a {exc}") from None
    if len(carrying) == 1:
        return carrying[0]
    if carrying:
        raise ReplyError(
            f"the reply holds {len(carrying)} different JSON objects carrying this call's nonce"
        )
    if others:
        raise ReplyError(f'no JSON object in the reply carries "nonce": "{nonce}"')
    raise ReplyError("no JSON object in the reply" if text.strip() else "the reply was empty")


def _strings(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(v.strip() for v in value if isinstance(v, str) and v.strip())[:MAX_HITS]


def _number_in(value: Any, low: float, high: float) -> TypeGuard[float]:
    number = finite_number(value)
    return number is not None and low <= number <= high


def _echo_rule(nonce: str) -> str:
    return f'Set "nonce" to exactly "{nonce}": only an object carrying it counts as your answer.\n'


def _with_nonce(schema: dict[str, Any], nonce: str) -> dict[str, Any]:
    properties = {**schema["properties"], "nonce": {"type": "string", "const": nonce}}
    return {**schema, "properties": properties, "required": [*schema["required"], "nonce"]}


# -- freeform: a score from 0 to 1 ---------------------------------------------------------------


def freeform_system(nonce: str) -> str:
    return (
        "You grade answers. Respond with a single JSON object and nothing else, no prose and no "
        "code fences:\n"
        '{"score": <number from 0.0 to 1.0>, "hits": [<at most 4 brief strings: what the answer '
        'achieved>], "misses": [<at most 4 brief strings: failures or omissions>], '
        f'"reasoning": "<one or two sentences>", "nonce": "{nonce}"}}\n'
        + _echo_rule(nonce)
        + data_rules(nonce)
    )


_FREEFORM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "score": {"type": "number", "minimum": 0, "maximum": 1},
        "hits": {"type": "array", "items": {"type": "string"}, "maxItems": MAX_HITS},
        "misses": {"type": "array", "items": {"type": "string"}, "maxItems": MAX_HITS},
        "reasoning": {"type": "string"},
    },
    "required": ["score", "hits", "misses", "reasoning"],
    "additionalProperties": False,
}


def parse_freeform(text: str, nonce: str) -> EvaluationScore:
    data = contract_object(text, nonce)
    score = data.get("score")
    if not _number_in(score, 0, 1):
        raise ReplyError(f"'score' must be a number from 0 to 1, got {score!r}")
    reasoning = data.get("reasoning")
    return EvaluationScore.graded(
        float(score),
        hits=_strings(data.get("hits")),
        misses=_strings(data.get("misses")),
        reasoning=reasoning if isinstance(reasoning, str) else None,
    )


# -- rubrics: one check per item, satisfied or scored 0-10 ---------------------------------------


@dataclass(frozen=True)
class _ItemGrade:
    """One rubric item as its check graded it."""

    #: The item's grade from 0 to 1, averaged by the items' weights.
    grade: float
    passed: bool
    gate_failed: bool
    line: str
    row: dict[str, Any]


@dataclass(frozen=True)
class _RubricMode:
    """How one rubric mode words its contract and reads a check."""

    #: The system prompt's words: what is graded, the id's name, the check's value.
    graded: str
    id_name: str
    value: str
    rule: str
    #: The check's value key, its JSON Schema, and what a valid value is.
    key: str
    value_schema: dict[str, Any]
    valid: Callable[[Any], bool]
    needs: str
    grade: Callable[[RubricItem, Any, str], _ItemGrade]
    details: Callable[[Sequence[_ItemGrade]], dict[str, Any]] = field(
        default=lambda grades: {"rubric": [g.row for g in grades]}
    )

    def system(self, nonce: str) -> str:
        return (
            f"You grade answers against {self.graded}. Respond with a single JSON object and "
            "nothing else:\n"
            f'{{"checks": [{{"id": "<{self.id_name} id>", "{self.key}": {self.value}, '
            '"reasoning": "<brief>"}], '
            f'"overall_reasoning": "<one or two sentences>", "nonce": "{nonce}"}}\n'
            f"{self.rule}Include exactly one check per {self.id_name} id.\n"
            + _echo_rule(nonce)
            + data_rules(nonce)
        )

    def schema(self, nonce: str) -> dict[str, Any]:
        check = {
            "type": "object",
            "properties": {
                "id": {"type": "string"},
                self.key: self.value_schema,
                "reasoning": {"type": "string"},
            },
            "required": ["id", self.key, "reasoning"],
            "additionalProperties": False,
        }
        schema = {
            "type": "object",
            "properties": {
                "checks": {"type": "array", "items": check},
                "overall_reasoning": {"type": "string"},
            },
            "required": ["checks", "overall_reasoning"],
            "additionalProperties": False,
        }
        return _with_nonce(schema, nonce)

    def parse(self, text: str, nonce: str, rubrics: Sequence[RubricItem]) -> EvaluationScore:
        """One check per rubric item, none for unknown ids, else a reply outside the contract;
        the score is the items' weighted grade, and a required item not met fails the gate."""
        data = contract_object(text, nonce)
        checks = data.get("checks")
        if not isinstance(checks, list) or not all(isinstance(c, dict) for c in checks):
            raise ReplyError("'checks' must be a list of objects")
        known = [item.id for item in rubrics]
        by_id: dict[str, dict[str, Any]] = {}
        for check in checks:
            check_id = check.get("id")
            if not isinstance(check_id, str):
                raise ReplyError("every check needs a string 'id'")
            if check_id not in known:
                raise ReplyError(f"a check names unknown rubric id {check_id!r} (the ids: {known})")
            if check.get("reasoning") is not None and not isinstance(check["reasoning"], str):
                raise ReplyError("'reasoning' of a check must be a string")
            if check_id in by_id and by_id[check_id].get(self.key) != check.get(self.key):
                raise ReplyError(f"rubric id {check_id!r} is checked twice with different results")
            by_id.setdefault(check_id, check)
        missing = [item_id for item_id in known if item_id not in by_id]
        if missing:
            raise ReplyError(f"no check for rubric item(s) {missing}")
        for check in by_id.values():
            if not self.valid(check.get(self.key)):
                value = check.get(self.key)
                raise ReplyError(f"check '{check['id']}' needs {self.needs}, got {value!r}")
        grades = [
            self.grade(item, by_id[item.id][self.key], by_id[item.id].get("reasoning") or "")
            for item in rubrics
        ]
        overall = data.get("overall_reasoning")
        weighted = zip((g.grade for g in grades), (item.weight for item in rubrics), strict=True)
        return EvaluationScore.graded(
            weighted_average(weighted),
            gate_failed=any(g.gate_failed for g in grades),
            hits=tuple(g.line for g in grades if g.passed),
            misses=tuple(g.line for g in grades if not g.passed),
            expected_aspect_count=len(rubrics),
            reasoning=overall if isinstance(overall, str) else None,
            raw_aspects=tuple(item.id for item in rubrics),
            details=self.details(grades),
        )


def _said(line: str, reasoning: str) -> str:
    return line + (f": {reasoning}" if reasoning else "")


def _checked(item: RubricItem, satisfied: bool, reasoning: str) -> _ItemGrade:
    return _ItemGrade(
        grade=1.0 if satisfied else 0.0,
        passed=satisfied,
        gate_failed=not satisfied and item.is_required,
        line=_said(f"[{item.id}] {item.expected_outcome}", reasoning),
        row={
            "id": item.id,
            "outcome": item.expected_outcome,
            "weight": item.weight,
            "required": item.is_required,
            "satisfied": satisfied,
            "reasoning": reasoning,
        },
    )


def _range_text(item: RubricItem, raw: int) -> str:
    for entry in item.score_ranges or ():
        low, high = entry.score_range
        if low <= raw <= high:
            return entry.expected_outcome
    return ""


def _scored(item: RubricItem, score: Any, reasoning: str) -> _ItemGrade:
    raw = int(score)
    gate = item.min_score
    gated = gate is not None and raw < gate
    matched = _range_text(item, raw)
    passed = raw >= 7 and not gated
    return _ItemGrade(
        grade=raw / 10,
        passed=passed,
        gate_failed=gated,
        line=_said(
            f"[{item.id}] {item.expected_outcome} - Score: {raw}/10"
            + (f" ({matched})" if matched else ""),
            reasoning,
        ),
        row={
            "id": item.id,
            "outcome": item.expected_outcome,
            "weight": item.weight,
            "raw_score": raw,
            "min_score": gate,
            "passed": passed,
            "reasoning": reasoning,
        },
    )


def _range_details(grades: Sequence[_ItemGrade]) -> dict[str, Any]:
    return {
        "raw_scores": {g.row["id"]: g.row["raw_score"] for g in grades},
        "normalization": "score / 10",
        "aggregation": "weighted_average",
        "rubric": [g.row for g in grades],
    }


CHECKLIST = _RubricMode(
    graded="a rubric",
    id_name="rubric",
    value="<true|false>",
    rule="",
    key="satisfied",
    value_schema={"type": "boolean"},
    valid=lambda value: isinstance(value, bool),
    needs="a boolean 'satisfied'",
    grade=_checked,
)
SCORE_RANGES = _RubricMode(
    graded="scoring criteria",
    id_name="criterion",
    value="<integer 0-10>",
    rule=(
        "Each score must be an integer from 0 to 10 within one of the criterion's defined ranges. "
    ),
    key="score",
    value_schema={"type": "integer", "minimum": 0, "maximum": 10},
    valid=lambda value: _number_in(value, 0, 10) and value == int(value),
    needs="an integer 'score' from 0 to 10",
    grade=_scored,
    details=_range_details,
)


def parse_checklist(text: str, nonce: str, rubrics: Sequence[RubricItem]) -> EvaluationScore:
    return CHECKLIST.parse(text, nonce, rubrics)


def parse_score_ranges(text: str, nonce: str, rubrics: Sequence[RubricItem]) -> EvaluationScore:
    return SCORE_RANGES.parse(text, nonce, rubrics)


# -- the contract of a request ---------------------------------------------------------------


@dataclass(frozen=True)
class Contract:
    """The contract one judge request is held to: its mode, system prompt, schema and parser."""

    mode: str
    system: Callable[[str], str]
    schema: Callable[[str], dict[str, Any]]
    parse: Callable[[str, str], EvaluationScore]

    def response_format(self, nonce: str) -> dict[str, Any]:
        schema = {"name": f"agentv_{self.mode}", "schema": self.schema(nonce), "strict": False}
        return {"type": "json_schema", "json_schema": schema}

    def accept(self, nonce: str) -> Callable[[str], EvaluationScore]:
        """The reply reader of one call: any problem reading it is ``ReplyError``, a reply
        outside the contract, never a grade."""

        def accept(text: str) -> EvaluationScore:
            try:
                return self.parse(text, nonce)
            except ReplyError:
                raise
            except (ValueError, TypeError, KeyError, OverflowError) as exc:
                raise ReplyError(str(exc)) from exc

        return accept


def contract_for(rubrics: Sequence[RubricItem]) -> Contract:
    """Score ranges if any item has them, a checklist for other rubrics, else freeform."""
    if not rubrics:
        return Contract(
            "freeform",
            freeform_system,
            lambda nonce: _with_nonce(_FREEFORM_SCHEMA, nonce),
            parse_freeform,
        )
    mode = SCORE_RANGES if any(item.score_ranges for item in rubrics) else CHECKLIST
    return Contract(
        "score_ranges" if mode is SCORE_RANGES else "checklist",
        mode.system,
        mode.schema,
        lambda text, nonce: mode.parse(text, nonce, rubrics),
    )


def correction(problem: str, nonce: str) -> str:
    """What the judge is told after a reply outside the contract."""
    return (
        f"Your reply does not follow the contract: {problem}. Reply again with only the JSON "
        f'object the system message describes, with "nonce": "{nonce}".'
    )
