"""A model's reply as the run counts it: its text, and the tokens and cost of its call as far as
they are known, read the same way from both transports and the replay store."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..redaction import valid_text
from ..schema.base import metric_number
from .limits.headers import Observed


def token_count(value: Any) -> int | None:
    """A count of tokens as a model server reports it: an integer >= 0 (``metric_number``),
    else None: the call's usage, and so its cost, is unknown (never negative spend)."""
    return value if isinstance(value, int) and metric_number(value) is not None else None


@dataclass(frozen=True)
class Reply:
    """A model's reply, with the usage and cost of its call as far as they are known: usage
    that is not counts of tokens (missing, negative, not an integer) is unknown (None), and
    then so is the cost; a cost that is not a number >= 0 is unknown too. Every request sends a
    prompt, so a prompt of 0 tokens was not counted (litellm reads usage it cannot read, or
    none, as 0 tokens)."""

    text: str
    cached: bool
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    #: None when the model's price or the call's usage is unknown; for a reused reply, what its
    #: recording cost.
    cost_usd: float | None = None
    #: What the reply's rate-limit headers said (never stored: a replayed reply tells nothing).
    limits: Observed | None = field(default=None, compare=False, repr=False)
    #: The model stopped at its length limit (``finish_reason: "length"``): the text is cut off.
    truncated: bool = False

    def __post_init__(self) -> None:
        # A model may send a lone surrogate escape: the store and reports must be UTF-8.
        object.__setattr__(self, "text", valid_text(self.text))
        prompt, completion = token_count(self.prompt_tokens), token_count(self.completion_tokens)
        prompt = prompt or None
        known = prompt is not None and completion is not None
        object.__setattr__(self, "prompt_tokens", prompt)
        object.__setattr__(self, "completion_tokens", completion)
        object.__setattr__(self, "cost_usd", metric_number(self.cost_usd) if known else None)
