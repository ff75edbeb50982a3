"""The rubric contracts: one check per rubric item, satisfied or not (a checklist) or scored
0 to 10 within the item's ranges (score ranges); the score is the items' weighted grade, and a
required item not met, or one under its ``min_score``, fails the gate."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...llm.client import ReplyError
from ...schema.base import weighted_average
from ...schema.rubrics import RubricItem
from ..base import EvaluationScore
from ..fencing import data_rules
from .reply import (
    CHECK_REASONING_CHARS,
    REASONING_CHARS,
    contract_object,
    echo_rule,
    number_in,
    text_schema,
    with_nonce,
    written,
)

#: What the reasoning keys hold, as the system prompt says it: no example a model could copy.
FIELDS = {
    "reasoning": "one brief sentence of your own on this answer and this item",
    "overall_reasoning": "one or two sentences of your own on the answer as a whole",
}


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

    def system(self, nonce: str, rubrics: Sequence[RubricItem]) -> str:
        ids = ", ".join(f'"{item.id}"' for item in rubrics)
        fields = FIELDS
        return (
            f"You grade answers against {self.graded}. Respond with a single JSON object and "
            "nothing else (no prose, no code fences), with exactly these keys:\n"
            f'- "checks": a list of one object per {self.id_name}, in the order they are '
            f'listed, each with the keys "id" (the {self.id_name}\'s id: {ids}), '
            f'"{self.key}" ({self.value}) and "reasoning" ({fields["reasoning"]})\n'
            f'- "overall_reasoning": {fields["overall_reasoning"]}\n'
            f'- "nonce": "{nonce}" (exactly this string)\n'
            f"{self.rule}Include exactly one check per {self.id_name} id.\n"
            + echo_rule(nonce)
            + data_rules(nonce)
        )

    def schema(self, nonce: str, rubrics: Sequence[RubricItem]) -> dict[str, Any]:
        """The reply's schema: the case's ids as an ``enum``, one check for each, every value
        in its range and every string bounded, the nonce as a ``const``."""
        ids = list(dict.fromkeys(item.id for item in rubrics))
        check = {
            "type": "object",
            "properties": {
                "id": {"type": "string", "enum": ids},
                self.key: self.value_schema,
                "reasoning": text_schema(CHECK_REASONING_CHARS),
            },
            "required": ["id", self.key, "reasoning"],
            "additionalProperties": False,
        }
        checks = {"type": "array", "items": check, "minItems": len(ids), "maxItems": len(ids)}
        schema = {
            "type": "object",
            "properties": {
                "checks": checks,
                "overall_reasoning": text_schema(REASONING_CHARS),
            },
            "required": ["checks", "overall_reasoning"],
            "additionalProperties": False,
        }
        return with_nonce(schema, nonce)

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
            written(check, "reasoning", FIELDS.values())
        written(data, "overall_reasoning", FIELDS.values())
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
    id_name="rubric item",
    value="true when the answer satisfies the item, else false",
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
    value="an integer from 0 to 10",
    rule=(
        "Each score must be an integer from 0 to 10 within one of the criterion's defined ranges. "
    ),
    key="score",
    value_schema={"type": "integer", "enum": list(range(11))},
    valid=lambda value: number_in(value, 0, 10) and value == int(value),
    needs="an integer 'score' from 0 to 10",
    grade=_scored,
    details=_range_details,
)
