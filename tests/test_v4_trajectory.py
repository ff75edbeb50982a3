"""AgentV v4's tool trajectories: ``superset`` and ``subset`` modes, ``args_match``, and the
v4 default of exact argument matching (a v2.5.8 file keeps matching the listed keys). Scores
checked against AgentV v4.42.4's ``ToolTrajectoryGrader`` on the same inputs."""

from __future__ import annotations

import json

import pytest

from tests.helpers import assert_load_error, cli_agent, write

AGENT = """\
import json
calls = [
    {"tool": "search", "input": {"q": "refund", "limit": 5}},
    {"tool": "read", "input": {"path": "policy.md"}},
    {"tool": "search", "input": {"q": "window"}},
]
print(json.dumps({"output": [{"role": "assistant", "content": "30 days", "tool_calls": calls}]}))
"""


def test_v4_modes_and_args_match(project: pytest.Pytester) -> None:
    cli_agent(project, AGENT)
    write(
        project,
        "t.eval.yaml",
        """
        tests:
          - id: v4
            input: q
            assertions:
              # exact argument matching is v4's default: {q: refund} misses the call
              - {name: exact-default, type: tool-trajectory, mode: in_order,
                 expected: [{tool: search, args: {q: refund}}, {tool: read}]}
              - {name: superset, type: tool-trajectory, mode: superset, args_match: superset,
                 expected: [{tool: search, args: {q: window}}, {tool: search, args: {q: refund}}]}
              - {name: subset, type: tool-trajectory, mode: subset,
                 expected: [{tool: search, args: any}]}
              - {name: fields, type: tool-trajectory, mode: exact, args_match: [q],
                 expected: [{tool: search, args: {q: refund, limit: 1}}, {tool: read},
                            {tool: search, args: {q: window}}]}
        """,
    )
    project.runpytest("--agentv-results", "out.jsonl").assert_outcomes(xfailed=1)
    [row] = map(json.loads, (project.path / "out.jsonl").read_text().splitlines())
    scores = {e["name"]: e["score"] for e in row["evaluator_results"]}
    assert scores == {"exact-default": 0.5, "superset": 1.0, "subset": 2 / 3, "fields": 1.0}
    [subset] = [e for e in row["evaluator_results"] if e["name"] == "subset"]
    assert subset["assertions"][1] == {
        "text": "Position 1: read is not in allowed set",
        "passed": False,
    }


def test_a_classic_file_matches_the_listed_keys(project: pytest.Pytester) -> None:
    cli_agent(project, AGENT, "command_template")
    write(
        project,
        "t.eval.yaml",
        """
        evalcases:
          - id: classic
            expected_outcome: c
            input_messages: [{role: user, content: q}]
            evaluators:
              - {name: t, type: tool_trajectory, mode: in_order,
                 expected: [{tool: search, args: {q: refund}}, {tool: read}]}
        """,
    )
    project.runpytest().assert_outcomes(passed=1)


def test_a_bad_args_match_is_a_load_error(project: pytest.Pytester) -> None:
    assertion = "{type: tool-trajectory, mode: superset, args_match: fuzzy, expected: []}"
    assert_load_error(project, assertion, "*args_match must be exact, superset, subset*")


ECHO = """\
import json, pathlib, sys
prompt = pathlib.Path(sys.argv[1]).read_text()
print(json.dumps({"output": [{"role": "assistant", "content": "You asked: " + prompt}]}))
"""


def test_a_v4_cli_target_with_command_prompt_file_and_use_target(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(project, "echo.py", ECHO)
    (project.path / ".agentv" / "targets.yaml").write_text(
        "targets:\n"
        "  - name: default\n"
        "    use_target: ${{ AGENT_TARGET }}\n"
        "  - name: echo\n"
        "    provider: cli\n"
        "    command: python echo.py {PROMPT_FILE}\n"
        "    healthcheck: {command: python -c pass}\n"
    )
    monkeypatch.setenv("AGENT_TARGET", "echo")
    write(
        project,
        "v4.eval.yaml",
        """
        tests:
          - id: echo
            input: "What's the window?"
            assertions: [{type: equals, value: "You asked: What's the window?"}]
        """,
    )
    result = project.runpytest("-W", "error::pytest_agentv.AgentvWarning")
    result.assert_outcomes(passed=1)


def test_use_target_errors_name_the_problem(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    (project.path / ".agentv" / "targets.yaml").write_text(
        "targets:\n  - {name: default, use_target: '${{ AGENT_TARGET }}'}\n"
        "  - {name: a, use_target: b}\n  - {name: b, use_target: a}\n"
    )
    write(project, "x.eval.yaml", "tests:\n  - {id: x, input: q, assertions: [{type: is-json}]}\n")
    result = project.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*environment variable AGENT_TARGET is not set*"])
    monkeypatch.setenv("AGENT_TARGET", "a")
    result = project.runpytest()
    result.stdout.fnmatch_lines(["*use_target goes round in a circle: default -> a -> b -> a*"])
