"""Run-wide limits through a coordinator (a real Redis): leases across processes, runs kept
apart, a Redis that goes away and comes back, a process killed while it holds a slot; and the
option itself (a clear error before any model call, no Redis import without it). Counts and
order, never how long anything took."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

import pytest

from pytest_agentv.llm.limits.coordinated import RedisLimits
from pytest_agentv.llm.limits.coordinator import Coordinator, CoordinatorLost
from tests.fake_openai import Delay, FakeOpenAI, freeform
from tests.helpers import write
from tests.redis_server import RedisServer
from tests.test_scheduler import cases

T = TypeVar("T")


class Machines:
    """Processes of one or more runs, each with its own connection to the test's Redis."""

    def __init__(self, server: RedisServer) -> None:
        self.server = server
        self.made: list[RedisLimits] = []

    def __call__(
        self, run: str = "run", concurrency: int = 2, patience: float = 30.0
    ) -> RedisLimits:
        self.made.append(RedisLimits(Coordinator(self.server.url(), run, patience), concurrency))
        return self.made[-1]

    def run(self, work: Coroutine[Any, Any, T]) -> T:
        """``work`` within a minute, every connection closed after."""

        async def closing() -> T:
            try:
                return await asyncio.wait_for(work, 60)
            finally:
                for limits in self.made:
                    await limits.coordinator.close()

        return asyncio.run(closing())


@pytest.fixture
def machines(redis_server: RedisServer) -> Machines:
    return Machines(redis_server)


async def most_at_once(processes: list[RedisLimits], calls: int) -> int:
    """Calls spread over ``processes``, each holding its slot a moment: the most in flight."""
    now = most = 0

    async def call(limits: RedisLimits) -> None:
        nonlocal now, most
        async with limits.slot("m", 10, hold=30):
            now += 1
            most = max(most, now)
            await asyncio.sleep(0.02)
            now -= 1

    await asyncio.gather(*(call(processes[i % len(processes)]) for i in range(calls)))
    return most


def test_the_concurrency_holds_across_processes(machines: Machines) -> None:
    processes = [machines(concurrency=3) for _ in range(4)]
    assert machines.run(most_at_once(processes, 24)) == 3


def test_two_runs_sharing_one_redis_stay_apart(machines: Machines) -> None:
    """Each run's one slot is its own: both are held at once."""

    async def both() -> None:
        first, second = machines("a", 1), machines("b", 1)
        async with first.slot("m", 1, hold=30), second.slot("m", 1, hold=30):
            keys = await first.coordinator.client.keys("agentv:*")
            assert sorted(keys) == [b"agentv:a:limits", b"agentv:b:limits"]

    machines.run(both())


def test_a_lost_coordinator_ends_the_call_after_its_patience(
    machines: Machines, redis_server: RedisServer
) -> None:
    redis_server.stop()

    async def ask() -> None:
        async with machines(patience=0.5).slot("m", 1, hold=30):
            raise AssertionError("a slot without the coordinator")

    with pytest.raises(CoordinatorLost, match=r"redis://127\.0\.0\.1:\d+/0 .* not be reached"):
        machines.run(ask())


def test_a_redis_that_lost_the_state_grants_nothing_until_the_calls_in_flight_are_over(
    machines: Machines, redis_server: RedisServer
) -> None:
    """Redis restarted without its data forgot the call in flight: no second call goes until
    that call's attempt would have ended (its lease), though one slot was free the whole time."""

    async def scenario() -> list[str]:
        held, other = machines(concurrency=1), machines(concurrency=1)
        order = []
        async with held.slot("m", 1, hold=1.0):
            redis_server.stop()
            redis_server.start()
            order.append("restarted")
        order.append("released")  # into a Redis that no longer knows it
        state = await other.coordinator.client.time()
        async with other.slot("m", 1, hold=1.0):
            granted = await other.coordinator.client.time()
            order.append("granted")
        assert granted[0] + granted[1] / 1e6 >= state[0] + state[1] / 1e6
        stored = json.loads(await other.coordinator.client.get("agentv:run:limits"))
        assert stored["blocked_until"] <= granted[0] + granted[1] / 1e6
        return order

    assert machines.run(scenario()) == ["restarted", "released", "granted"]


HOLDER = """
import asyncio, sys
from pytest_agentv.llm.limits.coordinated import RedisLimits
from pytest_agentv.llm.limits.coordinator import Coordinator

async def main():
    limits = RedisLimits(Coordinator(sys.argv[1], "run", 30), 1)
    async with limits.slot("m", 1, hold=float(sys.argv[2])):
        print("held", flush=True)
        await asyncio.sleep(3600)

asyncio.run(main())
"""


@pytest.fixture
def holder(redis_server: RedisServer) -> Iterator[subprocess.Popen[str]]:
    """A process that takes the run's only slot (a lease of 1 second) and holds it."""
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDER, redis_server.url(), "1.0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline() == "held\n"
    yield process
    process.kill()
    process.wait(30)
    process.stdout.close()


def test_a_killed_process_gives_its_slot_back_when_its_lease_ends(
    machines: Machines, holder: subprocess.Popen[str]
) -> None:
    async def after_kill() -> None:
        mine = machines(concurrency=1)
        client = mine.coordinator.client
        lease = next(iter(json.loads(await client.get("agentv:run:limits"))["leases"].values()))
        os.kill(holder.pid, signal.SIGKILL)
        async with mine.slot("m", 1, hold=30):
            seconds, micros = await client.time()
            assert seconds + micros / 1e6 >= lease["expires"]

    machines.run(after_kill())


def test_without_a_coordinator_redis_is_never_imported(
    judged: pytest.Pytester, fake_llm: FakeOpenAI
) -> None:
    judged.makeconftest(
        """
        import sys

        def pytest_sessionfinish(session):
            print("redis imported:", any(name.split(".")[0] == "redis" for name in sys.modules))
        """
    )
    write(judged, "c.eval.yaml", cases(2))
    result = judged.runpytest_subprocess("-s", "--agentv-concurrency=2")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*redis imported: False*"])


def test_an_unreachable_coordinator_is_a_usage_error_before_any_call(
    judged: pytest.Pytester, fake_llm: FakeOpenAI, redis_server: RedisServer
) -> None:
    redis_server.stop()
    url = redis_server.url().replace("redis://", "redis://:hunter2-secret-pw@")
    write(judged, "c.eval.yaml", cases(2))
    result = judged.runpytest(f"--agentv-coordinator={url}", "--agentv-run-id=r1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"*--agentv-coordinator=redis://:***@127.0.0.1:{redis_server.port}/0 cannot be used: *"]
    )
    assert "hunter2" not in result.stdout.str() + result.stderr.str()
    assert fake_llm.requests == []


def test_a_coordinator_needs_the_run_id(
    judged: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, redis_server: RedisServer
) -> None:
    monkeypatch.delenv("GITHUB_RUN_ID", raising=False)
    write(judged, "c.eval.yaml", cases(1))
    result = judged.runpytest(f"--agentv-coordinator={redis_server.url()}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--agentv-coordinator needs the run's id*--agentv-run-id*"])


def test_github_actions_names_the_run(
    judged: pytest.Pytester,
    fake_llm: FakeOpenAI,
    monkeypatch: pytest.MonkeyPatch,
    redis_server: RedisServer,
) -> None:
    """A password is a secret from the start: it reaches no report."""
    redis_server.stop()
    redis_server.password = "hunter2-secret-pw"
    redis_server.start()
    monkeypatch.setenv("GITHUB_RUN_ID", "4242")
    monkeypatch.setenv("GITHUB_RUN_ATTEMPT", "2")
    monkeypatch.setenv("AGENTV_COORDINATOR", redis_server.url())
    write(judged, "c.eval.yaml", cases(2))
    result = judged.runpytest("--junitxml=j.xml", "--agentv-results=r.jsonl")
    result.assert_outcomes(passed=2)
    import redis

    client = redis.Redis.from_url(redis_server.url())
    assert client.keys("agentv:*") == [b"agentv:4242-2:limits"]
    client.close()
    for name in ("j.xml", "r.jsonl"):
        assert "hunter2" not in (judged.path / name).read_text()
    assert "hunter2" not in result.stdout.str()


def test_a_run_outlives_its_redis_going_away_and_coming_back(
    judged: pytest.Pytester, fake_llm: FakeOpenAI, redis_server: RedisServer
) -> None:
    """Redis stopped mid-run and started again, empty: the calls waited for it, none went
    beyond the concurrency, and every case was graded."""
    fake_llm.responder = lambda request: Delay(0.1, freeform(0.9))  # type: ignore[assignment]
    write(judged, "c.eval.yaml", cases(12))
    coordinated = [f"--agentv-coordinator={redis_server.url()}", "--agentv-run-id=r"]
    limited = ["--agentv-concurrency=2", "--agentv-judge-attempt-timeout=2"]

    def outage() -> None:
        while len(fake_llm.requests) < 3 and not finished.is_set():
            time.sleep(0.01)
        redis_server.stop()
        time.sleep(0.3)
        redis_server.start()

    finished = threading.Event()
    stopper = threading.Thread(target=outage)
    stopper.start()
    try:
        result = judged.runpytest("-p", "no:cacheprovider", *coordinated, *limited)
    finally:
        finished.set()
        stopper.join()
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=12)
    assert len(fake_llm.requests) == 12
    assert fake_llm.peak_in_flight <= 2
