"""Trials through pytest: every strategy on real CLI targets and code judges, cost limits,
replaying a recorded multi-trial suite, fixtures, xdist, reports and assert_judged."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from tests.fake_openai import FakeOpenAI, Request
from tests.fake_openai import freeform as freeform_reply
from tests.helpers import judge_ini, load_error, write

#: Answers attempt k of case "<pattern>-<name>" by pattern[k % len(pattern)]: p passes the
#: keyword judge, f fails it, x crashes. Each call is logged, and reports a cost of $0.01. A
#: shell script, as is the judge: the tests here run them by the dozen, and a Python process
#: costs ten times a shell's CPU.
AGENT = """\
echo "$2 $1" >> attempts.log
pattern=${2%%-*}
skip=$(printf "%.$(($1 % ${#pattern}))s" "$pattern")
rest=${pattern#"$skip"}
case $rest in
  x*) echo "agent crashed" >&2; exit 1 ;;
  p*) text="Refunds within 30 days." ;;
  *) text="No." ;;
esac
printf '{"text": "%s", "cost_usd": 0.01}\\n' "$text"
"""

#: The keyword judge (``keywords.sh``) for the agent's two answers: whether the answer (in the
#: payload, one line of JSON) mentions "30 days".
KEYWORD_JUDGE = """\
IFS= read -r payload
case $payload in
  *'"candidate_answer": "Refunds within 30 days.'*) echo '{"score": 1, "hits": ["30 days"]}' ;;
  *) echo '{"score": 0, "misses": ["30 days"]}' ;;
esac
"""

TARGETS = """\
targets:
  - name: default
    provider: mock
    response: "Refunds are accepted within 30 days of purchase."
  - name: flaky
    provider: cli
    command_template: sh agent.sh {ATTEMPT} {EVAL_ID}
"""

HEADER = """\
execution:
  target: flaky
  evaluators:
    - {name: kw, type: code_judge, script: [sh, keywords.sh]}
evalcases:
"""

STRATEGIES = (
    HEADER
    + """\
  - {id: pf-at-k, input: Refunds, execution: {trials: {count: 3}}}
  - {id: fp-at-k, input: Refunds, execution: {trials: {count: 3, strategy: pass_any}}}
  - {id: pfp-all, input: Refunds, execution: {trials: {count: 3, strategy: pass_all}}}
  - {id: ppf-mean, input: Refunds, execution: {trials: {count: 3, strategy: mean}}}
  - {id: pppp-ci, input: Refunds, execution: {trials: {count: 4, strategy: confidence_interval}}}
  - {id: p-adaptive, input: Refunds, execution: {trials: {strategy: adaptive}}}
  - {id: f-adaptive, input: Refunds, execution: {trials: {strategy: adaptive}}}
  - {id: pf-adaptive, input: Refunds, execution: {trials: {strategy: adaptive, max: 6}}}
"""
)


@pytest.fixture
def flaky(project: pytest.Pytester) -> pytest.Pytester:
    write(project, ".agentv/targets.yaml", TARGETS)
    write(project, "agent.sh", AGENT)
    write(project, "keywords.sh", KEYWORD_JUDGE)
    return project


def rows(path: Path) -> dict[str, dict[str, Any]]:
    return {
        row["eval_id"]: row
        for row in map(json.loads, path.read_text(encoding="utf-8").split("\n")[:-1])
    }


def attempts(project: pytest.Pytester) -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for line in (project.path / "attempts.log").read_text().splitlines():
        case, attempt = line.split()
        found.setdefault(case, []).append(int(attempt))
    return found


# Serially only: results crossing pytest-xdist workers are tests/test_integrity.py's.
@pytest.mark.parametrize("run_args", [[]], ids=["serial"])
def test_every_strategy(flaky: pytest.Pytester, run_args: list[str]) -> None:
    write(flaky, "s.eval.yaml", STRATEGIES)
    result = flaky.runpytest("--agentv-results=r.jsonl", "--junitxml=j.xml", "-rx", *run_args)
    result.assert_outcomes(passed=4, failed=2, xfailed=2)
    found = rows(flaky.path / "r.jsonl")
    summary = {
        case: (
            row["verdict"],
            round(row["score"], 4),
            [t["verdict"] for t in row["trials"]],
            row["aggregation"]["strategy"],
            row["aggregation"]["stopped"],
        )
        for case, row in found.items()
    }
    assert summary == {
        "pf-at-k": ("pass", 1.0, ["pass"], "pass_at_k", "passed"),
        "fp-at-k": ("pass", 1.0, ["fail", "pass"], "pass_at_k", "passed"),
        "pfp-all": ("fail", 0.0, ["pass", "fail"], "pass_all", "failed"),
        "ppf-mean": ("borderline", 0.6667, ["pass", "pass", "fail"], "mean", "count"),
        "pppp-ci": ("pass", 1.0, ["pass"] * 4, "confidence_interval", "count"),
        "p-adaptive": ("pass", 1.0, ["pass"] * 4, "adaptive", "settled"),
        "f-adaptive": ("fail", 0.0, ["fail"] * 4, "adaptive", "settled"),
        "pf-adaptive": ("borderline", 0.5, ["pass", "fail"] * 3, "adaptive", "max"),
    }
    # Each trial is its own call of the target, with its index as {ATTEMPT}.
    assert {case: sorted(a) for case, a in attempts(flaky).items()} == {
        case: list(range(len(row["trials"]))) for case, row in found.items()
    }
    mean = found["ppf-mean"]
    assert mean["trials"][2] == {
        "attempt": 2,
        "score": 0.0,
        "verdict": "fail",
        "gate_failed": False,
        "cost_usd": 0.01,
    }
    aggregation = mean["aggregation"]
    assert (aggregation["passed"], aggregation["planned"], aggregation["shown_attempt"]) == (
        2,
        3,
        2,
    )
    assert aggregation["cost_usd"] == pytest.approx(0.03)
    assert mean["candidate_answer"] == "No."  # the trial shown is the one that explains the verdict
    unsettled = found["pf-adaptive"]["aggregation"]
    assert unsettled["settled"] is False and unsettled["ci_low"] < 0.5 < unsettled["ci_high"]
    # JUnit properties.
    props = {
        case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
        for case in ET.parse(flaky.path / "j.xml").getroot().iter("testcase")
    }
    assert {
        k: props["pf-adaptive"][k]
        for k in props["pf-adaptive"]
        if "trials" in k or "ci_" in k or "pass_rate" in k
    } == {
        "agentv.trials": "6",
        "agentv.pass_rate": "0.5000",
        "agentv.ci_low": f"{unsettled['ci_low']:.4f}",
        "agentv.ci_high": f"{unsettled['ci_high']:.4f}",
    }
    # Trials spent against the fixed counts (3+3+3+3+4+10+10+6).
    result.stdout.fnmatch_lines(
        ["agentv trials: 26 run for 8 cases; a fixed count would run 42 (16 saved)"]
    )
    # The failure report and the borderline reason show the trials.
    result.stdout.fnmatch_lines(
        [
            "s.eval.yaml:8: eval 'pfp-all' failed: score 0.00 (fail)",
            "target: flaky",
            "",
            "trials: pass_all, 2 of 3 run, 1 passed; pass rate 0.50, 95% wilson interval "
            "[0.09, 0.91]; stopped at the first failing trial",
            "  attempt  score  verdict     cost",
            "        0   1.00  pass     $0.0100",
            "        1   0.00  fail     $0.0100",
            "",
            "evaluators of attempt 1:",
            "  evaluator  type        weight  score  verdict",
            "  kw         code_judge       1   0.00  fail",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "XFAIL s.eval.yaml::pf-adaptive - borderline: trials: adaptive, 6 of at most 6 run, "
            "3 passed; pass rate 0.50, 95% wilson interval [0.19, 0.81]; unsettled: the interval "
            "still holds 0.5 after the most trials"
        ]
    )


def test_cost_limit_counts_what_the_target_reports(flaky: pytest.Pytester) -> None:
    write(
        flaky,
        "s.eval.yaml",
        HEADER + "  - {id: p-costly, input: Refunds, execution: {trials: "
        "{count: 10, strategy: mean, cost_limit_usd: 0.025}}}\n",
    )
    result = flaky.runpytest("--agentv-results=r.jsonl")
    result.assert_outcomes(passed=1)
    row = rows(flaky.path / "r.jsonl")["p-costly"]
    assert len(row["trials"]) == 3  # $0.01 each: the third reaches $0.025
    assert row["aggregation"]["stopped"] == "cost_limit"
    assert attempts(flaky) == {"p-costly": [0, 1, 2]}
    result.stdout.fnmatch_lines(
        ["agentv trials: 3 run for 1 case; a fixed count would run 10 (7 saved)"]
    )


PRICED = """
evalcases:
  - id: judged
    expected_outcome: Gives the 30-day window
    input: Returns?
    execution:
      trials: {count: 5, strategy: mean, cost_limit_usd: 0.00005}
  - id: adaptive
    expected_outcome: Gives the 30-day window
    input: Refunds?
    execution:
      trials: {strategy: adaptive}
  - id: model-target
    expected_outcome: Gives the 30-day window
    input: Warranty?
    execution:
      target: model
      trials: {count: 3, strategy: pass_all}
"""


def priced_judge(calls: list[int]) -> Any:
    """A judge whose verdicts differ from call to call, so every trial's reply matters."""

    def reply(request: Request) -> str:
        if "nonce" not in request.system:  # the model target's request
            return "Returns are accepted within 30 days."
        calls.append(1)
        return freeform_reply(0.9 if len(calls) % 3 else 0.3, ["x"], ["y"])

    return reply


def test_a_recorded_multi_trial_suite_replays_with_zero_model_calls(
    project: pytest.Pytester, fake_llm: FakeOpenAI
) -> None:
    calls: list[int] = []
    fake_llm.responder = priced_judge(calls)
    write(
        project,
        ".agentv/targets.yaml",
        f"""
        targets:
          - name: default
            provider: mock
            response: "Refunds are accepted within 30 days of purchase."
          - name: model
            provider: openai
            model: gpt-4o-mini
            api_base: {fake_llm.api_base}
        """,
    )
    write(project, "s.eval.yaml", PRICED)
    # gpt-4o-mini's list price at the fake's endpoint: each judge call costs $0.000027 (100 + 20
    # tokens).
    ini = judge_ini(
        fake_llm, "openai/gpt-4o-mini", model_prices="openai/gpt-4o-mini 0.15 0.6"
    ).replace("agentv_cache_mode = off", "agentv_cache_mode = readwrite")
    project.makeini(ini)
    first = project.runpytest("--agentv-results=first.jsonl")
    recorded = len(fake_llm.requests)
    recorded_rows = rows(project.path / "first.jsonl")
    judged = recorded_rows["judged"]
    # The judge's spend reached the limit after two trials ($0.000054 >= $0.00005).
    assert len(judged["trials"]) == 2 and judged["aggregation"]["stopped"] == "cost_limit"
    assert judged["trials"][0]["cost_usd"] == pytest.approx(0.000027)
    trials = sum(len(row["trials"]) for row in recorded_rows.values())
    # One judge call per trial, plus one target call per trial of the model-target case.
    assert recorded == trials + len(recorded_rows["model-target"]["trials"])

    fake_llm.stop()  # from here on, any HTTP call would fail
    replayed = project.runpytest("--agentv-cache-mode=replay", "--agentv-results=second.jsonl")
    assert replayed.parseoutcomes() == first.parseoutcomes()
    replayed.stdout.fnmatch_lines(
        [f"agentv: 0 model calls made, {recorded} replies reused from the store, 0 tokens, $0.0000"]
    )

    def essence(found: dict[str, dict[str, Any]]) -> dict[str, Any]:
        return {
            case: (row["score"], row["verdict"], row["trials"], row["aggregation"])
            for case, row in found.items()
        }

    # A replayed reply counts what it cost when recorded, so the cost limit stops at the same
    # trial and every verdict is the recorded one.
    assert essence(rows(project.path / "second.jsonl")) == essence(recorded_rows)


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_an_agentv_target_fixture_gets_each_trials_attempt(
    project: pytest.Pytester, kind: str
) -> None:
    body = (
        "def answer(case):\n"
        "    with open('seen.log', 'a') as log:\n"
        "        log.write(f'{case.attempt}\\n')\n"
        "    return 'Refunds within 30 days.' if case.attempt != 1 else 'No.'\n"
    )
    if kind == "async":
        body = "async " + body
    write(
        project,
        "conftest.py",
        f"""
import pytest

{body}

@pytest.fixture
def agentv_target():
    return answer
""",
    )
    write(
        project,
        "s.eval.yaml",
        """
        evalcases:
          - id: fixture
            input: Refunds?
            execution:
              trials: {count: 3, strategy: mean}
              evaluators:
                - {name: kw, type: code_judge, script: [python, keywords.py], keywords: ["30 days"]}
        """,
    )
    result = project.runpytest()
    result.assert_outcomes(xfailed=1)  # 2 of 3 pass: mean 0.67
    assert (project.path / "seen.log").read_text().split() == ["0", "1", "2"]


def test_a_fixture_that_raises_in_a_later_trial_leaves_the_case_not_graded(
    project: pytest.Pytester,
) -> None:
    write(
        project,
        "conftest.py",
        """
import pytest

def answer(case):
    if case.attempt == 1:
        raise RuntimeError("agent down")
    return "Refunds within 30 days."

@pytest.fixture
def agentv_target():
    return answer
""",
    )
    write(
        project,
        "s.eval.yaml",
        """
        evalcases:
          - id: fixture
            input: Refunds
            execution:
              trials: {count: 3, strategy: mean}
              evaluators:
                - {name: kw, type: code_judge, script: [python, keywords.py], keywords: ["30 days"]}
        """,
    )
    result = project.runpytest("--agentv-results=r.jsonl")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*eval 'fixture' was not graded: attempt 1: agentv_target fixture (answer) raised "
            "RuntimeError: agent down*"
        ]
    )
    assert [t["attempt"] for t in rows(project.path / "r.jsonl")["fixture"]["trials"]] == [0]


EVALUATOR = """
from pytest_agentv import EvaluationScore

class Attempts:
    kind = "attempts"
    def evaluate(self, context):
        # Each trial is graded on its own: the evaluator sees which one.
        if context.attempt == context.evaluator.options["broken"]:
            raise RuntimeError("evaluator bug")
        return EvaluationScore.graded(1.0, hits=[f"attempt {context.attempt}"])

def pytest_agentv_make_evaluator(config, kind):
    return Attempts() if kind == "attempts" else None
"""


def test_evaluators_see_the_attempt_and_an_evaluator_error_stops_the_trials(
    project: pytest.Pytester,
) -> None:
    write(project, "conftest.py", EVALUATOR)
    write(
        project,
        "s.eval.yaml",
        """
        evalcases:
          - id: fine
            input: Refunds
            execution:
              trials: {count: 3, strategy: pass_all}
              evaluators: [{name: a, type: attempts, broken: 9}]
          - id: broken
            input: Refunds
            execution:
              trials: {count: 3, strategy: pass_all}
              evaluators: [{name: a, type: attempts, broken: 2}]
        """,
    )
    result = project.runpytest("--agentv-results=r.jsonl")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*eval 'broken' was not graded: attempt 2: a: Evaluator 'a' failed: RuntimeError: "
            "evaluator bug*"
        ]
    )
    found = rows(project.path / "r.jsonl")
    assert found["fine"]["hits"] == ["attempt 0"]  # pass_all shows the weakest: all tie, first
    assert len(found["fine"]["trials"]) == 3
    assert [t["attempt"] for t in found["broken"]["trials"]] == [0, 1]
    assert found["broken"]["evaluator_results"][0]["error"].endswith("evaluator bug")


def test_the_trials_option_and_its_twins(
    flaky: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(
        flaky,
        "s.eval.yaml",
        HEADER
        + """\
  - {id: ffp-plain, input: Refunds}
  - {id: fffffp-mean, input: Refunds, execution: {trials: {count: 2, strategy: mean}}}
  - {id: p-adaptive, input: Refunds, execution: {trials: {strategy: adaptive}}}
""",
    )
    result = flaky.runpytest("--agentv-trials", "4", "--agentv-results=r.jsonl")
    result.assert_outcomes(passed=2, failed=1)
    found = rows(flaky.path / "r.jsonl")
    # No trials block: pass_at_k with N trials; a count is replaced; an adaptive case's max.
    assert [t["verdict"] for t in found["ffp-plain"]["trials"]] == ["fail", "fail", "pass"]
    assert found["ffp-plain"]["aggregation"]["strategy"] == "pass_at_k"
    assert len(found["fffffp-mean"]["trials"]) == 4
    adaptive = found["p-adaptive"]["aggregation"]
    assert (adaptive["planned"], adaptive["trials"], adaptive["settled"]) == (4, 4, True)

    (flaky.path / "attempts.log").unlink()
    monkeypatch.setenv("AGENTV_TRIALS", "1")  # 1: every case runs once, as without trials
    result = flaky.runpytest("--agentv-results=r.jsonl")
    result.assert_outcomes(passed=1, failed=2)
    assert not any(
        "trials" in row or "aggregation" in row for row in rows(flaky.path / "r.jsonl").values()
    )
    assert all(a == [0] for a in attempts(flaky).values())

    result = flaky.runpytest("--agentv-trials=0")
    result.stderr.fnmatch_lines(
        ["ERROR: --agentv-trials=0 is invalid: --agentv-trials must be an integer >= 1 and <= 1000"]
    )


@pytest.mark.parametrize(
    ("block", "at", "message"),
    [
        (
            "{count: 3, strategy: best}",
            "best",
            "evalcases.0.execution.trials.strategy: must be 'pass_at_k', 'pass_any', "
            "'pass_all', 'mean', 'confidence_interval' or 'adaptive'",
        ),
        (
            "{count: 3, threshold: 0.8}",
            "{count",
            "evalcases.0.execution.trials: 'threshold' applies to strategy 'adaptive' only (this "
            "block's strategy is 'pass_at_k')",
        ),
        (
            "{strategy: adaptive, count: 5}",
            "{strategy",
            "evalcases.0.execution.trials: strategy 'adaptive' runs between 'min' and 'max' "
            "trials until the verdict is settled: give 'max' instead of 'count'",
        ),
        (
            "{count: true}",
            "true",
            "evalcases.0.execution.trials.count: must be a whole number",
        ),
        (
            "{count: 2.5}",
            "2.5",
            "evalcases.0.execution.trials.count: must be a whole number",
        ),
        (
            "{count: 2, cost_limit_usd: .nan}",
            ".nan",
            "evalcases.0.execution.trials.cost_limit_usd: must be a finite number",
        ),
        (
            "{strategy: adaptive, threshold: 0.8}",
            "{strategy",
            "evalcases.0.execution.trials: strategy 'adaptive' can never settle above threshold "
            "0.8 within max 10 trials at confidence 0.95: 10 passes of 10 give a lower bound of "
            "0.72 (wilson); raise 'max' to at least 16",
        ),
    ],
)
def test_bad_trials_blocks_are_load_errors(
    tmp_path: Path, block: str, at: str, message: str
) -> None:
    line = f"  - {{id: p-x, input: Refunds, execution: {{trials: {block}}}}}"
    column = line.index(at, line.index("trials")) + 1
    error = load_error(tmp_path, "s.eval.yaml", HEADER + line + "\n")
    assert error == f"s.eval.yaml:6:{column}: {message}"


def test_a_trials_block_the_option_cannot_settle_is_a_collection_error(
    flaky: pytest.Pytester,
) -> None:
    line = "  - {id: p-x, input: Refunds, execution: {trials: {strategy: adaptive}}}"
    write(flaky, "s.eval.yaml", HEADER + line + "\n")
    result = flaky.runpytest("--agentv-trials", "3")
    result.assert_outcomes(errors=1)
    column = line.index("{strategy") + 1
    result.stdout.fnmatch_lines(
        [
            f"s.eval.yaml:6:{column}: evalcases.0.execution.trials: strategy 'adaptive' can never "
            "settle above threshold 0.5 within max 3 trials at confidence 0.95: 3 passes of 3 give "
            "a lower bound of 0.44 (wilson); raise 'max' to at least 4 (max is --agentv-trials 3)"
        ]
    )


def test_file_and_jsonl_sidecar_blocks(flaky: pytest.Pytester) -> None:
    write(
        flaky,
        "d.eval.jsonl",
        '{"id": "fp-sidecar", "input": "Refunds?"}\n'
        '{"id": "fp-own", "input": "Refunds?", '
        '"execution": {"trials": {"count": 2.0, "strategy": "mean"}}}\n',
    )
    write(
        flaky,
        "d.eval.yaml",
        """
        execution:
          target: flaky
          evaluators:
            - {name: kw, type: code_judge, script: [sh, keywords.sh]}
          trials: {count: 4}
        """,
    )
    result = flaky.runpytest("--agentv-results=r.jsonl", "d.eval.jsonl")
    result.assert_outcomes(passed=1, failed=1)
    found = rows(flaky.path / "r.jsonl")
    assert [t["verdict"] for t in found["fp-sidecar"]["trials"]] == ["fail", "pass"]
    assert found["fp-sidecar"]["aggregation"]["planned"] == 4
    assert found["fp-own"]["aggregation"]["strategy"] == "mean"  # the case's block wins whole
    assert len(found["fp-own"]["trials"]) == 2  # 2.0 is 2, as AgentV (JavaScript) reads it


def test_a_trial_that_cannot_be_graded_leaves_the_case_not_graded(flaky: pytest.Pytester) -> None:
    write(
        flaky,
        "s.eval.yaml",
        HEADER
        + "  - {id: pxp-crash, input: Refunds, execution: {trials: {count: 3, strategy: mean}}}\n",
    )
    result = flaky.runpytest("--agentv-results=r.jsonl")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*eval 'pxp-crash' was not graded: attempt 1: cli target 'flaky' exited with code 1*"]
    )
    row = rows(flaky.path / "r.jsonl")["pxp-crash"]
    assert row["status"] == "error" and row["verdict"] is None
    assert [t["attempt"] for t in row["trials"]] == [0]
    assert attempts(flaky) == {"pxp-crash": [0, 1]}  # no trial after the one that failed


BATCH_AGENT = """\
import json, sys
out, log, case = sys.argv[1], sys.argv[2], sys.argv[3]
with open(log, "a") as f:
    f.write(case + "\\n")
with open(out, "w") as f:
    for case_id in ("a", "b"):
        f.write(json.dumps({"id": case_id, "text": f"answer {case_id} (30 days)"}) + "\\n")
"""


def test_a_case_with_trials_is_not_batched(project: pytest.Pytester) -> None:
    write(project, "batch.py", BATCH_AGENT)
    write(
        project,
        ".agentv/targets.yaml",
        """
        targets:
          - name: default
            provider: cli
            provider_batching: true
            command_template: python batch.py {OUTPUT_FILE} runs.log {EVAL_ID}
        """,
    )
    write(
        project,
        "b.eval.yaml",
        """
        execution:
          evaluators:
            - {name: kw, type: code_judge, script: [python, keywords.py], keywords: ["30 days"]}
        evalcases:
          - {id: a, input: A?}
          - {id: b, input: B?, execution: {trials: {count: 2, strategy: mean}}}
          - {id: c, input: C?, execution: {trials: {count: 2, strategy: mean}}}
        """,
    )
    result = project.runpytest()
    result.assert_outcomes(passed=2, errors=1)
    # One batch for `a`; `b` runs the command alone, once per trial (as AgentV does). Its answer
    # is its own line: `c`, which has none, took the whole output as its answer, and passed.
    result.stdout.fnmatch_lines(
        [
            "*eval 'c' was not graded: attempt 0: the batch output of cli target 'default' has no "
            "line with id 'c'"
        ]
    )
    runs = sorted((project.path / "runs.log").read_text().splitlines())
    assert runs == ["b", "b", "batch", "c"]


UNIT = """
import asyncio
import pytest
from pytest_agentv import assert_judged, assert_judged_async
from pytest_agentv.assertions import JudgedAssertionError

KW = [{"name": "kw", "type": "code_judge", "script": ["sh", "keywords.sh"]}]
ANSWERS = ["Refunds within 30 days.", "No.", "Refunds within 30 days."]

def agent(calls):
    def answer():
        calls.append(len(calls))
        return {"text": ANSWERS[(len(calls) - 1) % 3], "cost_usd": 0.5}
    return answer

def test_mean_of_three():
    calls = []
    score = assert_judged(agent(calls), evaluators=KW, trials={"count": 3, "strategy": "mean"},
                          )
    raise AssertionError("not reached: 2 of 3 is borderline")

def test_pass_at_k_returns_the_aggregate():
    calls = []
    score = assert_judged(agent(calls), evaluators=KW, trials=3)
    assert calls == [0] and score.verdict == "pass"
    assert score.details["aggregation"]["strategy"] == "pass_at_k"
    assert [t["attempt"] for t in score.details["trials"]] == [0]
    assert score.details["aggregation"]["cost_usd"] == 0.5

def test_pass_all_fails_with_the_trial_table():
    calls = []
    with pytest.raises(JudgedAssertionError) as excinfo:
        assert_judged(agent(calls), evaluators=KW, trials={"count": 3, "strategy": "pass_all"})
    assert calls == [0, 1]
    text = str(excinfo.value)
    assert "trials: pass_all, 2 of 3 run, 1 passed" in text
    assert "evaluators of attempt 1:" in text
    assert excinfo.value.result["aggregation"]["stopped"] == "failed"

def test_cost_limit():
    calls = []
    assert_judged(agent(calls), evaluators=KW,
                  trials={"count": 3, "strategy": "pass_all", "cost_limit_usd": 0.5})
    assert calls == [0]

def test_an_async_agent_from_a_sync_test():
    calls = []
    async def answer():
        calls.append(1)
        return "Refunds within 30 days."
    assert_judged(answer, evaluators=KW, trials={"count": 2, "strategy": "mean"})
    assert len(calls) == 2

@pytest.mark.asyncio
async def test_an_async_agent_in_its_own_loop():
    loop = asyncio.get_running_loop()
    seen = []
    async def answer():
        seen.append(asyncio.get_running_loop() is loop)
        return "Refunds within 30 days."
    score = await assert_judged_async(answer, evaluators=KW,
                                      trials={"strategy": "adaptive", "max": 6})
    assert seen == [True] * 4 and score.details["aggregation"]["settled"]

def test_a_callable_without_trials_is_called_once():
    calls = []
    assert_judged(agent(calls), evaluators=KW)
    assert calls == [0]

def test_bad_trials():
    assert_judged("Refunds within 30 days.", evaluators=KW, trials={"count": 2, "max": 3})

def test_an_answer_that_cannot_be_graded():
    answers = iter(["Refunds within 30 days.", 42])
    assert_judged(lambda: next(answers), evaluators=KW, trials={"count": 2, "strategy": "mean"})

def test_no_judge_skips():
    assert_judged(lambda: "Refunds within 30 days.", expected_outcome="30 days", trials=2)
"""


def test_assert_judged_with_trials(project: pytest.Pytester) -> None:
    project.makepyfile(test_unit=UNIT)
    write(project, "keywords.sh", KEYWORD_JUDGE)
    result = project.runpytest("-rxs", "--junitxml=j.xml")
    result.assert_outcomes(passed=6, xfailed=1, failed=2, skipped=1)
    result.stdout.fnmatch_lines(
        [
            "E   *ValueError: trials: 'max' applies to strategy 'adaptive' only (this block's "
            "strategy is 'pass_at_k')",
            "*assert_judged was not graded: attempt 1: assert_judged candidate returned int*",
            "XFAIL test_unit.py::test_mean_of_three - borderline: score 0.67 over 3 trials (mean)*",
            "SKIPPED * assert_judged skipped: no LLM judge is configured*",
        ]
    )
    props = {
        case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
        for case in ET.parse(project.path / "j.xml").getroot().iter("testcase")
    }
    assert props["test_mean_of_three"]["agentv.trials"] == "3"
    assert props["test_mean_of_three"]["agentv.pass_rate"] == "0.6667"


def test_assert_judged_trials_have_their_own_judge_requests(
    judged: pytest.Pytester, fake_llm: FakeOpenAI
) -> None:
    judged.makepyfile(
        test_unit="""
        from pytest_agentv import assert_judged

        def test_judged():
            score = assert_judged("Refunds within 30 days.", expected_outcome="30 days",
                                  trials={"count": 3, "strategy": "mean"})
            assert score.details["aggregation"]["trials"] == 3
        """
    )
    judged.runpytest().assert_outcomes(passed=1)
    assert len(fake_llm.requests) == 3


def test_the_json_schema_knows_trials_blocks() -> None:
    import jsonschema
    import yaml

    from pytest_agentv.schema.jsonschema import json_schema

    validator = jsonschema.Draft202012Validator(json_schema("eval"))
    document = yaml.safe_load(STRATEGIES)
    document["execution"]["trials"] = {"count": 3, "costLimitUsd": 0.5}
    assert list(validator.iter_errors(document)) == []
    document["execution"]["trials"] = {"count": 2, "cost_limit": 1}
    error = jsonschema.exceptions.best_match(validator.iter_errors(document))
    assert error is not None and "'cost_limit' was unexpected" in error.message
