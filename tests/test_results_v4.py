"""``--agentv-results-format agentv-v4``: results rows as AgentV v4.42.4 writes them, read back by
``--agentv-answers``, ``--agentv-baseline`` and ``python -m pytest_agentv report``.

``V4_REQUIRED`` is AgentV v4.42.4's row contract: the fields its ``EvaluationResult``,
``GraderResult``, ``AssertionEntry``, ``Trace`` and ``ExecutionError`` declare required
(``packages/core/src/evaluation/types.ts``, ``trace.ts``), with their types, and the numeric
``score`` its reader (``result-row-schema.ts``) refuses a row without.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest

from pytest_agentv.answers import tool_calls
from pytest_agentv.reports.agentv_v4.rows import v4_row
from pytest_agentv.reports.agentv_v4.run_folder import RunFolder
from pytest_agentv.results import AggregationRow, CaseResult, Grade, TrialRow
from tests.conftest import INI
from tests.helpers import run_report, write

#: AgentV v4.42.4's ``GRADER_KIND_VALUES``.
V4_KINDS = {
    *("code-grader", "llm-grader", "rubric", "composite", "tool-trajectory", "field-accuracy"),
    *("latency", "cost", "token-usage", "execution-metrics", "skill-trigger", "contains"),
    *("contains-any", "contains-all", "icontains", "icontains-any", "icontains-all"),
    *("starts-with", "ends-with", "regex", "is-json", "equals", "rubrics", "inline-assert"),
}
V4_STAGES = {"setup", "repo_setup", "agent", "evaluator", "teardown"}


def number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check_assertion(entry: Any) -> None:
    assert isinstance(entry["text"], str) and isinstance(entry["passed"], bool)
    assert isinstance(entry.get("evidence", ""), str)


def check_grader(grader: dict[str, Any]) -> None:
    assert isinstance(grader["name"], str) and grader["type"] in V4_KINDS
    assert number(grader["score"]) and 0 <= grader["score"] <= 1
    assert number(grader.get("weight", 1)) and grader.get("verdict", "pass") in {
        "pass",
        "fail",
        "skip",
    }
    for entry in grader["assertions"]:
        check_assertion(entry)
    for member in grader.get("scores", []):
        check_grader(member)


def check_v4_row(row: dict[str, Any]) -> None:
    """The row holds every field AgentV v4.42.4 requires, with v4's types."""
    assert isinstance(row["timestamp"], str) and isinstance(row["test_id"], str)
    assert number(row["score"]) and isinstance(row["target"], str)
    assert isinstance(row["output"], str)
    for entry in row["assertions"]:
        check_assertion(entry)
    for grader in row.get("scores", []):
        check_grader(grader)
    trace = row["trace"]
    assert isinstance(trace["event_count"], int) and isinstance(trace["error_count"], int)
    assert all(isinstance(n, int) for n in trace["tool_calls"].values())
    assert all(isinstance(m["role"], str) for m in trace["messages"])
    assert all(isinstance(e["event_id"], str) for e in trace["events"])
    assert row["execution_status"] in {"ok", "quality_failure", "execution_error"}
    if row["execution_status"] == "execution_error":
        assert isinstance(row["error"], str) and row["failure_stage"] in V4_STAGES
        assert row["execution_error"] == {"message": row["error"], "stage": row["failure_stage"]}
        assert row["score"] == 0


SUITE = """
tests:
  - id: passes
    input: How long do refunds take?
    assertions:
      - {type: contains, value: "30 days"}
      - {type: icontains, value: PURCHASE}
  - id: borderline
    input: q
    assertions:
      - {type: contains, value: "30 days", weight: 7}
      - {type: contains, value: "never", weight: 3}
  - id: fails
    input: q
    assertions: [{type: contains, value: "never"}]
  - id: tools
    input: q
    execution: {target: tools}
    assertions:
      - {type: tool-trajectory, mode: any_order, minimums: {search: 1}}
      - type: composite
        name: both
        assertions:
          - {name: words, type: code-grader, command: [python, keywords.py], keywords: [days]}
          - {type: contains, value: days}
        aggregator: {type: weighted_average}
  - id: down
    input: q
    execution: {target: down}
    assertions: [{type: contains, value: x}]
  - id: no-judge
    input: q
    criteria: says how long
"""

TARGETS = """\
targets:
  - name: default
    provider: mock
    response: "Refunds are accepted within 30 days of purchase."
  - name: tools
    provider: mock
    response:
      output_messages:
        - role: assistant
          tool_calls: [{tool: search, input: {q: refunds}, duration_ms: 12}]
        - {role: assistant, content: "Within 30 days."}
      token_usage: {input: 10, output: 5}
      cost_usd: 0.25
  - name: down
    provider: cli
    command: python -c "raise SystemExit(3)"
"""


@pytest.fixture
def suite(project: pytest.Pytester) -> pytest.Pytester:
    write(project, "refunds.eval.yaml", SUITE)
    (project.path / ".agentv" / "targets.yaml").write_text(TARGETS)
    return project


def v4_rows(pytester: pytest.Pytester, path: str) -> dict[str, dict[str, Any]]:
    lines = (pytester.path / path).read_text().splitlines()
    return {row["test_id"]: row for row in map(json.loads, lines)}


def run_v4(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest(
        "--agentv-results=run/index.jsonl", "--agentv-results-format=agentv-v4", *args
    )


#: The outcomes of a run of ``SUITE``.
SUITE_OUTCOMES = {"passed": 2, "failed": 1, "xfailed": 1, "skipped": 1, "errors": 1}


@pytest.fixture(scope="module")
def first_v4_run() -> dict[str, Any]:
    """The outcomes and a copy of the run folder of the module's one run of ``SUITE`` (in each
    pytest-xdist worker that runs a test needing it)."""
    return {}


@pytest.fixture
def v4_run(
    suite: pytest.Pytester, first_v4_run: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, int]:
    """``suite`` with the run folder ``run/`` of ``run_v4`` (its paths are relative to it), and
    the run's outcomes: the first test that needs it runs it, the others read a copy."""
    if not first_v4_run:
        first_v4_run["outcomes"] = run_v4(suite).parseoutcomes()
        first_v4_run["folder"] = tmp_path_factory.mktemp("v4-run") / "run"
        shutil.copytree(suite.path / "run", first_v4_run["folder"])
    else:
        shutil.copytree(first_v4_run["folder"], suite.path / "run")
    outcomes: dict[str, int] = first_v4_run["outcomes"]
    return outcomes


def test_v4_rows_hold_what_agentv_v4_requires(
    suite: pytest.Pytester, v4_run: dict[str, int]
) -> None:
    assert v4_run == SUITE_OUTCOMES
    rows = v4_rows(suite, "run/index.jsonl")
    assert list(rows) == ["passes", "borderline", "fails", "tools", "down", "no-judge"]
    for row in rows.values():
        check_v4_row(row)
        assert "eval_id" not in row and "verdict" not in row  # v4's rows, not ours
    passes = rows["passes"]
    assert (passes["suite"], passes["score"], passes["target"]) == ("refunds", 1.0, "default")
    assert passes["execution_status"] == "ok"
    assert passes["input"] == [{"role": "user", "content": "How long do refunds take?"}]
    assert passes["output"] == "Refunds are accepted within 30 days of purchase."
    assert passes["assertions"] == [
        {"text": 'Output contains "30 days"', "passed": True},
        {"text": 'Output contains "PURCHASE" (case-insensitive)', "passed": True},
    ]
    assert [(g["name"], g["type"], g["weight"], g["verdict"]) for g in passes["scores"]] == [
        ("contains-30 days", "contains", 1.0, "pass"),
        ("icontains-PURCHASE", "icontains", 1.0, "pass"),
    ]
    assert [m["role"] for m in passes["trace"]["messages"]] == ["user", "assistant"]
    assert passes["trace"]["events"][-1]["type"] == "final_response"
    # v4 has no borderline: below its 0.8 bar is a quality failure, each grader pass or fail.
    borderline = rows["borderline"]
    assert (borderline["score"], borderline["execution_status"]) == (0.7, "quality_failure")
    assert [g["verdict"] for g in borderline["scores"]] == ["pass", "fail"]
    assert rows["fails"]["execution_status"] == "quality_failure"
    tools = rows["tools"]
    assert tools["output"] == "Within 30 days."
    assert (tools["token_usage"], tools["cost_usd"]) == ({"input": 10, "output": 5}, 0.25)
    trace = tools["trace"]
    assert (trace["tool_calls"], trace["event_count"], trace["llm_call_count"]) == (
        {"search": 1},
        1,
        2,
    )
    assert trace["messages"][1]["tool_calls"] == [
        {"tool": "search", "input": {"q": "refunds"}, "duration_ms": 12.0}
    ]
    trajectory, both = tools["scores"]
    assert trajectory["type"] == "tool-trajectory"
    assert (both["type"], [(m["name"], m["type"]) for m in both["scores"]]) == (
        "composite",
        [("words", "code-grader"), ("contains-days", "contains")],
    )
    assert both["scores"][0]["details"] == {"reasoning": "1 of 1 keywords"}
    assert both["scores"][0]["assertions"] == [{"text": "mentions days", "passed": True}]


def test_a_case_that_was_not_graded_is_a_v4_execution_error(suite: pytest.Pytester) -> None:
    run_v4(suite, "-k", "down or judge")
    rows = v4_rows(suite, "run/index.jsonl")
    down, skipped = rows["down"], rows["no-judge"]
    reason = down["error"]
    assert reason.startswith("cli target 'down' exited with code 3")
    assert (down["score"], down["output"], down["scores"]) == (0, "", [])
    assert (down["failure_stage"], down["failure_reason_code"]) == ("agent", "provider_error")
    assert down["assertions"] == [{"text": f"Error: {reason}", "passed": False}]
    assert down["trace"]["events"][-1] == {
        "event_id": "error",
        "ordinal": 1,
        "type": "error",
        "error": {"message": reason},
    }
    assert skipped["execution_status"] == "execution_error"
    assert skipped["error"].startswith("no LLM judge is configured")
    assert (skipped["failure_stage"], skipped["failure_reason_code"]) == (
        "evaluator",
        "judge_not_configured",
    )


@pytest.mark.parametrize("where", ["ini", "env"])
def test_the_format_is_an_option_like_every_other(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    if where == "ini":
        suite.makeini(INI + "agentv_results_format = agentv-v4\n")
    else:
        monkeypatch.setenv("AGENTV_RESULTS_FORMAT", "agentv-v4")
    suite.runpytest("-k", "passes", "--agentv-results=run.jsonl")
    assert v4_rows(suite, "run.jsonl")["passes"]["execution_status"] == "ok"


def test_an_unknown_format_is_a_usage_error(suite: pytest.Pytester) -> None:
    result = suite.runpytest("--agentv-results-format=agentv-v5")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--agentv-results-format*choose one of: pytest-agentv, agentv-v4"]
    )


@pytest.mark.usefixtures("v4_run")
def test_v4_rows_are_recorded_answers_and_a_baseline(suite: pytest.Pytester) -> None:
    """The answers a v4 file keeps (``output``, the tool calls in ``trace``, the usage and cost
    beside them) grade as they did; its not-graded rows are no answer and no baseline."""
    # No target can answer now: every answer comes from the file.
    (suite.path / ".agentv" / "targets.yaml").write_text(
        TARGETS.replace("provider: mock", "provider: cli\n    command: python -c 'exit(5)'")
    )
    result = suite.runpytest(
        "--agentv-answers=run/index.jsonl",
        "--agentv-baseline=run/index.jsonl",
        "--agentv-results=again.jsonl",
    )
    result.assert_outcomes(passed=2, failed=1, xfailed=1, skipped=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "agentv baseline run/index.jsonl: 0 improved, 0 regressed, 4 unchanged *, 0 new, "
            "0 gone, 2 not compared (not graded in one of the runs)",
        ]
    )
    lines = (suite.path / "again.jsonl").read_text().splitlines()
    again = {row["eval_id"]: row for row in map(json.loads, lines)}
    assert again["tools"]["score"] == 1.0
    assert again["tools"]["trace_summary"]["tool_calls_by_name"] == {"search": 1}
    assert again["tools"]["trace_summary"]["cost_usd"] == 0.25
    assert again["down"]["error"] == (
        "the recorded answer for 'down' in run/index.jsonl (--agentv-answers) is not an answer: "
        + v4_rows(suite, "run/index.jsonl")["down"]["error"]
    )


def answered_by(project: pytest.Pytester, rows: list[dict[str, Any]]) -> pytest.RunResult:
    """A run of the project's two one-case files (a, b) answered by ``rows``: one passes, one
    is not graded."""
    write(project, "old.jsonl", "".join(json.dumps(row) + "\n" for row in rows))
    result = project.runpytest("--agentv-answers=old.jsonl")
    result.assert_outcomes(passed=1, errors=1)
    return result


def test_a_v4_row_from_before_v4_42_keeps_its_messages_as_output(
    project: pytest.Pytester,
) -> None:
    entry = "assertions: [{type: contains, value: 'found it'}]"
    write(project, "a.eval.yaml", f"tests:\n  - {{id: a, input: q, {entry}}}\n")
    write(project, "b.eval.yaml", f"tests:\n  - {{id: b, input: q, {entry}}}\n")
    rows = [
        {
            "test_id": "a",
            "score": 1,
            "execution_status": "ok",
            "output": [{"role": "assistant", "content": "I found it."}],
        },
        {"test_id": "b", "score": 1, "execution_status": "ok"},
    ]
    result = answered_by(project, rows)
    result.stdout.fnmatch_lines(
        [
            "*eval 'b' was not graded: the recorded row for 'b' in old.jsonl (--agentv-answers) "
            "has no 'candidate_answer', 'output_messages' or 'output'"
        ]
    )


def test_a_v4_run_folder_index_names_the_file_holding_each_answer(
    project: pytest.Pytester,
) -> None:
    """AgentV v4.42's run folder ``index.jsonl`` carries no ``output``: each row names its
    ``outputs/answer.md`` (from the index's folder), which is read, and never outside it."""
    entry = "assertions: [{type: contains, value: 'found it'}]"
    for case in "abc":
        write(project, f"{case}.eval.yaml", f"tests:\n  - {{id: {case}, input: q, {entry}}}\n")
    write(project, "run/s/a/outputs/answer.md", "I found it.")
    write(project, "secret.md", "found it")
    rows = [
        {
            "test_id": "a",
            "score": 1,
            "execution_status": "ok",
            "answer_path": "s/a/outputs/answer.md",
        },
        {
            "test_id": "b",
            "score": 1,
            "execution_status": "ok",
            "answer_path": "s/b/outputs/answer.md",
        },
        {"test_id": "c", "score": 1, "execution_status": "ok", "answer_path": "../secret.md"},
    ]
    write(project, "run/index.jsonl", "".join(json.dumps(row) + "\n" for row in rows))
    result = project.runpytest("--agentv-answers=run/index.jsonl")
    result.assert_outcomes(passed=1, errors=2)
    result.stdout.fnmatch_lines_random(
        [
            "*eval 'b' was not graded: the recorded row for 'b' in run/index.jsonl "
            "(--agentv-answers) names answer_path 's/b/outputs/answer.md', which cannot be read*",
            "*eval 'c' was not graded: * names answer_path '../secret.md', outside its folder",
        ]
    )


@pytest.mark.parametrize(
    "asked",
    [
        {"question": "Refund window?"},
        {"input": [{"role": "user", "content": "Refund window?"}]},
    ],
    ids=["ours", "v4"],
)
def test_a_recorded_answer_to_another_question_is_not_graded(
    project: pytest.Pytester, asked: dict[str, Any]
) -> None:
    """A recorded answer was paired with its case by id alone, whatever it was asked."""
    entry = "assertions: [{type: contains, value: 'found it'}]"
    write(project, "a.eval.yaml", f"tests:\n  - {{id: a, input: q, {entry}}}\n")
    write(project, "b.eval.yaml", f"tests:\n  - {{id: b, input: 'Refund window?', {entry}}}\n")
    rows = [
        {"test_id": case, "score": 1, "execution_status": "ok", "output": "found it", **asked}
        for case in ("a", "b")
    ]
    result = answered_by(project, rows)
    result.stdout.fnmatch_lines(
        [
            "*eval 'a' was not graded: the recorded answer for 'a' in old.jsonl (--agentv-answers)"
            " was given to another input: it was asked 'Refund window?', the case now asks 'q'"
        ]
    )


@pytest.mark.usefixtures("v4_run")
def test_the_report_reads_our_v4_file(
    suite: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run_report(capsys, "run/index.jsonl", "--markdown", "-")
    assert result.ret == 1  # as the run ended
    result.stdout.fnmatch_lines(
        [
            "6 evaluations: 2 pass, 1 borderline, 1 fail, 1 not graded, 1 skipped; mean score 0.68",
            '| fails | 0.00 | contains-never (contains) 0.00 | Output does not contain "never" |',
            "| down | cli target 'down' exited with code 3*",
        ]
    )


def test_trials_keep_v4_s_aggregation_shape() -> None:
    trials = (
        TrialRow(attempt=0, score=0.7, verdict="borderline", gate_failed=False, cost_usd=0.5),
        TrialRow(attempt=1, score=0.9, verdict="pass", gate_failed=False, cost_usd=0.5),
    )
    aggregation = AggregationRow(
        strategy="pass_at_k",
        trials=2,
        planned=3,
        passed=1,
        pass_rate=0.5,
        ci_low=0.1,
        ci_high=0.9,
        confidence=0.95,
        interval="wilson",
        stopped="passed",
        cost_usd=1.0,
        shown_attempt=1,
    )
    grade = Grade(score=0.9, verdict="pass")
    row = CaseResult("graded", "a", grade=grade, trials=trials, aggregation=aggregation).row()
    line = v4_row(row)
    check_v4_row(line)
    assert line["trials"] == [
        {"attempt": 0, "score": 0.7, "verdict": "fail", "cost_usd": 0.5},
        {"attempt": 1, "score": 0.9, "verdict": "pass", "cost_usd": 0.5},
    ]
    assert line["aggregation"] == {
        "strategy": "pass_at_k",
        "passed_attempts": 1,
        "total_attempts": 2,
    }


def test_a_failed_tool_call_in_v4_s_words_is_an_error() -> None:
    messages = [{"role": "assistant", "tool_calls": [{"tool": "search", "status": "error"}]}]
    assert [call.error for call in tool_calls(messages)] == [True]


def test_v4_rows_are_matched_by_suite_then_by_a_unique_test_id(project: pytest.Pytester) -> None:
    """Two eval files (datasets) with the same case id each get their own recorded answer: a v4
    row's ``suite`` is its dataset. A row of a suite this run does not have (AgentV named it
    otherwise) still answers the one case with its id."""
    case = "tests:\n  - {id: same, input: q, assertions: [{type: contains, value: '30 days'}]}\n"
    write(project, "a.eval.yaml", case)
    write(project, "b.eval.yaml", "execution: {target: wrong}\n" + case)
    run_v4(project).assert_outcomes(passed=1, failed=1)
    result = project.runpytest("--agentv-answers=run/index.jsonl", "--agentv-target=none", "-v")
    result.stdout.fnmatch_lines(["a.eval.yaml::same PASSED*", "b.eval.yaml::same FAILED*"])
    rows = v4_rows(project, "run/index.jsonl")  # the last row of each id: b's
    write(project, "other.jsonl", json.dumps({**rows["same"], "suite": "renamed"}) + "\n")
    (project.path / "b.eval.yaml").unlink()
    result = project.runpytest("--agentv-answers=other.jsonl", "--agentv-target=none")
    result.assert_outcomes(failed=1)


def test_a_v4_file_s_name_is_its_suite(project: pytest.Pytester) -> None:
    """AgentV v4 names a file's suite after its ``name`` (else the file): our rows and v4 rows
    say the same, so a results file AgentV wrote matches case by case, also when two suites
    have a case of the same id. Rows used to carry the file's name."""
    case = "  - {id: same, input: q, assertions: [{type: contains, value: '30 days'}]}\n"
    write(project, "a.eval.yaml", "name: billing\ntests:\n" + case)
    write(project, "b.eval.yaml", "name: refunds\nexecution: {target: wrong}\ntests:\n" + case)
    run_v4(project).assert_outcomes(passed=1, failed=1)
    lines = (project.path / "run/index.jsonl").read_text().splitlines()
    suites = [json.loads(line)["suite"] for line in lines]
    assert sorted(suites) == ["billing", "refunds"]
    result = project.runpytest("--agentv-answers=run/index.jsonl", "--agentv-target=none", "-v")
    result.stdout.fnmatch_lines(["a.eval.yaml::same PASSED*", "b.eval.yaml::same FAILED*"])


def test_a_v4_run_folder_gets_v4_s_side_files(
    suite: pytest.Pytester, v4_run: dict[str, int]
) -> None:
    """Beside ``index.jsonl``: each test's ``grading.json``, ``timing.json``, ``input.md`` and
    answer, named in its row (what ``agentv results validate`` looks for), and the run's
    ``timing.json`` and ``benchmark.json``, as v4's ``run-artifacts.ts`` makes them."""
    assert v4_run == SUITE_OUTCOMES
    folder = suite.path / "run"
    rows = v4_rows(suite, "run/index.jsonl")
    for test_id, row in rows.items():
        assert row["artifact_dir"] == f"refunds/{test_id}"
        grading = json.loads((folder / row["grading_path"]).read_text())
        assert grading["assertions"] == [
            {"text": a["text"], "passed": a["passed"], "evidence": a.get("evidence", "")}
            for a in row["assertions"]
        ]
        total = len(row["assertions"])
        assert grading["summary"]["total"] == total
        assert grading["summary"]["passed"] == sum(a["passed"] for a in row["assertions"])
        assert json.loads((folder / row["timing_path"]).read_text())["duration_ms"] == row.get(
            "duration_ms", 0
        )
        assert (folder / row["input_path"]).read_text() == f"@[user]:\n{row['input'][0]['content']}"
        if row["output"]:
            assert (folder / row["answer_path"]).read_text() == row["output"]
            assert (folder / row["response_path"]).read_text() == row["output"]
        else:
            assert "answer_path" not in row
    tools = json.loads((folder / rows["tools"]["grading_path"]).read_text())
    assert tools["execution_metrics"]["tool_calls"] == {"search": 1}
    assert [g["type"] for g in tools["graders"]] == ["tool-trajectory", "composite"]
    timing = json.loads((folder / rows["tools"]["timing_path"]).read_text())
    assert (timing["total_tokens"], timing["token_usage"]) == (
        15,
        {"input": 10, "output": 5, "reasoning": 0},
    )
    bench = json.loads((folder / "benchmark.json").read_text())
    assert bench["metadata"]["targets"] == ["default", "down", "tools", "unknown"]
    assert bench["metadata"]["tests_run"] == sorted(rows)
    assert bench["metadata"]["eval_file"] == "refunds.eval.yaml"
    assert bench["run_summary"]["tools"]["cost_usd"] == {"mean": 0.25, "stddev": 0}
    assert bench["run_summary"]["tools"]["tool_calls"] == {"mean": 1, "stddev": 0}
    assert bench["notes"] == [
        "2 test(s) had execution errors and are excluded from quality pass_rate"
    ]
    assert json.loads((folder / "timing.json").read_text())["total_tokens"] == 15


def test_side_files_only_beside_an_index_jsonl(suite: pytest.Pytester) -> None:
    """Any other results file may sit in a folder of the user's, which they must not fill."""
    suite.runpytest("--agentv-results=out/results.jsonl", "--agentv-results-format=agentv-v4")
    assert sorted(p.name for p in (suite.path / "out").iterdir()) == ["results.jsonl"]
    assert "grading_path" not in (suite.path / "out" / "results.jsonl").read_text()


#: AgentV v4.42.4's trace envelope (``trace-envelope.ts``, ``TraceEnvelopeWireSchema``, strict):
#: the keys an envelope, its ``eval`` and its spans may have, and those they must have.
ENVELOPE_KEYS = {"schema_version", "artifact_id", "created_at", "eval", "projection_identity"}
ENVELOPE_KEYS |= {"export_metadata", "replay", "trace", "source", "capture"}
ENVELOPE_KEYS |= {"conversion_warnings", "artifacts", "scores"}
ENVELOPE_REQUIRED = {"schema_version", "artifact_id", "created_at", "eval", "trace", "source"}
ENVELOPE_REQUIRED |= {"capture"}
EVAL_KEYS = {"eval_id", "eval_path", "suite", "test_id", "target", "source_target", "attempt"}
EVAL_KEYS |= {"variant", "run_id", "category", "experiment"}
SPAN_KEYS = {"trace_id", "span_id", "parent_span_id", "name", "kind", "start_time_unix_nano"}
SPAN_KEYS |= {"end_time_unix_nano", "status", "attributes", "events"}


def v4_hash(length: int, *parts: str) -> str:
    """v4's ``hashHex``: the parts joined with NUL, hashed with SHA-256."""
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:length]


def check_envelope(envelope: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The envelope has what v4's schema requires, and nothing it refuses; its spans by id."""
    assert ENVELOPE_REQUIRED <= set(envelope) <= ENVELOPE_KEYS
    assert envelope["schema_version"] == "agentv.trace.v1"
    assert isinstance(envelope["artifact_id"], str) and isinstance(envelope["created_at"], str)
    evaluation = envelope["eval"]
    assert {"test_id", "target"} <= set(evaluation) <= EVAL_KEYS
    trace = envelope["trace"]
    assert trace["format"] == "otlp_openinference_spans"
    spans = {span["span_id"]: span for span in trace["spans"]}
    for span in trace["spans"]:
        assert SPAN_KEYS - {"parent_span_id", "events"} <= set(span) <= SPAN_KEYS
        assert span["trace_id"] == trace["trace_id"] and isinstance(span["attributes"], dict)
        assert int(span["start_time_unix_nano"]) <= int(span["end_time_unix_nano"])
        assert span["status"]["code"] in {"UNSET", "OK", "ERROR"}
        root = span["span_id"] == trace["root_span_id"]
        assert span["parent_span_id"] is None if root else span["parent_span_id"] in spans
    assert envelope["capture"]["content"] in {"none", "metadata", "full"}
    assert envelope["capture"]["redaction_level"] in {"none", "partial", "full"}
    assert isinstance(envelope["source"]["kind"], str)
    return spans


def envelopes(folder: Path, rows: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        test_id: json.loads((folder / row["artifact_dir"] / "outputs" / "trace.json").read_text())
        for test_id, row in rows.items()
    }


def transcript_lines(folder: Path, row: dict[str, Any]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / row["transcript_path"]).read_text().splitlines()]


def operation(span: dict[str, Any]) -> Any:
    return span["attributes"]["gen_ai.operation.name"]


def test_each_v4_test_gets_its_trace_envelope(
    suite: pytest.Pytester, v4_run: dict[str, int]
) -> None:
    """``outputs/trace.json``, as v4's run writer makes it: the run's span carries the row's
    messages, a chat span each answer and a tool span each tool call; its ids are v4's hashes
    of the same values, its artifacts name files that are there, its scores are the row's, and
    it says that the content is full with secrets masked (every row is redacted)."""
    assert v4_run == SUITE_OUTCOMES
    folder = suite.path / "run"
    rows = v4_rows(suite, "run/index.jsonl")
    found = envelopes(folder, rows)
    for test_id, row in rows.items():
        envelope = found[test_id]
        spans = check_envelope(envelope)
        trace_id = v4_hash(
            32, "execution-trace", row["timestamp"], "refunds", test_id, row["target"], "run"
        )
        assert envelope["trace"]["trace_id"] == trace_id
        assert envelope["eval"] == {
            "eval_path": "refunds.eval.yaml",
            "suite": "refunds",
            "test_id": test_id,
            "target": row["target"],
            "source_target": row["target"],
            "attempt": 0,
            "variant": None,
            "run_id": "run",
        }
        for path in envelope["artifacts"].values():
            assert (folder / row["artifact_dir"] / path).is_file()
        for key in ("projection_identity", "export_metadata"):
            assert row[key] == envelope[key]
        root = spans[envelope["trace"]["root_span_id"]]
        events = [
            e["attributes"] for e in root["events"] if e["name"] == "agentv.transcript.message"
        ]
        assert [e["agentv.transcript.message"] for e in events] == row["trace"]["messages"]
        answers = [i for i, m in enumerate(row["trace"]["messages"]) if m["role"] == "assistant"]
        chats = [s for s in spans.values() if operation(s) == "chat"]
        assert [s["attributes"]["agentv.message.index"] for s in chats] == answers
        assert [s["name"] for s in envelope.get("scores", [])] == [g["name"] for g in row["scores"]]
        assert envelope["capture"]["content"] == "full"
        assert envelope["capture"]["redaction_level"] == "partial"
    # The artifact id hashes the score as JavaScript writes it: 1, not 1.0.
    passes = found["passes"]
    assert rows["passes"]["score"] == 1.0
    trace_id = passes["trace"]["trace_id"]
    assert passes["artifact_id"] == "execution-trace-" + v4_hash(
        20, trace_id, rows["passes"]["timestamp"], "1"
    )
    assert passes["artifacts"] == {
        "trace_path": "outputs/trace.json",
        "answer_path": "outputs/answer.md",
        "response_path": "outputs/response.md",
        "transcript_path": "outputs/transcript.jsonl",
    }
    tools = found["tools"]
    (call,) = [s for s in tools["trace"]["spans"] if operation(s) == "execute_tool"]
    assert call["name"] == "execute_tool search"
    assert call["attributes"]["gen_ai.tool.call.arguments"] == {"q": "refunds"}
    spent = int(call["end_time_unix_nano"]) - int(call["start_time_unix_nano"])
    assert spent == 12_000_000  # the call's 12 ms, in nanoseconds
    # Our tool calls have no id: v4 makes one up, and says so.
    assert [w["code"] for w in tools["conversion_warnings"]] == ["missing_tool_call_id"]
    down = found["down"]
    root = down["trace"]["spans"][0]
    assert root["status"] == {"code": "ERROR", "message": rows["down"]["error"]}
    assert root["events"][-1]["attributes"] == {"exception.message": rows["down"]["error"]}
    assert "answer_path" not in down["artifacts"]


@pytest.mark.usefixtures("v4_run")
def test_a_v4_transcript_is_projected_from_the_trace_envelope(suite: pytest.Pytester) -> None:
    """``outputs/transcript.jsonl``: a line per message, its tool calls completed from their
    spans, each line pointing at its span in the envelope; the row names it. v4's ``inspect``
    and dashboard read it to show the tool calls a row's answer came with."""
    folder = suite.path / "run"
    rows = v4_rows(suite, "run/index.jsonl")
    for row in rows.values():
        transcript = folder / row["artifact_dir"] / "outputs" / "transcript.jsonl"
        assert row["transcript_path"] == transcript.relative_to(folder).as_posix()
        assert transcript.is_file()
    envelope = envelopes(folder, rows)["tools"]
    spans = {span["span_id"]: span for span in envelope["trace"]["spans"]}
    lines = transcript_lines(folder, rows["tools"])
    assert [(line["message_index"], line["role"], line.get("content")) for line in lines] == [
        (0, "user", "q"),
        (1, "assistant", None),
        (2, "assistant", "Within 30 days."),
    ]
    for line in lines:
        assert line["schema_version"] == "agentv.transcript.v1"
        assert (line["test_id"], line["target"]) == ("tools", "tools")
        assert line["transcript_token_usage"] == {"input": 10, "output": 5}
        assert line["transcript_cost_usd"] == 0.25
        assert line["capture"] == {
            "content": "full",
            "redaction_level": "partial",
            "redacted_fields": [],
        }
        assert line["source"]["session_id"] == "run" and line["source"]["kind"] == "agentv_run"
        assert line["trace"]["artifact_id"] == envelope["artifact_id"]
        span = spans[line["trace"]["span_id"]]
        if line["role"] == "user":
            assert span["span_id"] == envelope["trace"]["root_span_id"]
        else:
            assert operation(span) == "chat"
            assert span["attributes"]["agentv.message.index"] == line["message_index"]
    (call,) = lines[1]["tool_calls"]
    span = spans[call.pop("trace")["span_id"]]
    assert operation(span) == "execute_tool"
    assert call.pop("start_time") < call.pop("end_time")
    assert call == {
        "tool": "search",
        "input": {"q": "refunds"},
        "id": span["attributes"]["gen_ai.tool.call.id"],
        "status": "ok",
        "duration_ms": 12.0,
    }


CONVERSATION = """\
tests:
  - id: tutor
    mode: conversation
    input:
      - {role: system, content: You are a math tutor.}
    turns:
      - input: What is 15% of 200?
        assertions: [{type: contains, value: "30"}]
      - input: Now double it.
        assertions: [{type: contains, value: "60"}]
"""


def test_a_conversation_s_transcript_has_its_turns(project: pytest.Pytester) -> None:
    """A conversation's trace: what the user said and each reply, in turn order, a chat span
    per reply (its turn's index), the last one the answer."""
    targets = (
        "targets:\n  - {name: default, provider: mock, responses: [It is 30., Double is 60.]}\n"
    )
    write(project, ".agentv/targets.yaml", targets)
    write(project, "math.eval.yaml", CONVERSATION)
    run_v4(project).assert_outcomes(passed=1)
    folder = project.path / "run"
    row = v4_rows(project, "run/index.jsonl")["tutor"]
    envelope = json.loads((folder / row["artifact_dir"] / "outputs/trace.json").read_text())
    spans = check_envelope(envelope)
    lines = transcript_lines(folder, row)
    assert [(line["role"], line["content"]) for line in lines] == [
        ("user", "What is 15% of 200?"),
        ("assistant", "It is 30."),
        ("user", "Now double it."),
        ("assistant", "Double is 60."),
    ]
    assert [line["message_index"] for line in lines] == [0, 1, 2, 3]
    replies = [spans[line["trace"]["span_id"]] for line in lines if line["role"] == "assistant"]
    assert [span["attributes"]["agentv.turn_index"] for span in replies] == [0, 1]
    assert [span["attributes"]["gen_ai.output.messages"] for span in replies] == [
        "It is 30.",
        "Double is 60.",
    ]
    assert [operation(span) for span in spans.values()].count("chat") == 2


def test_no_transcript_for_a_row_without_messages(tmp_path: Path) -> None:
    """v4 writes a transcript, and names it in the row and the envelope, only for a result with
    an answer or messages; the envelope is written for every test. Without a suite nor an eval
    file, v4's projection identity warns that it is less portable."""
    line = v4_row(CaseResult("error", "quiet", error="no answer").row())
    assert (line["output"], line["trace"]["messages"]) == ("", [])
    paths = RunFolder(tmp_path / "run").add(line, None)
    outputs = tmp_path / "run" / "quiet" / "outputs"
    assert "transcript_path" not in paths and not (outputs / "transcript.jsonl").exists()
    envelope = json.loads((outputs / "trace.json").read_text())
    check_envelope(envelope)
    assert envelope["artifacts"] == {"trace_path": "outputs/trace.json"}
    assert [w["code"] for w in envelope["export_metadata"]["identity_warnings"]] == [
        "missing_suite_or_eval_path"
    ]


def test_a_v4_row_s_input_keeps_its_messages_roles(project: pytest.Pytester) -> None:
    """v4's ``input`` (``buildResultInput``): the case's messages with their roles when there
    is more than one user message; a single question stays one user message. A conversation
    whose shared input is a system prompt shows it as ``system``, not as what the user said."""
    (project.path / ".agentv" / "targets.yaml").write_text(
        "targets:\n  - name: default\n    provider: mock\n    response: Within 30 days.\n"
    )
    write(
        project,
        "inputs.eval.yaml",
        """
        tests:
          - id: plain
            input: How long do refunds take?
            assertions: [{type: contains, value: days}]
          - id: with-system
            input:
              - {role: system, content: You answer for the refunds desk.}
              - {role: user, content: How long do refunds take?}
            assertions: [{type: contains, value: days}]
          - id: talk
            mode: conversation
            input: [{role: system, content: Be brief.}]
            turns:
              - input: Hello
                assertions: [{type: contains, value: days}]
        """,
    )
    run_v4(project).assert_outcomes(passed=3)
    rows = v4_rows(project, "run/index.jsonl")
    assert rows["plain"]["input"] == [{"role": "user", "content": "How long do refunds take?"}]
    system = {"role": "system", "content": "You answer for the refunds desk."}
    asked = [system, {"role": "user", "content": "How long do refunds take?"}]
    assert rows["with-system"]["input"] == asked
    assert rows["with-system"]["trace"]["messages"][:2] == asked
    assert rows["talk"]["input"] == [{"role": "system", "content": "Be brief."}]


def test_every_artifact_folder_is_inside_the_run_folder_and_its_test_s_own(
    project: pytest.Pytester,
) -> None:
    """A dataset or id of ``..`` wrote grading.json, input.md and outputs/ outside the run
    folder and overwrote its parent's timing.json; ``a/b`` and ``a_b``, and the matrix pairs
    ``c[bad]`` and ``c--bad[good]``, shared one folder, one grading replacing the other."""
    (project.path / ".agentv" / "targets.yaml").write_text(
        "targets:\n"
        + "".join(f"  - {{name: {n}, provider: mock, response: {n}}}\n" for n in ("bad", "good"))
    )
    check = "assertions: [{type: contains, value: o}]"
    ids = ["..", ".", "a/b", "a_b"]
    write(
        project,
        "up.eval.yaml",
        "name: '..'\nexecution: {targets: [good]}\ntests:\n"
        + "".join(f"  - {{id: '{i}', input: q, {check}}}\n" for i in ids),
    )
    write(
        project,
        "m.eval.yaml",
        "execution: {targets: [bad, good]}\ntests:\n"
        + "".join(f"  - {{id: '{i}', input: q, {check}}}\n" for i in ("c", "c--bad")),
    )
    (project.path / "timing.json").write_text("mine")
    before = {p for p in project.path.rglob("*") if "run" not in p.parts}
    run_v4(project, "-p", "no:cacheprovider").assert_outcomes(passed=6, failed=2)
    after = {
        p for p in project.path.rglob("*") if "run" not in p.parts and "__pycache__" not in p.parts
    }
    assert after == before
    assert (project.path / "timing.json").read_text() == "mine"
    rows = [
        json.loads(line) for line in (project.path / "run/index.jsonl").read_text().splitlines()
    ]
    folders = [row["artifact_dir"] for row in rows]
    assert len(set(folders)) == len(rows) == 8
    run = (project.path / "run").resolve()
    for row in rows:
        folder = (run / row["artifact_dir"]).resolve()
        assert folder.is_relative_to(run) and folder != run
        trace = json.loads((folder / "outputs" / "trace.json").read_text())
        assert json.dumps(trace).count(row["test_id"]) > 0
