"""What a coding agent did reaches everything that reads an answer: a v4 code grader's payload
(messages with their tool calls, the trace), an LLM judge's ``{{tool_calls}}``, the results
rows, the v4 run folder's trace envelope and the HTML report's tool calls; and a ``replay``
target grades that recorded run again (its trace envelope, or AgentV's replay fixtures)
without running the agent.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fake_openai import FakeOpenAI
from tests.fake_vendors import FakeVendor, Say, Use
from tests.helpers import judge_ini, write
from tests.test_agents import agent_target

Vendors = Callable[..., FakeVendor]

#: A v4 code grader that checks the agent's tool call in the messages and the trace.
TRACE_GRADER = """\
import json, sys
p = json.load(sys.stdin)
calls = [c for m in p["messages"] for c in m.get("tool_calls") or ()]
checks = {
    "write call": [c["tool"] for c in calls] == ["Write"],
    "its input": calls and calls[0]["input"].get("file_path") == "hello.txt",
    "its status": calls and calls[0].get("status") == "ok",
    "trace counts": p["trace"]["tool_calls"] == {"Write": 1},
    "model calls": p["trace"]["llm_call_count"] == 2,
}
print(json.dumps({"assertions": [{"text": k, "passed": bool(v)} for k, v in checks.items()]}))
"""

EVAL = """\
tests:
  - id: write-hello
    criteria: writes hello.txt
    input: Write hello.txt saying hi there.
    assertions:
      - type: tool-trajectory
        mode: exact
        args_match: superset
        expected: [{tool: Write, args: {file_path: hello.txt}}]
      - type: code-grader
        command: [python, grader.py]
      - type: llm-grader
        prompt: "Tools used:\\n{{tool_calls}}\\nAnswer: {{candidate_answer}}"
"""


def test_the_trace_reaches_graders_judges_reports_and_a_replay_of_it(
    project: pytest.Pytester, agent_bin: Path, vendors: Vendors, fake_llm: FakeOpenAI
) -> None:
    fake = vendors(
        (Say("Writing it."), Use("Write", {"file_path": "hello.txt", "content": "hi there\n"})),
        (Say("I wrote hello.txt."),),
    )
    project.makeini(judge_ini(fake_llm))
    targets = agent_target("claude-cli", agent_bin, fake, name="default")
    (project.path / ".agentv" / "targets.yaml").write_text("targets:\n" + targets)
    write(project, "grader.py", TRACE_GRADER)
    write(project, "trace.eval.yaml", EVAL)
    v4 = ("--agentv-results=run/index.jsonl", "--agentv-results-format=agentv-v4")
    project.inline_run(*v4, "--agentv-html=report.html").assertoutcome(passed=1)
    [judged] = fake_llm.requests
    assert "\n- Write: hello.txt\n" in judged.user and "I wrote hello.txt." in judged.user
    html = (project.path / "report.html").read_text()
    assert "<td>Write</td>" in html and "hello.txt" in html
    [row] = [
        json.loads(line) for line in (project.path / "run/index.jsonl").read_text().splitlines()
    ]
    trace = project.path / "run" / row["artifact_dir"] / "outputs" / "trace.json"
    spans = json.loads(trace.read_text())["trace"]["spans"]
    tools = [s["attributes"].get("gen_ai.tool.name") for s in spans]
    assert [tool for tool in tools if tool] == ["Write"]

    # The recorded run, graded again by a replay target: nothing runs, the same checks pass.
    replay = {
        "name": "replayed",
        "provider": "replay",
        "execution_traces": str(trace.relative_to(project.path)),
        "source_target": "default",
    }
    (project.path / ".agentv" / "targets.yaml").write_text(
        "targets:\n" + targets + "  - " + json.dumps(replay) + "\n"
    )
    project.inline_run("--agentv-target=replayed").assertoutcome(passed=1)
    assert len(fake.turns) == 2


FIXTURE = {
    "schema_version": "agentv.replay_fixture.v1",
    "suite": "trace",
    "test_id": "write-hello",
    "source_target": "live_agent",
    "output": [
        {
            "role": "assistant",
            "content": "I wrote hello.txt.",
            "tool_calls": [{"tool": "Write", "input": {"file_path": "hello.txt"}, "status": "ok"}],
        }
    ],
    "token_usage": {"input": 10, "output": 5},
}


def test_replay_fixtures_are_graded_and_a_missing_record_is_named(
    project: pytest.Pytester,
) -> None:
    other = {**FIXTURE, "test_id": "other", "source_target": "live_agent"}
    write(
        project,
        "fixtures.jsonl",
        "".join(json.dumps(record) + "\n" for record in (FIXTURE, other, other)),
    )
    replay = (
        "{name: default, provider: replay, fixtures: fixtures.jsonl, source_target: live_agent}"
    )
    write(project, ".agentv/targets.yaml", f"targets:\n  - {replay}\n")
    eval_file = EVAL.split("      - type: code-grader")[0]
    eval_file += "  - {id: other, input: q, assertions: [{type: contains, value: wrote}]}\n"
    eval_file += "  - {id: missing, input: q, assertions: [{type: contains, value: wrote}]}\n"
    write(project, "trace.eval.yaml", eval_file)
    result = project.runpytest()
    result.assert_outcomes(passed=1, errors=2)
    result.stdout.fnmatch_lines(
        [
            "*'other' was not graded: replay target 'default': fixtures.jsonl has 2 records "
            "(lines 2, 3) for suite=trace test_id=other source_target=live_agent attempt=0*",
            "*'missing' was not graded: replay target 'default': fixtures.jsonl has no record "
            "for suite=trace test_id=missing*",
        ]
    )
