"""--agentv-baseline and --agentv-max-regression: deltas per case, the comparison block, and the
regression gate, against our own results files and AgentV's."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from pytest_agentv.baseline import PreviousResults, comparison_lines
from pytest_agentv.errors import ConfigError
from tests.helpers import outcome_counts, write

#: The cases' evaluator: the score it is given (in the run's process: the comparison is what
#: these tests are about, not how a score is made).
FIXED = """\
import pytest
from pytest_agentv import EvaluationScore


class Fixed:
    kind = "fixed"

    def evaluate(self, context):
        return EvaluationScore(score=context.evaluator.options["score"])


@pytest.hookimpl
def pytest_agentv_make_evaluator(config, kind):
    return Fixed() if kind == "fixed" else None
"""


def case(case_id: str, score: float) -> str:
    return f"""
  - id: {case_id}
    input: q
    evaluators:
      - {{name: fixed, type: fixed, score: {score}}}
"""


SUITE = "dataset: support\nevalcases:\n" + "".join(
    [
        case("dropped", 0.83),  # 1.00 before: still passes, but down 0.17
        case("steady", 0.83),  # 0.85 before: unchanged
        case("better", 0.9),  # 0.50 before
        case("sinking", 0.7),  # 0.95 before: borderline now, down 0.25
        case("fresh", 1.0),  # not in the baseline
        case("skipped-by-k", 1.0),  # in the baseline; deselected, so not gone
    ]
)


def our_row(case_id: str, score: float, **extra: Any) -> dict[str, Any]:
    return {"eval_id": case_id, "dataset": "support", "score": score, "status": "graded", **extra}


BASELINE = [
    our_row("dropped", 1.0),
    our_row("steady", 0.85),
    our_row("better", 0.5),
    our_row("sinking", 0.95),
    our_row("skipped-by-k", 1.0),
    our_row("retired", 0.9),  # no longer in the file: gone
    {"eval_id": "elsewhere", "dataset": "billing", "score": 0.2},  # a dataset not collected
]


def write_rows(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.fixture
def suite(project: pytest.Pytester) -> pytest.Pytester:
    write_suite(project)
    return project


def reports(result: pytest.RunResult) -> dict[str, pytest.TestReport]:
    """The report that ends each eval item (the call phase, or setup when it did not pass it)."""
    found: dict[str, pytest.TestReport] = {}
    for report in result.reprec.getreports("pytest_runtest_logreport"):  # type: ignore[attr-defined]
        if report.when == "call" or report.outcome != "passed":
            found[report.nodeid.split("::")[-1]] = report
    return found


def test_a_regression_that_still_passes_fails_beyond_max_regression(
    suite: pytest.Pytester,
) -> None:
    result = suite.runpytest(
        "--agentv-baseline=base.jsonl",
        "--agentv-max-regression=0.1",
        "--agentv-results=now.jsonl",
        "--junitxml=junit.xml",
        "-k",
        "not skipped",
    )
    result.assert_outcomes(passed=3, failed=2, deselected=1)
    by_id = reports(result)
    assert {name for name, r in by_id.items() if r.failed} == {"dropped", "sinking"}
    report = str(by_id["dropped"].longrepr)
    assert (
        "eval 'dropped' failed: score 0.83 (pass), down 0.17 from the baseline's 1.00: "
        "more than --agentv-max-regression 0.1"
    ) in report
    assert "baseline: score 1.00, delta -0.17" in report
    # Borderline would be an xfail; a regression beyond the limit fails it.
    assert "score 0.70 (borderline), down 0.25 from the baseline's 0.95" in str(
        by_id["sinking"].longrepr
    )

    rows = {
        row["eval_id"]: row
        for row in map(json.loads, (suite.path / "now.jsonl").read_text().splitlines())
    }
    assert (rows["dropped"]["baseline_score"], rows["dropped"]["delta"]) == (1.0, -0.17)
    assert (rows["better"]["baseline_score"], rows["better"]["delta"]) == (0.5, 0.4)
    assert (rows["fresh"]["baseline_score"], rows["fresh"]["delta"]) == (None, None)
    properties = {
        (case.get("name"), p.get("name")): p.get("value")
        for case in ET.parse(suite.path / "junit.xml").iter("testcase")
        for p in case.iter("property")
    }
    assert properties[("dropped", "agentv.baseline_score")] == "1.0000"
    assert properties[("dropped", "agentv.delta")] == "-0.1700"
    assert ("fresh", "agentv.delta") not in properties

    result.stdout.fnmatch_lines(
        [
            "agentv baseline base.jsonl: 1 improved, 2 regressed, 1 unchanged (|delta| < 0.05), "
            "1 new, 1 gone",
            "  regressed:",
            "    support.eval.yaml::sinking  0.95 -> 0.70  (-0.25, more than "
            "--agentv-max-regression 0.1)",
            "    support.eval.yaml::dropped  1.00 -> 0.83  (-0.17, more than "
            "--agentv-max-regression 0.1)",
            "  improved:",
            "    support.eval.yaml::better  0.50 -> 0.90  (+0.40)",
            "  new:",
            "    support.eval.yaml::fresh",
            "  gone:",
            "    support::retired",
        ]
    )


def test_without_max_regression_the_comparison_only_reports(suite: pytest.Pytester) -> None:
    """Under pytest-xdist too: tests/test_collection.py::test_runs_under_xdist."""
    assert_only_compared(suite.runpytest("--agentv-baseline=base.jsonl"))


def write_suite(project: pytest.Pytester, folder: str = "") -> None:
    """``SUITE`` (its evaluator kind from the folder's ``conftest.py``) in ``folder``, and its
    baseline ``base.jsonl``."""
    write(project, f"{folder}conftest.py", FIXED)
    write(project, f"{folder}support.eval.yaml", SUITE)
    write_rows(project.path / "base.jsonl", BASELINE)


def assert_only_compared(result: pytest.RunResult, folder: str = "", new: int = 1) -> None:
    """``SUITE`` in ``folder`` was compared with ``BASELINE`` without a gate (``result`` may
    have run ``new`` - 1 other cases, which the baseline does not have)."""
    assert outcome_counts(result, folder) == {"passed": 5, "xfailed": 1}
    # Every case was collected (by each xdist worker too): nothing is gone but "retired".
    result.stdout.fnmatch_lines(
        [f"agentv baseline base.jsonl: 1 improved, 2 regressed, 2 unchanged *, {new} new, 1 gone"]
    )


def test_an_agentv_results_file_is_a_baseline(project: pytest.Pytester) -> None:
    write(project, "conftest.py", FIXED)
    write(
        project,
        "dataset.eval.yaml",
        "evalcases:\n" + case("v2-case", 0.6) + case("later-case", 0.9) + case("errored", 0.9),
    )
    # AgentV v2.5.8 rows (no status, no verdict; an error row scores 0 and carries `error`),
    # and a later AgentV row that carries only `test_id`.
    write_rows(
        project.path / "agentv.jsonl",
        [
            {
                "timestamp": "2026-01-03T12:07:10.957Z",
                "eval_id": "v2-case",
                "dataset": "dataset",
                "score": 1,
                "hits": ["x"],
                "misses": [],
                "candidate_answer": "...",
                "target": "azure_base",
                "reasoning": "fixed: ok",
            },
            {"test_id": "later-case", "score": 0.5, "execution_status": "ok"},
            {
                "eval_id": "errored",
                "dataset": "dataset",
                "score": 0,
                "misses": ["Error: boom"],
                "error": "boom",
            },
        ],
    )
    result = project.runpytest(
        "--agentv-baseline=agentv.jsonl", "--agentv-max-regression=0.3", "--agentv-results=r.jsonl"
    )
    result.assert_outcomes(passed=2, failed=1)
    assert reports(result)["v2-case"].failed
    rows = {
        row["eval_id"]: row
        for row in map(json.loads, (project.path / "r.jsonl").read_text().splitlines())
    }
    assert rows["v2-case"]["delta"] == -0.4
    assert rows["later-case"]["delta"] == 0.4
    assert (rows["errored"]["baseline_score"], rows["errored"]["delta"]) == (None, None)
    result.stdout.fnmatch_lines(
        [
            "agentv baseline agentv.jsonl: 1 improved, 1 regressed, 0 unchanged *, 0 new, 0 gone, "
            "1 not compared (not graded in one of the runs)"
        ]
    )


def test_cases_not_graded_and_cases_with_trials(project: pytest.Pytester) -> None:
    write(project, "conftest.py", FIXED)
    write(
        project,
        "t.eval.yaml",
        """
        evalcases:
          - id: broken
            input: q
            execution: {target: nowhere}
            evaluators:
              - {name: fixed, type: fixed, score: 1}
          - id: tried
            input: q
            execution:
              trials: {count: 2, strategy: mean}
            evaluators:
              - {name: fixed, type: fixed, score: 0.7}
        """,
    )
    write_rows(
        project.path / "base.jsonl",
        [
            {"eval_id": "broken", "dataset": "t", "score": 1.0, "status": "graded"},
            {"eval_id": "tried", "dataset": "t", "score": 0.9, "status": "graded"},
        ],
    )
    result = project.runpytest(
        "--agentv-baseline=base.jsonl", "--agentv-max-regression=0.1", "--agentv-results=r.jsonl"
    )
    # The case that was not graded stays an error: no delta, no regression verdict on it.
    result.assert_outcomes(errors=1, failed=1)
    rows = {
        row["eval_id"]: row
        for row in map(json.loads, (project.path / "r.jsonl").read_text().splitlines())
    }
    assert (rows["broken"]["baseline_score"], rows["broken"]["delta"]) == (1.0, None)
    # Under trials the case's aggregate score is compared.
    assert rows["tried"]["aggregation"]["strategy"] == "mean"
    assert rows["tried"]["delta"] == pytest.approx(-0.2)
    assert "down 0.20 from the baseline's 0.90" in str(reports(result)["tried"].longrepr)


def test_bad_baseline_options_are_usage_errors(project: pytest.Pytester) -> None:
    result = project.runpytest("--agentv-max-regression=0.1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--agentv-max-regression needs --agentv-baseline*"])

    write(project, "bad.jsonl", '{"eval_id": "a", "score": 1}\n{"score": 2}\n')
    result = project.runpytest("--agentv-baseline=bad.jsonl")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--agentv-baseline: *bad.jsonl:2: a results row needs a string 'eval_id' (or 'test_id')"]
    )

    result = project.runpytest("--agentv-baseline=base.jsonl", "--agentv-max-regression=1.5")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--agentv-max-regression must be a number >= 0 and <= 1*"])


#: A baseline row of a case that was not graded, twice, then one of a graded case, "one".
UNGRADED_ROWS = (
    '{"eval_id": "two", "dataset": "a", "score": 0, "error": "boom"}\n'
    '{"eval_id": "two", "dataset": "a", "status": "skipped"}\n'
)


def unusable_score(folder: Path, score: str | None) -> tuple[Path, str]:
    """``base.jsonl`` in ``folder``, whose graded row of case "one" (line 3) has ``score`` (JSON
    text, None: no score), and how the error shows that score."""
    scored = "" if score is None else f', "score": {score}'
    path = folder / "base.jsonl"
    path.write_text(
        UNGRADED_ROWS + f'{{"eval_id": "one", "dataset": "a", "candidate_answer": "x"{scored}}}\n'
    )
    shown = "no 'score'" if score is None else f"score {score}"
    if score is not None and len(score) > 24:  # a number is not shown whole
        shown = f"score {score[:20]}... ({len(score)} characters)"
    return path, shown


@pytest.mark.parametrize("score", ['"abc"', "7", "null", "-0.5", "1" + "0" * 400, None])
def test_a_graded_baseline_row_without_a_usable_score_is_a_usage_error(
    tmp_path: Path, score: str | None
) -> None:
    """As both options read the file (what a session makes of it: the next test). Such a row
    used to be "not compared": the gate was off for its case, silently. Recorded answers need
    no score, but one they carry is a score."""
    path, shown = unusable_score(tmp_path, score)
    problem = (
        f"base.jsonl:3: case 'one' has {shown}; a graded row needs a 'score' from 0 to 1 (a row "
        "that was not graded carries 'error', or status 'error' or 'skipped')"
    )
    baseline = PreviousResults(path, "base.jsonl", "--agentv-baseline", scored=True)
    with pytest.raises(ConfigError) as raised:
        baseline.rows()
    assert str(raised.value) == f"--agentv-baseline: {problem}"
    answers = PreviousResults(path, "base.jsonl", "--agentv-answers")
    if score in (None, "null"):
        assert answers.find("a", "one") is not None
    else:
        with pytest.raises(ConfigError) as raised:
            answers.rows()
        assert str(raised.value).startswith(
            f"--agentv-answers: base.jsonl:3: case 'one' has {shown};"
        )


def test_an_unusable_score_stops_the_run_or_its_cases(project: pytest.Pytester) -> None:
    """What pytest makes of the errors above: the baseline's is a usage error; the recorded
    answers' is an error of each case, and a row without a score is a recorded answer."""
    write(project, "conftest.py", FIXED)
    write(project, "a.eval.yaml", "evalcases:\n" + case("one", 0.9) + case("two", 0.9))
    _, shown = unusable_score(project.path, '"abc"')
    result = project.runpytest("--agentv-baseline=base.jsonl")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            f"*--agentv-baseline: base.jsonl:3: case 'one' has {shown}; a graded row "
            "needs a 'score' from 0 to 1 (a row that was not graded carries 'error', or status "
            "'error' or 'skipped')"
        ]
    )
    result = project.runpytest("--agentv-answers=base.jsonl")
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines([f"*--agentv-answers: base.jsonl:3: case 'one' has {shown};*"])
    unusable_score(project.path, None)
    project.runpytest("--agentv-answers=base.jsonl").assert_outcomes(passed=1, errors=1)


def test_the_comparison_block_lists_every_regression_and_caps_the_rest(tmp_path: Path) -> None:
    rows = [{"eval_id": f"c{i:02}", "dataset": "d", "score": 0.5} for i in range(30)]
    baseline = PreviousResults(write_rows(tmp_path / "b.jsonl", rows), "b.jsonl", "--x")
    cases = [
        {
            "eval_id": f"c{i:02}",
            "dataset": "d",
            "file": "d.eval.yaml",
            "score": 0.5 + (0.3 if i < 15 else -0.3) * (i + 1) / 30,
            "baseline_score": 0.5,
            "delta": round((0.3 if i < 15 else -0.3) * (i + 1) / 30, 6),
        }
        for i in range(30)
    ]
    collected = {("d.eval.yaml", "d", f"c{i:02}") for i in range(30)}
    lines = comparison_lines(baseline, cases, collected)
    regressed = lines[lines.index("  regressed:") + 1 : lines.index("  improved:")]
    assert len(regressed) == 15
    assert regressed[0].startswith("    d.eval.yaml::c29") and "(-0.30)" in regressed[0]
    improved = lines[lines.index("  improved:") + 1 :]
    # Deltas under 0.05 are unchanged: 11 improved, 10 of them named.
    assert improved[0].startswith("    d.eval.yaml::c14") and improved[-1] == "    ... and 1 more"


def test_files_with_the_same_dataset_and_ids_are_compared_file_by_file(
    project: pytest.Pytester,
) -> None:
    """AgentV's layout has an ``evals/dataset.yaml`` in every folder: the same dataset name and
    the same ids in several files. Each case is compared with its own file's row, and a folder
    left out of the run has nothing gone."""
    suites = {"billing": case("basic", 0.85) + case("old", 1.0), "refunds": case("basic", 1.0)}
    write(project, "conftest.py", FIXED)
    for folder, cases in suites.items():
        write(project, f"{folder}/evals/dataset.eval.yaml", "evalcases:" + cases)
    project.runpytest("--agentv-results=base.jsonl").assert_outcomes(passed=3)
    rows = [json.loads(line) for line in (project.path / "base.jsonl").read_text().splitlines()]
    assert sorted(row["file"] for row in rows) == [
        "billing/evals/dataset.eval.yaml",
        "billing/evals/dataset.eval.yaml",
        "refunds/evals/dataset.eval.yaml",
    ]

    result = project.runpytest("--agentv-baseline=base.jsonl", "--agentv-max-regression=0.1")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*0 improved, 0 regressed, 3 unchanged*, 0 new, 0 gone*"])

    write(project, "billing/evals/dataset.eval.yaml", "evalcases:" + case("basic", 0.85))
    result = project.runpytest("--agentv-baseline=base.jsonl", "refunds")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*1 unchanged*, 0 new, 0 gone*"])
    result = project.runpytest("--agentv-baseline=base.jsonl")
    result.stdout.fnmatch_lines(
        ["*2 unchanged*, 0 new, 1 gone*", "*gone:", "*billing/evals/dataset.eval.yaml::old"]
    )


def test_a_row_of_another_file_is_used_only_when_that_file_is_gone(
    project: pytest.Pytester,
) -> None:
    """A renamed file keeps its baseline; a file that is still there keeps its rows to itself
    (the other file's case with the same dataset and id is new)."""
    write(project, "conftest.py", FIXED)
    suite = "dataset: support\nevalcases:" + case("x", 0.9)
    write(project, "a/cases.eval.yaml", suite)
    project.runpytest("a", "--agentv-results=base.jsonl").assert_outcomes(passed=1)

    write(project, "b/cases.eval.yaml", suite)
    result = project.runpytest("--agentv-baseline=base.jsonl")
    result.stdout.fnmatch_lines(["*0 regressed, 1 unchanged*, 1 new, 0 gone*"])

    (project.path / "a" / "cases.eval.yaml").unlink()
    result = project.runpytest("--agentv-baseline=base.jsonl")
    result.stdout.fnmatch_lines(["*0 regressed, 1 unchanged*, 0 new, 0 gone*"])
