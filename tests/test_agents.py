"""Coding agents as targets, run for real: the agents' own CLIs from npm (``tests.agent_clis``)
against a loopback fake of their vendor's API that scripts the model's turns
(``tests.fake_vendors``), in the case's workspace. What the agent did (files it changed, the
tools it called) reaches the graders; the same eval file holds under two agents.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.fake_vendors import FakeVendor, Say, Use
from tests.helpers import write

#: A v4 code grader: the workspace's diff has the file the agent wrote.
DIFF_GRADER = """\
import json, sys
p = json.load(sys.stdin)
diff = p["file_changes"] or ""
ok = "b/hello.txt" in diff and "+hi there" in diff
print(json.dumps({"assertions": [{"text": "hello.txt written", "passed": ok}]}))
"""

#: An eval file whose one case asks for a file, checked by its diff and the agent's tools.
WRITE_EVAL = """\
workspace:
  template: tpl
tests:
  - id: write-hello
    criteria: writes hello.txt
    input: Write hello.txt saying hi there.
    assertions:
      - type: tool-trajectory
        mode: in_order
        args_match: superset
        expected:
          - {tool: Write, args: {file_path: hello.txt}}
      - type: code-grader
        command: [python, grader.py]
"""


def rows(pytester: pytest.Pytester) -> list[dict[str, Any]]:
    """The results file's rows."""
    text = (pytester.path / "results.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


def agent_target(name: str, provider: str, program: Path, vendor: FakeVendor, **more: str) -> str:
    """A targets-file entry running ``program`` against the fake vendor."""
    lines = [
        f"  - name: {name}",
        f"    provider: {provider}",
        f"    executable: {program}",
        f"    base_url: {vendor.url}",
        "    api_key: sk-fake-agent-key-0123456789",
        "    timeout_seconds: 120",
        "    env: {IS_SANDBOX: '1'}",
        *(f"    {key}: {value}" for key, value in more.items()),
    ]
    return "\n".join(lines) + "\n"


def test_claude_code_writes_a_file_in_the_workspace_that_graders_see(
    project: pytest.Pytester, agent_bin: Path, vendor: FakeVendor
) -> None:
    vendor.push(
        (Use("Write", {"file_path": "hello.txt", "content": "hi there\n"}),),
        (Say("I wrote hello.txt."),),
    )
    (project.path / ".agentv" / "targets.yaml").write_text(
        "targets:\n" + agent_target("default", "claude-cli", agent_bin / "claude", vendor)
    )
    write(project, "tpl/README.md", "a project\n")
    write(project, "grader.py", DIFF_GRADER)
    write(project, "write.eval.yaml", WRITE_EVAL)
    reprec = project.inline_run("--agentv-results=results.jsonl")
    reprec.assertoutcome(passed=1)
    [row] = rows(project)
    assert row["candidate_answer"] == "I wrote hello.txt."
    assert [call["tool"] for call in row["tool_calls"]] == ["Write"]
    assert len(vendor.turns) == 2
    assert "hello.txt" in vendor.turns[1].said()  # the tool's result went back to the model
    assert not (project.path / "tpl" / "hello.txt").exists()
