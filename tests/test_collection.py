"""Collection: which files, node ids, markers, selection, fixtures, xdist, disabling the plugin."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from tests.helpers import junit_cases_in, outcome_counts, rows_in, write
from tests.test_baseline import assert_only_compared, write_suite
from tests.test_hostile_yaml import assert_deep_nesting_refused, write_deep_nesting
from tests.test_integrity import assert_odd_outputs_kept, write_odd_outputs
from tests.test_outcomes import RESULTS_CASES, SCORE_JUDGE, assert_results_rows
from tests.test_project_config import (
    assert_before_session_ran,
    exports_removed,  # noqa: F401 (a fixture used here)
    write_before_session,
)
from tests.test_v4_matrix import MATRIX, assert_each_case_ran_once_per_target

CASES = """
evalcases:
  - id: refund-window
    input: How long do I have to return an item?
    evaluators:
      - {name: kw, type: code_judge, script: [python, keywords.py], keywords: [30 days]}
  - id: refund-method
    input: How are refunds paid?
    evaluators:
      - {name: kw, type: code_judge, script: [python, keywords.py], keywords: [refund]}
"""


def collected(pytester: pytest.Pytester, *args: str) -> list[str]:
    """The node ids a collect-only run finds, in order (and no collection errors)."""
    items, reprec = pytester.inline_genitems(*args)
    assert not [r for r in reprec.getreports("pytest_collectreport") if r.failed]
    return [item.nodeid for item in items]


def test_one_item_per_case_with_file_node_ids(project: pytest.Pytester) -> None:
    write(project, "evals/support.eval.yaml", CASES)
    write(project, "evals/other.eval.yml", CASES)
    assert collected(project) == [
        "evals/other.eval.yml::refund-window",
        "evals/other.eval.yml::refund-method",
        "evals/support.eval.yaml::refund-window",
        "evals/support.eval.yaml::refund-method",
    ]


def test_plain_yaml_is_ignored_unless_named_with_evalcases(project: pytest.Pytester) -> None:
    write(project, "cases.yaml", CASES)
    write(project, "config.yaml", "just: config\n")
    assert collected(project) == []
    assert collected(project, "cases.yaml") == [
        "cases.yaml::refund-window",
        "cases.yaml::refund-method",
    ]
    result = project.runpytest("--co", "-q", "config.yaml")
    result.stderr.fnmatch_lines(["ERROR: not found: *config.yaml*"])


def test_eval_patterns_ini_changes_what_is_collected(project: pytest.Pytester) -> None:
    project.makeini(
        """
        [pytest]
        asyncio_default_fixture_loop_scope = function
        agentv_eval_patterns = *.cases.yaml
        """
    )
    write(project, "a.cases.yaml", CASES)
    write(project, "b.eval.yaml", CASES)
    assert collected(project) == ["a.cases.yaml::refund-window", "a.cases.yaml::refund-method"]


@pytest.mark.parametrize(
    ("where", "source"),
    [
        ("cli", "--agentv-eval-patterns="),
        ("env", "AGENTV_EVAL_PATTERNS=,,,"),
        ("ini", "agentv_eval_patterns = , , (ini)"),
    ],
)
def test_an_empty_eval_patterns_list_is_a_usage_error(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, where: str, source: str
) -> None:
    # It used to collect nothing, and exit 5 without saying why.
    write(project, "support.eval.yaml", CASES)
    args = ["--agentv-eval-patterns", ""] if where == "cli" else []
    if where == "env":
        monkeypatch.setenv("AGENTV_EVAL_PATTERNS", ",,,")
    if where == "ini":
        project.makeini(
            "[pytest]\nasyncio_default_fixture_loop_scope = function\nagentv_eval_patterns = , ,\n"
        )
    result = project.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            f"ERROR: {source} is invalid: --agentv-eval-patterns needs at least one file name "
            "pattern; leave it unset for the default *.eval.yaml,*.eval.yml,*.eval.jsonl"
        ]
    )


def test_marker_keyword_and_last_failed_selection(project: pytest.Pytester) -> None:
    write(project, "support.eval.yaml", CASES)
    write(project, "test_plain.py", "def test_plain():\n    pass\n")
    project.runpytest("-m", "agentv").assert_outcomes(passed=2)
    project.runpytest("-m", "not agentv").assert_outcomes(passed=1)
    project.runpytest("-k", "window").assert_outcomes(passed=1)
    write(project, "support.eval.yaml", CASES.replace("[30 days]", "[ninety days]"))
    project.runpytest().assert_outcomes(passed=2, failed=1)
    result = project.runpytest("--lf")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*rerun previous 1 failure*"])


def test_fixtures_apply_to_eval_items(project: pytest.Pytester) -> None:
    write(project, "support.eval.yaml", CASES)
    project.makeconftest(
        """
        import pytest

        SEEN = []

        @pytest.fixture(autouse=True)
        def tracked(request):
            SEEN.append(request.node.nodeid)
            yield
            print("teardown", request.node.name)

        def pytest_sessionfinish():
            print("autouse saw", len(SEEN))
        """
    )
    result = project.runpytest("-s", "--setup-show")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        ["*SETUP    F tracked*", "*teardown refund-window*", "*autouse saw 2"]
    )


def test_plugin_can_be_disabled(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """By its entry point's name, as installed."""
    monkeypatch.delenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD")
    monkeypatch.delenv("PYTEST_PLUGINS")
    write(project, "support.eval.yaml", CASES)
    assert collected(project) == [
        "support.eval.yaml::refund-window",
        "support.eval.yaml::refund-method",
    ]
    assert collected(project, "-p", "no:agentv") == []


@pytest.mark.usefixtures("exports_removed")
def test_runs_under_xdist(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """What pytest-xdist's workers report reaches the controller whole. One session (an inner
    ``-n 2`` costs two worker processes) runs, each in a folder of its own, the files of the
    features whose results cross from the workers, checked as their own modules' serial tests
    check them: a v4 target matrix, the results file's fields, text JSON or UTF-8 cannot hold,
    a baseline comparison, files nested too deep for YAML beside tests that must still run
    (tests/test_hostile_yaml.py's test_deep_nesting_is_refused_before_anything_recursive was
    such a session of its own), and a project's before_session hook, run once by the
    controller, whose exports reach the tests the workers run (tests/test_project_config.py's
    test_before_session_runs_once_and_its_exports_reach_every_test[xdist] was another)."""
    write(project, "a.eval.yaml", CASES)
    write(project, "b.eval.yaml", CASES.replace("[30 days]", "[ninety days]"))
    write(project, "matrix/m.eval.yaml", MATRIX)  # tests/test_v4_matrix.py
    write(project, "rows/score.py", SCORE_JUDGE)  # tests/test_outcomes.py::test_results_file
    write(project, "rows/r.eval.yaml", RESULTS_CASES)
    write_odd_outputs(project, "odd/")  # tests/test_integrity.py
    write_suite(project, "baseline/")  # tests/test_baseline.py
    write_deep_nesting(project, "deep/")  # tests/test_hostile_yaml.py
    write_before_session(project, monkeypatch, "session/")  # tests/test_project_config.py
    result = project.runpytest(
        "-n",
        "2",
        "--junitxml=out.xml",
        "--agentv-results=out/results.jsonl",
        "--agentv-baseline=base.jsonl",
        "-rE",
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    junit, results = project.path / "out.xml", project.path / "out/results.jsonl"
    ran = result.reprec.getreports("pytest_runtest_logreport")  # type: ignore[attr-defined]
    assert {report.worker_id for report in ran} == {"gw0", "gw1"}
    plain = [outcome_counts(result, name) for name in ("a.eval.yaml", "b.eval.yaml")]
    assert plain == [{"passed": 2}, {"passed": 1, "failed": 1}]
    scored = [
        case for name in ("a.eval.yaml", "b.eval.yaml") for case in junit_cases_in(junit, name)
    ]
    assert sum(ET.tostring(case).count(b'name="agentv.score"') for case in scored) == 4
    assert_each_case_ran_once_per_target(result, results, junit, "matrix/")
    assert_results_rows(rows_in(results, "rows/"))
    assert_odd_outputs_kept(result, results, "odd/")
    assert_only_compared(result, "baseline/", new=18)  # and the 17 cases of the other folders
    assert_deep_nesting_refused(result, "deep/")
    assert_before_session_ran(result, project.path, "session/")
    # The summary counts every worker's cases: those of a and b (3 pass, 1 fail), the matrix's
    # (2 pass, 1 fail), rows/ (1 pass, 2 fail, 1 not graded), odd/ (3 pass, 1 fail), baseline/
    # (5 pass, 1 borderline) and deep/ (1 not graded, 1 skipped).
    result.stdout.fnmatch_lines(
        ["*23 evaluations: 14 pass, 1 borderline, 5 fail, 2 not graded, 1 skipped*"]
    )


def test_collection_is_cheap_and_does_not_run_cases(project: pytest.Pytester) -> None:
    write(
        project,
        "slow.eval.yaml",
        """
        evalcases:
          - id: would-hang
            input: q
            evaluators: [{name: hang, type: code_judge, script: "touch judged; sleep 30"}]
        """,
    )
    result = project.runpytest("--co", "-q")
    result.stdout.fnmatch_lines(["slow.eval.yaml::would-hang"])
    assert not (project.path / "judged").exists()
    assert result.duration < 25  # well short of the judge's 30 s sleep


def test_a_run_imports_only_the_evaluator_kinds_it_uses(project: pytest.Pytester) -> None:
    """Start-up is mostly imports: a suite of deterministic checks on a mock target imports no
    judge, code-judge, composite or calibration machinery, nor the HTTP client a URL
    healthcheck needs."""
    write(
        project,
        "c.eval.yaml",
        "tests:\n  - {id: a, input: q, assertions: [{type: contains, value: o}]}\n",
    )
    project.makeconftest(
        """
        import sys

        HEAVY = ("llm_judge", "code_judge", "composite", "field_accuracy", "tool_trajectory")

        def pytest_sessionfinish(session):
            modules = [f"pytest_agentv.evaluators.{kind}" for kind in HEAVY]
            modules += ["pytest_agentv.calibration", "urllib.request"]
            print("IMPORTED", sorted(m for m in modules if m in sys.modules))
        """
    )
    result = project.runpytest_subprocess("-s", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*IMPORTED []"])
