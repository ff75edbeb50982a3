"""Coding agents that go wrong leave their case not graded, saying why, never graded on part of
an answer: a program that is not installed, one that exits non-zero, a stream broken, cut
short or flooding, an agent that hangs (killed at its deadline, nothing left running), one
refused a permission. Secrets the agent is given or repeats reach no report.

The agent is the real Claude Code (``tests.agent_clis``); where its stream must go wrong, a
shell script runs it and spoils what it prints.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fake_vendors import FakeVendor, Hang, Say, Use
from tests.helpers import outcomes, recorded, still_running, write
from tests.test_agents import agent_target

Vendors = Callable[..., FakeVendor]

EVAL = """\
tests:
  - id: task
    criteria: does the task
    input: Write hello.txt saying hi there.
    assertions: [{type: contains, value: hello}]
"""

WRITE = Use("Write", {"file_path": "hello.txt", "content": "hi there\n"})
DONE = Say("I wrote hello.txt.")


def wrapper(pytester: pytest.Pytester, program: Path, pipe: str, name: str) -> Path:
    """An executable script (``name``.sh, which writes its pid to ``name``.pid) that runs
    ``program`` with its arguments, its output through ``pipe`` (a shell pipeline's tail;
    empty: as it is)."""
    script = pytester.path / f"{name}.sh"
    pid = pytester.path / f"{name}.pid"
    script.write_text(f'#!/bin/sh\necho $$ > {pid}\n"{program}" "$@" {pipe}\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


#: How a stream is spoiled, by the name of the target that spoils it, and what is said of it.
BROKEN = {
    "malformed": ("| sed '2i not an event'", "has a line (2) that is not a JSON event"),
    "truncated": ("| head -n 3", "stopped before its 'result' event (3 events read)"),
    "cut-mid-line": ("| head -c 900", "ends in a line cut short"),
}

#: What is said of each other fault, by the name of its target.
SAID = {
    "not-installed": "the program '*nowhere/claude' was not found*"
    "npm install -g @anthropic-ai/claude-code",
    "exits-1": "exited with code 1: Reached maximum number of turns (1)",
    "flood": "printed more than 64 MiB and was stopped",
    "hung": "timed out after 3s and was killed",
    "refused": "was refused Write (a test run has nobody to grant permissions",
    **{name: problem for name, (_, problem) in BROKEN.items()},
}


def test_an_agent_that_goes_wrong_is_not_graded_saying_why(
    project: pytest.Pytester, agent_bin: Path, vendors: Vendors
) -> None:
    """Each fault is a target of the file's matrix: one session, with one run of Claude Code
    for each but the program that is not installed. The flooding and the hung agent leave
    nothing running."""
    claude = agent_bin / "claude"
    hung = vendors(Hang())
    targets = [
        agent_target("claude-cli", project.path / "nowhere", vendors(), name="not-installed"),
        agent_target(
            "claude-cli", agent_bin, vendors((WRITE,), (DONE,)), name="exits-1", max_turns=1
        ),
        agent_target(
            "claude-cli",
            agent_bin,
            vendors((WRITE,), (DONE,)),
            name="refused",
            bypass_permissions=False,
        ),
        # Through ``cat``: Claude Code makes its stdout non-blocking, which ``yes`` would inherit.
        agent_target(
            "claude-cli",
            agent_bin,
            vendors((DONE,)),
            name="flood",
            executable=str(wrapper(project, claude, '| cat; yes \'{"type": "flood"}\'', "flood")),
        ),
        agent_target(
            "claude-cli",
            agent_bin,
            hung,
            name="hung",
            executable=str(wrapper(project, claude, "", "hung")),
            timeout_seconds=3,
        ),
        *(
            agent_target(
                "claude-cli",
                agent_bin,
                vendors((WRITE,), (DONE,)),
                name=name,
                executable=str(wrapper(project, claude, pipe, name)),
            )
            for name, (pipe, _) in BROKEN.items()
        ),
    ]
    (project.path / ".agentv" / "targets.yaml").write_text("targets:\n" + "".join(targets))
    # One case at a time, as in a session of its own: the hung agent's deadline is no race
    # with seven other agents starting.
    matrix = f"execution: {{workers: 1, targets: [{', '.join(SAID)}]}}\n"
    write(project, "task.eval.yaml", matrix + EVAL)
    result = project.runpytest()
    assert outcomes(result.reprec) == {  # type: ignore[attr-defined]
        f"task.eval.yaml::task[{name}]": "error" for name in SAID
    }
    for name, problem in SAID.items():
        result.stdout.fnmatch_lines([f"*eval 'task[[]{name}[]]' was not graded: *{problem}*"])
    assert len(hung.turns) == 1
    pids = recorded(project.path / "flood.pid", project.path / "hung.pid")
    assert still_running(pids) == []


def test_secrets_the_agent_is_given_or_repeats_reach_no_report(
    project: pytest.Pytester, agent_bin: Path, vendors: Vendors, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "Qv8xT2mZ4kLp9sRw"
    monkeypatch.setenv("AGENT_SERVICE_TOKEN", secret)
    fake = vendors((Say(f"hello, the token is {secret} and the key sk-fake-agent-key-0123456789"),))
    target = agent_target(
        "claude-cli",
        agent_bin,
        fake,
        name="default",
        env={"IS_SANDBOX": "1", "SERVICE_TOKEN": "${{ AGENT_SERVICE_TOKEN }}"},
        stream_log="raw",
    )
    (project.path / ".agentv" / "targets.yaml").write_text("targets:\n" + target)
    write(project, "task.eval.yaml", EVAL)
    result = project.runpytest(
        "--agentv-results=r.jsonl", "--junitxml=j.xml", "--agentv-html=r.html"
    )
    result.assert_outcomes(passed=1)
    [log] = (project.path / ".agentv" / "logs" / "claude-cli").iterdir()
    for path in (project.path / "r.jsonl", project.path / "j.xml", project.path / "r.html", log):
        text = path.read_text()
        assert "hello, the token is" in text or path.suffix == ".xml", path
        assert secret not in text and "sk-fake-agent-key-0123456789" not in text, path
    assert os.environ["AGENT_SERVICE_TOKEN"] == secret
