"""The freeform contract: one score from 0 to 1, with hits, misses and reasoning."""

from __future__ import annotations

from typing import Any

from ...llm.client import ReplyError
from ..base import EvaluationScore
from ..fencing import data_rules
from .reply import (
    MAX_HITS,
    REASONING_CHARS,
    contract_object,
    echo_rule,
    notes_schema,
    number_in,
    strings,
    text_schema,
    written,
)

#: What each key holds, as the system prompt says it: no example value a model could copy.
FIELDS = {
    "score": "a number from 0 to 1 in steps of 0.05: how well the answer achieves the "
    "expected outcome",
    "hits": f"a list of at most {MAX_HITS} short strings, each something the answer achieved",
    "misses": f"a list of at most {MAX_HITS} short strings, each a failure or an omission",
    "reasoning": "one or two sentences of your own on why this answer earns its score",
}

#: The scores a reply may give: a grammar that enforces an ``enum`` keeps every reply on the
#: scale (servers ignore ``minimum`` and ``maximum`` of a number).
SCORES = [round(step / 20, 2) for step in range(21)]


def freeform_system(nonce: str) -> str:
    described = "".join(f'- "{key}": {text}\n' for key, text in FIELDS.items())
    return (
        "You grade answers. Respond with a single JSON object and nothing else (no prose, no "
        "code fences), with exactly these keys:\n"
        + described
        + f'- "nonce": "{nonce}" (exactly this string)\n'
        + echo_rule(nonce)
        + data_rules(nonce)
    )


FREEFORM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "score": {"type": "number", "enum": SCORES},
        "hits": notes_schema(),
        "misses": notes_schema(),
        "reasoning": text_schema(REASONING_CHARS),
    },
    "required": ["score", "hits", "misses", "reasoning"],
    "additionalProperties": False,
}


def parse_freeform(text: str, nonce: str) -> EvaluationScore:
    data = contract_object(text, nonce)
    score = data.get("score")
    if not number_in(score, 0, 1):
        raise ReplyError(f"'score' must be a number from 0 to 1, got {score!r}")
    for key in ("reasoning", "hits", "misses"):
        written(data, key, FIELDS.values())
    reasoning = data.get("reasoning")
    return EvaluationScore.graded(
        float(score),
        hits=strings(data.get("hits")),
        misses=strings(data.get("misses")),
        reasoning=reasoning if isinstance(reasoning, str) else None,
    )
