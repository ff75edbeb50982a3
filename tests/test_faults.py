"""Judge faults: transient ones never change a verdict, persistent ones never invent one.

The property tests drive the real judge (LlmJudgeEvaluator → LlmClient → each transport → HTTP)
against the loopback fake server, with a fault schedule per example.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator

import pytest
from fake_openai import (
    Action,
    Delay,
    Drop,
    FakeOpenAI,
    NonJson,
    Reset,
    Status,
    Truncated,
)
from fake_openai import freeform as freeform_reply
from helpers import judge_ini, write
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_agentv.cases import PreparedCase
from pytest_agentv.errors import NotGradedError
from pytest_agentv.evaluators.base import EvaluationContext, EvaluationScore
from pytest_agentv.evaluators.llm_judge import LlmJudgeEvaluator
from pytest_agentv.judge import LlmClient, ModelSpec, RetryPolicy
from pytest_agentv.scheduler import shared_loop

RETRIES = 3
TRANSIENT: list[Action] = [
    Status(408),
    Status(409),
    Status(429),
    Status(429, {"retry-after": "0"}),
    Status(429, {"retry-after-ms": "5"}),
    Status(500),
    Status(502),
    Status(503),
    Status(504),
    Reset(),
    Drop(),
    Truncated(),
    NonJson(),
    Delay(0.6, freeform_reply(0.0)),  # outlives the 0.3 s attempt timeout: a read timeout
]
SCORES = {0.95: "pass", 0.7: "borderline", 0.3: "fail"}


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI().start()
    yield fake
    fake.stop()


def judge(
    server: FakeOpenAI, transport: str, retries: int = RETRIES, deadline: float = 10.0
) -> LlmJudgeEvaluator:
    client = LlmClient(
        ModelSpec("openai/fake-judge", api_base=server.api_base),
        RetryPolicy(retries=retries, deadline=deadline, attempt_timeout=0.3, backoff=0.001),
        transport=transport,
    )
    return LlmJudgeEvaluator(resolve_judge_provider=lambda context: client)


def grade(evaluator: LlmJudgeEvaluator) -> EvaluationScore:
    case = PreparedCase(id="c", question="Refunds?", input_messages=(), expected_outcome="30 days")
    context = EvaluationContext(eval_case=case, candidate="Within 30 days.")
    return asyncio.run_coroutine_threadsafe(evaluator.evaluate(context), shared_loop()).result(30)


def reset(server: FakeOpenAI, schedule: list[Action], score: float) -> None:
    server.script.clear()
    server.requests.clear()
    server.push(*schedule)
    server.responder = lambda request: freeform_reply(score)


@settings(
    max_examples=500,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    schedule=st.lists(st.sampled_from(TRANSIENT), max_size=RETRIES),
    score=st.sampled_from(list(SCORES)),
)
def test_transient_faults_within_budget_keep_the_verdict(
    server: FakeOpenAI, judge_transport: str, schedule: list[Action], score: float
) -> None:
    reset(server, schedule, score)
    result = grade(judge(server, judge_transport))
    assert result.verdict == SCORES[score]
    assert result.score == score
    assert len(server.requests) == len(schedule) + 1


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(schedule=st.lists(st.sampled_from(TRANSIENT), min_size=RETRIES + 1, max_size=RETRIES + 1))
def test_faults_beyond_budget_are_not_graded(
    server: FakeOpenAI, judge_transport: str, schedule: list[Action]
) -> None:
    reset(server, schedule, 0.95)
    with pytest.raises(NotGradedError, match=r"failed after 4 attempts \(retry budget spent\)"):
        grade(judge(server, judge_transport))
    assert len(server.requests) == RETRIES + 1


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_non_retryable_statuses_get_one_attempt(
    server: FakeOpenAI, judge_transport: str, status: int
) -> None:
    reset(server, [Status(status)], 0.95)
    with pytest.raises(NotGradedError, match="not retryable"):
        grade(judge(server, judge_transport))
    assert len(server.requests) == 1


def test_connection_refused_is_retried_then_not_graded(judge_transport: str) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = LlmClient(
        ModelSpec("openai/fake-judge", api_base=f"http://127.0.0.1:{port}/v1"),
        RetryPolicy(retries=2, deadline=10, attempt_timeout=1, backoff=0.001),
        transport=judge_transport,
    )
    evaluator = LlmJudgeEvaluator(resolve_judge_provider=lambda context: client)
    started = time.monotonic()
    with pytest.raises(NotGradedError, match=r"failed after 3 attempts \(retry budget spent\)"):
        grade(evaluator)
    assert time.monotonic() - started < 5


def test_a_server_that_never_answers_ends_within_the_deadline(
    server: FakeOpenAI, judge_transport: str
) -> None:
    reset(server, [], 0.95)
    server.responder = lambda request: Delay(30, freeform_reply(0.95))
    client = LlmClient(
        ModelSpec("openai/fake-judge", api_base=server.api_base),
        RetryPolicy(retries=10, deadline=1.5, attempt_timeout=60, backoff=0.001),
        transport=judge_transport,
    )
    started = time.monotonic()
    with pytest.raises(NotGradedError):
        grade(LlmJudgeEvaluator(resolve_judge_provider=lambda context: client))
    assert time.monotonic() - started < 1.5 + 1


def test_retry_after_beyond_the_cap_fails_fast(server: FakeOpenAI, judge_transport: str) -> None:
    reset(server, [Status(429, {"retry-after": "3600"})], 0.95)
    started = time.monotonic()
    with pytest.raises(NotGradedError, match="asked to retry after 3600s, more than the 60s cap"):
        grade(judge(server, judge_transport))
    assert time.monotonic() - started < 2


CASES = "evalcases:\n" + "".join(
    f"  - {{id: case-{i}, input: question {i}, expected_outcome: outcome {i}}}\n" for i in range(8)
)


def test_one_ungradable_case_changes_no_other_outcome(
    project: pytest.Pytester, fake_llm: FakeOpenAI
) -> None:
    project.makeini(judge_ini(fake_llm))
    write(project, "c.eval.yaml", CASES)
    scores = [0.95, 0.3, 0.7, 0.95, 0.3, 0.7, 0.95, 0.95]

    def respond(request: object, broken: int | None) -> Action:
        user = request.user  # type: ignore[attr-defined]
        index = next(i for i in range(8) if f"outcome {i}\n" in user)
        return Status(500) if index == broken else freeform_reply(scores[index])

    def outcomes(broken: int | None) -> dict[str, str]:
        fake_llm.responder = lambda request: respond(request, broken)
        result = project.runpytest("-rA", "--agentv-judge-retries=1")
        assert result.ret not in (pytest.ExitCode.INTERNAL_ERROR, pytest.ExitCode.USAGE_ERROR)
        found = {}
        for line in result.stdout.lines:
            for word in ("PASSED", "FAILED", "XFAIL", "ERROR"):
                if line.startswith(word + " c.eval.yaml::"):
                    found[line.split("::")[1].split()[0]] = word
        return found

    baseline = outcomes(None)
    assert sorted(baseline.values()).count("PASSED") == 4
    for broken in (1, 2, 6):
        changed = outcomes(broken)
        assert changed[f"case-{broken}"] == "ERROR"
        assert {k: v for k, v in changed.items() if k != f"case-{broken}"} == {
            k: v for k, v in baseline.items() if k != f"case-{broken}"
        }


def test_fail_on_error_decides_whether_ungraded_cases_fail_the_run(
    project: pytest.Pytester, fake_llm: FakeOpenAI
) -> None:
    project.makeini(judge_ini(fake_llm))
    write(project, "c.eval.yaml", CASES)
    fake_llm.responder = lambda request: (
        Status(503) if "question 3\n" in request.user else freeform_reply(0.95)
    )
    failing = project.runpytest("--agentv-judge-retries=0")
    failing.assert_outcomes(passed=7, errors=1)
    assert failing.ret == pytest.ExitCode.TESTS_FAILED
    failing.stdout.fnmatch_lines(["*7 pass, 0 borderline, 0 fail, 1 not graded*"])
    lenient = project.runpytest("--agentv-judge-retries=0", "--agentv-fail-on-error=no")
    lenient.assert_outcomes(passed=7, skipped=1)
    assert lenient.ret == pytest.ExitCode.OK
