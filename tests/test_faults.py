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
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_agentv.cases import PreparedCase
from pytest_agentv.errors import NotGradedError
from pytest_agentv.evaluators.base import EvaluationContext, EvaluationScore
from pytest_agentv.evaluators.llm_judge import LlmJudgeEvaluator
from pytest_agentv.llm.client import LlmClient
from pytest_agentv.llm.retry import RetryPolicy
from pytest_agentv.llm.transports import ModelSpec
from pytest_agentv.scheduler import shared_loop
from tests.fake_openai import (
    Action,
    Delay,
    Drop,
    FakeOpenAI,
    NonJson,
    Reset,
    Status,
    Truncated,
)
from tests.fake_openai import freeform as freeform_reply
from tests.helpers import agentv_results, examples, judge_ini, outcomes, write

# How models are called: every test here runs through each judge transport.
pytestmark = pytest.mark.transports

RETRIES = 3
# Each attempt must answer within this; Delay below outlives it (a read timeout). A reply takes
# about 10 ms here: the margin covers a loaded machine, and the server fixture keeps full garbage
# collections (a quarter of a second in a worker holding litellm) out of the attempts, so that a
# slow reply is never mistaken for a timeout (which would be one request too many).
ATTEMPT_TIMEOUT = 0.5
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
    Delay(ATTEMPT_TIMEOUT + 2, freeform_reply(0.0)),  # outlives the attempt timeout
]
TRANSIENT_IDS = [
    "408",
    "409",
    "429",
    "429-retry-after",
    "429-retry-after-ms",
    "500",
    "502",
    "503",
    "504",
    "reset",
    "drop",
    "truncated",
    "non-json",
    "read-timeout",
]
SCORES = {0.95: "pass", 0.7: "borderline", 0.3: "fail"}
PROPERTY = settings(
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture(scope="module")
def server(_transport: str) -> Iterator[FakeOpenAI]:
    # What the transport loaded is left out of later collections (see ``_warm_up``), so that
    # no collection pause lasts as long as an attempt.
    fake = FakeOpenAI().start()
    try:
        yield fake
    finally:
        fake.stop()


def judge(
    server: FakeOpenAI, transport: str, retries: int = RETRIES, deadline: float = 30.0
) -> LlmJudgeEvaluator:
    client = LlmClient(
        ModelSpec("openai/fake-judge", api_base=server.api_base),
        RetryPolicy(
            retries=retries, deadline=deadline, attempt_timeout=ATTEMPT_TIMEOUT, backoff=0.001
        ),
        transport=transport,
    )
    return LlmJudgeEvaluator(resolve_judge_provider=lambda context: client)


def grade(evaluator: LlmJudgeEvaluator) -> EvaluationScore:
    case = PreparedCase(id="c", question="Refunds?", input_messages=(), expected_outcome="30 days")
    context = EvaluationContext(eval_case=case, candidate="Within 30 days.")
    return asyncio.run_coroutine_threadsafe(evaluator.evaluate(context), shared_loop()).result(60)


def reset(server: FakeOpenAI, schedule: list[Action], score: float) -> None:
    server.script.clear()
    server.requests.clear()
    server.push(*schedule)
    server.responder = lambda request: freeform_reply(score)


def check_verdict_kept(
    server: FakeOpenAI, transport: str, schedule: list[Action], score: float
) -> None:
    """Faults within the retry budget: the verdict of a clean reply, one request per fault."""
    reset(server, schedule, score)
    result = grade(judge(server, transport))
    assert result.verdict == SCORES[score]
    assert result.score == score
    assert len(server.requests) == len(schedule) + 1


def check_not_graded(server: FakeOpenAI, transport: str, schedule: list[Action]) -> None:
    """One fault more than the retry budget: not graded, after exactly the budgeted attempts."""
    reset(server, schedule, 0.95)
    with pytest.raises(NotGradedError, match=r"failed after 4 attempts \(retry budget spent\)"):
        grade(judge(server, transport))
    assert len(server.requests) == RETRIES + 1


# The fourteen transient faults are a small space: each one is checked on its own (before one of
# the three verdicts in turn, so that each verdict follows several faults; and repeated beyond
# the retry budget). Mixed schedules, with any verdict, are sampled, sharded by their first fault
# so that xdist spreads them too: the profile's example count in all (the deep profile's 500 are
# today's fault schedules).


@pytest.mark.parametrize("score", SCORES)
def test_a_clean_reply_gives_the_verdict(
    server: FakeOpenAI, judge_transport: str, score: float
) -> None:
    check_verdict_kept(server, judge_transport, [], score)


@pytest.mark.parametrize(
    ("fault", "score"),
    [(fault, list(SCORES)[index % len(SCORES)]) for index, fault in enumerate(TRANSIENT)],
    ids=TRANSIENT_IDS,
)
def test_each_transient_fault_keeps_the_verdict(
    server: FakeOpenAI, judge_transport: str, fault: Action, score: float
) -> None:
    check_verdict_kept(server, judge_transport, [fault], score)


@pytest.mark.parametrize("first", TRANSIENT, ids=TRANSIENT_IDS)
@settings(PROPERTY, max_examples=max(1, examples(500) // len(TRANSIENT)))
@given(
    rest=st.lists(st.sampled_from(TRANSIENT), min_size=1, max_size=RETRIES - 1),
    score=st.sampled_from(list(SCORES)),
)
def test_transient_faults_within_budget_keep_the_verdict(
    server: FakeOpenAI, judge_transport: str, first: Action, rest: list[Action], score: float
) -> None:
    check_verdict_kept(server, judge_transport, [first, *rest], score)


@pytest.mark.parametrize("fault", TRANSIENT, ids=TRANSIENT_IDS)
def test_each_fault_beyond_budget_is_not_graded(
    server: FakeOpenAI, judge_transport: str, fault: Action
) -> None:
    check_not_graded(server, judge_transport, [fault] * (RETRIES + 1))


@settings(PROPERTY, max_examples=examples(60))
@given(schedule=st.lists(st.sampled_from(TRANSIENT), min_size=RETRIES + 1, max_size=RETRIES + 1))
def test_faults_beyond_budget_are_not_graded(
    server: FakeOpenAI, judge_transport: str, schedule: list[Action]
) -> None:
    check_not_graded(server, judge_transport, schedule)


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
        RetryPolicy(retries=2, deadline=120, attempt_timeout=30, backoff=0.001),
        transport=judge_transport,
    )
    evaluator = LlmJudgeEvaluator(resolve_judge_provider=lambda context: client)
    started = time.monotonic()
    with pytest.raises(
        NotGradedError, match=r"failed after 3 attempts \(retry budget spent\)"
    ) as err:
        grade(evaluator)
    # Each refusal fails its attempt at once: none waits out its 30 s attempt timeout.
    assert "connect" in str(err.value).lower()
    assert time.monotonic() - started < 25


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
    with pytest.raises(
        NotGradedError, match=r"failed after 1 attempt: no time left within the 1\.5s deadline"
    ):
        grade(LlmJudgeEvaluator(resolve_judge_provider=lambda context: client))
    # The deadline ended the one attempt: not the 60 s attempt timeout nor the 30 s reply.
    assert len(server.requests) == 1
    assert time.monotonic() - started < 20


def test_retry_after_beyond_the_cap_fails_fast(server: FakeOpenAI, judge_transport: str) -> None:
    reset(server, [Status(429, {"retry-after": "3600"})], 0.95)
    started = time.monotonic()
    with pytest.raises(NotGradedError, match="asked to retry after 3600s, more than the 60s cap"):
        grade(judge(server, judge_transport))
    # Given up at once: no second attempt, and no wait (not even the 60 s cap).
    assert len(server.requests) == 1
    assert time.monotonic() - started < 30


def cases(label: str = "") -> str:
    """Eight cases, ``case-<i>`` asking "question <i><label>" and expecting "outcome <i>"."""
    return "evalcases:\n" + "".join(
        f"  - {{id: case-{i}, input: question {i}{label}, expected_outcome: outcome {i}}}\n"
        for i in range(8)
    )


CASES = cases()


def test_one_ungradable_case_changes_no_other_outcome(
    project: pytest.Pytester, fake_llm: FakeOpenAI
) -> None:
    """A run of eight cases; then one run of three copies of them (``broken-<i>/``), in each of
    which the judge of case ``i`` is down: every other case of each copy ends as in the first."""
    project.makeini(judge_ini(fake_llm))
    write(project, "c.eval.yaml", CASES)
    scores = [0.95, 0.3, 0.7, 0.95, 0.3, 0.7, 0.95, 0.95]
    broken = (1, 2, 6)

    def respond(request: object) -> Action:
        user = request.user  # type: ignore[attr-defined]
        index = next(i for i in range(8) if f"outcome {i}\n" in user)
        down = f"question {index} of broken-{index}\n" in user  # the copy's broken case
        return Status(500) if down else freeform_reply(scores[index])

    def run() -> tuple[dict[str, str], dict[str, tuple[str, float]]]:
        reprec = project.inline_run("--agentv-judge-retries=1")
        assert reprec.ret not in (pytest.ExitCode.INTERNAL_ERROR, pytest.ExitCode.USAGE_ERROR)
        graded = {
            nodeid: (row["verdict"], row["score"]) for nodeid, row in agentv_results(reprec).items()
        }
        return outcomes(reprec), graded

    def others(found: dict[str, object], folder: str, broken: int) -> dict[str, object]:
        """The results of the cases under ``folder`` by case id, but case ``broken``'s."""
        return {
            node.rpartition("::")[2]: value
            for node, value in found.items()
            if node.startswith(folder) and not node.endswith(f"::case-{broken}")
        }

    fake_llm.responder = respond
    baseline, baseline_graded = run()
    assert len(baseline) == len(baseline_graded) == 8
    assert list(baseline.values()).count("passed") == 4
    (project.path / "c.eval.yaml").unlink()
    for copy in broken:
        write(project, f"broken-{copy}/c.eval.yaml", cases(f" of broken-{copy}"))
    changed, graded = run()
    assert len(changed) == 3 * 8
    for copy in broken:
        folder = f"broken-{copy}/"
        assert changed[f"{folder}c.eval.yaml::case-{copy}"] == "error"
        assert others(changed, folder, copy) == others(baseline, "", copy)
        assert others(graded, folder, copy) == others(baseline_graded, "", copy)


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
