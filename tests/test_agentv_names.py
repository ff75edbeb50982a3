"""Later AgentV names as aliases of the classic ones, the JSON Schema, and re-grading recorded
answers with --agentv-answers."""

from __future__ import annotations

import contextlib
import functools
import io
import json
import subprocess
import sys
from fnmatch import fnmatch
from pathlib import Path

import jsonschema
import pytest
import yaml

from pytest_agentv.__main__ import main
from pytest_agentv.schema.rubrics import RubricItem
from tests.helpers import load_error, write

ROOT = Path(__file__).resolve().parent.parent

V4_FILE = """
description: written with AgentV v4 names
tests:
  - id: refund
    criteria: Gives the 30-day window
    input: How long do I have to return something?
    expected_output: Within 30 days.
    assertions:
      - type: code-grader
        command: [python, keywords.py]
        config: {keywords: ["30 days"]}
  - id: kebab
    criteria: Same
    input: q
    execution:
      assertions:
        - {name: kw, type: code-judge, script: [python, keywords.py], keywords: [refund]}
"""


def rows(path: Path) -> dict[str, dict]:
    return {row["eval_id"]: row for row in map(json.loads, path.read_text().splitlines())}


def test_a_v4_named_file_runs_like_its_classic_twin(project: pytest.Pytester) -> None:
    write(project, "v4.eval.yaml", V4_FILE)
    result = project.runpytest("-W", "error::pytest_agentv.AgentvWarning", "--agentv-results", "o")
    result.assert_outcomes(passed=2)
    found = rows(project.path / "o")
    [entry] = found["refund"]["evaluator_results"]
    assert entry["evaluator_provider_request"]["script"] == ["python", "keywords.py"]
    assert found["refund"]["hits"] == ["mentions 30 days"]


def test_a_mixed_file_warns_once(project: pytest.Pytester) -> None:
    write(
        project,
        "mixed.eval.yaml",
        """
        evalcases:
          - id: a
            criteria: Gives the window
            input: q
            assertions:
              - {type: code-grader, command: [python, keywords.py], keywords: [refund]}
          - id: b
            criteria: Gives the window
            input: q
            evaluators: [{name: k, type: code_judge, script: [python, keywords.py]}]
        """,
    )
    result = project.runpytest("-W", "always")
    result.assert_outcomes(passed=2)
    text = result.stdout.str()
    assert text.count("this file mixes AgentV generations") == 1
    result.stdout.fnmatch_lines(
        [
            "*mixed.eval.yaml:4: this file mixes AgentV generations: classic (v2.5.8) 'evalcases' "
            "at line 3 and later 'criteria' here*"
        ]
    )


@pytest.mark.parametrize(
    ("evaluator", "expected"),
    [
        ("{name: c, type: agent_judge}", "*'agent_judge' was introduced in AgentV v2.10*"),
        ("{name: c, type: agent-judge}", "*'agent-judge' was introduced in AgentV v2.19*"),
        ("{type: inline-assert}", "*'inline-assert' was introduced in AgentV v3.1*"),
        (
            "{name: c, type: llm-rubric, value: [Polite]}",
            "*'llm-rubric' was introduced in AgentV v5*",
        ),
        ("{name: c, type: 'trajectory:tool-used'}", "*introduced in AgentV v5*"),
    ],
    ids=["v2.10-kind", "v2.19-kind", "v3.1-kind", "v5-kind", "trajectory"],
)
def test_names_we_cannot_map_are_errors_naming_the_version(
    tmp_path: Path, evaluator: str, expected: str
) -> None:
    error = load_error(
        tmp_path,
        "later.eval.yaml",
        f"evalcases:\n  - {{id: a, input: q, assertions: [{evaluator}]}}\n",
    )
    assert fnmatch(error, "later.eval.yaml:2:*" + expected.lstrip("*")), error


def test_a_composite_written_with_later_names(project: pytest.Pytester) -> None:
    """AgentV v3 lists a composite's members under ``assertions`` and names its aggregators
    ``code-grader`` / ``llm-grader``."""
    write(
        project,
        "lowest.py",
        """
        import json, sys
        results = json.load(sys.stdin)["results"]
        print(json.dumps({"score": min(r["score"] for r in results.values())}))
        """,
    )
    write(
        project,
        "c.eval.yaml",
        """
        tests:
          - id: refund
            input: How long do I have to return something?
            assertions:
              - name: both
                type: composite
                assertions:
                  - {name: days, type: code-grader, command: [python, keywords.py],
                     keywords: [days]}
                  - {name: weeks, type: code-grader, command: [python, keywords.py],
                     keywords: [weeks]}
                aggregator: {type: code-grader, path: [python, lowest.py]}
        """,
    )
    reprec = project.inline_run("--agentv-results", "r.jsonl")
    reprec.assertoutcome(failed=1)
    (row,) = map(json.loads, (project.path / "r.jsonl").read_text().splitlines())
    (composite,) = row["evaluator_results"]
    assert [m["name"] for m in composite["evaluator_results"]] == ["days", "weeks"]
    assert [m["score"] for m in composite["evaluator_results"]] == [1.0, 0.0]
    assert composite["score"] == 0.0


def test_v4_rubric_items_and_rubrics_kind(project: pytest.Pytester, fake_llm) -> None:
    from tests.helpers import judge_ini

    project.makeini(judge_ini(fake_llm))
    fake_llm.responder = lambda request: json.dumps(
        {
            "checks": [{"id": "brevity", "score": 6, "reasoning": "a bit long"}],
            "overall_reasoning": "ok",
        }
    )
    write(
        project,
        "r.eval.yaml",
        """
        tests:
          - id: gated
            criteria: Short
            input: q
            assertions:
              - type: rubrics
                criteria:
                  - id: brevity
                    outcome: Short answer
                    min_score: 0.65
                    score_ranges:
                      - {score_range: [0, 5], outcome: long}
                      - {score_range: [6, 10], outcome: short}
        """,
    )
    result = project.runpytest("--agentv-results", "o")
    result.assert_outcomes(failed=1)
    assert "[REQUIRED: min score 7]" in fake_llm.requests[0].user
    assert RubricItem.model_validate({"id": "x", "min_score": 0.8}).min_score == 8


#: Files that give one field under two of its names, and the error each must get (pydantic
#: would read one name and leave the other unread, or warn about it as an unknown key).
TWICE = {
    "suite": (
        "evalcases:\n  - {id: c1, input: hi}\ntests:\n  - {id: t1, input: hi}\n",
        "3:1: tests: give either 'evalcases' or 'tests', not both",
    ),
    "case": (
        "tests:\n  - id: a\n    input: hi\n    input_messages: hello\n",
        "4:5: tests.0.input_messages: give either 'input' or 'input_messages', not both",
    ),
    "outcome": (
        "tests:\n  - id: a\n    input: hi\n    expected_outcome: x\n    criteria: y\n",
        "5:5: tests.0.criteria: give either 'expected_outcome' or 'criteria', not both",
    ),
    "evaluators": (
        "tests:\n  - id: a\n    input: hi\n    assertions: [{type: latency, threshold: 1}]\n"
        "    evaluators: [{type: cost, budget: 1}]\n",
        "5:5: tests.0.evaluators: give either 'assertions' or 'evaluators', not both",
    ),
    "execution": (
        "execution:\n  evaluators: [{type: latency, threshold: 1}]\n"
        "  assertions: [{type: cost, budget: 1}]\ntests: [{id: a, input: hi}]\n",
        "3:3: execution.assertions: give either 'evaluators' or 'assertions', not both",
    ),
    "script": (
        "tests:\n  - id: a\n    input: hi\n    evaluators:\n      - name: j\n"
        "        type: code_judge\n        script: [python, a.py]\n"
        "        command: [python, b.py]\n",
        "8:9: tests.0.evaluators.0.command: give either 'script' or 'command', not both",
    ),
    "rubrics": (
        "tests:\n  - id: a\n    input: hi\n    evaluators:\n"
        "      - {name: j, type: llm_judge, rubrics: [a], criteria: [b]}\n",
        "5:*: tests.0.evaluators.0.criteria: give either 'rubrics' or 'criteria', not both",
    ),
    "composite": (
        "tests:\n  - id: a\n    input: hi\n    evaluators:\n      - name: c\n"
        "        type: composite\n        evaluators: [{type: latency, threshold: 1}]\n"
        "        assertions: [{type: cost, budget: 1}]\n"
        "        aggregator: {type: weighted_average}\n",
        "8:9: tests.0.evaluators.0.assertions: give either 'evaluators' or 'assertions', not both",
    ),
    "camel-case": (
        "execution:\n  trials: {count: 2, costLimitUsd: 1, cost_limit_usd: 2}\n"
        "tests: [{id: a, input: hi}]\n",
        "2:*: execution.trials.cost_limit_usd: give either 'costLimitUsd' or 'cost_limit_usd', "
        "not both",
    ),
    "score-range": (
        "tests:\n  - id: a\n    input: hi\n    rubrics:\n      - id: r\n        score_ranges:\n"
        "          - {score_range: [0, 10], outcome: good, description: fine}\n",
        "7:*: tests.0.rubrics.0.score_ranges.0.description: give either 'outcome' or "
        "'description', not both",
    ),
}


def test_a_field_written_under_two_names_is_an_error(project: pytest.Pytester) -> None:
    for name, (content, _) in TWICE.items():
        write(project, f"{name}.eval.yaml", content)
    result = project.runpytest("--co", "-q")
    result.assert_outcomes(errors=len(TWICE))
    result.stdout.fnmatch_lines_random(
        [f"{name}.eval.yaml:{expected}" for name, (_, expected) in TWICE.items()]
    )
    assert "Traceback" not in result.stdout.str()


def test_a_target_setting_written_under_two_names_is_an_error(project: pytest.Pytester) -> None:
    write(
        project,
        ".agentv/targets.yaml",
        "targets:\n  - name: default\n    provider: cli\n    command_template: echo a\n"
        "    commandTemplate: echo b\n",
    )
    write(project, "a.eval.yaml", "tests: [{id: a, input: hi}]\n")
    result = project.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*.agentv/targets.yaml:5:5: targets.0.commandTemplate: give either "
            "'command_template' or 'commandTemplate', not both*"
        ]
    )


# -- JSON Schema ----------------------------------------------------------------------------


def schema(kind: str) -> dict:
    """What ``python -m pytest_agentv schema KIND`` prints (its ``main``, in this process)."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["schema", kind]) == 0
    return json.loads(printed.getvalue())


def test_python_m_pytest_agentv_schema_prints_it() -> None:
    """The other tests call ``main``; the command itself prints the same."""
    printed = subprocess.run(
        [sys.executable, "-m", "pytest_agentv", "schema", "eval"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert json.loads(printed.stdout) == schema("eval")


@functools.cache
def validator(kind: str) -> jsonschema.Draft202012Validator:
    """A validator of the printed schema, checked to be a JSON Schema (once per process: the
    check takes about a third of a second)."""
    found = schema(kind)
    jsonschema.Draft202012Validator.check_schema(found)
    return jsonschema.Draft202012Validator(found)


def test_every_example_file_validates_against_the_schema() -> None:
    evals, targets = validator("eval"), validator("targets")
    eval_files = sorted((ROOT / "examples").rglob("*.eval.yaml"))
    target_files = sorted((ROOT / "examples").rglob("targets.yaml"))
    assert eval_files and target_files
    for path in eval_files:
        # As an editor sees it: JSON data (a YAML map's number keys are strings in JSON).
        document = json.loads(json.dumps(yaml.safe_load(path.read_text()), default=str))
        errors = [e.message for e in evals.iter_errors(document)]
        assert errors == [], path
    for path in target_files:
        assert [e.message for e in targets.iter_errors(yaml.safe_load(path.read_text()))] == []


def test_the_schema_takes_later_names_and_flags_typos() -> None:
    evals = validator("eval")
    assert list(evals.iter_errors(yaml.safe_load(V4_FILE))) == []
    typo = {"evalcases": [{"id": "a", "input": "q", "expected_outcom": "x"}]}
    assert [e.message for e in evals.iter_errors(typo)] == [
        "Additional properties are not allowed ('expected_outcom' was unexpected)"
    ]
    # Evaluator entries pass unknown keys on as the judge's config: not flagged.
    config_keys = {
        "evalcases": [
            {
                "id": "a",
                "input": "q",
                "evaluators": [
                    {"name": "k", "type": "code_judge", "script": ["x"], "keywords": ["y"]}
                ],
            }
        ]
    }
    assert list(evals.iter_errors(config_keys)) == []
    assert list(evals.iter_errors({"description": "no cases"}))
    targets = validator("targets")
    assert (
        list(
            targets.iter_errors(
                [
                    {
                        "name": "a",
                        "provider": "cli",
                        "command_template": "x",
                        "filesFormat": "--file {path}",
                    }
                ]
            )
        )
        == []
    )
    flagged = list(
        targets.iter_errors({"targets": [{"name": "a", "provider": "mock", "respnse": "x"}]})
    )
    assert "'respnse' was unexpected" in jsonschema.exceptions.best_match(flagged).message


# -- recorded answers -----------------------------------------------------------------------

REGRADED = """
evalcases:
  - id: refund
    input: How long do I have to return something?
    evaluators:
      - {name: kw, type: code_judge, script: [python, keywords.py], keywords: ["30 days"]}
  - id: new-case
    input: q
    evaluators:
      - {name: kw, type: code_judge, script: [python, keywords.py], keywords: ["30 days"]}
"""


def test_regrade_our_own_results_without_calling_the_target(project: pytest.Pytester) -> None:
    write(project, "r.eval.yaml", REGRADED)
    project.runpytest("--agentv-results", "first.jsonl", "-k", "refund").assert_outcomes(passed=1)
    # Tonight the target is broken; last night's answer is graded again all the same.
    result = project.runpytest(
        "--agentv-target", "missing", "--agentv-answers", "first.jsonl", "--agentv-results", "o"
    )
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*eval 'new-case' was not graded: no recorded answer for dataset 'r', eval_id "
            "'new-case' in first.jsonl (--agentv-answers)*"
        ]
    )
    assert rows(project.path / "o")["refund"]["candidate_answer"].startswith("Refunds are")


TRACE_JUDGE = """\
import json, sys
payload = json.load(sys.stdin)
print(json.dumps({"score": 1.0, "hits": [json.dumps(payload["trace_summary"]),
                                         payload["candidate_answer"]]}))
"""


def test_regrade_agentv_rows(project: pytest.Pytester) -> None:
    write(project, "trace.py", TRACE_JUDGE)
    write(
        project,
        "dataset.yaml",
        """
        evalcases:
          - {id: a, input: q, evaluators: [{name: t, type: code_judge, script: [python, trace.py]}]}
          - {id: b, input: q, evaluators: [{name: t, type: code_judge, script: [python, trace.py]}]}
          - {id: c, input: q, evaluators: [{name: t, type: code_judge, script: [python, trace.py]}]}
        """,
    )
    trace = {
        "event_count": 1,
        "tool_names": ["search"],
        "tool_calls_by_name": {"search": 1},
        "error_count": 0,
    }
    recorded = [
        {
            "eval_id": "a",
            "dataset": "dataset",
            "candidate_answer": "from a",
            "trace_summary": trace,
        },
        {"test_id": "b", "output_messages": [{"role": "assistant", "content": "from b"}]},
        {
            "eval_id": "c",
            "dataset": "dataset",
            "score": 0,
            "candidate_answer": "Error occurred: x",
            "error": "Batch output missing id 'c'",
        },
    ]
    write(project, "baseline.jsonl", "".join(json.dumps(r) + "\n" for r in recorded))
    result = project.runpytest(
        "dataset.yaml", "--agentv-answers", "baseline.jsonl", "--agentv-results", "o"
    )
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*eval 'c' was not graded: the recorded answer for 'c' in baseline.jsonl "
            "(--agentv-answers) is not an answer: Batch output missing id 'c'"
        ]
    )
    found = rows(project.path / "o")
    # The judge sees the recorded summary with AgentV v4's name for the counts added.
    assert found["a"]["hits"] == [json.dumps({**trace, "tool_calls": {"search": 1}}), "from a"]
    assert found["b"]["hits"][1] == "from b"
    assert found["a"]["trace_summary"] == trace


def test_a_recorded_execution_error_is_not_an_answer(project: pytest.Pytester) -> None:
    """A later AgentV row with execution_status execution_error (and no 'error') was graded
    as if its text were an answer, and could pass; a quality_failure was graded and is."""
    write(
        project,
        "r.eval.yaml",
        REGRADED
        + REGRADED.split("evalcases:")[1].replace("refund", "low").replace("new-case", "x"),
    )
    recorded = [
        {
            "test_id": "refund",
            "candidate_answer": "Within 30 days.",
            "execution_status": "execution_error",
            "execution_error": {"message": "agent timed out after 120s", "stage": "agent"},
        },
        {"test_id": "new-case", "candidate_answer": "30 days", "execution_status": "timeout"},
        {"test_id": "low", "candidate_answer": "30 days", "execution_status": "quality_failure"},
        {"test_id": "x", "candidate_answer": "30 days", "execution_status": "ok", "score": 1},
    ]
    write(project, "agentv.jsonl", "".join(json.dumps(row) + "\n" for row in recorded))
    result = project.runpytest("--agentv-answers", "agentv.jsonl")
    result.assert_outcomes(passed=2, errors=2)
    result.stdout.fnmatch_lines(
        [
            "*eval 'refund' was not graded: the recorded answer for 'refund' in agentv.jsonl "
            '(--agentv-answers) is not an answer: execution_status "execution_error": agent '
            "timed out after 120s",
            "*eval 'new-case' was not graded: *is not an answer: execution_status \"timeout\"",
        ]
    )


def test_answers_file_errors_name_the_line(project: pytest.Pytester) -> None:
    write(project, "r.eval.yaml", REGRADED)
    write(project, "bad.jsonl", '{"eval_id": "refund", "candidate_answer": "x"}\n{oops\n')
    result = project.runpytest("--agentv-answers", "bad.jsonl")
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["*--agentv-answers: bad.jsonl:2:2: invalid JSON*"])
