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
from dataclasses import dataclass
from typing import Any

from ...llm.client import ReplyError
from ...schema.rubrics import RubricItem
from ..base import EvaluationScore
from ..fencing import NONCE_LENGTH
from .freeform import FREEFORM_SCHEMA, freeform_system, parse_freeform
from .reply import contract_object, reply_tokens, with_nonce
from .rubrics import CHECKLIST, SCORE_RANGES

__all__ = [
    "PROTOCOL_VERSION",
    "Contract",
    "contract_for",
    "contract_object",
    "correction",
    "parse_freeform",
]

#: Bumped whenever a prompt or contract changes, so stored replies of the old wording miss.
PROTOCOL_VERSION = "agentv-judge/3"


@dataclass(frozen=True)
class Contract:
    """The contract one judge request is held to: its mode, system prompt, schema and parser."""

    mode: str
    system: Callable[[str], str]
    schema: Callable[[str], dict[str, Any]]
    parse: Callable[[str, str], EvaluationScore]

    def response_format(self, nonce: str) -> dict[str, Any]:
        """The schema as OpenAI's ``json_schema`` response format (``llm/structured.py`` sends
        it in the endpoint's dialect)."""
        schema = {"name": f"agentv_{self.mode}", "schema": self.schema(nonce), "strict": False}
        return {"type": "json_schema", "json_schema": schema}

    @property
    def max_tokens(self) -> int:
        """The reply bound: what the longest reply within the schema takes."""
        return reply_tokens(self.schema("0" * NONCE_LENGTH))

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
            lambda nonce: with_nonce(FREEFORM_SCHEMA, nonce),
            parse_freeform,
        )
    mode = SCORE_RANGES if any(item.score_ranges for item in rubrics) else CHECKLIST
    return Contract(
        "score_ranges" if mode is SCORE_RANGES else "checklist",
        lambda nonce: mode.system(nonce, rubrics),
        lambda nonce: mode.schema(nonce, rubrics),
        lambda text, nonce: mode.parse(text, nonce, rubrics),
    )


def correction(problem: str, nonce: str) -> str:
    """What the judge is told after a reply outside the contract."""
    return (
        f"Your reply does not follow the contract: {problem}. Reply again with only the JSON "
        f'object the system message describes, with "nonce": "{nonce}".'
    )
