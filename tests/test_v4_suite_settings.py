"""AgentV v4's suite settings: ``threshold`` (file and case; ``--agentv-threshold`` wins),
``budget_usd``, ``execution.trials`` in v4's shape, ``depends_on`` with
``on_dependency_failure``, and ``tags`` as pytest markers."""

from __future__ import annotations

import json
from fnmatch import fnmatch
from pathlib import Path

import pytest

from tests.helpers import load_error, outcome_counts, write

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
def test_a_threshold_outside_zero_to_one_is_refused(tmp_path: Path, value: str) -> None:
    text = f"execution: {{threshold: {value}}}\ntests: [{{id: a, input: q}}]\n"
    error = load_error(tmp_path, "t.eval.yaml", text)
    assert fnmatch(error, "t.eval.yaml:1:*: execution.threshold: *"), error


def test_the_command_line_threshold_is_checked(project: pytest.Pytester) -> None:
    result = project.runpytest("--agentv-threshold", "2")
    result.stderr.fnmatch_lines(["*--agentv-threshold=2*"])


DEPENDENCIES = """
tests:
  - id: child
    input: q
    depends_on: [parent]
    assertions: [{type: contains, value: "30 days"}]
  - id: parent
    input: q
    execution: {target: missing}
    assertions: [{type: contains, value: "30 days"}]
  - id: failer
    input: q
    depends_on: [parent]
    on_dependency_failure: fail
    assertions: [{type: contains, value: "30 days"}]
  - id: runner
    input: q
    depends_on: [parent]
    on_dependency_failure: run
    assertions: [{type: contains, value: "30 days"}]
  - id: grandchild
    input: q
    depends_on: [child, low]
    on_dependency_failure: fail
    assertions: [{type: contains, value: "30 days"}]
  - id: low
    input: q
    assertions: [{type: contains, value: never}]
  - id: after-low
    input: q
    depends_on: [low]
    assertions: [{type: contains, value: "30 days"}]
"""


def test_a_failed_dependency_skips_fails_or_runs_its_dependents(project: pytest.Pytester) -> None:
    """``parent`` cannot be graded (its target is unknown): ``child`` is skipped, ``failer``
    fails without running, ``runner`` runs; ``grandchild`` depends on the skipped ``child``, which
    counts as failed; ``low`` scored low but was graded, so ``after-low`` runs. Under
    pytest-xdist with ``--dist loadfile``: in tests/test_shards.py's
    test_xdist_workers_deal_the_same."""
    write(project, "d.eval.yaml", DEPENDENCIES)
    assert_dependents_held(project.runpytest("-rsf"))


def assert_dependents_held(result: pytest.RunResult, folder: str = "") -> None:
    """``DEPENDENCIES`` in ``folder`` ran as its cases' dependencies say (``result`` may have
    run other files too, with ``-rsf``)."""
    assert outcome_counts(result, folder) == {"passed": 2, "failed": 3, "skipped": 1, "error": 1}
    for line in (
        f"SKIPPED *{folder}d.eval.yaml:3: eval 'child': dependency failed (parent); skipped*",
        f"{folder}d.eval.yaml:11: eval 'failer': dependency failed (parent) "
        "(on_dependency_failure: fail)",
        f"{folder}d.eval.yaml:21: eval 'grandchild': dependency failed (child) "
        "(on_dependency_failure: *",
    ):
        result.stdout.fnmatch_lines([line])


def test_dependencies_run_first(project: pytest.Pytester) -> None:
    write(
        project,
        "d.eval.yaml",
        """
        tests:
          - {id: last, input: q, criteria: c, depends_on: [middle]}
          - {id: middle, input: q, criteria: c, depends_on: [first]}
          - {id: first, input: q, criteria: c}
        """,
    )
    result = project.runpytest("--co", "-q")
    result.stdout.fnmatch_lines(["d.eval.yaml::first", "d.eval.yaml::middle", "d.eval.yaml::last"])


@pytest.mark.parametrize(
    ("cases", "problem"),
    [
        (
            "[{id: a, input: q, depends_on: [b]}, {id: b, input: q, depends_on: [c]},"
            " {id: c, input: q, depends_on: [a]}]",
            "d.eval.yaml:1:*: evalcases.2.depends_on.0: dependency cycle: a → b → c → a",
        ),
        (
            "[{id: a, input: q, depends_on: [a]}]",
            "d.eval.yaml:1:*: evalcases.0.depends_on.0: case 'a' depends on itself",
        ),
        (
            "[{id: a, input: q, depends_on: [nobody]}]",
            "d.eval.yaml:1:*: evalcases.0.depends_on.0: no case of this file has the id 'nobody'",
        ),
        (
            "[{id: a, input: q, on_dependency_failure: later}]",
            "d.eval.yaml:1:*: tests.0.on_dependency_failure: must be *",
        ),
    ],
)
def test_bad_dependencies_are_load_errors(tmp_path: Path, cases: str, problem: str) -> None:
    error = load_error(tmp_path, "d.eval.yaml", f"tests: {cases}\n")
    assert fnmatch(error, problem), error


def test_bad_suite_settings_are_collection_errors(project: pytest.Pytester) -> None:
    """What pytest makes of the errors above: one collection error for each file."""
    write(project, "t.eval.yaml", "execution: {threshold: 1.5}\ntests: [{id: a, input: q}]\n")
    write(project, "d.eval.yaml", "tests: [{id: a, input: q, depends_on: [a]}]\n")
    result = project.runpytest("--co", "-q")
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["t.eval.yaml:1:*: execution.threshold: *"])
    result.stdout.fnmatch_lines(
        ["d.eval.yaml:1:*: evalcases.0.depends_on.0: case 'a' depends on itself"]
    )


def test_tags_are_markers_for_dash_m(project: pytest.Pytester) -> None:
    write(project, "a.eval.yaml", "tags: [smoke, skip]\ntests: [{id: a, input: q, criteria: c}]\n")
    write(project, "b.eval.yaml", "tags: [slow]\ntests: [{id: b, input: q, criteria: c}]\n")
    result = project.runpytest("--co", "-q", "--strict-markers", "-m", "smoke or not slow")
    result.stdout.fnmatch_lines(["a.eval.yaml::a", "1/2 tests collected (1 deselected)*"])
    # A tag naming a marker that changes how tests run ("skip") is no marker: "a" is not skipped
    # (it has no judge: it is skipped with that reason).
    result = project.runpytest("-m", "smoke", "-rs")
    result.stdout.fnmatch_lines(["SKIPPED *eval 'a' skipped: *judge*"])


def test_a_suites_budget_stops_its_cases_once_spent(project: pytest.Pytester) -> None:
    """Each answer reports a cost of $0.60: the budget of $1 is spent after two cases; the
    third is not started (not graded), and another file's cases are not held back."""
    write(
        project,
        ".agentv/targets.yaml",
        "targets:\n  - {name: default, provider: mock, response: {text: ok, cost_usd: 0.6}}\n",
    )
    case = "  - {{id: c{}, input: q, assertions: [{{type: contains, value: ok}}]}}"
    cases = "\n".join(case.format(n) for n in (1, 2, 3))
    write(project, "b.eval.yaml", f"execution: {{budget_usd: 1}}\ntests:\n{cases}\n")
    write(project, "free.eval.yaml", f"tests:\n{cases}\n")
    result = project.runpytest("-rE")
    result.assert_outcomes(passed=5, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*eval 'c3' was not graded: the suite's budget is spent: $1.2* of $1.0* "
            "(execution.budget_usd of b.eval.yaml)*"
        ]
    )


def test_v4_trials_run_as_written(project: pytest.Pytester) -> None:
    """AgentV v4's trials example's block: count, strategy, cost_limit_usd."""
    write(
        project,
        "t.eval.yaml",
        """
        execution:
          trials: {count: 2, strategy: pass_at_k, cost_limit_usd: 1.00}
        tests:
          - {id: a, input: q, assertions: [{type: contains, value: "30 days"}]}
        """,
    )
    project.runpytest("--agentv-results", "out.jsonl").assert_outcomes(passed=1)
    row = json.loads((project.path / "out.jsonl").read_text())
    assert [trial["score"] for trial in row["trials"]] == [1.0]
