"""Code judges: the stdin payload, the stdout protocols, and every way a script can fail."""

from __future__ import annotations

import json
from fnmatch import fnmatch

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_agentv.evaluators.code_judge import parse_judge_output
from pytest_agentv.jsonlines import _read_deep
from tests.helpers import outcomes, recorded, still_running, write

PAYLOAD_DUMPER = """\
import json, sys
payload = json.load(sys.stdin)
with open("payload.json", "w") as f:
    json.dump(payload, f)
print(json.dumps({"score": 1}))
"""


def judge_case(script: str, extra: str = "") -> str:
    return f"""
evalcases:
  - id: judged
    input: Refund window?
    evaluators:
      - name: script
        type: code_judge
        script: {script}{extra}
"""


def judge_cases(scripts: dict[str, str]) -> str:
    """``judge_case`` for several cases, each named by its key, in one file (a session runs
    them all, and each is checked by its name)."""
    cases = "".join(
        f"  - id: {name}\n    input: Refund window?\n"
        f"    evaluators: [{{name: script, type: code_judge, script: {script}}}]\n"
        for name, script in scripts.items()
    )
    return f"evalcases:\n{cases}"


def by_case(result: pytest.RunResult) -> dict[str, str]:
    """Each case's outcome in an in-process run, by its id."""
    reprec = result.reprec  # type: ignore[attr-defined]
    return {nodeid.split("::")[-1]: outcome for nodeid, outcome in outcomes(reprec).items()}


def test_a_v4_file_sends_no_retired_reference_answer(project: pytest.Pytester) -> None:
    """AgentV v4's Python grader helper refuses a payload holding ``reference_answer`` (v4's
    example sdk-python scored 0 under pytest-agentv, 1 under AgentV): a v4 file's scripts get
    the expected answer as ``expected_output`` only."""
    write(project, "dump.py", PAYLOAD_DUMPER)
    write(
        project,
        "p.eval.yaml",
        """
        tests:
          - id: payload
            criteria: Mentions 30 days
            input: Refund window?
            expected_output: {days: 30}
            assertions:
              - name: dump
                type: code-grader
                command: [python, dump.py]
        """,
    )
    project.runpytest().assert_outcomes(passed=1)
    payload = json.loads((project.path / "payload.json").read_text())
    assert "reference_answer" not in payload
    assert payload["expected_output"] == [{"role": "assistant", "content": {"days": 30}}]
    assert payload["candidate_answer"] == payload["output"]


def test_payload_keys_and_user_config_as_written(project: pytest.Pytester) -> None:
    write(project, "dump.py", PAYLOAD_DUMPER)
    write(project, "notes.md", "see notes")
    write(
        project,
        "p.eval.yaml",
        """
        evalcases:
          - id: payload
            expected_outcome: Mentions 30 days
            input:
              - role: system
                content: Be brief.
              - role: user
                content:
                  - {type: text, value: Refund window?}
                  - {type: file, value: notes.md}
            expected_output: {days: 30}
            conversation_id: conv-1
            evaluators:
              - name: dump
                type: code_judge
                script: [python, dump.py]
                camelCaseKey: {innerKey: 1}
        """,
    )
    project.runpytest().assert_outcomes(passed=1)
    payload = json.loads((project.path / "payload.json").read_text())
    assert sorted(payload) == sorted(
        [
            "question",
            "expected_outcome",
            "expected_messages",
            "reference_answer",
            "candidate_answer",
            "output_messages",
            "input_messages",
            "input_files",
            "guideline_files",
            "trace_summary",
            "config",
            # AgentV v4's names, beside v2.5.8's
            "criteria",
            "expected_output",
            "output",
            "messages",
            "input",
            "metadata",
            "trace",
            "token_usage",
            "cost_usd",
            "duration_ms",
            "start_time",
            "end_time",
            "file_changes",
            "workspace_path",
        ]
    )
    assert payload["question"] == "Be brief.\n\nRefund window?"
    assert payload["expected_outcome"] == "Mentions 30 days"
    assert payload["expected_messages"] == [{"role": "assistant", "content": {"days": 30}}]
    assert payload["reference_answer"] == '{\n  "days": 30\n}'
    assert payload["candidate_answer"] == "Refunds are accepted within 30 days of purchase."
    assert payload["output_messages"] == [
        {"role": "assistant", "content": "Refunds are accepted within 30 days of purchase."}
    ]
    assert payload["input_messages"][1]["content"] == [
        {"type": "text", "value": "Refund window?"},
        {"type": "file", "value": "notes.md"},
    ]
    assert payload["input_files"] == [str(project.path / "notes.md")]
    assert payload["guideline_files"] == []
    # As AgentV: a text answer still has a trace summary, with no tool calls in it.
    assert payload["trace_summary"] == {
        "event_count": 0,
        "tool_names": [],
        "tool_calls_by_name": {},
        "tool_calls": {},  # AgentV v4's name
        "error_count": 0,
    }
    assert payload["config"] == {"camelCaseKey": {"innerKey": 1}}


@pytest.mark.parametrize(
    ("stdout", "score", "hits", "misses", "verdict"),
    [
        ('{"score": 0.9, "hits": ["a"], "misses": [], "reasoning": "ok"}', 0.9, ["a"], [], "pass"),
        ('{"score": 0.7}', 0.7, [], [], "borderline"),
        ('{"pass": true, "reason": "fine"}', 1.0, [], [], "pass"),
        ('{"pass": false, "score": 0.9}', 0.9, [], [], "fail"),
        (
            '{"checks": [{"text": "a", "pass": true}, {"id": "b", "pass": false, "reason": "no"}]}',
            0.5,
            ["a"],
            ["b: no"],
            "fail",
        ),
        (
            '{"score": 1, "assertions": [{"text": "t", "passed": true, "evidence": "e"}]}',
            1.0,
            ["t: e"],
            [],
            "pass",
        ),
    ],
    ids=["v2", "borderline", "pass-only", "pass-false-gates", "checks", "assertions"],
)
def test_stdout_protocols(
    stdout: str, score: float, hits: list[str], misses: list[str], verdict: str
) -> None:
    parsed = parse_judge_output(stdout.encode())
    assert (parsed.score, list(parsed.hits), list(parsed.misses), parsed.verdict) == (
        score,
        hits,
        misses,
        verdict,
    )


@pytest.mark.parametrize(
    ("stdout", "miss"),
    [
        (b"", "code judge printed nothing on stdout*"),
        (b"score: 1", "code judge output must be one JSON object*not valid JSON*"),
        (b"[1, 2]", "code judge output must be a JSON object, got an array"),
        (b'{"score": NaN}', "*it is not valid JSON (NaN is not valid JSON)*"),
        (b'{"score": Infinity}', "*it is not valid JSON (Infinity*"),
        (b'{"score": 1.7}', "code judge 'score' must be between 0 and 1 (got 1.7)"),
        (b'{"score": "0.8"}', "code judge 'score' must be a number between 0 and 1 (got '0.8')"),
        (b'{"score": true}', "code judge 'score' must be a number*"),
        (
            b'{"score": 1' + b"0" * 400 + b"}",
            "code judge 'score' must be between 0 and 1 (got 1000*...)",
        ),
        (b'{"score": 1, "hits": "all"}', "code judge 'hits' must be a list of strings"),
        (b'{"score": 1, "reasoning": 3}', "code judge 'reasoning' must be a string"),
        (b'{"hits": []}', "code judge output needs a 'score' (0 to 1), 'pass' or 'checks'"),
        (b"\xff\xfe{}", "code judge output is not UTF-8 text"),
    ],
    ids=[
        "empty",
        "not-json",
        "array",
        "nan",
        "infinity",
        "out-of-range",
        "string-score",
        "bool-score",
        "400-digit-score",
        "hits-type",
        "reasoning-type",
        "no-score",
        "not-utf8",
    ],
)
def test_stdout_outside_the_contract_is_not_graded(stdout: bytes, miss: str) -> None:
    parsed = parse_judge_output(stdout)
    assert parsed.misses == (parsed.error,)
    assert fnmatch(parsed.misses[0], miss), parsed.misses


@pytest.mark.parametrize(
    "stdout",
    [b'{"score": 0, "score": 1}', b'{"score": 1, "details": {"a": 1, "a": 2}}'],
    ids=["score", "nested"],
)
def test_output_that_gives_a_key_twice_is_not_graded(stdout: bytes) -> None:
    parsed = parse_judge_output(stdout)
    assert parsed.error is not None
    assert parsed.error.startswith("code judge output is outside its contract: duplicate key")
    assert parsed.misses == (parsed.error,)


def test_a_judge_that_gives_a_key_twice_leaves_the_case_not_graded(
    project: pytest.Pytester,
) -> None:
    write(project, "twice.py", 'print(\'{"score": 0, "score": 1}\')\n')
    write(project, "f.eval.yaml", judge_case("[python, twice.py]"))
    result = project.runpytest("--agentv-results=out.jsonl")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*eval 'judged' was not graded*duplicate key 'score'*"])
    row = json.loads((project.path / "out.jsonl").read_text())
    assert (row["status"], row["verdict"]) == ("error", None)


def test_a_judge_that_exits_non_zero_fails_the_case_with_the_cause(
    project: pytest.Pytester,
) -> None:
    write(project, "f.eval.yaml", judge_case('"echo judge broke >&2; exit 2"'))
    result = project.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*eval 'judged' failed: score 0.00 (fail)",
            "*✗ code judge exited with code 2: judge broke",
        ]
    )


#: Name: (script, what the case says).
OUTSIDE_THE_CONTRACT = {
    "signal": ('"kill -9 $$"', "code judge was killed by SIGKILL"),
    "not-json": ('"echo not json"', "code judge output must be one JSON object*not valid JSON*"),
    "silent-and-closes-stdin": ('"exit 0"', "code judge printed nothing on stdout*"),
    "scalar": ("[python, -c, 'print(1)']", "code judge output must be a JSON object, got int"),
}


def test_a_judge_that_broke_or_replied_outside_its_contract_is_not_graded(
    project: pytest.Pytester,
) -> None:
    scripts = {name: script for name, (script, _) in OUTSIDE_THE_CONTRACT.items()}
    write(project, "f.eval.yaml", judge_cases(scripts))
    result = project.runpytest()
    assert by_case(result) == dict.fromkeys(OUTSIDE_THE_CONTRACT, "error")
    for name, (_, problem) in OUTSIDE_THE_CONTRACT.items():
        result.stdout.fnmatch_lines([f"*eval '{name}' was not graded: *{problem}"])
    assert "Traceback" not in result.stdout.str()


BROKEN_GRADERS = {
    "timeout": ("sleep 30", "code judge timed out after 1s and was killed"),
    "killed": ("kill -9 $$", "code judge was killed by SIGKILL"),
    "flood": ("yes", "code judge wrote more than 1024 KiB to stdout*"),
    "out-of-range": ("echo '{\"score\": 1.5}'", "code judge 'score' must be between 0 and 1*"),
    "log-line-first": ("echo starting; echo '{\"score\": 0}'", "*one JSON object*: starting {*"),
    "two-objects": ('echo \'{"score": 0}{"score": 1}\'', "*one JSON object*Extra data*"),
    "truncated": ('echo \'{"score": 0, "hits": [\'', "*one JSON object*Expecting value*"),
    "nan": ("echo '{\"score\": NaN}'", "*one JSON object*NaN is not valid JSON*"),
}


def test_negation_never_turns_a_broken_grader_into_a_pass(project: pytest.Pytester) -> None:
    """A grader that timed out, was killed, flooded its output or replied outside its contract
    said nothing about the answer: not graded, under ``negate`` too (it passed as 1 - 0)."""
    cases = []
    for name, (script, _) in BROKEN_GRADERS.items():
        write(project, f"{name}.sh", script)
        timeout = 1 if script.startswith("sleep") else 60
        cases.append(
            f"  - {{id: {name}, input: q, assertions: [{{type: code-grader, "
            f"command: [sh, {name}.sh], negate: true, timeout_seconds: {timeout}}}]}}\n"
        )
    write(project, "f.eval.yaml", "tests:\n" + "".join(cases))
    result = project.runpytest("--agentv-results=out.jsonl")
    assert by_case(result) == dict.fromkeys(BROKEN_GRADERS, "error")
    for name, (_, problem) in BROKEN_GRADERS.items():
        result.stdout.fnmatch_lines([f"*eval '{name}' was not graded: *{problem}"])
    rows = [json.loads(line) for line in (project.path / "out.jsonl").read_text().splitlines()]
    assert {row["eval_id"]: (row["status"], row["score"]) for row in rows} == dict.fromkeys(
        BROKEN_GRADERS, ("error", None)
    )


def test_a_negated_grader_that_exits_non_zero_said_fail_and_passes(
    project: pytest.Pytester,
) -> None:
    """AgentV's convention: a grader that ran and exited non-zero said "fail", which negation
    turns into a pass."""
    write(
        project,
        "f.eval.yaml",
        """
        tests:
          - id: judged
            input: q
            assertions: [{type: code-grader, command: "exit 1", negate: true}]
        """,
    )
    project.runpytest().assert_outcomes(passed=1)


ZERO_SCORES = {
    "bom": b'\xef\xbb\xbf{"score": 0}\r\n',
    "deep-details": b'{"score": 0, "details": ' + b'{"a": ' * 1000 + b"1" + b"}" * 1001,
}


@pytest.mark.parametrize("stdout", ZERO_SCORES.values(), ids=ZERO_SCORES)
def test_a_zero_score_is_read_after_a_byte_order_mark_and_under_deep_details(
    stdout: bytes,
) -> None:
    """They fell through to v4's plain-text path, which passes: AgentV v4 trims the byte order
    mark (JavaScript's ``trim``) and parses deep JSON."""
    parsed = parse_judge_output(stdout, v4=True)
    assert (parsed.score, parsed.verdict, parsed.error) == (0.0, "fail", None)


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
)


@given(value=JSON, indent=st.sampled_from([None, 0, 2]))
def test_the_deep_reader_reads_what_json_reads(value: object, indent: int | None) -> None:
    """The reader used past ``json``'s recursion reads any JSON text as ``json`` does."""
    text = json.dumps(value, indent=indent)
    assert _read_deep(text) == json.loads(text)


def test_details_nested_deeper_than_100_levels_are_kept_to_100(project: pytest.Pytester) -> None:
    deep = '{"score": 1, "details": ' + '{"a": ' * 1000 + "1" + "}" * 1001
    write(project, "deep.json", deep)
    write(project, "f.eval.yaml", judge_case('"cat deep.json"'))
    project.runpytest("--agentv-results=out.jsonl").assert_outcomes(passed=1)
    details = json.loads((project.path / "out.jsonl").read_text())["evaluator_results"][0][
        "details"
    ]
    depth = 1
    while isinstance(details, dict):
        details, depth = details["a"], depth + 1
    assert (depth, details) == (100, "(nested deeper than 100 levels: not kept)")


#: Name: (script, why it cannot start).
CANNOT_START = {
    "missing-file": ("[python, missing.py]", "script file 'missing.py' does not exist (in evals)"),
    "missing-file-shell": (
        '"python missing.py"',
        "script file 'missing.py' does not exist (in evals)",
    ),
    "options-first": (
        "[python, -W, ignore, ../missing.py]",
        "script file '../missing.py' does not exist*",
    ),
    "no-program": (
        "[no-such-runner, run, judge.py]",
        "program 'no-such-runner' was not found (run from evals)",
    ),
    "no-program-shell": ('"no-such-runner judge.py"', "program 'no-such-runner' was not found*"),
    "not-executable": ("[./locked.sh]", "program './locked.sh' is not executable (run from evals)"),
}


def test_a_judge_that_cannot_start_is_not_graded(project: pytest.Pytester) -> None:
    """`python missing.py` exits 2 (can't open file): it was a graded fail with score 0, as a
    judge that ran and failed. A judge that cannot start says nothing about the answer."""
    write(project, "evals/judge.py", 'import json; print(json.dumps({"score": 1}))\n')
    write(project, "evals/locked.sh", "#!/bin/sh\necho '{\"score\": 1}'\n")
    scripts = {name: script for name, (script, _) in CANNOT_START.items()}
    write(project, "evals/f.eval.yaml", judge_cases(scripts))
    result = project.runpytest()
    assert by_case(result) == dict.fromkeys(CANNOT_START, "error")
    for name, (_, problem) in CANNOT_START.items():
        result.stdout.fnmatch_lines(
            [f"*eval '{name}' was not graded: code judge cannot start: {problem}"]
        )


#: Name: script; each runs and exits 2.
STARTS_AND_FAILS = {
    "inline-code": "[python, -c, 'import sys; sys.exit(2)']",
    "shell": '"python judge.py && exit 2"',
    "data-file": "[python, judge.py, missing.json]",
}


def test_a_judge_that_starts_and_fails_is_a_graded_fail(project: pytest.Pytester) -> None:
    """As AgentV: a judge that ran and exited non-zero scores 0 with the cause."""
    write(project, "judge.py", "import sys; sys.exit(2 if len(sys.argv) > 1 else 0)\n")
    write(project, "f.eval.yaml", judge_cases(STARTS_AND_FAILS))
    result = project.runpytest()
    assert by_case(result) == dict.fromkeys(STARTS_AND_FAILS, "failed")
    shown = {
        report.nodeid.split("::")[-1]: report.longreprtext
        for report in result.reprec.getreports("pytest_runtest_logreport")  # type: ignore[attr-defined]
        if report.failed
    }
    for name in STARTS_AND_FAILS:
        assert "✗ code judge exited with code 2" in shown[name], shown[name]


def test_hanging_judge_is_killed_at_its_timeout(project: pytest.Pytester) -> None:
    write(
        project,
        "f.eval.yaml",
        judge_case('"echo $$ > judge.pid; exec sleep 30"', "\n        timeout_seconds: 1"),
    )
    result = project.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*not graded: script: code judge timed out after 1s and was killed"]
    )
    assert still_running(recorded(project.path / "judge.pid")) == []
    assert result.duration < 25  # well short of the judge's 30 s sleep


def test_default_timeout_from_ini(project: pytest.Pytester) -> None:
    project.makeini(
        """
        [pytest]
        asyncio_default_fixture_loop_scope = function
        agentv_code_judge_timeout = 0.5
        """
    )
    write(project, "f.eval.yaml", judge_case('"sleep 30"'))
    result = project.runpytest()
    result.stdout.fnmatch_lines(["*code judge timed out after 0.5s*"])


def test_cwd_defaults_to_the_eval_folder_and_can_be_set(project: pytest.Pytester) -> None:
    write(project, "evals/judge.py", 'import json; print(json.dumps({"score": 1}))\n')
    write(project, "tools/judge2.py", 'import json; print(json.dumps({"score": 1}))\n')
    write(project, "evals/a.eval.yaml", judge_case("[python, judge.py]"))
    write(project, "evals/b.eval.yaml", judge_case("[python, judge2.py]", "\n        cwd: tools"))
    project.runpytest().assert_outcomes(passed=2)


def test_string_scripts_run_through_the_shell(project: pytest.Pytester) -> None:
    write(
        project,
        "f.eval.yaml",
        judge_case("""'cat > /dev/null; echo "{\\"score\\": 1}" | cat'"""),
    )
    project.runpytest().assert_outcomes(passed=1)


def test_weighted_mean_of_several_evaluators(project: pytest.Pytester) -> None:
    write(project, "one.py", 'import json; print(json.dumps({"score": 1}))\n')
    write(
        project, "half.py", 'import json; print(json.dumps({"score": 0.5, "misses": ["half"]}))\n'
    )
    write(
        project,
        "w.eval.yaml",
        """
        evalcases:
          - id: weighted
            input: q
            evaluators:
              - {name: one, type: code_judge, script: [python, one.py], weight: 3}
              - {name: half, type: code_judge, script: [python, half.py], weight: 1}
              - {name: ignored, type: code_judge, script: "exit 1", weight: 0}
        """,
    )
    result = project.runpytest("--agentv-results=out.jsonl")
    result.assert_outcomes(passed=1)
    row = json.loads((project.path / "out.jsonl").read_text())
    assert row["score"] == pytest.approx(0.875)
    assert [(e["name"], e["weight"], e["score"]) for e in row["evaluator_results"]] == [
        ("one", 3.0, 1.0),
        ("half", 1.0, 0.5),
        ("ignored", 0.0, 0.0),
    ]
    assert row["misses"] == ["half", "code judge exited with code 1"]
