"""Coding agents as targets, run for real: the agents' own CLIs from npm (``tests.agent_clis``)
against a loopback fake of their vendor's API that scripts the model's turns
(``tests.fake_vendors``), in the case's workspace. What the agent did (files it changed, the
tools it called) reaches the graders, one eval file holds under every agent, and the session the
Copilot CLI recorded is graded again by ``copilot-log``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.fake_vendors import FakeVendor, Say, Use
from tests.helpers import outcomes, write

Vendors = Callable[..., FakeVendor]

#: A v4 code grader: the workspace's diff has the file the agent wrote.
DIFF_GRADER = """\
import json, sys
p = json.load(sys.stdin)
diff = p["file_changes"] or ""
ok = "b/hello.txt" in diff and "+hi there" in diff
print(json.dumps({"assertions": [{"text": "hello.txt written", "passed": ok}]}))
"""

#: An eval file whose one case asks for a file, checked by its diff and the agent's tools, for
#: each target of a matrix, each in a workspace of its own.
WRITE_EVAL = """\
execution:
  targets: [{targets}]
workspace:
  template: tpl
  isolation: per_test
tests:
  - id: write-hello
    criteria: writes hello.txt
    input: Write hello.txt saying hi there.
    assertions:
      - type: tool-trajectory
        mode: in_order
        expected: [{{tool: {tool}}}]
      - type: code-grader
        command: [python, grader.py]
"""

#: Each agent's model turns that write ``hello.txt`` with its own tool, then say so.
WRITES = {
    "claude-cli": Use("Write", {"file_path": "hello.txt", "content": "hi there\n"}),
    "gemini-cli": Use("write_file", {"file_path": "hello.txt", "content": "hi there\n"}),
    "pi-cli": Use("write", {"path": "hello.txt", "content": "hi there\n"}),
    "copilot-cli": Use("create", {"path": "hello.txt", "file_text": "hi there\n"}),
    "codex": Use("exec_command", {"cmd": "printf 'hi there\\n' > hello.txt"}),
}
#: What else each agent's target needs to talk to the fake: the model, the fake's API.
SETTINGS = {
    "claude-cli": {},
    "gemini-cli": {"model": "gemini-2.5-flash"},
    "pi-cli": {"model": "fake-model", "subprovider": "anthropic"},
    "copilot-cli": {"model": "claude-sonnet-4.5", "subprovider": "anthropic"},
    "codex": {"model": "gpt-5"},
}
PROGRAMS = {"claude-cli": "claude", "gemini-cli": "gemini", "pi-cli": "pi"}
PROGRAMS.update({"copilot-cli": "copilot", "codex": "codex"})


def rows(pytester: pytest.Pytester) -> list[dict[str, Any]]:
    """The results file's rows."""
    text = (pytester.path / "results.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


def agent_target(
    provider: str, bin: Path, vendor: FakeVendor, name: str | None = None, **more: Any
) -> str:
    """A targets-file entry running ``provider``'s program against the fake vendor."""
    url = f"{vendor.url}/v1" if provider == "codex" else vendor.url
    settings = {
        "name": name or provider,
        "provider": provider,
        "executable": str(bin / PROGRAMS[provider]),
        "base_url": url,
        "api_key": "sk-fake-agent-key-0123456789",
        "timeout_seconds": 120,
        "env": {"IS_SANDBOX": "1"},
        **SETTINGS[provider],
        **more,
    }
    return "  - " + json.dumps(settings) + "\n"


def write_project(pytester: pytest.Pytester, targets: str, eval_file: str) -> None:
    (pytester.path / ".agentv" / "targets.yaml").write_text("targets:\n" + targets)
    write(pytester, "tpl/README.md", "a project\n")
    write(pytester, "grader.py", DIFF_GRADER)
    write(pytester, "write.eval.yaml", eval_file)


def test_one_eval_file_holds_under_four_agents_in_workspaces_of_their_own(
    project: pytest.Pytester, agent_bin: Path, vendors: Vendors
) -> None:
    """Claude Code, the Gemini CLI, Pi and the Copilot CLI each write the file with their own
    tool: its name is ``Write`` to the trajectory, the diff shows the file, under xdist. The
    session the Copilot CLI recorded (in a home of its own) is then found by ``copilot-log``
    (the latest of its working folder) and graded on what it did, without running anything:
    one Copilot run serves both."""
    agents = ["claude-cli", "gemini-cli", "pi-cli", "copilot-cli"]
    fakes = {a: vendors((WRITES[a],), (Say("I wrote hello.txt."),)) for a in agents}
    copilot_home = project.path / "copilot-home"
    env = {"IS_SANDBOX": "1", "COPILOT_HOME": str(copilot_home)}
    targets = "".join(
        agent_target(a, agent_bin, fakes[a], **({"env": env} if a == "copilot-cli" else {}))
        for a in agents
    )
    write_project(project, targets, WRITE_EVAL.format(targets=", ".join(agents), tool="Write"))
    reprec = project.inline_run("-n", "2", "--agentv-results=results.jsonl")
    reprec.assertoutcome(passed=4)
    found = {row["target"]: row for row in rows(project)}
    assert sorted(found) == sorted(agents)
    for agent, row in found.items():
        assert [call["tool"] for call in row["tool_calls"]] == ["Write"], agent
        assert row["candidate_answer"] == "I wrote hello.txt.", agent
        assert len(fakes[agent].turns) == 2, agent
        assert "hello.txt" in fakes[agent].turns[1].said(), agent  # its result went back
    assert not (project.path / "tpl" / "hello.txt").exists()

    state = copilot_home / "session-state"
    [workspace] = state.glob("*/workspace.yaml")
    [worked_in] = re.findall(r"^cwd: (.*)$", workspace.read_text(), re.MULTILINE)
    assert Path(worked_in).name.startswith("write-hello-")
    log = {"provider": "copilot-log", "discover": "latest", "session_state_dir": str(state)}
    logs = [{**log, "name": "log", "cwd": worked_in}]
    logs.append({**log, "name": "elsewhere", "cwd": str(project.path)})
    (project.path / ".agentv" / "targets.yaml").write_text(
        "targets:\n" + "".join(f"  - {json.dumps(target)}\n" for target in logs)
    )
    write(
        project,
        "write.eval.yaml",
        "execution: {targets: [log, elsewhere]}\n"
        "tests:\n  - {id: a, input: ignored, assertions: [{type: contains, value: wrote}, "
        "{type: tool-trajectory, mode: exact, expected: [{tool: Write}]}]}\n",
    )
    result = project.runpytest()
    assert outcomes(result.reprec) == {  # type: ignore[attr-defined]
        "write.eval.yaml::a[log]": "passed",
        "write.eval.yaml::a[elsewhere]": "error",
    }
    result.stdout.fnmatch_lines([f"*no Copilot CLI session of cwd {project.path} in {state}*"])
    assert len(fakes["copilot-cli"].turns) == 2


def test_codex_runs_a_command_that_is_a_bash_call_with_its_output_and_usage(
    project: pytest.Pytester, agent_bin: Path, vendors: Vendors
) -> None:
    fake = vendors((WRITES["codex"],), (Say("I wrote hello.txt."),))
    write_project(
        project,
        agent_target("codex", agent_bin, fake, name="default"),
        WRITE_EVAL.format(targets="default", tool="Bash"),
    )
    reprec = project.inline_run("--agentv-results=results.jsonl")
    reprec.assertoutcome(passed=1)
    [row] = rows(project)
    [call] = row["tool_calls"]
    assert call["tool"] == "Bash" and "hello.txt" in call["input"]["command"]
    assert not call["error"]
    usage = {"input": 200, "output": 40, "cached": 0, "reasoning": 0}
    assert row["trace_summary"]["token_usage"] == usage
    assert [r.path for r in fake.turns] == ["/v1/responses", "/v1/responses"]
