"""One set of limits on model calls for the whole run: calls in flight across pytest-xdist
workers, requests and tokens per minute per model. Asserted on what the loopback judge saw
(counts and bounds), never on how long anything took."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import pytest

from pytest_agentv.llm.limits import (
    CallLimits,
    LimitServer,
    RemoteLimits,
    serve_limits,
    stop_limits,
)
from pytest_agentv.scheduler import shared_loop
from tests.fake_openai import Delay, FakeOpenAI, Request
from tests.fake_openai import freeform as freeform_reply
from tests.helpers import write
from tests.test_scheduler import cases


def slow_judge(server: FakeOpenAI, seconds: float) -> None:
    server.responder = lambda request: Delay(seconds, freeform_reply(0.9))  # type: ignore[assignment]


def most_in_window(requests: list[Request], window: float) -> int:
    """The most requests that arrived within any ``window`` seconds."""
    times = sorted(request.at for request in requests)
    return max(
        sum(1 for later in times[start:] if later < first + window)
        for start, first in enumerate(times)
    )


def test_concurrency_and_requests_per_minute_hold_across_xdist_workers(
    judged: pytest.Pytester, fake_llm: FakeOpenAI
) -> None:
    """``-n 2 --agentv-concurrency 2`` used to allow 2 x 2 judge calls at once. One run holds
    both limits, each of which binds: without the concurrency's, a window's four requests go at
    once; without the rate's, two at a time finish the twelve calls in under two windows."""
    slow_judge(fake_llm, 0.3)
    write(judged, "c.eval.yaml", cases(12))
    judged.runpytest(
        "-n", "2", "--agentv-concurrency=2", "--agentv-rpm=4", "--agentv-rate-window=1"
    ).assert_outcomes(passed=12)
    assert len(fake_llm.requests) == 12
    assert fake_llm.peak_in_flight <= 2
    assert most_in_window(fake_llm.requests, 1.0) <= 4
    assert span(fake_llm.requests) >= 2.0


def test_limits_are_served_from_a_tmpdir_too_deep_for_a_socket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A TMPDIR too deep for a Unix socket's path was an INTERNALERROR: the controller's socket
    goes to /tmp instead, where workers reach it."""
    deep = tmp_path.joinpath(*["folder"] * 12)
    deep.mkdir(parents=True)
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    server = serve_limits(CallLimits(2), shared_loop())
    try:
        assert len(str(server.path)) <= 107

        async def reach() -> None:
            _, writer = await asyncio.open_unix_connection(str(server.path))
            writer.close()
            await writer.wait_closed()

        asyncio.run_coroutine_threadsafe(reach(), shared_loop()).result(30)
    finally:
        stop_limits(server, shared_loop())
    assert not server.path.parent.exists()


def test_limits_that_cannot_be_shared_stay_per_worker(
    judged: pytest.Pytester, fake_llm: FakeOpenAI
) -> None:
    """No socket for the controller: a warning says so, and the run goes on."""
    judged.makeconftest(
        """
        import asyncio

        def pytest_configure(config):
            async def refuse(*args, **kwargs):
                raise OSError("sockets are not allowed here")

            config._agentv_kept = asyncio.start_unix_server
            asyncio.start_unix_server = refuse

        def pytest_unconfigure(config):
            asyncio.start_unix_server = config._agentv_kept
        """
    )
    write(judged, "c.eval.yaml", cases(4))
    result = judged.runpytest("-n", "2", "--agentv-concurrency=1")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(
        [
            "*the model-call limits cannot be shared between pytest-xdist workers "
            "(sockets are not allowed here); each worker keeps its own*"
        ]
    )
    assert len(fake_llm.requests) == 4


def test_requests_per_minute_in_one_process(judged: pytest.Pytester, fake_llm: FakeOpenAI) -> None:
    write(judged, "c.eval.yaml", cases(9))
    judged.runpytest("--agentv-rpm=3", "--agentv-rate-window=1").assert_outcomes(passed=9)
    assert most_in_window(fake_llm.requests, 1.0) <= 3


def span(requests: list[Request]) -> float:
    times = [request.at for request in requests]
    return max(times) - min(times)


def test_tokens_per_minute_count_each_call(judged: pytest.Pytester, fake_llm: FakeOpenAI) -> None:
    """The fake judge reports 120 tokens a call: 12 calls (1,440 tokens) cannot all start in
    one window of 1,000. (A call is let through on its estimate, the prompt and the reply bound:
    about one a window here, so the window is a quarter of a second.)"""
    write(judged, "c.eval.yaml", cases(12))
    judged.runpytest("--agentv-tpm=1000", "--agentv-rate-window=0.25").assert_outcomes(passed=12)
    assert most_in_window(fake_llm.requests, 0.25) * 120 <= 1000
    assert span(fake_llm.requests) >= 0.25


def test_a_call_larger_than_the_allowance_still_goes_alone() -> None:
    async def scenario() -> list[int]:
        limits = CallLimits(4, tpm=10, window=0.2)
        seen: list[int] = []

        async def call(i: int) -> None:
            async with limits.slot("m", 50) as grant:
                seen.append(limits.in_flight)
                grant.used = 50

        await asyncio.gather(*(call(i) for i in range(3)))
        return seen

    assert asyncio.run(scenario()) == [1, 1, 1]


def test_a_call_that_ends_wakes_one_waiter_per_free_slot() -> None:
    """With only the concurrency to hold, hundreds of cases may wait at the limit: a call that
    ended woke every one of them to look again (2,000 cases at 64 in flight: most of the event
    loop's time). Counted as the looks each waiter takes."""

    async def scenario() -> tuple[int, int]:
        limits = CallLimits(2)
        looks = 0
        wait_for = limits._wait_for

        def counted(model: str, estimate: int) -> float:
            nonlocal looks
            looks += 1
            return wait_for(model, estimate)

        limits._wait_for = counted  # type: ignore[method-assign]
        first = await limits.acquire("m", 1)
        await limits.acquire("m", 1)
        waiters = [asyncio.ensure_future(limits.acquire("m", 1)) for _ in range(20)]
        await asyncio.sleep(0)
        before = looks
        await limits.release(first, 1)
        await asyncio.wait(waiters, timeout=0.5)
        for waiter in waiters:
            waiter.cancel()
        return looks - before, sum(waiter.done() and not waiter.cancelled() for waiter in waiters)

    looks, granted = asyncio.run(scenario())
    assert granted == 1
    assert looks == 1


@pytest.mark.parametrize(
    ("option", "value"),
    [("rpm", "0"), ("tpm", "-5"), ("rpm", "many"), ("rate-window", "0")],
)
def test_bad_limits_are_usage_errors(project: pytest.Pytester, option: str, value: str) -> None:
    result = project.runpytest(f"--agentv-{option}={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--agentv-{option}={value} is invalid*"])


def test_a_dead_workers_slots_are_held_until_its_calls_would_have_timed_out(
    tmp_path: Path,
) -> None:
    """``-n 2 --agentv-concurrency 2`` peaked at 3 calls open at the provider after a worker
    was killed mid-call: the controller gave its slot back with its connection while its
    request was still open there. It is held until the call's attempt would have timed out."""

    async def scenario() -> list[str]:
        events: list[str] = []
        limits = CallLimits(2)
        server = LimitServer(limits, Path(tempfile.mkdtemp(dir="/tmp")) / "limits.sock")
        await server.start()
        dying, other = RemoteLimits(server.path), RemoteLimits(server.path)
        # Each slot's context stays referenced: a dropped one gives its slot back.
        slots = [dying.slot("m", 1, hold=0.5), other.slot("m", 1, hold=30)]
        for slot in slots:  # a call of each worker open at the provider
            await asyncio.wait_for(slot.__aenter__(), 5)
        events.append("both slots taken")
        assert dying._writer is not None
        dying._writer.transport.abort()  # the worker is killed
        slots.append(other.slot("m", 1, hold=30))
        second = asyncio.ensure_future(slots[-1].__aenter__())
        done, _ = await asyncio.wait([second], timeout=0.2)
        events.append("granted at once" if done else "held while the dead call may be open")
        await asyncio.wait_for(second, 5)
        events.append("granted once its attempt would have timed out")
        await server.close()
        return events

    assert asyncio.run(scenario()) == [
        "both slots taken",
        "held while the dead call may be open",
        "granted once its attempt would have timed out",
    ]
