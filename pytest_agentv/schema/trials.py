"""``execution.trials``: how many times a case runs and how its trials are aggregated."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from ..options import MAX_TRIALS
from ..spellings import spelled
from .base import FINITE, WHOLE, Model, real_number

#: ``execution.trials`` strategies: AgentV's (``pass_any`` is ``pass_at_k``'s later name) and
#: ``adaptive``, which stops when the case's pass probability is settled.
TrialStrategy = Literal[
    "pass_at_k", "pass_any", "pass_all", "mean", "confidence_interval", "adaptive"
]

#: Keys that only the ``adaptive`` strategy reads.
ADAPTIVE_KEYS = ("threshold", "confidence", "min", "max", "interval")


def _trials_rules(schema: dict[str, Any]) -> None:
    """What ``_strategy_keys`` checks, in the JSON Schema (that ``min`` is at most ``max``, and
    that an adaptive block can settle, are arithmetic a schema cannot do)."""
    schema["if"] = {"required": ["strategy"], "properties": {"strategy": {"const": "adaptive"}}}
    schema["then"] = {"not": {"required": ["count"]}}
    schema["else"] = {"allOf": [{"not": {"required": [key]}} for key in ADAPTIVE_KEYS]}


#: A number of trials: a whole number from 1 to ``MAX_TRIALS``.
TrialCount = Annotated[int, WHOLE, Field(ge=1, le=MAX_TRIALS, strict=True)]


class TrialsConfig(Model):
    """``execution.trials``: run a case several times and aggregate (file or case; case wins)."""

    model_config = ConfigDict(json_schema_extra=_trials_rules)

    count: TrialCount | None = None
    strategy: TrialStrategy = "pass_at_k"
    cost_limit_usd: Annotated[float, FINITE] | None = Field(
        None, gt=0, validation_alias=spelled("TrialsConfig", "cost_limit_usd")
    )
    threshold: Annotated[float, FINITE] | None = Field(None, gt=0, lt=1)
    confidence: Annotated[float, FINITE] | None = Field(None, ge=0.5, lt=1)
    min: TrialCount | None = None
    max: TrialCount | None = None
    interval: Literal["wilson", "exact"] | None = None

    @field_validator("cost_limit_usd", "threshold", "confidence", mode="before")
    @classmethod
    def _numbers(cls, value: Any) -> Any:
        return None if value is None else real_number(value)

    @model_validator(mode="after")
    def _strategy_keys(self) -> TrialsConfig:
        if self.strategy != "adaptive":
            for key in ADAPTIVE_KEYS:
                if getattr(self, key) is not None:
                    raise ValueError(
                        f"'{key}' applies to strategy 'adaptive' only (this block's strategy "
                        f"is '{self.strategy}')"
                    )
            return self
        if self.count is not None:
            raise ValueError(
                "strategy 'adaptive' runs between 'min' and 'max' trials until the verdict is "
                "settled: give 'max' instead of 'count'"
            )
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min ({self.min}) must not be more than max ({self.max})")
        return self
