"""AgentV v4's target matrices: ``execution.targets`` (file or case) runs each case once per
target, one pytest item per pair, named ``case[target]``, with a result row and a JUnit test
case of its own."""

from __future__ import annotations

import json
import re
from fnmatch import fnmatch
from pathlib import Path

import pytest

from tests.helpers import (
    LOGGING_HOOK,
    hook_calls,
    junit_cases_in,
    load_error,
    outcome_counts,
    rows_in,
    write,
)

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


def test_each_case_runs_once_per_target(project: pytest.Pytester) -> None:
    """Under pytest-xdist too: tests/test_collection.py::test_runs_under_xdist."""
    write(project, "m.eval.yaml", MATRIX)
    result = project.runpytest("--agentv-results", "out.jsonl", "--junitxml", "j.xml")
    assert_each_case_ran_once_per_target(result, project.path / "out.jsonl", project.path / "j.xml")


def assert_each_case_ran_once_per_target(
    result: pytest.RunResult, results: Path, junit: Path, folder: str = ""
) -> None:
    """``MATRIX`` in ``folder`` ran: an outcome, a result row and a JUnit test case per pair
    (``result`` may have run other files too)."""
    assert outcome_counts(result, folder) == {"passed": 2, "failed": 1}
    where = re.escape(f"{folder}m.eval.yaml")
    result.stdout.re_match_lines([rf"{where}:5: eval 'both\[wrong\]' failed: score 0\.00"])
    found = sorted(
        (row["eval_id"], row["target"], row["score"]) for row in rows_in(results, folder)
    )
    assert found == [("both", "default", 1.0), ("both", "wrong", 0.0), ("only-wrong", "wrong", 1.0)]
    assert sorted(case.get("name") for case in junit_cases_in(junit, folder)) == [
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


def test_a_target_listed_twice_is_refused(tmp_path: Path) -> None:
    text = "execution: {targets: [a, a]}\ntests: [{id: a, input: q}]\n"
    error = load_error(tmp_path, "m.eval.yaml", text)
    assert fnmatch(error, "m.eval.yaml:1:*execution.targets*listed twice*"), error


def test_each_pair_reads_its_own_row_of_a_recorded_run(project: pytest.Pytester) -> None:
    """A matrix run's results have one row per (case, target). Used as a baseline, each pair
    compares with its own row; replayed with ``--agentv-answers``, each pair is given the answer
    its own target gave. Both pairs used to read the last row of the case: one delta was against
    the other target's score, and both pairs were graded on one answer."""
    write(project, "m.eval.yaml", MATRIX)
    project.runpytest("--agentv-results", "rec.jsonl").assert_outcomes(passed=2, failed=1)
    replayed = project.runpytest(
        "--agentv-answers",
        "rec.jsonl",
        "--agentv-baseline",
        "rec.jsonl",
        "--agentv-results",
        "again.jsonl",
        "-rf",
    )
    replayed.assert_outcomes(passed=2, failed=1)
    replayed.stdout.re_match_lines([r"FAILED m\.eval\.yaml::both\[wrong\]"])
    rows = [json.loads(line) for line in (project.path / "again.jsonl").read_text().splitlines()]
    found = sorted((row["eval_id"], row["target"], row["baseline_score"]) for row in rows)
    assert found == [("both", "default", 1.0), ("both", "wrong", 0.0), ("only-wrong", "wrong", 1.0)]


VARIANTS = """
execution:
  targets:
    - name: variant-right
      use_target: default
    - name: variant-env
      use_target: ${{ AGENT_TARGET }}
tests:
  - id: refund
    input: q
    assertions: [{type: contains, value: "30 days"}]
"""


def test_a_matrix_entry_answers_with_its_use_target_under_its_own_name(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """AgentV v4: ``{name, use_target}`` runs the target ``use_target`` names (or the one an
    environment variable names), and the pair is reported under the entry's name."""
    monkeypatch.setenv("AGENT_TARGET", "wrong")
    write(project, "m.eval.yaml", VARIANTS)
    result = project.runpytest("--agentv-results", "out.jsonl")
    result.assert_outcomes(passed=1, failed=1)
    rows = [json.loads(line) for line in (project.path / "out.jsonl").read_text().splitlines()]
    assert sorted((str(row["target"]), row["score"]) for row in rows) == [
        ("variant-env", 0.0),
        ("variant-right", 1.0),
    ]
    result.stdout.re_match_lines([r".*eval 'refund\[variant-env\]' failed: score 0\.00"])


def test_an_unset_use_target_variable_leaves_its_pairs_not_graded(
    project: pytest.Pytester,
) -> None:
    write(project, "m.eval.yaml", VARIANTS)
    result = project.runpytest("--agentv-results", "out.jsonl")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "m.eval.yaml:9: eval 'refund[variant-env]' was not graded: matrix target"
            " 'variant-env': use_target says ${{ AGENT_TARGET }}, but the environment variable"
            " AGENT_TARGET is not set; set it to a target's name"
        ]
    )
    rows = [json.loads(line) for line in (project.path / "out.jsonl").read_text().splitlines()]
    assert sorted((row["target"], row["status"]) for row in rows) == [
        ("variant-env", "error"),
        ("variant-right", "graded"),
    ]


def _hook(name: str) -> str:
    return f"{{command: [sh, ../hook.sh, '{name}']}}"


def test_target_hooks_run_inside_the_workspaces_in_v4_order(project: pytest.Pytester) -> None:
    """A target's ``before_all`` once, after the workspace's; its ``before_each`` after the
    workspace's and its ``after_each`` before it, for each of its cases; its ``after_all``
    before the workspace's — from the eval file's folder, with v4's context."""
    write(project, "hook.sh", LOGGING_HOOK)
    write(project, "evals/tpl/seed.txt", "seed\n")
    names = ("before_all", "before_each", "after_each", "after_all")
    workspace = "\n".join(f"    {n}: {_hook('ws:' + n)}" for n in names)
    target = "\n".join(f"          {n}: {_hook('t:' + n)}" for n in names)
    write(
        project,
        "evals/m.eval.yaml",
        f"""workspace:
  template: tpl
  hooks:
{workspace}
execution:
  targets:
    - name: variant
      use_target: default
      hooks:
{target}
    - plain
tests:
  - {{id: a, input: q, assertions: [{{type: contains, value: "30 days"}}]}}
  - {{id: b, input: q, assertions: [{{type: contains, value: "30 days"}}]}}
""",
    )
    write(project, ".agentv/targets.yaml", TARGETS_WITH_PLAIN)
    result = project.runpytest("-p", "no:randomly", "--agentv-concurrency=1")
    result.assert_outcomes(passed=4)
    calls = [
        (name, context["test_id"], context["workspace_path"], cwd)
        for cwd, (name,), context in hook_calls(project.path / "hooks.log")
    ]
    assert [(name, test_id) for name, test_id, _, _ in calls] == [
        ("ws:before_all", "__before_all__"),
        ("t:before_all", "__target_before_all__"),
        ("ws:before_each", "a"),
        ("t:before_each", "a"),
        ("t:after_each", "a"),
        ("ws:after_each", "a"),
        ("ws:before_each", "a"),  # a[plain]: the workspace's hooks only
        ("ws:after_each", "a"),
        ("ws:before_each", "b"),
        ("t:before_each", "b"),
        ("t:after_each", "b"),
        ("ws:after_each", "b"),
        ("ws:before_each", "b"),
        ("ws:after_each", "b"),
        ("t:after_all", "__target_after_all__"),
        ("ws:after_all", "__after_all__"),
    ]
    assert len({path for _, _, path, _ in calls}) == 1
    assert {cwd for *_, cwd in calls} == {str(project.path / "evals")}


def test_a_failing_target_before_all_leaves_that_targets_cases_not_graded(
    project: pytest.Pytester,
) -> None:
    write(
        project,
        "m.eval.yaml",
        """
        workspace: {hooks: {before_each: {command: ["true"]}}}
        execution:
          targets:
            - name: broken
              use_target: default
              hooks:
                before_all: {command: [sh, -c, "echo no setup >&2; exit 1"]}
            - default
        tests:
          - {id: a, input: q, assertions: [{type: contains, value: "30 days"}]}
          - {id: b, input: q, assertions: [{type: contains, value: "30 days"}]}
        """,
    )
    result = project.runpytest("--agentv-results", "out.jsonl")
    result.assert_outcomes(passed=2, errors=2)
    result.stdout.fnmatch_lines(
        ["*target 'broken' hook before_all (sh -c *) exited with code 1: no setup*"]
    )
    rows = [json.loads(line) for line in (project.path / "out.jsonl").read_text().splitlines()]
    assert sorted((row["eval_id"], row["target"], row["status"]) for row in rows) == [
        ("a", "broken", "error"),
        ("a", "default", "graded"),
        ("b", "broken", "error"),
        ("b", "default", "graded"),
    ]


#: Matrix entries that are no target, and what the collection error of each says.
BAD_ENTRIES = {
    "reset": (
        "{name: v, use_target: default, hooks: {before_each: {reset: fast}}}",
        "*execution.targets.0.hooks: before_each: a target's hooks run commands; 'reset'"
        " belongs to the workspace's (workspace.hooks.before_each.reset)*",
    ),
    "typo": ("{name: v, use_targte: default}", "*execution.targets.0*use_targte*"),
    "no-name": ("{use_target: default}", "*execution.targets.0.name*"),
}


def test_bad_matrix_entries_are_load_errors(project: pytest.Pytester) -> None:
    """One file for each, in one session: each is its own collection error."""
    for name, (entry, _) in BAD_ENTRIES.items():
        text = f"execution: {{targets: [{entry}]}}\ntests: [{{id: a, input: q}}]\n"
        write(project, f"{name}.eval.yaml", text)
    result = project.runpytest("--co", "-q")
    result.assert_outcomes(errors=len(BAD_ENTRIES))
    for name, (_, problem) in BAD_ENTRIES.items():
        result.stdout.fnmatch_lines([f"*{name}.eval.yaml:1:*{problem.lstrip('*')}"])


TARGETS_WITH_PLAIN = """\
targets:
  - name: default
    provider: mock
    response: "Refunds are accepted within 30 days of purchase."
  - name: plain
    provider: mock
    response: "Refunds are accepted within 30 days of purchase."
"""
