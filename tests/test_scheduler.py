"""Case work starts ahead of pytest, bounded and in order; reports stay those of a serial run."""

from __future__ import annotations

import threading
import time

import psutil
import pytest

from pytest_agentv.scheduler import AdaptiveLimit
from tests.fake_openai import Delay, FakeOpenAI, Request, Status
from tests.fake_openai import freeform as freeform_reply
from tests.helpers import write


def cases(count: int, prefix: str = "case") -> str:
    return "evalcases:\n" + "".join(
        f"  - {{id: {prefix}-{i:02d}, input: question {i}, expected_outcome: ok}}\n"
        for i in range(count)
    )


def slow(seconds: float, score: float = 0.9) -> object:
    return lambda request: Delay(seconds, freeform_reply(score))


def test_judge_calls_overlap_and_reports_keep_item_order(
    judged: pytest.Pytester, fake_llm: FakeOpenAI
) -> None:
    fake_llm.responder = slow(0.3)  # type: ignore[assignment]
    write(judged, "c.eval.yaml", cases(16))
    started = time.monotonic()
    result = judged.runpytest("-v", "--agentv-concurrency=8")
    elapsed = time.monotonic() - started
    result.assert_outcomes(passed=16)
    result.stdout.fnmatch_lines([f"c.eval.yaml::case-{i:02d} PASSED*" for i in range(16)])
    assert 4 <= fake_llm.peak_in_flight <= 8
    assert elapsed < 16 * 0.3 / 2


def test_concurrency_one_runs_one_case_at_a_time(
    judged: pytest.Pytester, fake_llm: FakeOpenAI
) -> None:
    fake_llm.responder = slow(0.05)  # type: ignore[assignment]
    write(judged, "c.eval.yaml", cases(6))
    judged.runpytest("--agentv-concurrency=1").assert_outcomes(passed=6)
    assert fake_llm.peak_in_flight == 1


def quiet_after(server: FakeOpenAI, seconds: float = 1.0) -> None:
    """Nothing keeps running once pytest has returned: no new requests, none in flight."""
    count = len(server.requests)
    time.sleep(seconds)
    assert len(server.requests) == count
    assert server.in_flight == 0


def test_exit_first_stops_early_work(judged: pytest.Pytester, fake_llm: FakeOpenAI) -> None:
    def respond(request: Request) -> object:
        return (
            freeform_reply(0.1)
            if "question 1\n" in request.user
            else Delay(0.5, freeform_reply(0.9))
        )

    fake_llm.responder = respond  # type: ignore[assignment]
    write(judged, "c.eval.yaml", cases(40))
    result = judged.runpytest("-x", "--agentv-concurrency=4")
    result.assert_outcomes(passed=1, failed=1)
    assert len(fake_llm.requests) <= 2 + 4 * 2
    quiet_after(fake_llm)


def test_keyboard_interrupt_cancels_work_and_kills_judges(project: pytest.Pytester) -> None:
    project.makeconftest(
        """
        def pytest_runtest_logreport(report):
            if report.when == "call" and report.nodeid.endswith("case-01"):
                raise KeyboardInterrupt
        """
    )
    write(
        project,
        "slow_judge.py",
        """
        import json, os, sys, time
        case = json.load(sys.stdin)["question"]
        with open(os.path.join("pids", str(os.getpid())), "w") as f:
            f.write(case)
        if case.endswith(" 0") or case.endswith(" 1"):
            print(json.dumps({"score": 1}))
        else:
            time.sleep(30)
        """,
    )
    (project.path / "pids").mkdir()
    eval_file = cases(12).replace(
        "expected_outcome: ok}",
        "expected_outcome: ok, evaluators: "
        "[{name: slow, type: code_judge, script: [python, slow_judge.py]}]}",
    )
    write(project, "c.eval.yaml", eval_file)
    started = time.monotonic()
    result = project.runpytest_subprocess("--agentv-concurrency=4", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert time.monotonic() - started < 20
    pids = [int(p.name) for p in (project.path / "pids").iterdir()]
    assert len(pids) >= 3
    time.sleep(0.5)
    alive = [
        pid
        for pid in pids
        if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    ]
    assert alive == []


def test_fixture_targets_run_at_item_time(judged: pytest.Pytester, fake_llm: FakeOpenAI) -> None:
    fake_llm.responder = slow(0.05)  # type: ignore[assignment]
    write(judged, "early/a.eval.yaml", cases(4, "early"))
    write(judged, "fixture/b.eval.yaml", cases(4, "fixture"))
    write(
        judged,
        "fixture/conftest.py",
        """
        import pytest
        import pytest_agentv.plugin as plugin

        SEEN = []

        @pytest.fixture
        def agentv_target():
            def answer(case):
                SEEN.append((case.id, plugin.active["item"].name))
                return "answer"
            return answer

        def pytest_sessionfinish():
            print("mismatched:", [pair for pair in SEEN if pair[0] != pair[1]], len(SEEN))
        """,
    )
    result = judged.runpytest("-s")
    result.assert_outcomes(passed=8)
    result.stdout.fnmatch_lines(["*mismatched: [[][]] 4"])


def test_rate_limits_slow_the_run_down_instead_of_failing(
    judged: pytest.Pytester, fake_llm: FakeOpenAI
) -> None:
    lock = threading.Lock()

    def respond(request: Request) -> object:
        with lock:
            crowded = fake_llm.in_flight > 3
        if crowded:
            return Status(429, {"retry-after": "0.05"})
        return Delay(0.05, freeform_reply(0.9))

    fake_llm.responder = respond  # type: ignore[assignment]
    write(judged, "c.eval.yaml", cases(24))
    result = judged.runpytest("--agentv-concurrency=8", "--agentv-judge-retries=20")
    result.assert_outcomes(passed=24)
    assert any(r for r in fake_llm.requests)


def test_each_xdist_worker_prefetches_its_share(
    judged: pytest.Pytester, fake_llm: FakeOpenAI
) -> None:
    fake_llm.responder = slow(0.3)  # type: ignore[assignment]
    write(judged, "c.eval.yaml", cases(24))
    judged.runpytest("-n", "2", "--agentv-concurrency=4").assert_outcomes(passed=24)
    # Two workers, at most 4 cases each in flight; without early work it would be 2.
    assert 2 < fake_llm.peak_in_flight <= 8


def test_adaptive_limit_halves_then_recovers() -> None:
    limit = AdaptiveLimit(8, cooldown=0.0)
    limit.on_rate_limit()
    assert limit.current == 4
    limit.on_rate_limit()
    limit.on_rate_limit()
    limit.on_rate_limit()
    assert limit.current == 1
    for _ in range(1 + 2 + 3 + 4 + 5 + 6 + 7):
        limit.on_success()
    assert limit.current == 8
    limit.on_success()
    assert limit.current == 8
    slow_cooldown = AdaptiveLimit(8, cooldown=60)
    slow_cooldown.on_rate_limit()
    slow_cooldown.on_rate_limit()
    assert slow_cooldown.current == 4
