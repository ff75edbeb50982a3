"""The statistics of trials, without pytest runs: intervals, AgentV's strategies, stopping rules,
and a seeded simulation of the adaptive rule's error rate and savings."""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest

from pytest_agentv.errors import ConfigError
from pytest_agentv.results import Grade
from pytest_agentv.schema.trials import TrialsConfig
from pytest_agentv.trials import (
    DEFAULT_MAX,
    TrialPolicy,
    TrialResult,
    TrialRun,
    exact_interval,
    mean_interval,
    policy_for,
    t_critical,
    trials_from_argument,
    wilson_interval,
)
from pytest_agentv.verdicts import score_to_verdict

#: The adaptive rule's worst wrong-verdict rate per side with its defaults, as the README
#: states it (the exact value, 7.81%, is reached when the pass probability sits at the bar).
STATED_BOUND = 0.08


def trial(
    attempt: int, score: float, *, gate_failed: bool = False, cost: float = 0.0
) -> TrialResult:
    verdict = score_to_verdict(score, gate_failed=gate_failed)
    return TrialResult(attempt, Grade(score, verdict, gate_failed=gate_failed), cost)


def run_all(policy: TrialPolicy, scores: list[float], cost: float = 0.0) -> TrialRun:
    """Feed scores as trials until the run stops (or the scores run out)."""
    run = TrialRun(policy)
    for score in scores:
        attempt = run.next_attempt()
        if attempt is None:
            break
        run.add(trial(attempt, score, cost=cost))
    return run


# -- intervals --------------------------------------------------------------------------------


def test_wilson_interval_known_values() -> None:
    low, high = wilson_interval(5, 5, 0.95)
    assert low == pytest.approx(0.5655, abs=1e-4) and high == 1.0
    assert wilson_interval(4, 4, 0.95)[0] == pytest.approx(0.5101, abs=1e-4)
    assert wilson_interval(0, 4, 0.95) == (0.0, pytest.approx(0.4899, abs=1e-4))
    low, high = wilson_interval(7, 10, 0.95)
    assert (low, high) == (pytest.approx(0.3968, abs=1e-4), pytest.approx(0.8922, abs=1e-4))


def test_exact_interval_known_values() -> None:
    # Clopper-Pearson for 3 of 10 at 95%: [0.0667, 0.6525] (published tables).
    low, high = exact_interval(3, 10, 0.95)
    assert (low, high) == (pytest.approx(0.0667, abs=1e-4), pytest.approx(0.6525, abs=1e-4))
    assert exact_interval(5, 5, 0.95) == (pytest.approx(0.025**0.2), 1.0)
    assert exact_interval(0, 5, 0.95) == (0.0, pytest.approx(1 - 0.025**0.2))
    # Wider than Wilson: it never promises more than its confidence.
    assert exact_interval(7, 10, 0.95)[0] < wilson_interval(7, 10, 0.95)[0]


def test_t_critical_is_agentvs_table() -> None:
    assert t_critical(1) == 12.706
    assert t_critical(10) == 2.228
    assert t_critical(29) == 2.045
    assert t_critical(30) == t_critical(100) == 1.96
    assert t_critical(0) == 12.706


def test_mean_interval_as_agentv() -> None:
    mean, stddev, low, high = mean_interval([0.7, 0.8, 0.9])
    assert mean == pytest.approx(0.8) and stddev > 0 and low < 0.8 < high
    assert low == pytest.approx(0.8 - 4.303 * 0.1 / math.sqrt(3))
    assert mean_interval([0.85]) == (0.85, 0.0, 0.85, 0.85)
    assert mean_interval([0.98, 0.99])[3] <= 1.0
    assert mean_interval([0.05, 0.1, 0.02])[2] == 0.0


# -- strategies (AgentV's trials.test.ts cases) ------------------------------------------------


def test_pass_at_k_scores_the_best_trial_and_stops_at_the_first_pass() -> None:
    run = run_all(TrialPolicy(count=3), [0.5, 0.9, 0.95])
    outcome = run.conclude()
    assert len(run.results) == 2 and run.stopped == "passed"
    assert outcome.grade.score == 0.9 and outcome.grade.verdict == "pass"
    assert outcome.aggregation["passed"] == 1 and outcome.aggregation["trials"] == 2
    run = run_all(TrialPolicy(count=3), [0.3, 0.4, 0.2])
    assert run.conclude().grade.score == 0.4 and run.stopped == "count"


def test_pass_all_scores_the_weakest_trial_and_stops_at_the_first_failure() -> None:
    run = run_all(TrialPolicy("pass_all", 3), [1.0, 0.7, 0.9])
    outcome = run.conclude()
    assert outcome.grade.score == 0.7 and outcome.grade.verdict == "borderline"
    assert outcome.aggregation["min"] == 0.7 and outcome.aggregation["passed"] == 2
    assert outcome.aggregation["shown_attempt"] == 1
    run = run_all(TrialPolicy("pass_all", 5), [1.0, 0.3, 1.0])
    assert len(run.results) == 2 and run.stopped == "failed"
    assert run.conclude().grade.verdict == "fail"


def test_mean_and_confidence_interval() -> None:
    outcome = run_all(TrialPolicy("mean", 3), [0.7, 0.9, 1.0]).conclude()
    assert outcome.grade.score == pytest.approx(0.8667, abs=1e-4)
    assert outcome.grade.verdict == "pass"
    assert (outcome.aggregation["min"], outcome.aggregation["max"]) == (0.7, 1.0)
    outcome = run_all(TrialPolicy("confidence_interval", 3), [0.7, 0.8, 0.9]).conclude()
    assert outcome.grade.score == outcome.aggregation["score_ci_low"] < 0.8
    assert outcome.aggregation["mean"] == pytest.approx(0.8)
    assert outcome.grade.verdict == "fail"  # the lower bound, 0.55, is the score


def test_gates_per_strategy() -> None:
    # pass_at_k: a trial that failed a gate never stands for the case over one that met it.
    run = TrialRun(TrialPolicy(count=2))
    run.add(trial(0, 0.95, gate_failed=True))
    run.add(trial(1, 0.7))
    outcome = run.conclude()
    assert (outcome.grade.score, outcome.grade.verdict, outcome.grade.gate_failed) == (
        0.7,
        "borderline",
        False,
    )
    # pass_all: any failed gate fails the case; the trial shown is the one that failed it.
    run = TrialRun(TrialPolicy("pass_all", 3))
    run.add(trial(0, 0.9))
    run.add(trial(1, 0.95, gate_failed=True))
    outcome = run.conclude()
    assert outcome.grade.verdict == "fail" and outcome.grade.gate_failed
    assert outcome.aggregation["shown_attempt"] == 1
    # mean: a gated trial counts 0; the case's gate fails only when every trial's did.
    run = TrialRun(TrialPolicy("mean", 2))
    run.add(trial(0, 1.0))
    run.add(trial(1, 1.0, gate_failed=True))
    outcome = run.conclude()
    assert outcome.grade.score == 0.5 and not outcome.grade.gate_failed
    run = TrialRun(TrialPolicy("mean", 2))
    run.add(trial(0, 0.9, gate_failed=True))
    run.add(trial(1, 0.9, gate_failed=True))
    assert run.conclude().grade.gate_failed


def test_cost_limit_stops_further_trials() -> None:
    run = run_all(TrialPolicy("mean", 10, cost_limit_usd=0.05), [1.0] * 10, cost=0.02)
    assert len(run.results) == 3 and run.stopped == "cost_limit"
    assert run.conclude().aggregation["cost_usd"] == pytest.approx(0.06)


def test_adaptive_rule() -> None:
    policy = policy_for(TrialsConfig(strategy="adaptive"))
    assert policy is not None and (policy.count, policy.min, policy.threshold) == (10, 2, 0.5)
    # Every trial passing settles at 4 (Wilson lower bound 0.51 > 0.5); 5 of 5 gives 0.57.
    run = run_all(policy, [1.0] * 10)
    outcome = run.conclude()
    assert len(run.results) == 4 and run.stopped == "settled"
    assert (outcome.grade.verdict, outcome.aggregation["settled"]) == ("pass", True)
    run = run_all(policy, [0.0] * 10)
    assert len(run.results) == 4 and run.conclude().grade.verdict == "fail"
    # Alternating passes never settle: borderline after max trials, the interval holds 0.5.
    run = run_all(policy, [1.0, 0.0] * 5)
    outcome = run.conclude()
    assert len(run.results) == 10 and run.stopped == "max"
    assert outcome.grade.verdict == "borderline" and outcome.grade.score == 0.5
    assert outcome.aggregation["ci_low"] < 0.5 < outcome.aggregation["ci_high"]
    # `min` trials run even when the first would settle; a cost limit reached before `min`
    # leaves the case unsettled, whatever the interval says.
    strict = TrialPolicy("adaptive", 10, min=6)
    assert len(run_all(strict, [1.0] * 10).results) == 6
    capped = TrialPolicy("adaptive", 10, cost_limit_usd=0.04, min=6)
    run = run_all(capped, [1.0] * 10, cost=0.01)
    outcome = run.conclude()
    assert (len(run.results), run.stopped, outcome.grade.verdict) == (4, "cost_limit", "borderline")
    assert outcome.aggregation["settled"] is False


def test_policy_resolution() -> None:
    assert policy_for(None) is None
    assert policy_for(None, 3) == TrialPolicy(count=3)
    assert policy_for(TrialsConfig(count=1)) is None
    assert policy_for(TrialsConfig(count=4, strategy="pass_any")) == TrialPolicy(count=4)
    assert policy_for(TrialsConfig(count=4, strategy="mean"), 6) == TrialPolicy("mean", 6)
    assert policy_for(TrialsConfig(strategy="mean"), 6) == TrialPolicy("mean", 6)
    assert policy_for(TrialsConfig(strategy="adaptive"), 1) is None  # --agentv-trials 1
    adaptive = policy_for(TrialsConfig(strategy="adaptive", min=3), 5)
    assert adaptive is not None and (adaptive.count, adaptive.min) == (5, 3)


def test_adaptive_rule_that_cannot_settle_is_refused() -> None:
    with pytest.raises(ConfigError) as excinfo:
        policy_for(TrialsConfig(strategy="adaptive", threshold=0.8))
    assert str(excinfo.value) == (
        "strategy 'adaptive' can never settle above threshold 0.8 within max 10 trials at "
        "confidence 0.95: 10 passes of 10 give a lower bound of 0.72 (wilson); raise 'max' to "
        "at least 16"
    )
    assert policy_for(TrialsConfig(strategy="adaptive", threshold=0.8, max=16)) is not None
    with pytest.raises(ConfigError, match="at least 17"):
        policy_for(TrialsConfig(strategy="adaptive", threshold=0.8, max=16, interval="exact"))
    with pytest.raises(ConfigError, match=r"can never settle above threshold 0\.5 within max 3"):
        policy_for(TrialsConfig(strategy="adaptive"), 3)


def test_adaptive_min_above_max_is_refused_not_lowered() -> None:
    with pytest.raises(ConfigError) as excinfo:
        policy_for(TrialsConfig(strategy="adaptive", min=15))
    assert str(excinfo.value) == (
        "strategy 'adaptive': min 15 is more than max 10 (the default); raise 'max' to at least 15"
    )
    assert policy_for(TrialsConfig(strategy="adaptive", min=15, max=20)) is not None
    capped = policy_for(TrialsConfig(strategy="adaptive", min=6), 4)  # --agentv-trials 4
    assert capped is not None and (capped.count, capped.min) == (4, 4)


def test_assert_judged_trials_argument() -> None:
    assert policy_for(trials_from_argument(3)) == TrialPolicy(count=3)
    adaptive = trials_from_argument({"strategy": "adaptive", "max": 6})
    assert policy_for(adaptive) == TrialPolicy("adaptive", 6)
    assert policy_for(trials_from_argument(1)) is None
    with pytest.raises(ValueError, match="trials must be a count or a mapping"):
        trials_from_argument(True)
    with pytest.raises(ValueError, match=r"trials\.count: must be at least 1"):
        trials_from_argument(0)
    with pytest.raises(ValueError, match=r"trials\.strategy: must be 'pass_at_k'"):
        trials_from_argument({"count": 2, "strategy": "best"})
    with pytest.raises(ValueError, match="trials: strategy 'adaptive' can never settle"):
        trials_from_argument({"strategy": "adaptive", "threshold": 0.9})


# -- the adaptive rule's error rate and savings, simulated ------------------------------------


def exact_rates(policy: TrialPolicy, p: float) -> tuple[float, float, float]:
    """P(pass), P(fail) and the expected trials of the rule for a case that passes with
    probability p, by walking every sequence of passes (dynamic programming)."""
    alive = {0: 1.0}
    settled = {"pass": 0.0, "fail": 0.0}
    expected = 0.0
    for n in range(1, policy.count + 1):
        grown: dict[int, float] = {}
        for passed, weight in alive.items():
            grown[passed + 1] = grown.get(passed + 1, 0.0) + weight * p
            grown[passed] = grown.get(passed, 0.0) + weight * (1 - p)
        alive = {}
        for passed, weight in grown.items():
            verdict = policy.settled(passed, n) if n >= policy.min else None
            if verdict is not None:
                settled[verdict] += weight
                expected += weight * n
            elif n == policy.count:
                expected += weight * n
            else:
                alive[passed] = weight
    return settled["pass"], settled["fail"], expected


def simulate(
    policy: TrialPolicy, p: float, cases: int, rng: random.Random
) -> tuple[Counter, float]:  # type: ignore[type-arg]
    """Run the real TrialRun on simulated cases whose trials pass with probability p."""
    verdicts: Counter[str] = Counter()
    trials = 0
    for _ in range(cases):
        run = TrialRun(policy)
        while (attempt := run.next_attempt()) is not None:
            run.add(trial(attempt, 1.0 if rng.random() < p else 0.0))
        verdicts[run.conclude().grade.verdict] += 1
        trials += len(run.results)
    return verdicts, trials / cases


def test_the_bound_holds_for_every_pass_probability() -> None:
    """Exactly, not by sampling: the chance of a wrong verdict is largest when the pass
    probability sits at the bar, and stays below the stated bound on either side."""
    policy = TrialPolicy("adaptive", DEFAULT_MAX)
    grid = [i / 100 for i in range(1, 100)]
    wrong_pass = max(exact_rates(policy, p)[0] for p in grid if p <= 0.5)
    wrong_fail = max(exact_rates(policy, p)[1] for p in grid if p >= 0.5)
    assert wrong_pass == pytest.approx(exact_rates(policy, 0.5)[0])
    assert wrong_pass == pytest.approx(0.0781, abs=1e-4)
    assert wrong_fail == pytest.approx(0.0781, abs=1e-4)
    assert max(wrong_pass, wrong_fail) <= STATED_BOUND


def test_simulated_wrong_verdicts_stay_within_the_bound_and_cost_fewer_trials() -> None:
    """Seeded: cases with known pass probabilities, the defaults (threshold 0.5, confidence
    0.95, min 2, max 10). A verdict is wrong when it says pass for p <= 0.5 or fail for
    p > 0.5; the fixed count of the same confidence runs max = 10 trials every time."""
    policy = TrialPolicy("adaptive", DEFAULT_MAX)
    rng = random.Random(20240615)
    cases = 10_000
    spent: dict[float, float] = {}
    for p in (0.95, 0.8, 0.5, 0.05):
        verdicts, mean_trials = simulate(policy, p, cases, rng)
        wrong = verdicts["fail"] if p > 0.5 else verdicts["pass"]
        rate = wrong / cases
        exact_pass, exact_fail, exact_trials = exact_rates(policy, p)
        exact_wrong = exact_fail if p > 0.5 else exact_pass
        sigma = math.sqrt(max(exact_wrong, 1 / cases) * (1 - exact_wrong) / cases)
        # The simulation agrees with the exact analysis, and both stay within the bound.
        assert abs(rate - exact_wrong) <= 4 * sigma
        assert exact_wrong <= STATED_BOUND
        assert rate <= STATED_BOUND + 3 * sigma
        assert mean_trials == pytest.approx(exact_trials, abs=0.1)
        assert mean_trials < DEFAULT_MAX
        spent[p] = mean_trials
    # Clear-cut cases settle in about half the fixed count; a coin flip runs nearly all of it.
    assert spent[0.95] < 5 and spent[0.05] < 5
    assert spent[0.8] < 7.5
    assert spent[0.5] > 9
    assert sum(spent.values()) < 0.7 * 4 * DEFAULT_MAX
