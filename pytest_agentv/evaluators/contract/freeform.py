"""The freeform contract: one score from 0 to 1, with hits, misses and reasoning."""

from __future__ import annotations

from typing import Any

from ...llm.client import ReplyError
from ..base import EvaluationScore
from ..fencing import data_rules
from .reply import MAX_HITS, contract_object, echo_rule, number_in, strings


def freeform_system(nonce: str) -> str:
    return (
        "You grade answers. Respond with a single JSON object and nothing else, no prose and no "
        "code fences:\n"
        '{"score": <number from 0.0 to 1.0>, "hits": [<at most 4 brief strings: what the answer '
        'achieved>], "misses": [<at most 4 brief strings: failures or omissions>], '
        f'"reasoning": "<one or two sentences>", "nonce": "{nonce}"}}\n'
        + echo_rule(nonce)
        + data_rules(nonce)
    )


FREEFORM_SCHEMA: dict[str, Any] = {
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
    if not number_in(score, 0, 1):
        raise ReplyError(f"'score' must be a number from 0 to 1, got {score!r}")
    reasoning = data.get("reasoning")
    return EvaluationScore.graded(
        float(score),
        hits=strings(data.get("hits")),
        misses=strings(data.get("misses")),
        reasoning=reasoning if isinstance(reasoning, str) else None,
    )
