"""The statistics of trials: AgentV's t-interval of a mean score (its t-table), and the Wilson
and Clopper–Pearson ("exact") intervals of a pass probability that ``adaptive`` stops on."""

from __future__ import annotations

import math
from collections.abc import Callable
from statistics import NormalDist, fmean

#: AgentV's two-sided 95% critical values of Student's t for 1 to 29 degrees of freedom; from 30
#: on it uses 1.96.
T_TABLE_95 = tuple(
    float(value)
    for value in (
        "12.706 4.303 3.182 2.776 2.571 2.447 2.365 2.306 2.262 2.228 2.201 2.179 2.16 2.145 "
        "2.131 2.12 2.11 2.101 2.093 2.086 2.08 2.074 2.069 2.064 2.06 2.056 2.052 2.048 2.045"
    ).split()
)


def t_critical(df: int) -> float:
    """AgentV's ``getTCritical``: the table up to 29 degrees of freedom, then 1.96."""
    if df < 1:
        return T_TABLE_95[0]
    if df >= 30:
        return 1.96
    return T_TABLE_95[df - 1]


def _clamp(value: float) -> float:
    return max(0.0, min(1.0, value))


def mean_interval(scores: list[float]) -> tuple[float, float, float, float]:
    """``(mean, stddev, low, high)``: mean ± t·s/√n, clamped to [0, 1] (AgentV's
    ``confidence_interval``; one score has no spread, so its interval is the score)."""
    n = len(scores)
    mean = fmean(scores)
    if n < 2:
        return mean, 0.0, _clamp(mean), _clamp(mean)
    stddev = math.sqrt(sum((s - mean) ** 2 for s in scores) / (n - 1))
    margin = t_critical(n - 1) * stddev / math.sqrt(n)
    return mean, stddev, _clamp(mean - margin), _clamp(mean + margin)


def wilson_interval(passed: int, n: int, confidence: float) -> tuple[float, float]:
    """The Wilson score interval of a pass probability after ``passed`` passes in ``n``."""
    z = NormalDist().inv_cdf((1 + confidence) / 2)
    rate = passed / n
    denominator = 1 + z * z / n
    centre = (rate + z * z / (2 * n)) / denominator
    margin = z / denominator * math.sqrt(rate * (1 - rate) / n + z * z / (4 * n * n))
    low = 0.0 if passed == 0 else max(0.0, centre - margin)
    high = 1.0 if passed == n else min(1.0, centre + margin)
    return low, high


def _at_most(k: int, n: int, p: float) -> float:
    """P(X ≤ k) for X ~ Binomial(n, p), 0 < p < 1, summed in log space (n up to 1000)."""
    log_p, log_q = math.log(p), math.log1p(-p)
    top = math.lgamma(n + 1)
    return math.fsum(
        math.exp(top - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * log_p + (n - i) * log_q)
        for i in range(k + 1)
    )


def _bisect(too_low: Callable[[float], bool]) -> float:
    """The point in (0, 1) where ``too_low`` turns false (it is true below, false above)."""
    low, high = 0.0, 1.0
    for _ in range(60):
        middle = (low + high) / 2
        if too_low(middle):
            low = middle
        else:
            high = middle
    return (low + high) / 2


def exact_interval(passed: int, n: int, confidence: float) -> tuple[float, float]:
    """The Clopper–Pearson ("exact") interval: never narrower than its confidence promises."""
    alpha = (1 - confidence) / 2
    if passed == 0:
        return 0.0, 1 - alpha ** (1 / n)
    if passed == n:
        return alpha ** (1 / n), 1.0
    low = _bisect(lambda p: 1 - _at_most(passed - 1, n, p) < alpha)
    high = _bisect(lambda p: _at_most(passed, n, p) > alpha)
    return low, high
