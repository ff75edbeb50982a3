"""Pacing by the provider's rate-limit headers: both vendors' header families read, the pace
they imply, a ``retry-after`` honoured for every call of the model and never past a call's
deadline, against the loopback judge enforcing a limit the way the vendors do. Asserted on
counts and order (and lower bounds on time, which a loaded machine can only raise)."""

from __future__ import annotations

import asyncio
import itertools
import math
from datetime import datetime, timezone

import pytest

from pytest_agentv.llm.limits import CallLimits, observed
from pytest_agentv.llm.limits.headers import duration, until
from pytest_agentv.llm.limits.pacing import Pace
from tests.fake_openai import FakeOpenAI, RateLimit, Status, go_duration
from tests.helpers import write
from tests.test_limits import span
from tests.test_scheduler import cases

NOON = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc).timestamp()


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("6m0s", 360.0),
        ("1.5s", 1.5),
        ("20ms", 0.02),
        ("1h2m3.5s", 3723.5),
        ("0s", 0.0),
        ("250us", 0.00025),
        ("7", 7.0),
        ("0.25", 0.25),
    ],
)
def test_openai_resets_are_go_durations(text: str, seconds: float) -> None:
    assert duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "soon", "1.5x", "6m0", "m5s", "-1s", "1s 2s", "nan", "-3"])
def test_resets_that_are_not_durations_say_nothing(text: str) -> None:
    assert duration(text) is None


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("2026-11-29T12:00:30Z", 30.0),
        ("2026-11-29T12:00:01.250Z", 1.25),
        ("2026-11-29T13:00:30+01:00", 30.0),
        ("2026-11-29T11:59:00Z", 0.0),  # already past: now
        (str(int(NOON + 12)), 12.0),  # a Unix time
        ("2026-11-29T12:00:30", None),  # no offset: not RFC 3339
        ("tomorrow", None),
    ],
)
def test_anthropic_resets_are_rfc3339_times(text: str, seconds: float | None) -> None:
    assert until(text, now=lambda: NOON) == (None if seconds is None else pytest.approx(seconds))


def test_both_families_read_into_the_same_facts() -> None:
    openai = {
        "x-ratelimit-limit-requests": "600",
        "x-ratelimit-remaining-requests": "598",
        "x-ratelimit-reset-requests": "200ms",
        "x-ratelimit-limit-tokens": "150000",
        "x-ratelimit-remaining-tokens": "149000",
        "x-ratelimit-reset-tokens": "6m0s",
    }
    anthropic = {
        "anthropic-ratelimit-requests-limit": "600",
        "anthropic-ratelimit-requests-remaining": "598",
        "anthropic-ratelimit-requests-reset": "2026-11-29T12:00:00.200Z",
        "anthropic-ratelimit-tokens-limit": "150000",
        "anthropic-ratelimit-tokens-remaining": "149000",
        "anthropic-ratelimit-tokens-reset": "2026-11-29T12:06:00Z",
        "anthropic-ratelimit-input-tokens-limit": "100000",
    }
    expected = {
        "requests": {"limit": 600, "remaining": 598, "reset": pytest.approx(0.2)},
        "tokens": {"limit": 150000, "remaining": 149000, "reset": pytest.approx(360.0)},
    }
    assert observed(openai) == expected
    assert observed(anthropic, now=lambda: NOON) == expected


@pytest.mark.parametrize(
    "headers",
    [
        None,
        {},
        {"content-type": "application/json"},
        {"x-ratelimit-limit-requests": "many", "x-ratelimit-remaining-requests": "-3"},
        {"x-ratelimit-reset-requests": "1s"},  # a reset alone says nothing to pace by
    ],
)
def test_replies_without_readable_headers_change_nothing(
    headers: dict[str, str] | None,
) -> None:
    assert observed(headers) is None


def test_the_fake_writes_resets_as_openai_does() -> None:
    assert [go_duration(s) for s in (360.0, 1.5, 0.02, 0.0123, 75.25)] == [
        "6m0s",
        "1.5s",
        "20ms",
        "13ms",
        "1m15.25s",
    ]


# -- the pace -------------------------------------------------------------------------------
def told(limit: float, remaining: float, reset: float) -> dict[str, dict[str, float]]:
    return {"requests": {"limit": limit, "remaining": remaining, "reset": reset}}


def test_a_learned_limit_is_spent_a_sixtieth_at_a_time() -> None:
    """600 a minute: once known, at most 10 at once (5 at first: half is kept for the
    network's jitter), then one every 0.1 s (and 3 % more)."""
    pace = Pace(window=60.0)
    first = pace.take(0.0, 100)
    pace.end(0.5, first, 100, told(600, 599, 0.1))
    starts = []
    now = 0.5
    while len(starts) < 30:
        now += max(pace.wait(now, 100), 0.0)
        pace.take(now, 100)
        starts.append(now)
    assert starts[:5] == [0.5] * 5
    assert starts[5] > 0.5
    gaps = [later - earlier for earlier, later in itertools.pairwise(starts[5:])]
    assert min(gaps) == pytest.approx(0.1 / 0.97, rel=1e-6)


def test_what_the_provider_has_left_holds_calls_until_it_refills() -> None:
    """Another user of the key spent the budget: 0 left, whole again in 6 s at 600 a minute
    (what the limit says): the next call waits a tenth of a second, not the whole reset."""
    pace = Pace(window=60.0)
    ticket = pace.take(0.0, 1)
    pace.end(1.0, ticket, 1, told(600, 0, 6.0))
    assert pace.wait(1.0, 1) == pytest.approx(0.1)


def test_a_slower_refill_than_the_limit_says_is_believed() -> None:
    """A limit of 10,000 requests that is whole again a day after it is spent is a daily one:
    one request every 8.64 s, not 10,000 a minute."""
    pace = Pace(window=60.0)
    ticket = pace.take(0.0, 1)
    pace.end(0.0, ticket, 1, told(10_000, 0, 86_400.0))
    assert pace.wait(0.0, 1) == pytest.approx(8.64)


def test_calls_started_since_the_reply_count_against_what_was_left() -> None:
    pace = Pace(window=60.0)
    seen = pace.take(0.0, 1)
    for _ in range(3):
        pace.take(0.0, 1)
    pace.end(0.0, seen, 1, told(6000, 3, 59.97))  # 3 left before the 3 calls after it
    assert pace.wait(0.0, 1) == pytest.approx(0.01)  # 0 left: one more in 1/100 s


def test_only_a_newer_calls_reply_replaces_what_is_known() -> None:
    pace = Pace(window=60.0)
    older, newer = pace.take(0.0, 1), pace.take(0.0, 1)
    pace.end(0.0, newer, 1, told(6000, 50, 0.5))
    pace.end(0.0, older, 1, told(6000, 0, 3.0))  # arrived before ``newer``: stale
    assert pace.wait(0.0, 1) == 0.0


def test_a_retry_after_pauses_every_call_of_the_model() -> None:
    pace, other = Pace(window=60.0), Pace(window=60.0)
    pace.refused(10.0, 2.5)
    assert pace.wait(10.0, 1) == pytest.approx(2.5)
    assert pace.wait(12.5, 1) == 0.0
    assert other.wait(10.0, 1) == 0.0
    pace.refused(11.0, None)  # a 429 that names no pause holds nothing by itself
    assert pace.stats.refused == 2
    assert pace.wait(12.5, 1) == 0.0


def test_an_option_caps_a_higher_learned_limit() -> None:
    pace = Pace(window=60.0, rpm=60)
    assert pace.wait(0.0, 1) == 0.0
    ticket = pace.take(0.0, 1)
    pace.end(0.0, ticket, 1, told(6000, 5999, 0.01))
    assert pace.dimensions["requests"].limit() == 60
    assert pace.wait(0.0, 1) == pytest.approx(1 / 0.97)


def test_the_limits_hold_a_model_for_its_retry_after() -> None:
    limits = CallLimits(4, clock=lambda: 100.0)
    limits.rate_limited("openai/m", 3.0)
    assert limits._wait_for("openai/m", 1) == pytest.approx(3.0)
    assert limits._wait_for("openai/other", 1) == 0.0
    assert limits.current == 2  # and the concurrency halves, as for any 429


# -- against the loopback judge ---------------------------------------------------------------
PACED = ["--agentv-concurrency=2", "--agentv-rate-window=4"]


@pytest.mark.parametrize("family", ["openai", "anthropic"])
def test_the_headers_pace_the_run_below_the_limit(
    judged: pytest.Pytester, fake_llm: FakeOpenAI, family: str
) -> None:
    """120 requests per 4 s window (30 a second, 2 at a time) and immediate replies: with no
    option, the headers of the first replies are enough to stay under the limit."""
    fake_llm.rate_limit = RateLimit(rpm=120, tpm=1_000_000, window=4.0, family=family)
    write(judged, "c.eval.yaml", cases(24))
    judged.runpytest(*PACED).assert_outcomes(passed=24)
    assert fake_llm.refused <= 1
    assert len(fake_llm.requests) == 24 + fake_llm.refused
    assert span(fake_llm.requests) >= (24 - 2 - 1) / 30


def test_without_headers_the_option_keeps_the_run_below_the_limit(
    judged: pytest.Pytester, fake_llm: FakeOpenAI
) -> None:
    """120 a 12 s window: 10 a second, 2 at a time, and nothing said in the replies."""
    fake_llm.rate_limit = RateLimit(rpm=120, window=12.0, family=None)
    write(judged, "c.eval.yaml", cases(16))
    paced = ["--agentv-concurrency=2", "--agentv-rate-window=12", "--agentv-rpm=120"]
    judged.runpytest(*paced).assert_outcomes(passed=16)
    assert (fake_llm.refused, len(fake_llm.requests)) == (0, 16)


def test_xdist_workers_share_what_the_headers_taught(
    judged: pytest.Pytester, fake_llm: FakeOpenAI
) -> None:
    """...and the summary and the page give the controller's limits: one line for both
    workers (the serial run's is the next test's)."""
    fake_llm.rate_limit = RateLimit(rpm=120, window=4.0)
    write(judged, "c.eval.yaml", cases(24))
    result = judged.runpytest("-n", "2", *PACED, "--agentv-html=report.html")
    result.assert_outcomes(passed=24)
    refused = fake_llm.refused
    assert refused <= 1
    assert len(fake_llm.requests) == 24 + refused
    retried = f" ({refused} retry)" if refused else ""
    model = f"openai/fake-judge: {24 + refused} requests{retried}, {refused} answered 429;"
    result.stdout.fnmatch_lines(
        [
            "agentv pacing (a minute is 4 s here): the rate limits held calls back for * s",
            f"  {model} * a minute against the provider's 120 (learned from its headers)",
        ]
    )
    assert result.stdout.str().count("agentv pacing") == 1
    page = (judged.path / "report.html").read_text()
    assert "<dt>rate limits</dt>" in page
    assert model in page


def test_a_retry_after_past_the_deadline_leaves_the_case_not_graded_at_once(
    judged: pytest.Pytester, fake_llm: FakeOpenAI
) -> None:
    """The provider asks for 30 s; the call has 5 s: the case is not graded, saying why,
    rather than waiting past its deadline (one request: no retry was sent)."""
    fake_llm.push(Status(429, {"retry-after": "30"}))
    write(judged, "c.eval.yaml", cases(1))
    result = judged.runpytest("--agentv-judge-timeout=5")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*failed after 1 attempt: the server asked to retry after 30s, past the call's 5s "
            "deadline*"
        ]
    )
    assert len(fake_llm.requests) == 1


def test_a_429_that_says_when_the_limit_is_whole_waits_for_it_not_a_guess(
    judged: pytest.Pytester, fake_llm: FakeOpenAI
) -> None:
    """No retry-after, but the headers say nothing is left until 300 ms from now: the retry
    goes then. A backoff guess (at least 15 s here) would not fit in the 10 s deadline: the
    case would not be graded."""
    fake_llm.push(
        Status(429, {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "300ms"})
    )
    write(judged, "c.eval.yaml", cases(1))
    judged.runpytest("--agentv-judge-backoff=30", "--agentv-judge-timeout=10").assert_outcomes(
        passed=1
    )
    assert len(fake_llm.requests) == 2
    assert fake_llm.requests[1].at - fake_llm.requests[0].at >= 0.3 * 0.9


def test_the_summary_and_the_page_say_how_the_run_met_the_limits(
    judged: pytest.Pytester, fake_llm: FakeOpenAI
) -> None:
    """Under pytest-xdist, see the test above."""
    fake_llm.push(
        Status(
            429,
            {
                "x-ratelimit-limit-requests": "120",
                "x-ratelimit-remaining-requests": "0",
                "x-ratelimit-reset-requests": "100ms",
                "retry-after-ms": "10",
            },
        )
    )
    write(judged, "c.eval.yaml", cases(6))
    result = judged.runpytest(*PACED, "--agentv-html=report.html")
    result.assert_outcomes(passed=6)
    lines = [
        "agentv pacing (a minute is 4 s here): the rate limits held calls back for * s",
        "  openai/fake-judge: 7 requests (1 retry), 1 answered 429; * a minute against "
        "the provider's 120 (learned from its headers)",
    ]
    result.stdout.fnmatch_lines(lines)
    assert result.stdout.str().count("agentv pacing") == 1
    page = (judged.path / "report.html").read_text()
    assert "<dt>rate limits</dt>" in page
    assert "7 requests (1 retry), 1 answered 429;" in page


def test_unlimited_models_pace_nothing() -> None:
    async def scenario() -> float:
        limits = CallLimits(2)
        held = await limits.acquire("m", 10)
        await limits.release(held, 10, None)
        return limits._wait_for("m", 10)

    assert asyncio.run(scenario()) == 0.0
    assert math.isinf(CallLimits(0)._wait_for("m", 1))
