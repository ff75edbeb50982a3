"""Shards as the machines of one CI run: pytest processes × ``-n 2`` through one Redis against
one loopback judge, which counts what it received (in flight, per window, paid for). The merged
report of the shards is the single run's. Counts and order, never how long anything took."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.fake_openai import Delay, FakeOpenAI, Request, freeform
from tests.helpers import write
from tests.redis_server import RedisServer
from tests.test_budget import call_cost, priced_ini
from tests.test_limits import most_in_window
from tests.test_scheduler import cases
from tests.test_shards import assert_merged_is_whole, verdicts


def graded(request: Request) -> Delay:
    """Every fifth question fails; each answer takes a moment, so that calls overlap."""
    found = re.search(r"question (\d+)", request.user)
    number = int(found.group(1)) if found else 0
    return Delay(0.05, freeform(0.2 if number % 5 == 0 else 0.9))


def shards(project: pytest.Pytester, count: int, *args: str) -> list[subprocess.Popen[bytes]]:
    """Every shard of ``count`` started at once, each under ``-n 2``, each writing its results."""
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "-q", *args]
    return [
        subprocess.Popen(
            [*command, f"--agentv-shard={k}/{count}", f"--agentv-results=s{k}.jsonl"],
            cwd=project.path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for k in range(1, count + 1)
    ]


def finished(processes: list[subprocess.Popen[bytes]]) -> list[int]:
    return [process.wait(timeout=300) for process in processes]


def test_shards_hold_one_concurrency_and_one_rpm(
    judged: pytest.Pytester,
    fake_llm: FakeOpenAI,
    redis_server: RedisServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Two shards of two workers each: four processes ask at once, more than the concurrency."""
    fake_llm.responder = graded  # type: ignore[assignment]
    write(judged, "c.eval.yaml", cases(20))
    coordinated = [f"--agentv-coordinator={redis_server.url()}", "--agentv-run-id=ci-1"]
    limited = ["--agentv-concurrency=3", "--agentv-rpm=12", "--agentv-rate-window=1"]
    returns = finished(shards(judged, 2, *coordinated, *limited))
    assert len(fake_llm.requests) == 20
    assert fake_llm.peak_in_flight <= 3
    assert most_in_window(fake_llm.requests, 1.0) <= 12 + 1

    judged.runpytest("-p", "no:cacheprovider", "--agentv-results=whole.jsonl")
    files = [f"s{k}.jsonl" for k in range(1, 3)]
    assert_merged_is_whole(judged, files)
    capsys.readouterr()
    # Each shard fails exactly when one of its cases did.
    shard_verdicts = [verdicts(judged.path / name).values() for name in files]
    assert returns == [int(("fail", 0.2) in shown) for shown in shard_verdicts]
    merged = set(verdicts(judged.path / "all.jsonl").values())
    assert sorted(merged) == [("fail", 0.2), ("pass", 0.9)]


def test_the_budget_holds_across_shards(
    project: pytest.Pytester, fake_llm: FakeOpenAI, redis_server: RedisServer
) -> None:
    """Three and a half calls' worth for the whole run: at most one call past it, however many
    shards and workers ask at once."""
    fake_llm.responder = lambda request: Delay(0.05, freeform(0.9))  # type: ignore[assignment]
    write(project, "s.eval.yaml", cases(16))
    project.makeini(priced_ini(fake_llm, concurrency="4"))
    budget = 3.5 * call_cost()
    coordinated = [f"--agentv-coordinator={redis_server.url()}", "--agentv-run-id=ci-2"]
    returns = finished(shards(project, 2, *coordinated, f"--agentv-budget-usd={budget!r}"))
    assert returns == [1, 1]
    assert 1 <= len(fake_llm.requests) <= 4
    assert len(fake_llm.requests) * call_cost() <= budget + call_cost()
