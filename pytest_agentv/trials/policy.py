"""How many trials a case runs and how they are aggregated: its ``execution.trials`` (or
``assert_judged(trials=...)``) and ``--agentv-trials``, resolved with AgentV's defaults, and an
adaptive rule checked to be able to settle."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from ..errors import ConfigError
from ..options import MAX_TRIALS
from ..results import Verdict
from ..schema.base import problem_text
from ..schema.trials import TrialsConfig
from .intervals import exact_interval, wilson_interval

Strategy = Literal["pass_at_k", "pass_all", "mean", "confidence_interval", "adaptive"]
Interval = Literal["wilson", "exact"]

DEFAULT_THRESHOLD = 0.5
DEFAULT_CONFIDENCE = 0.95
DEFAULT_MIN = 2
DEFAULT_MAX = 10


@dataclass(frozen=True)
class TrialPolicy:
    """How many trials a case runs and how they are aggregated (resolved, with defaults)."""

    strategy: Strategy = "pass_at_k"
    #: Trials to run; for ``adaptive`` the most it may run (``max``).
    count: int = 1
    cost_limit_usd: float | None = None
    threshold: float = DEFAULT_THRESHOLD
    confidence: float = DEFAULT_CONFIDENCE
    min: int = DEFAULT_MIN
    interval: Interval = "wilson"

    def pass_interval(self, passed: int, n: int) -> tuple[float, float]:
        if self.interval == "exact":
            return exact_interval(passed, n, self.confidence)
        return wilson_interval(passed, n, self.confidence)

    def settled(self, passed: int, n: int) -> Verdict | None:
        """The adaptive rule: pass when the interval lies above the threshold, fail when below."""
        low, high = self.pass_interval(passed, n)
        if low > self.threshold:
            return "pass"
        if high < self.threshold:
            return "fail"
        return None

    def fewest(self, passed_all: bool) -> int | None:
        """The fewest trials that settle when every trial passes (or every one fails)."""
        for n in range(1, MAX_TRIALS + 1):
            if self.settled(n if passed_all else 0, n) is not None:
                return n
        return None

    def check(self) -> None:
        """An adaptive rule must be able to settle both ways within ``max`` trials: a bar that
        ``max`` passes in a row cannot clear would leave every case borderline."""
        if self.strategy != "adaptive":
            return
        for passed_all, side in ((True, "above"), (False, "below")):
            passed = self.count if passed_all else 0
            if self.settled(passed, self.count) is not None:
                continue
            low, high = self.pass_interval(passed, self.count)
            bound = f"a lower bound of {low:.2f}" if passed_all else f"an upper bound of {high:.2f}"
            needed = self.fewest(passed_all)
            fix = (
                f"raise 'max' to at least {needed}"
                if needed is not None
                else "move the threshold or lower the confidence"
            )
            raise ConfigError(
                f"strategy 'adaptive' can never settle {side} threshold {self.threshold:g} "
                f"within max {self.count} trials at confidence {self.confidence:g}: "
                f"{passed} passes of {self.count} give {bound} ({self.interval}); {fix}"
            )


def policy_for(config: TrialsConfig | None, override: int | None = None) -> TrialPolicy | None:
    """The trials a case runs: its ``execution.trials`` (the case's, else the file's) and
    ``--agentv-trials`` (the count; an adaptive case's ``max``). None runs the case once, as
    without trials: no block and no option, a count of 1, or ``--agentv-trials 1``.

    Raises ``ConfigError`` for an adaptive rule that cannot settle within its ``max``.
    """
    if override == 1:
        return None
    if config is None:
        return TrialPolicy(count=override) if override else None
    if config.strategy == "adaptive":
        most = override or config.max or DEFAULT_MAX
        least = config.min or DEFAULT_MIN
        if least > most and not override:
            raise ConfigError(
                f"strategy 'adaptive': min {least} is more than max {most}"
                f"{'' if config.max else ' (the default)'}; raise 'max' to at least {least}"
            )
        policy = TrialPolicy(
            strategy="adaptive",
            count=most,
            cost_limit_usd=config.cost_limit_usd,
            threshold=config.threshold if config.threshold is not None else DEFAULT_THRESHOLD,
            confidence=config.confidence if config.confidence is not None else DEFAULT_CONFIDENCE,
            min=min(least, most),  # --agentv-trials may cap it
            interval=config.interval or "wilson",
        )
        policy.check()
        return policy
    count = override or config.count or 1
    if count == 1:
        return None
    strategy: Strategy = "pass_at_k" if config.strategy == "pass_any" else config.strategy
    return TrialPolicy(strategy=strategy, count=count, cost_limit_usd=config.cost_limit_usd)


def trials_from_argument(trials: object) -> TrialsConfig:
    """``assert_judged(..., trials=...)``: a count (with the default strategy) or a mapping like
    an ``execution.trials`` block. Raises ``ValueError`` naming the problem."""
    if isinstance(trials, int) and not isinstance(trials, bool):
        block: dict[str, Any] = {"count": trials}
    elif isinstance(trials, Mapping):
        block = dict(trials)
    else:
        raise ValueError(
            f"trials must be a count or a mapping like execution.trials, not "
            f"{type(trials).__name__}"
        )
    try:
        config = TrialsConfig.model_validate(block)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(map(str, ("trials", *first["loc"])))
        raise ValueError(f"{where}: {problem_text(first)}") from None
    try:
        policy_for(config)
    except ConfigError as exc:
        raise ValueError(f"trials: {exc}") from None
    return config
