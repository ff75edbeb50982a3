"""Results rows read back: one reading of ours, AgentV v2.5.8's and v4's rows (camelCase aliases
included) for every reader — the baseline, recorded answers, ``python -m pytest_agentv report``
and its HTML page — the same verdicts and deltas in each, bad rows refused at their line, and a
baseline read once per run."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lxml import html

from pytest_agentv.__main__ import main
from tests.fake_openai import FakeOpenAI
from tests.helpers import examples, outcome_counts, outcomes, rows_in, run_report, write
from tests.test_calibration import CANARIES, SUITE, assert_failed_calibration, lenient

ANSWER = "Refunds within 30 days."
#: One file of every kind of row: ours, AgentV v2.5.8's, v4's in snake_case and in camelCase;
#: graded, failed on quality, not graded (an error, a skip, v4's execution_error and a status v4
#: does not know), with scores that are no number where the row was not graded.
MIXED: list[dict[str, Any]] = [
    {"eval_id": "ours-pass", "dataset": "mixed", "status": "graded", "score": 0.9,
     "verdict": "pass", "candidate_answer": ANSWER},
    {"eval_id": "ours-error", "dataset": "mixed", "status": "error", "score": None,
     "error": "target down", "candidate_answer": ""},
    {"eval_id": "ours-skipped", "dataset": "mixed", "status": "skipped", "score": None,
     "candidate_answer": ANSWER},
    {"eval_id": "v2", "dataset": "mixed", "score": 0.5, "hits": [], "misses": ["tone"],
     "candidate_answer": ANSWER},
    {"eval_id": "v2-error", "dataset": "mixed", "score": 0, "error": "Batch output missing",
     "candidate_answer": ANSWER},
    {"test_id": "v4-ok", "suite": "mixed", "score": 1, "execution_status": "ok",
     "output": ANSWER},
    {"test_id": "v4-low", "suite": "mixed", "score": 0.3, "execution_status": "quality_failure",
     "output": ANSWER},
    {"test_id": "v4-error", "suite": "mixed", "score": 0, "execution_status": "execution_error",
     "execution_error": {"message": "agent timed out", "stage": "agent"}, "output": ANSWER},
    {"test_id": "v4-timeout", "suite": "mixed", "score": "n/a", "execution_status": "timeout",
     "output": ANSWER},
    {"testId": "camel-ok", "suite": "mixed", "score": 0.75, "executionStatus": "ok",
     "output": ANSWER, "durationMs": 1200, "tokenUsage": {"input": 10, "output": 5}},
    {"testId": "camel-error", "suite": "mixed", "score": 0,
     "executionStatus": "execution_error", "failureReasonCode": "provider_error",
     "output": ANSWER},
]  # fmt: skip
GRADED = {"ours-pass": 0.9, "v2": 0.5, "v4-ok": 1.0, "v4-low": 0.3, "camel-ok": 0.75}
SKIPPED = {"ours-skipped"}
IDS = [str(row.get("eval_id") or row.get("test_id") or row.get("testId")) for row in MIXED]


def write_rows(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.fixture
def mixed(project: pytest.Pytester) -> pytest.Pytester:
    """An eval file with a case for each row (its answer, the mock target's, mentions 30 days)."""
    entry = "{name: kw, type: contains, value: 30 days}"
    cases = "".join(f"  - {{id: {case}, input: q, evaluators: [{entry}]}}\n" for case in IDS)
    write(project, "mixed.eval.yaml", "evalcases:\n" + cases)
    write_rows(project.path / "mixed.jsonl", MIXED)
    return project


def by_id(path: Path) -> dict[str, dict[str, Any]]:
    return {row["eval_id"]: row for row in map(json.loads, path.read_text().splitlines())}


def page_cases(path: Path) -> dict[str, html.HtmlElement]:
    """The HTML page's cases by eval id."""
    found = html.fromstring(path.read_bytes()).find_class("case")
    return {str(case.get("id")).split("::")[-1]: case for case in found}


def assert_compared_with_mixed(now: dict[str, dict[str, Any]]) -> dict[str, float | None]:
    """A run compared with the mixed rows has a delta for every graded row, none for the others
    (each case scores 1). Returns the deltas."""
    assert {case: row["baseline_score"] for case, row in now.items()} == {
        case: GRADED.get(case) for case in IDS
    }
    deltas = {case: row["delta"] for case, row in now.items()}
    assert deltas == {case: round(1 - GRADED[case], 6) if case in GRADED else None for case in IDS}
    return deltas


def test_every_reader_reads_mixed_rows_alike(
    mixed: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same rows under pytest-xdist: test_the_baseline_is_read_once_per_run."""
    # The baseline: a delta for every graded row, none for the others.
    result = mixed.runpytest("--agentv-baseline=mixed.jsonl", "--agentv-results=now")
    result.assert_outcomes(passed=len(MIXED))
    deltas = assert_compared_with_mixed(by_id(mixed.path / "now"))

    # The recorded answers: a graded row's answer is graded again; the others are no answer.
    answered = outcomes(mixed.inline_run("--agentv-answers=mixed.jsonl"))
    graded_again = {
        node.split("::")[-1] for node, outcome in answered.items() if outcome == "passed"
    }
    assert graded_again == set(GRADED)
    assert list(answered.values()).count("error") == len(MIXED) - len(GRADED)

    # The report command: the same verdicts, on the page and in the Markdown summary.
    assert run_report(capsys, "mixed.jsonl", "-o", "mixed.html").ret == 1  # cases failed
    kinds = {case: element.get("data-kind") for case, element in page_cases(
        mixed.path / "mixed.html"
    ).items()}  # fmt: skip
    assert {case for case, kind in kinds.items() if kind not in ("error", "skipped")} == set(GRADED)
    assert {case for case, kind in kinds.items() if kind == "skipped"} == SKIPPED
    assert kinds["camel-ok"] == "borderline" and kinds["v4-low"] == "fail"
    summary = run_report(capsys, "mixed.jsonl", "--markdown", "-")
    assert "11 evaluations: 2 pass, 1 borderline, 2 fail, 5 not graded, 1 skipped" in (
        summary.stdout.str()
    )
    # ... and the same deltas when it compares the run with the same baseline.
    assert run_report(capsys, "now", "--baseline", "mixed.jsonl", "-o", "now.html").ret == 0
    compared = page_cases(mixed.path / "now.html")
    assert {case: compared[case].get("data-delta") for case in IDS} == {
        case: None if delta is None else str(delta) for case, delta in deltas.items()
    }


def test_a_recorded_execution_error_in_camel_case_is_not_an_answer(
    mixed: pytest.Pytester,
) -> None:
    """v4's own reader takes ``executionStatus`` for ``execution_status``: such a row's text was
    graded as an answer, and passed."""
    result = mixed.runpytest("--agentv-answers=mixed.jsonl", "-k", "camel")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*eval 'camel-error' was not graded: the recorded answer for 'camel-error' in "
            'mixed.jsonl (--agentv-answers) is not an answer: execution_status "execution_error"'
        ]
    )


BAD_ROWS = [
    ({"candidate_answer": {"text": "hi"}}, "'candidate_answer' is an object; it must be a string"),
    ({"hits": {"a": 1}}, "'hits' is an object; it must be a list of strings"),
    ({"misses": 3}, "'misses' is the number 3; it must be a list of strings"),
    ({"misses": ["ok", 3]}, "'misses[1]' is the number 3; it must be a string"),
    (
        {"evaluator_results": [{"name": "kw", "score": 0.5, "hits": "all"}]},
        "'evaluator_results[0].hits' is a string; it must be a list of strings",
    ),
    (
        {"evaluator_results": [{"name": "kw", "score": 2}]},
        "'evaluator_results[0].score' is 2; a score is from 0 to 1",
    ),
    ({"trace_summary": {"token_usage": [1]}}, "'trace_summary.token_usage' is a list; it must*"),
    ({"status": "done"}, "'status' is \"done\"; it must be graded, error or skipped"),
    ({"score": 1e308}, "has score 1e+308; a graded row needs a 'score' from 0 to 1*"),
    ({"score": -5}, "has score -5; a graded row needs a 'score' from 0 to 1*"),
    ({"score": -5, "error": "boom"}, "has score -5; a score is from 0 to 1"),
    ({"score": 10**400}, "has score 10000000000000000000... (401 characters); a graded*"),
    ({"score": "high"}, "has score \"high\"; a graded row needs a 'score' from 0 to 1*"),
]


@pytest.mark.parametrize(("fields", "problem"), BAD_ROWS)
def test_a_bad_row_is_an_error_at_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fields: dict[str, Any], problem: str
) -> None:
    """``report`` used to show a traceback, or 1e308 as 309 digits and -5 as a mean score."""
    good = {"eval_id": "fine", "score": 1, "candidate_answer": "ok"}
    bad = write_rows(tmp_path / "bad.jsonl", [good, {**good, "eval_id": "bad", **fields}])
    assert main(["report", str(bad), "-o", str(tmp_path / "bad.html")]) == 2
    said = capsys.readouterr().err.splitlines()
    pattern = f"error: {bad}:2: case 'bad'*{problem}".replace("[", "[[]")
    assert len(said) == 1 and fnmatch(said[0], pattern), said
    assert not (tmp_path / "bad.html").exists()


def test_a_results_file_in_camel_case_is_a_results_file(mixed: pytest.Pytester) -> None:
    """It may be written over as ``--agentv-results`` (it was refused as holding something
    else), as every reader takes its rows."""
    write_rows(mixed.path / "old.jsonl", [row for row in MIXED if "testId" in row])
    mixed.runpytest("--agentv-results=old.jsonl", "-k", "camel").assert_outcomes(passed=2)
    assert set(by_id(mixed.path / "old.jsonl")) == {"camel-ok", "camel-error"}


def test_a_bad_row_is_the_same_error_in_a_baseline(mixed: pytest.Pytester) -> None:
    write_rows(mixed.path / "bad.jsonl", [*MIXED, {"testId": "x", "score": 7}])
    result = mixed.runpytest("--agentv-baseline=bad.jsonl")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"ERROR: --agentv-baseline: bad.jsonl:{len(MIXED) + 1}: case 'x' has score 7; a graded*"]
    )


#: Logs which process opens the baseline, for as long as the session of each process lasts:
#: ``open`` and ``io.open`` (which ``Path.open`` and its readers call) count the baseline's
#: opens, and are given back at the end, so that the session can run inside the test's process.
COUNT_OPENS = """
import builtins, io, os

LOG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "opened.log")
_open = io.open


def _counted(file, *args, **kwargs):
    if str(file).endswith("base.jsonl"):
        with _open(LOG, "a") as log:
            log.write(os.environ.get("PYTEST_XDIST_WORKER", "controller") + "\\n")
    return _open(file, *args, **kwargs)


def pytest_configure(config):
    io.open = builtins.open = _counted


def pytest_unconfigure(config):
    io.open = builtins.open = _open
"""


def compared_with_base(
    mixed: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, *args: str
) -> pytest.RunResult:
    """A run with the mixed rows as its baseline (``base.jsonl``) and its results in ``now``;
    the processes that opened the baseline are logged."""
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)  # this test's own worker's
    write_rows(mixed.path / "base.jsonl", MIXED)
    write(mixed, "conftest.py", COUNT_OPENS)
    return mixed.runpytest(*args, "--agentv-baseline=base.jsonl", "--agentv-results=now")


def assert_read_once(mixed: pytest.Pytester, result: pytest.RunResult) -> None:
    """Only the controller read the baseline, and each case compared with its row."""
    assert outcome_counts(result, "mixed.eval.yaml") == {"passed": len(MIXED)}
    assert (mixed.path / "opened.log").read_text().splitlines() == ["controller"]
    now = {row["eval_id"]: row for row in rows_in(mixed.path / "now", "mixed.eval.yaml")}
    assert_compared_with_mixed(now)


def test_the_baseline_is_read_once_per_run(
    mixed: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert_read_once(mixed, compared_with_base(mixed, monkeypatch))


def test_under_xdist_the_baseline_is_read_once_and_calibration_holds(
    mixed: pytest.Pytester,
    judged: pytest.Pytester,
    fake_llm: FakeOpenAI,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One pytest-xdist session for two features, in files of their own. The workers get the
    controller's reading of the baseline (every process read it) and compare with every kind of
    row as a serial run does. A judge that fails calibration stops the judged cases of every
    worker (serially: tests/test_calibration.py)."""
    fake_llm.responder = lenient
    write(judged, ".agentv/calibration.yaml", CANARIES)
    write(judged, "s.eval.yaml", SUITE)
    result = compared_with_base(mixed, monkeypatch, "-n", "2")
    assert_read_once(mixed, result)
    assert_failed_calibration(result, fake_llm, "s.eval.yaml")


def test_rows_read_by_one_rule() -> None:
    from pytest_agentv.resultrows import read_row

    def read(**row: Any) -> tuple[str, str | None, float | None]:
        found = read_row({"eval_id": "a", **row}, 1, scored=False)
        return found.status, found.reason, found.score

    assert read(score=0.7) == ("graded", None, 0.7)
    assert read(score=0, error="boom") == ("error", "boom", None)
    assert read(score=1, status="skipped") == ("skipped", "status skipped", None)
    assert read(score=1, execution_status="timeout") == (
        "error",
        'execution_status "timeout"',
        None,
    )
    assert read(score=0.3, execution_status="quality_failure") == ("graded", None, 0.3)
    assert read(score=0, executionStatus="execution_error", failureReasonCode=(
        "judge_not_configured"
    ))[0] == "skipped"  # fmt: skip
    assert read() == ("graded", None, None)  # recorded answers need no score
    for score in (True, 7, -0.5, 10**400, "0.5"):
        with pytest.raises(ValueError, match="a graded row needs a 'score' from 0 to 1"):
            read(score=score)
    # The snake_case key wins over its alias, as in v4's reader.
    found = read_row({"testId": "b", "test_id": "a", "score": 1}, 1, scored=True)
    assert found.case_id == "a"
    aliased = read_row(
        {
            "test_id": "a",
            "score": 1,
            "trace": {"toolCalls": {"search": 1}, "messages": [{"toolCalls": [{"durationMs": 3}]}]},
            "output": [{"role": "assistant", "toolCalls": [{"startTime": "t"}]}],
        },
        1,
        scored=True,
    ).data
    assert aliased["trace"] == {"tool_calls": {"search": 1}, "messages": [
        {"tool_calls": [{"duration_ms": 3}]}
    ]}  # fmt: skip
    assert aliased["output"] == [{"role": "assistant", "tool_calls": [{"start_time": "t"}]}]


#: A row of ours and one of v4's with every field a report shows, for the fuzz test to break.
FULL_ROWS: list[dict[str, Any]] = [
    {
        "eval_id": "a", "dataset": "d", "file": "f.eval.yaml", "line": 3, "target": "t",
        "status": "graded", "timestamp": "2026-01-01T00:00:00Z", "score": 0.9, "verdict": "pass",
        "gate_failed": False, "hits": ["h"], "misses": ["m"], "reasoning": "r",
        "candidate_answer": "a", "question": "q", "expected_outcome": "e", "error": None,
        "evaluator_results": [
            {"name": "n", "type": "llm_judge", "score": 0.9, "weight": 1.0, "verdict": "pass",
             "hits": ["h"], "misses": [], "reasoning": "r", "gate_failed": False,
             "details": {"rubric": [{"id": "r1", "outcome": "o", "satisfied": True,
                                     "required": True, "raw_score": 7}], "more": 1},
             "evaluator_results": [{"name": "m", "type": "contains", "score": 1.0}]},
        ],
        "trace_summary": {"tool_calls_by_name": {"s": 1}, "token_usage": {"input": 3},
                          "cost_usd": 0.1, "duration_ms": 3},
        "usage": {"calls": 1, "reused": 0, "tokens": 10, "cost_usd": 0.01, "unpriced_calls": 0},
        "trials": [{"attempt": 1, "score": 0.9, "verdict": "pass", "cost_usd": 0.0}],
        "aggregation": {"strategy": "adaptive", "trials": 1, "planned": 3, "passed": 1,
                        "pass_rate": 1.0, "ci_low": 0.2, "ci_high": 1.0, "confidence": 0.95,
                        "interval": "wilson", "stopped": "settled", "cost_usd": 0.0,
                        "shown_attempt": 1, "mean": 0.9, "threshold": 0.5, "settled": True},
        "duration_ms": 12.0, "tool_calls": [{"tool": "s", "input": {"q": 1}, "duration_ms": 3}],
        "turns": [{"turn": 1, "input": "hi", "answer": "yo", "score": 1.0, "verdict": "pass",
                   "assertions": [{"text": "t", "passed": True, "evidence": "e"}]}],
        "assertions": [{"text": "t", "passed": False, "evidence": "e"}],
        "baseline_score": 0.5, "delta": 0.4,
    },
    {
        "test_id": "b", "suite": "s", "score": 0.4, "target": "v4", "output": "I could not.",
        "input": [{"role": "user", "content": [{"type": "text", "text": "Where?"}]}],
        "scores": [{"name": "g", "type": "llm-grader", "score": 0.4, "verdict": "fail",
                    "assertions": [{"text": "Names", "passed": False, "evidence": "no"}]}],
        "tokenUsage": {"input": 100, "output": 20}, "costUsd": 0.01, "durationMs": 2500,
        "executionStatus": "quality_failure", "execution_error": {"message": "m"},
        "aggregation": {"strategy": "mean", "mean": 0.4, "min": 0.4, "max": 0.4},
        "trace": {"toolCalls": {"search": 1}, "tokenUsage": {"input": 1}, "costUsd": 0.1,
                  "messages": [{"role": "assistant", "toolCalls": [{"tool": "search"}]}]},
    },
]  # fmt: skip
JSON = st.recursive(
    st.none() | st.booleans() | st.sampled_from([0, 2, -5, 0.5, 1e308]) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=4,
)


def places(value: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[str | int, ...]]:
    """Every place in a row, but its id."""
    if path and path[0] not in ("eval_id", "test_id"):
        yield path
    if isinstance(value, (dict, list)):
        for key, item in value.items() if isinstance(value, dict) else enumerate(value):
            yield from places(item, (*path, key))


@settings(max_examples=examples(1000), deadline=None, suppress_health_check=[*HealthCheck])
@given(data=st.data())
def test_any_row_is_shown_or_refused_at_its_line(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    """Whatever a field of a row holds, the report is written or the row is named: never a
    traceback."""
    row = copy.deepcopy(data.draw(st.sampled_from(FULL_ROWS)))
    for _ in range(data.draw(st.integers(1, 3))):
        *path, last = data.draw(st.sampled_from(list(places(row))))
        parent = row
        for part in path:
            parent = parent[part]
        if isinstance(parent, dict) and data.draw(st.booleans()):
            del parent[last]
        else:
            parent[last] = data.draw(JSON)
    folder = tmp_path_factory.mktemp("rows")
    results = write_rows(folder / "r.jsonl", [row])
    for output in (["-o", str(folder / "r.html")], ["--markdown", str(folder / "r.md")]):
        assert main(["report", str(results), *output]) in (0, 1, 2)
