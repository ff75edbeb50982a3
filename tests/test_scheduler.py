"""Case work starts ahead of pytest, bounded and in order; reports stay those of a serial run.

Scheduling does not depend on the kind of judge, so most tests here grade with the LLM judge on
the loopback server (``judged``), which sees how many cases are judged at once; the lean
transport keeps litellm out of the runs and their xdist workers, and no case starts a process.
The tests about child processes grade with a code judge (``relay.py``) that asks the same server
for its verdict.
"""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from pytest_agentv.llm.limits import CallLimits
from tests.fake_openai import Action, Delay, FakeOpenAI, Gate, Request, Status
from tests.fake_openai import freeform as freeform_reply
from tests.helpers import cli_agent, recorded, still_running, write

#: Only the standard library's socket: importing urllib.request cost each judge process more CPU
#: than all the rest of its work.
RELAY_JUDGE = """\
import json, socket, sys

payload = json.load(sys.stdin)
messages = [{"role": "user", "content": payload["question"]}]
body = json.dumps({"model": "relay", "messages": messages})
head = "POST /v1/chat/completions HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nConnection: close\\r\\n"
head += f"Content-Type: application/json\\r\\nContent-Length: {len(body.encode())}\\r\\n\\r\\n"
with socket.create_connection(("127.0.0.1", payload["config"]["port"]), timeout=120) as server:
    server.sendall((head + body).encode())
    reply = b"".join(iter(lambda: server.recv(65536), b""))
print(json.loads(reply.partition(b"\\r\\n\\r\\n")[2])["choices"][0]["message"]["content"])
"""


@pytest.fixture
def relayed(project: pytest.Pytester, fake_server: FakeOpenAI) -> pytest.Pytester:
    """A project with a code judge that relays each case to the fake server for its verdict."""
    write(project, "relay.py", RELAY_JUDGE)
    return project


def cases(count: int, prefix: str = "case", relay: FakeOpenAI | None = None) -> str:
    """Cases asking "question <i>"; graded by the relay judge when ``relay`` is given."""
    judge = (
        f", evaluators: [{{name: relay, type: code_judge, script: [python, relay.py], "
        f"port: {relay.port}}}]"
        if relay
        else ""
    )
    return "evalcases:\n" + "".join(
        f"  - {{id: {prefix}-{i:02d}, input: question {i}, expected_outcome: ok{judge}}}\n"
        for i in range(count)
    )


def slow(seconds: float, score: float = 0.9) -> object:
    return lambda request: Delay(seconds, freeform_reply(score))


def gated(parties: int, then: Action, timeout: float = 20.0) -> object:
    """Replies held until ``parties`` cases are judged at once (the overlap the test asserts)."""
    return lambda request: Gate(parties, then, timeout)


def call_reports(reprec: pytest.HookRecorder) -> list[pytest.TestReport]:
    return [r for r in reprec.getreports("pytest_runtest_logreport") if r.when == "call"]


def test_judge_calls_overlap_and_reports_keep_item_order(
    judged: pytest.Pytester, fake_llm: FakeOpenAI
) -> None:
    # Held until four cases are judged at once, then slow enough that a ninth would show.
    fake_llm.responder = gated(4, Delay(0.3, freeform_reply(0.9)))  # type: ignore[assignment]
    write(judged, "c.eval.yaml", cases(16))
    reprec = judged.inline_run("--agentv-concurrency=8")
    reprec.assertoutcome(passed=16)
    reports = call_reports(reprec)
    assert [r.nodeid for r in reports] == [f"c.eval.yaml::case-{i:02d}" for i in range(16)]
    assert all(r.passed for r in reports)
    assert 4 <= fake_llm.peak_in_flight <= 8


def test_concurrency_one_runs_one_case_at_a_time(
    judged: pytest.Pytester, fake_llm: FakeOpenAI
) -> None:
    fake_llm.responder = slow(0.05)  # type: ignore[assignment]
    write(judged, "c.eval.yaml", cases(6))
    judged.inline_run("--agentv-concurrency=1").assertoutcome(passed=6)
    assert fake_llm.peak_in_flight == 1


def test_a_files_workers_cap_its_cases_in_flight(
    judged: pytest.Pytester, fake_llm: FakeOpenAI
) -> None:
    """AgentV v4's ``execution.workers``: at most that many of the file's cases at once, under
    the run's own limit (8 here), and the reports in item order."""
    fake_llm.responder = gated(2, Delay(0.2, freeform_reply(0.9)))  # type: ignore[assignment]
    write(judged, "c.eval.yaml", "execution: {workers: 2}\n" + cases(8))
    reprec = judged.inline_run("--agentv-concurrency=8")
    reprec.assertoutcome(passed=8)
    assert [r.nodeid for r in call_reports(reprec)] == [
        f"c.eval.yaml::case-{i:02d}" for i in range(8)
    ]
    assert fake_llm.peak_in_flight == 2


def quiet_after(server: FakeOpenAI, seconds: float = 1.0) -> None:
    """Nothing keeps running once pytest has returned: no new requests, none in flight."""
    count = len(server.requests)
    time.sleep(seconds)
    assert len(server.requests) == count
    assert server.in_flight == 0


def test_exit_first_stops_early_work(judged: pytest.Pytester, fake_llm: FakeOpenAI) -> None:
    def respond(request: Request) -> object:
        first_fails = "## question ## ]]\nquestion 1\n" in request.user
        return freeform_reply(0.1) if first_fails else Delay(0.5, freeform_reply(0.9))

    fake_llm.responder = respond  # type: ignore[assignment]
    write(judged, "c.eval.yaml", cases(40))
    judged.inline_run("-x", "--agentv-concurrency=4").assertoutcome(passed=1, failed=1)
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
            open(os.path.join("finished", str(os.getpid())), "w").close()
        """,
    )
    (project.path / "pids").mkdir()
    (project.path / "finished").mkdir()
    eval_file = cases(12).replace(
        "expected_outcome: ok}",
        "expected_outcome: ok, evaluators: "
        "[{name: slow, type: code_judge, script: [python, slow_judge.py]}]}",
    )
    write(project, "c.eval.yaml", eval_file)
    result = project.runpytest_subprocess("--agentv-concurrency=4", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    # pytest did not wait for the sleeping judges: none of them lived to finish its sleep.
    assert list((project.path / "finished").iterdir()) == []
    assert result.duration < 30
    pids = recorded(project.path / "pids")
    assert len(pids) >= 3
    assert still_running(pids) == []


def test_fixture_targets_run_at_item_time(judged: pytest.Pytester, fake_llm: FakeOpenAI) -> None:
    fake_llm.responder = slow(0.05)  # type: ignore[assignment]
    for folder, prefix in (("early", "a"), ("fixture", "b")):
        write(judged, f"{folder}/{prefix}.eval.yaml", cases(4, folder))
    write(
        judged,
        "fixture/conftest.py",
        """
        import json
        import pytest
        from pytest_agentv.assertions import current_test

        SEEN = []

        @pytest.fixture
        def agentv_target():
            def answer(case):
                SEEN.append((case.id, current_test.get().item.name))
                return "answer"
            return answer

        def pytest_sessionfinish():
            with open("seen.json", "w") as f:
                json.dump(SEEN, f)
        """,
    )
    judged.inline_run().assertoutcome(passed=8)
    seen = json.loads((judged.path / "seen.json").read_text())
    assert sorted(case for case, _ in seen) == [f"fixture-{i:02d}" for i in range(4)]
    assert [pair for pair in seen if pair[0] != pair[1]] == []


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
    # Held until three cases are judged at once, then slow enough that a fifth would show.
    fake_llm.responder = gated(3, Delay(0.15, freeform_reply(0.9)), timeout=10)  # type: ignore[assignment]
    write(judged, "c.eval.yaml", cases(24))
    judged.runpytest("-n", "2", "--agentv-concurrency=4").assert_outcomes(passed=24)
    # Two workers; without early work it would be 2 calls at once. The controller holds the
    # model calls of both to the run's 4.
    assert 2 < fake_llm.peak_in_flight <= 4


ANSWER_AND_LOG = """\
with open("answered.log", "a") as log:
    log.write("answered\\n")
print("ok")
"""


def test_next_cases_wait_for_the_judge_with_their_answers_ready(
    judged: pytest.Pytester, fake_llm: FakeOpenAI
) -> None:
    """While both judge slots are taken, two more cases get their answers (a CLI target, a real
    process) and wait for a slot, so the judge never idles while a case gets ready. A case used
    to start only when another had ended: the judge then waited for each one's target."""
    cli_agent(judged, ANSWER_AND_LOG)
    log = judged.path / "answered.log"
    answered_before_reply: list[int] = []

    def answered() -> int:
        return len(log.read_text().splitlines()) if log.exists() else 0

    def respond(request: Request) -> object:
        if len(answered_before_reply) < 2:  # the first two calls wait for the next answers
            deadline = time.monotonic() + 30
            while answered() < 4 and time.monotonic() < deadline:
                time.sleep(0.01)
        answered_before_reply.append(answered())
        return freeform_reply(0.9)

    fake_llm.responder = respond  # type: ignore[assignment]
    write(judged, "c.eval.yaml", cases(8))
    judged.runpytest("--agentv-concurrency=2").assert_outcomes(passed=8)
    assert answered_before_reply[:2] == [4, 4]
    assert fake_llm.peak_in_flight == 2
    assert answered() == 8


def test_child_processes_hold_to_the_concurrency(
    relayed: pytest.Pytester, fake_server: FakeOpenAI
) -> None:
    """Cases start ahead of the limit, but their code judges (processes) run at most
    ``--agentv-concurrency`` at a time."""
    fake_server.responder = gated(3, Delay(0.2, freeform_reply(0.9)), timeout=5)  # type: ignore[assignment]
    write(relayed, "c.eval.yaml", cases(12, relay=fake_server))
    relayed.inline_run("--agentv-concurrency=3").assertoutcome(passed=12)
    assert fake_server.peak_in_flight == 3


def test_adaptive_limit_halves_then_recovers() -> None:
    limit = CallLimits(8, cooldown=0.0)
    limit.rate_limited()
    assert limit.current == 4
    limit.rate_limited()
    limit.rate_limited()
    limit.rate_limited()
    assert limit.current == 1
    for _ in range(1 + 2 + 3 + 4 + 5 + 6 + 7):
        limit.succeeded()
    assert limit.current == 8
    limit.succeeded()
    assert limit.current == 8
    slow_cooldown = CallLimits(8, cooldown=60)
    slow_cooldown.rate_limited()
    slow_cooldown.rate_limited()
    assert slow_cooldown.current == 4


LOGGING_PROVIDER = """
import pytest

class Logged:
    def __init__(self, target):
        self.name = target.name
        self.judge_target = None
        with open("calls.log", "a") as log:
            print("built", target.name, file=log)

    async def invoke(self, case, attempt):
        with open("calls.log", "a") as log:
            print("called", case.id, file=log)
        return "Refunds take 30 days."

@pytest.hookimpl
def pytest_agentv_make_target(config, target):
    return Logged(target) if target.provider == "logged" else None
"""


@pytest.mark.parametrize(
    "args",
    # One xdist worker shows what each one does (plans nothing), at half the processes.
    [["--setup-only"], ["--setup-plan"], ["-n", "1", "--setup-plan"], ["collection-error"]],
    ids=["setup-only", "setup-plan", "xdist-setup-plan", "collection-error"],
)
def test_nothing_starts_when_pytest_runs_no_test(
    judged: pytest.Pytester,
    fake_llm: FakeOpenAI,
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
) -> None:
    """After a collection error ("Interrupted: 1 error during collection") and under
    ``--setup-only``/``--setup-plan``, targets were built and called, workspace hooks ran and
    judges were asked (9 and 40 requests)."""
    write(judged, "conftest.py", LOGGING_PROVIDER)
    write(judged, ".agentv/targets.yaml", "targets:\n  - {name: default, provider: logged}\n")
    hook = '[python, -c, \'open("calls.log", "a").write("hook\\\\n")\']'
    cases = "".join(
        f"  - {{id: c{i}, input: q{i}, expected_outcome: says 30 days}}\n" for i in range(8)
    )
    write(
        judged,
        "e.eval.yaml",
        f"workspace:\n  hooks: {{before_all: {{command: {hook}}}}}\nevalcases:\n{cases}",
    )
    if args == ["collection-error"]:
        write(judged, "test_broken.py", "this is not python(\n")
        # The inner sessions go on past collection errors (tests/conftest.py): not this one.
        addopts = os.environ["PYTEST_ADDOPTS"].replace("--continue-on-collection-errors", "")
        monkeypatch.setenv("PYTEST_ADDOPTS", addopts)
        args = []
    result = judged.runpytest("--agentv-concurrency=4", *args)
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.INTERRUPTED)
    assert not (judged.path / "calls.log").exists()
    assert fake_llm.requests == []
