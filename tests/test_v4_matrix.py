"""AgentV v4's target matrices: ``execution.targets`` (file or case) runs each case once per
target, one pytest item per pair, named ``case[target]``, with a result row and a JUnit test
case of its own."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from tests.helpers import write

MATRIX = """
execution:
  targets: [default, wrong]
tests:
  - id: both
    input: q
    assertions: [{type: contains, value: "30 days"}]
  - id: only-wrong
    input: q
    execution: {targets: [wrong]}
    assertions: [{type: contains, value: never}]
"""


def test_each_case_runs_once_per_target(project: pytest.Pytester, run_args: list[str]) -> None:
    write(project, "m.eval.yaml", MATRIX)
    result = project.runpytest(*run_args, "--agentv-results", "out.jsonl", "--junitxml", "j.xml")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.re_match_lines([r"m\.eval\.yaml:5: eval 'both\[wrong\]' failed: score 0\.00"])
    lines = (project.path / "out.jsonl").read_text().splitlines()
    found = sorted((row["eval_id"], row["target"], row["score"]) for row in map(json.loads, lines))
    assert found == [("both", "default", 1.0), ("both", "wrong", 0.0), ("only-wrong", "wrong", 1.0)]
    cases = ET.parse(project.path / "j.xml").getroot().iter("testcase")
    assert sorted(case.get("name") for case in cases) == [
        "both[default]",
        "both[wrong]",
        "only-wrong[wrong]",
    ]


def test_pairs_are_selected_by_their_ids(project: pytest.Pytester) -> None:
    write(project, "m.eval.yaml", MATRIX)
    result = project.runpytest("m.eval.yaml::both[default]", "-q")
    result.assert_outcomes(passed=1)


def test_the_command_line_target_runs_each_case_once(project: pytest.Pytester) -> None:
    write(project, "m.eval.yaml", MATRIX)
    result = project.runpytest("--co", "-q", "--agentv-target", "default")
    result.stdout.fnmatch_lines(["m.eval.yaml::both", "m.eval.yaml::only-wrong", "2 tests*"])


def test_a_case_target_outside_the_files_matrix_is_a_load_error(project: pytest.Pytester) -> None:
    write(
        project,
        "m.eval.yaml",
        """
        execution: {targets: [default]}
        tests:
          - {id: a, input: q, criteria: c, execution: {targets: [wrong]}}
        """,
    )
    result = project.runpytest("--co", "-q")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["m.eval.yaml:4:*: evalcases.0.execution.targets: none of these is in the file's*"]
    )


def test_a_target_listed_twice_is_refused(project: pytest.Pytester) -> None:
    write(project, "m.eval.yaml", "execution: {targets: [a, a]}\ntests: [{id: a, input: q}]\n")
    result = project.runpytest("--co", "-q")
    result.stdout.fnmatch_lines(["*m.eval.yaml:1:*execution.targets*listed twice*"])


def test_each_pair_compares_with_its_own_baseline_row(project: pytest.Pytester) -> None:
    """A baseline written by a matrix run has one row per (case, target): each pair reads its
    own. Both pairs used to read the last row of the case, so one delta was against the other
    target's score."""
    write(project, "m.eval.yaml", MATRIX)
    project.runpytest("--agentv-results", "base.jsonl").assert_outcomes(passed=2, failed=1)
    project.runpytest("--agentv-results", "again.jsonl", "--agentv-baseline", "base.jsonl")
    rows = [json.loads(line) for line in (project.path / "again.jsonl").read_text().splitlines()]
    found = sorted((row["eval_id"], row["target"], row["baseline_score"]) for row in rows)
    assert found == [("both", "default", 1.0), ("both", "wrong", 0.0), ("only-wrong", "wrong", 1.0)]


def test_recorded_answers_are_each_pairs_own(project: pytest.Pytester) -> None:
    """A matrix run's results replayed with ``--agentv-answers`` give each pair the answer its
    own target gave: both pairs used to be graded on the case's last row."""
    write(project, "m.eval.yaml", MATRIX)
    project.runpytest("--agentv-results", "rec.jsonl").assert_outcomes(passed=2, failed=1)
    replayed = project.runpytest("--agentv-answers", "rec.jsonl", "-rf")
    replayed.assert_outcomes(passed=2, failed=1)
    replayed.stdout.re_match_lines([r"FAILED m\.eval\.yaml::both\[wrong\]"])
