"""The coding agents' settings as AgentV v4.42.4's targets files write them: read (or refused
with the reason), never dropped in silence; providers out of scope say why; tool names
normalised onto Claude Code's. (A session the Copilot CLI recorded, read by ``copilot-log``:
``tests.test_agents``, which shares that run.)
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_agentv.targets.events import canonical_tool
from tests.fake_vendors import FakeVendor, Say, Use
from tests.helpers import outcomes, write
from tests.test_agents import agent_target

Vendors = Callable[..., FakeVendor]

#: Targets written as AgentV's own targets files write them (its root ``.agentv/targets.yaml``,
#: its ``agentv init`` template, its trace and copilot-log examples): every key is read.
AGENTV_STYLE = """\
targets:
  - name: default
    use_target: ${{ AGENT_TARGET }}
  - name: claude
    provider: claude-cli
    grader_target: grader
  - name: codex
    provider: codex
    judge_target: grader
    executable: ${{ CODEX_EXECUTABLE }}
    model: ${{ CODEX_MODEL }}
    model_reasoning_effort: ${{ CODEX_REASONING_EFFORT }}
    cwd: ${{ CODEX_WORKSPACE_DIR }}
    log_dir: ${{ CODEX_LOG_DIR }}
    stream_log: raw
  - name: copilot
    provider: copilot-cli
    model: claude-haiku-4.5
    grader_target: grader
    stream_log: raw
  - name: pi
    provider: pi-cli
    subprovider: openrouter
    model: ${{ OPENROUTER_MODEL }}
    api_key: ${{ OPENROUTER_API_KEY }}
    grader_target: grader
  - name: copilot-log
    provider: copilot-log
    discover: latest
  - name: replay_coding_agent
    provider: replay
    fixtures: fixtures.jsonl
    suite: trace-evaluation-showcase
    source_target: live_coding_agent
  - name: grader
    provider: openai
    api_format: chat
    model: gpt-4o-mini
    api_key: sk-unused
"""


def one_case(pytester: pytest.Pytester, expected: str, folder: str = "") -> None:
    """An eval file of one case whose answer must contain ``expected``."""
    case = f"{{id: a, input: q, assertions: [{{type: contains, value: {expected}}}]}}"
    write(pytester, f"{folder}a.eval.yaml", f"tests:\n  - {case}\n")


@pytest.mark.parametrize(
    "target", ["claude", "codex", "copilot", "pi", "copilot-log", "replay_coding_agent"]
)
def test_agentv_s_own_agent_targets_collect_clean(project: pytest.Pytester, target: str) -> None:
    write(project, ".agentv/targets.yaml", AGENTV_STYLE)
    write(project, "fixtures.jsonl", "")
    one_case(project, "x")
    result = project.runpytest("--co", "-q", "-W", "error", f"--agentv-target={target}")
    result.assert_outcomes()
    assert "warning" not in result.stdout.str().lower()
    result.stdout.fnmatch_lines(["a.eval.yaml::a", "1 test collected*"])


#: Settings that are not what they must be, and what is said of each.
BAD_SETTINGS = {
    "stream_log: yes": "stream_log must be false, 'raw' or 'summary'",
    "home: elsewhere": "home must be 'fresh' or 'inherit'",
    "args: --yolo": "args must be a list of strings",
    "model_reasoning_effort: extreme": "model_reasoning_effort must be one of minimal",
    "env: {A: 1}": "env must map names to strings",
}
#: AgentV's providers out of scope, and why each is.
OUT_OF_SCOPE = {
    "claude-sdk": "its TypeScript SDK inside AgentV's own Node process*use provider: claude-cli",
    "vscode": "drives a VS Code window*use provider: copilot-cli",
    "pi-coding-agent": "TypeScript SDK*use provider: pi-cli",
}


def test_bad_settings_and_providers_out_of_scope_each_name_their_target(
    project: pytest.Pytester,
) -> None:
    """One session, a folder (its own targets file, its own eval file) for each bad setting
    and each provider out of scope: each case errors, saying why, with the file and line."""
    for n, setting in enumerate(BAD_SETTINGS):
        target = f"targets:\n  - name: default\n    provider: codex\n    {setting}\n"
        write(project, f"setting{n}/.agentv/targets.yaml", target)
        one_case(project, "x", f"setting{n}/")
    for provider in OUT_OF_SCOPE:
        target = f"targets:\n  - {{name: default, provider: {provider}}}\n"
        write(project, f"{provider}/.agentv/targets.yaml", target)
        one_case(project, "x", f"{provider}/")
    result = project.runpytest()
    assert outcomes(result.reprec) == {  # type: ignore[attr-defined]
        f"{folder}/a.eval.yaml::a": "error"
        for folder in [*(f"setting{n}" for n in range(len(BAD_SETTINGS))), *OUT_OF_SCOPE]
    }
    for n, problem in enumerate(BAD_SETTINGS.values()):
        where = f"setting{n}/.agentv/targets.yaml:4:"
        result.stdout.fnmatch_lines([f"*codex target 'default' (*{where}*): {problem}*"])
    for provider, reason in OUT_OF_SCOPE.items():
        result.stdout.fnmatch_lines([f"*AgentV's provider '{provider}' *{reason}*"])


def test_a_model_target_s_api_format_is_read(project: pytest.Pytester) -> None:
    target = "{name: default, provider: openai, model: m, api_format: responses}"
    write(project, ".agentv/targets.yaml", f"targets:\n  - {target}\n")
    one_case(project, "x")
    result = project.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*api_format 'responses' is not supported*chat completions*"])


def test_verbose_logs_each_command_a_cli_target_runs(project: pytest.Pytester) -> None:
    target = "{name: default, provider: cli, command: 'echo hello {EVAL_ID}', verbose: true}"
    write(project, ".agentv/targets.yaml", f"targets:\n  - {target}\n")
    one_case(project, "hello")
    result = project.runpytest("--log-cli-level=INFO")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*cli target 'default': cwd=* command=echo hello a*"])


def test_a_summary_stream_log_names_each_tool_call(
    project: pytest.Pytester, agent_bin: Path, vendors: Vendors
) -> None:
    fake = vendors((Use("Write", {"file_path": "x.txt", "content": "x"}),), (Say("hello"),))
    target = agent_target(
        "claude-cli", agent_bin, fake, name="default", stream_log="summary", log_dir="logs"
    )
    write(project, ".agentv/targets.yaml", "targets:\n" + target)
    one_case(project, "hello")
    project.runpytest().assert_outcomes(passed=1)
    [log] = (project.path / "logs").iterdir()
    assert log.name.endswith(".log") and "_default_a_attempt-1_" in log.name
    lines = log.read_text().splitlines()
    assert lines[0].startswith("[tool] Write ok ") and lines[1:] == [
        "[text] hello",
        "[end] finished=True error=None",
    ]


@pytest.mark.parametrize(
    ("provider", "name", "args", "expected"),
    [
        ("gemini-cli", "replace", {"file_path": "a.py"}, ("Edit", {"file_path": "a.py"})),
        ("pi-cli", "read", {"path": "a.py"}, ("Read", {"path": "a.py", "file_path": "a.py"})),
        ("codex", "mcp:docs/search", {"q": 1}, ("Skill", {"q": 1, "skill": "docs/search"})),
        ("copilot-cli", "Using skill: csv", None, ("Skill", {"skill": "csv"})),
        ("copilot-cli", "view", {"path": "/a"}, ("Read", {"path": "/a", "file_path": "/a"})),
        ("claude-cli", "Grep", {"pattern": "x"}, ("Grep", {"pattern": "x"})),
    ],
)
def test_tool_names_are_claude_code_s(
    provider: str, name: str, args: object, expected: tuple[str, object]
) -> None:
    assert canonical_tool(provider, name, args) == expected
