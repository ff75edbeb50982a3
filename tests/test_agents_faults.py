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


def wrapper(pytester: pytest.Pytester, program: Path, pipe: str, name: str = "agent") -> Path:
    """An executable script (``name``.sh, which writes its pid to ``name``.pid) that runs
    ``program`` with its arguments, its output through ``pipe`` (a shell pipeline's tail;
    empty: as it is)."""
    script = pytester.path / f"{name}.sh"
    pid = pytester.path / f"{name}.pid"
    script.write_text(f'#!/bin/sh\necho $$ > {pid}\n"{program}" "$@" {pipe}\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def run(pytester: pytest.Pytester, targets: str, *args: str) -> tuple[pytest.RunResult, str]:
    (pytester.path / ".agentv" / "targets.yaml").write_text("targets:\n" + targets)
    write(pytester, "task.eval.yaml", EVAL)
    result = pytester.runpytest(*args)
    return result, result.stdout.str()


def test_a_program_that_is_not_installed_names_its_npm_package(
    project: pytest.Pytester, vendors: Vendors
) -> None:
    target = agent_target("claude-cli", project.path / "nowhere", vendors(), name="default")
    result, out = run(project, target)
    result.assert_outcomes(errors=1)
    assert "the program '" in out and "nowhere/claude' was not found" in out
    assert "npm install -g @anthropic-ai/claude-code" in out


def test_an_agent_that_exits_non_zero_says_what_it_said(
    project: pytest.Pytester, agent_bin: Path, vendors: Vendors
) -> None:
    fake = vendors((WRITE,), (DONE,))
    target = agent_target("claude-cli", agent_bin, fake, name="default", max_turns=1)
    result, out = run(project, target)
    result.assert_outcomes(errors=1)
    assert "exited with code 1: Reached maximum number of turns (1)" in out


#: How a stream is spoiled, by the name of the target that spoils it, and what is said of it.
BROKEN = {
    "malformed": ("| sed '2i not an event'", "has a line (2) that is not a JSON event"),
    "truncated": ("| head -n 3", "stopped before its 'result' event (3 events read)"),
    "cut-mid-line": ("| head -c 900", "ends in a line cut short"),
}


def test_a_broken_stream_is_not_graded(
    project: pytest.Pytester, agent_bin: Path, vendors: Vendors
) -> None:
    """Each way of breaking the stream is a target of the file's matrix: one session."""
    targets = ""
    for name, (pipe, _) in BROKEN.items():
        program = wrapper(project, agent_bin / "claude", pipe, name)
        fake = vendors((WRITE,), (DONE,))
        targets += agent_target("claude-cli", agent_bin, fake, name=name, executable=str(program))
    (project.path / ".agentv" / "targets.yaml").write_text("targets:\n" + targets)
    write(project, "task.eval.yaml", f"execution: {{targets: [{', '.join(BROKEN)}]}}\n{EVAL}")
    result = project.runpytest()
    assert outcomes(result.reprec) == {  # type: ignore[attr-defined]
        f"task.eval.yaml::task[{name}]": "error" for name in BROKEN
    }
    for name, (_, problem) in BROKEN.items():
        result.stdout.fnmatch_lines([f"*eval 'task[[]{name}[]]' was not graded: *{problem}*"])


def test_an_agent_that_floods_its_output_is_stopped(
    project: pytest.Pytester, agent_bin: Path, vendors: Vendors
) -> None:
    fake = vendors((DONE,))
    # Through ``cat``: Claude Code makes its stdout non-blocking, which ``yes`` would inherit.
    program = wrapper(project, agent_bin / "claude", '| cat; yes \'{"type": "flood"}\'')
    target = agent_target("claude-cli", agent_bin, fake, name="default", executable=str(program))
    result, out = run(project, target)
    result.assert_outcomes(errors=1)
    assert "printed more than 64 MiB and was stopped" in out
    assert still_running(recorded(project.path / "agent.pid")) == []


def test_a_hung_agent_is_killed_at_its_deadline_with_nothing_left_running(
    project: pytest.Pytester, agent_bin: Path, vendors: Vendors
) -> None:
    fake = vendors(Hang())
    program = wrapper(project, agent_bin / "claude", "")
    target = agent_target(
        "claude-cli", agent_bin, fake, name="default", executable=str(program), timeout_seconds=3
    )
    result, out = run(project, target)
    result.assert_outcomes(errors=1)
    assert "timed out after 3s and was killed" in out
    assert len(fake.turns) == 1
    assert still_running(recorded(project.path / "agent.pid")) == []


def test_an_agent_refused_a_permission_is_not_graded(
    project: pytest.Pytester, agent_bin: Path, vendors: Vendors
) -> None:
    fake = vendors((WRITE,), (DONE,))
    target = agent_target("claude-cli", agent_bin, fake, name="default", bypass_permissions=False)
    result, out = run(project, target)
    result.assert_outcomes(errors=1)
    assert "was refused Write (a test run has nobody to grant permissions" in out


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
    result, _ = run(
        project, target, "--agentv-results=r.jsonl", "--junitxml=j.xml", "--agentv-html=r.html"
    )
    result.assert_outcomes(passed=1)
    [log] = (project.path / ".agentv" / "logs" / "claude-cli").iterdir()
    for path in (project.path / "r.jsonl", project.path / "j.xml", project.path / "r.html", log):
        text = path.read_text()
        assert "hello, the token is" in text or path.suffix == ".xml", path
        assert secret not in text and "sk-fake-agent-key-0123456789" not in text, path
    assert os.environ["AGENT_SERVICE_TOKEN"] == secret
