"""AgentV v4's suite settings: ``threshold`` (file and case; ``--agentv-threshold`` wins),
``budget_usd``, ``execution.trials`` in v4's shape, ``depends_on`` with
``on_dependency_failure``, and ``tags`` as pytest markers."""

from __future__ import annotations

import json

import pytest

from tests.helpers import write

#: Two checks, one met: a score of 0.5 for the mock answer ("... 30 days of purchase.").
HALF = "[{type: contains, value: 30 days}, {type: contains, value: never}]"


def verdicts(pytester: pytest.Pytester) -> dict[str, str]:
    lines = (pytester.path / "out.jsonl").read_text().splitlines()
    return {row["eval_id"]: row["verdict"] for row in map(json.loads, lines)}


def test_threshold_is_the_pass_bar_and_the_command_line_wins(project: pytest.Pytester) -> None:
    write(
        project,
        "t.eval.yaml",
        f"""
        execution: {{threshold: 0.5}}
        tests:
          - {{id: file-bar, input: q, assertions: {HALF}}}
          - {{id: own-bar, input: q, execution: {{threshold: 0.9}}, assertions: {HALF}}}
          - {{id: default, input: q, assertions: [{{type: contains, value: 30 days}}]}}
        """,
    )
    result = project.runpytest("--agentv-results", "out.jsonl")
    result.assert_outcomes(passed=2, failed=1)
    assert verdicts(project) == {"file-bar": "pass", "own-bar": "fail", "default": "pass"}
    result = project.runpytest("--agentv-results", "out.jsonl", "--agentv-threshold", "0.4")
    result.assert_outcomes(passed=3)


def test_without_a_threshold_the_bar_is_the_usual_one(project: pytest.Pytester) -> None:
    write(project, "t.eval.yaml", f"tests:\n  - {{id: half, input: q, assertions: {HALF}}}\n")
    project.runpytest("--agentv-results", "out.jsonl").assert_outcomes(failed=1)
    assert verdicts(project) == {"half": "fail"}


@pytest.mark.parametrize("value", ["1.5", "-0.1", "x"])
def test_a_threshold_outside_zero_to_one_is_refused(project: pytest.Pytester, value: str) -> None:
    text = f"execution: {{threshold: {value}}}\ntests: [{{id: a, input: q}}]\n"
    write(project, "t.eval.yaml", text)
    result = project.runpytest("--co", "-q")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["t.eval.yaml:1:*: execution.threshold: *"])


def test_the_command_line_threshold_is_checked(project: pytest.Pytester) -> None:
    result = project.runpytest("--agentv-threshold", "2")
    result.stderr.fnmatch_lines(["*--agentv-threshold=2*"])
