"""AgentV v4's code-grader protocol: the v4 stdin keys beside the v2.5.8 ones, and the v4 reply
(``assertions: [{text, passed, evidence}]``) kept in results and reports."""

from __future__ import annotations

import json

import pytest

from tests.helpers import write

#: A judge written for AgentV v4: it reads ``output``, ``criteria``, ``input`` and ``messages``.
V4_JUDGE = """\
import json, sys
p = json.load(sys.stdin)
ok = "30 days" in p["output"]
seen = [m["role"] for m in p["input"]] == ["user"] and p["messages"][-1]["role"] == "assistant"
print(json.dumps({
    "score": 1.0 if ok and seen and p["criteria"] == "Gives the window" else 0.0,
    "assertions": [
        {"text": "mentions 30 days", "passed": ok, "evidence": p["output"][:40]},
        {"text": "sees the conversation", "passed": seen},
    ],
}))
"""


def test_a_v4_code_grader_reading_output_passes_a_correct_answer(
    project: pytest.Pytester,
) -> None:
    (project.path / "v4judge.py").write_text(V4_JUDGE)
    write(
        project,
        "v4.eval.yaml",
        """
        tests:
          - id: window
            criteria: Gives the window
            input: How long do I have?
            expected_output: Within 30 days.
            assertions:
              - type: code-grader
                command: [python, v4judge.py]
        """,
    )
    result = project.runpytest("--agentv-results", "out.jsonl")
    result.assert_outcomes(passed=1)
    [row] = map(json.loads, (project.path / "out.jsonl").read_text().splitlines())
    [grader] = row["evaluator_results"]
    assert grader["assertions"] == [
        {
            "text": "mentions 30 days",
            "passed": True,
            "evidence": "Refunds are accepted within 30 days of p",
        },
        {"text": "sees the conversation", "passed": True},
    ]
    assert grader["hits"] == [
        "mentions 30 days: Refunds are accepted within 30 days of p",
        "sees the conversation",
    ]


PAYLOAD_JUDGE = """\
import json, sys
p = json.load(sys.stdin)
print(json.dumps({"score": 1, "details": {"keys": sorted(p)}}))
"""


def test_the_payload_has_both_generations_keys(project: pytest.Pytester) -> None:
    (project.path / "keys.py").write_text(PAYLOAD_JUDGE)
    write(
        project,
        "keys.eval.yaml",
        """
        tests:
          - id: k
            criteria: c
            input: q
            assertions: [{type: code-grader, command: [python, keys.py]}]
        """,
    )
    project.runpytest("--agentv-results", "out.jsonl").assert_outcomes(passed=1)
    [row] = map(json.loads, (project.path / "out.jsonl").read_text().splitlines())
    keys = set(row["evaluator_results"][0]["details"]["keys"])
    # Not reference_answer, a key v4 retired and its Python helper refuses.
    v2 = {"question", "expected_outcome", "expected_messages"}
    v2 |= {"candidate_answer", "output_messages", "input_messages", "input_files"}
    v4 = {"criteria", "expected_output", "output", "messages", "input", "metadata", "trace"}
    v4 |= {"token_usage", "cost_usd", "duration_ms", "start_time", "end_time"}
    v4 |= {"file_changes", "workspace_path", "config", "trace_summary"}
    assert v2 | v4 <= keys
    assert "reference_answer" not in keys


def test_failure_reports_and_junit_show_each_check_with_its_evidence(
    project: pytest.Pytester,
) -> None:
    write(
        project,
        "f.eval.yaml",
        """
        tests:
          - id: f
            input: q
            assertions:
              - {type: contains, value: "never said", required: true}
              - {type: icontains, value: REFUNDS, negate: true}
        """,
    )
    result = project.runpytest("--junitxml", "j.xml")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*contains-never said (contains): score 0.00 (fail)*",
            '*✗ Output does not contain "never said"',
            "*✗ required: score 0 is below its minimum 0.8",
            "*icontains-REFUNDS (icontains): score 0.00 (fail)*",
            '*✗ Output contains "REFUNDS" (case-insensitive)',
        ]
    )
    xml = (project.path / "j.xml").read_text()
    assert (
        'name="agentv.evaluator.contains-never said.assertions" value="[{&quot;text&quot;:'
        "&quot;Output does not contain \\&quot;never said\\&quot;&quot;,&quot;passed&quot;:false}]"
    ) in xml


def test_v4_exit_code_convention_only_in_v4_files(project: pytest.Pytester) -> None:
    (project.path / "ok.py").write_text("print('looks fine')\n")
    write(
        project,
        "v4.eval.yaml",
        "tests:\n  - {id: v4, input: q, assertions: "
        "[{type: code-grader, command: [python, ok.py]}]}\n",
    )
    write(
        project,
        "classic.eval.yaml",
        """
        evalcases:
          - id: classic
            expected_outcome: c
            input_messages: [{role: user, content: q}]
            evaluators: [{name: ok, type: code_judge, script: [python, ok.py]}]
        """,
    )
    result = project.runpytest("--agentv-results", "out.jsonl")
    result.assert_outcomes(passed=1, errors=1)
    rows = {
        r["eval_id"]: r
        for r in map(json.loads, (project.path / "out.jsonl").read_text().splitlines())
    }
    assert rows["v4"]["evaluator_results"][0]["assertions"] == [
        {"text": "looks fine", "passed": True}
    ]
    assert rows["classic"]["status"] == "error"


EVENTS_JUDGE = """\
import json, sys
p = json.load(sys.stdin)
events = p["trace"]["events"]
print(json.dumps({"score": 1, "details": {"events": [
    [e["event_id"], e["type"], e.get("parent_event_id"), (e.get("tool") or {}).get("name")]
    for e in events
], "ordinals": [e["ordinal"] for e in events], "output": events[2]["tool"].get("output")}}))
"""


def test_a_v4_code_grader_gets_the_transcript_s_events(project: pytest.Pytester) -> None:
    """``trace.events`` as v4 derives them from the messages: each message, each tool call and
    its result, then the final response (they were empty)."""
    (project.path / "events.py").write_text(EVENTS_JUDGE)
    (project.path / ".agentv" / "targets.yaml").write_text(
        """\
targets:
  - name: default
    provider: mock
    response:
      output_messages:
        - role: assistant
          tool_calls: [{tool: search, input: {q: refunds}, output: "30 days", id: c1}]
        - {role: assistant, content: "Within 30 days."}
"""
    )
    write(
        project,
        "e.eval.yaml",
        """
        tests:
          - id: e
            input: q
            assertions: [{type: code-grader, command: [python, events.py]}]
        """,
    )
    project.runpytest("--agentv-results", "out.jsonl").assert_outcomes(passed=1)
    [row] = map(json.loads, (project.path / "out.jsonl").read_text().splitlines())
    details = row["evaluator_results"][0]["details"]
    assert details["events"] == [
        ["message-0", "message", None, None],
        ["message-0-tool-0", "tool_call", "message-0", "search"],
        ["message-0-tool-0-result", "tool_result", "message-0-tool-0", "search"],
        ["message-1", "message", None, None],
        ["final-response", "final_response", "message-1", None],
    ]
    assert details["ordinals"] == [0, 1, 2, 3, 4]
    assert details["output"] == "30 days"
