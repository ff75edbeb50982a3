"""Targets: mock, CLI, environment interpolation, selection, and the agentv_target fixture."""

from __future__ import annotations

import json

import pytest

from tests.helpers import outcomes, still_running, write
from tests.test_conversation import aggregation_cases, assert_aggregations
from tests.test_workspaces import assert_workspaces_graded, shared_and_own_workspaces


def expect_case(case_id: str, expect: str, extra: str = "", judge: str = "expect.py") -> str:
    """A case whose code judge passes only if the answer is exactly ``expect``."""
    return f"""
  - id: {case_id}
    input: What is the refund window?{extra}
    evaluators:
      - name: expect
        type: code_judge
        script: [python, {judge}]
        config: {json.dumps({"expect": expect})}
"""


def test_mock_target_answers_every_case(project: pytest.Pytester) -> None:
    write(
        project,
        "m.eval.yaml",
        "evalcases:" + expect_case("a", "Refunds are accepted within 30 days of purchase."),
    )
    project.runpytest().assert_outcomes(passed=1)


def test_mock_target_delay(project: pytest.Pytester) -> None:
    write(
        project,
        ".agentv/targets.yaml",
        "targets:\n  - {name: default, provider: mock, response: slow, delay_ms: 300}\n",
    )
    write(project, "m.eval.yaml", "evalcases:" + expect_case("a", "slow"))
    reprec = project.inline_run()
    reprec.assertoutcome(passed=1)
    [setup] = [r for r in reprec.getreports("pytest_runtest_logreport") if r.when == "setup"]
    # The delay is spent in the item's setup, where it waits for its case's work; in
    # milliseconds (300 s would be far over the bound).
    assert setup.nodeid == "m.eval.yaml::a"
    assert 0.3 <= setup.duration < 30


@pytest.mark.parametrize("delay", ["slow", "-100"])
def test_mock_target_delay_must_be_milliseconds(project: pytest.Pytester, delay: str) -> None:
    write(
        project,
        ".agentv/targets.yaml",
        f"targets:\n  - name: default\n    provider: mock\n    delay_ms: {delay}\n",
    )
    write(project, "m.eval.yaml", "evalcases:" + expect_case("a", "x"))
    result = project.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            f"*mock target 'default' (.agentv/targets.yaml:4:15): delay_ms must be a number of "
            f"milliseconds >= 0, not {delay if delay == '-100' else repr(delay)}*"
        ]
    )


AGENT = """\
import json, sys
prompt, eval_id, attempt, out = sys.argv[1:5]
files = sys.argv[5:]
with open(out, "w") as f:
    json.dump({
        "output_messages": [
            {"role": "assistant", "tool_calls": [{"tool": "search", "input": {"q": prompt}}]},
            {"role": "assistant", "content": f"{eval_id}/{attempt}/{len(files)}: {prompt}"},
        ],
        "token_usage": {"input": 10, "output": 5},
        "cost_usd": 0.01,
        "duration_ms": 5,
    }, f)
"""


def test_cli_target_placeholders_and_output_file(project: pytest.Pytester) -> None:
    write(project, "agent.py", AGENT)
    write(project, "notes.md", "notes")
    write(
        project,
        ".agentv/targets.yaml",
        """
        targets:
          - name: default
            provider: cli
            command_template: python agent.py {PROMPT} {EVAL_ID} {ATTEMPT} {OUTPUT_FILE} {FILES}
            timeout_seconds: 20
        """,
    )
    write(
        project,
        "c.eval.yaml",
        """
        evalcases:
          - id: quoting
            input:
              - role: user
                content:
                  - {type: text, value: "it's $(id) & `x`"}
                  - {type: file, value: notes.md}
            evaluators:
              - name: expect
                type: code_judge
                script: [python, expect.py]
                config:
                  expect: "quoting/0/1: it's $(id) & `x`"
                  payload:
                    trace_summary:
                      event_count: 1
                      tool_names: [search]
                      tool_calls_by_name: {search: 1}
                      error_count: 0
                      token_usage: {input: 10, output: 5}
                      tool_calls: {search: 1}
                      cost_usd: 0.01
                      duration_ms: 5
        """,
    )
    result = project.runpytest("-rA")
    result.assert_outcomes(passed=1)


def test_cli_target_stdout_when_no_output_file(project: pytest.Pytester) -> None:
    write(
        project,
        ".agentv/targets.yaml",
        'targets:\n  - {name: default, provider: cli, command_template: "printf %s {PROMPT}"}\n',
    )
    write(project, "c.eval.yaml", "evalcases:" + expect_case("a", "What is the refund window?"))
    project.runpytest().assert_outcomes(passed=1)


ANSWERS_AGENT = """\
import json, sys
tool = {"tool": "lookup", "input": {"q": "refunds"}}
outputs = {
    "text-and-messages": {
        "text": "a summary",
        "output_messages": [{"role": "assistant", "content": "From the messages"}],
    },
    "last-message-only-calls": {
        "output_messages": [
            {"role": "assistant", "content": "Before the call"},
            {"role": "assistant", "content": None, "tool_calls": [tool]},
        ]
    },
    "object-text": {"text": {"days": 30}},
    "empty-messages": {"output_messages": [], "text": "From the text"},
    "no-assistant": {"output_messages": [{"role": "tool", "content": "tool output"}]},
}
print(json.dumps(outputs[sys.argv[1]]))
"""


ANSWERS_TARGETS = """\
targets:
  - {name: default, provider: cli, command_template: "python agent.py {EVAL_ID}"}
"""


#: Each case of ANSWERS_AGENT and the answer taken from its output.
CLI_ANSWERS = {
    "text-and-messages": "From the messages",
    "last-message-only-calls": "Before the call",
    "object-text": '{"days": 30}',
    "empty-messages": "From the text",
}


def test_cli_answers_are_taken_as_agentv_takes_them(project: pytest.Pytester) -> None:
    """Messages win over ``text``; the last assistant message with content is the answer; as in
    AgentV, messages without an answer grade as ''. Each case passes only on its own answer."""
    write(project, "agent.py", ANSWERS_AGENT)
    write(project, ".agentv/targets.yaml", ANSWERS_TARGETS)
    write(
        project,
        "c.eval.yaml",
        "evalcases:"
        + "".join(expect_case(case_id, answer) for case_id, answer in CLI_ANSWERS.items())
        + expect_case("no-assistant", "tool output"),
    )
    result = project.runpytest()
    assert outcomes(result.reprec) == {  # type: ignore[attr-defined]
        **{f"c.eval.yaml::{case_id}": "passed" for case_id in CLI_ANSWERS},
        "c.eval.yaml::no-assistant": "failed",
    }
    result.stdout.fnmatch_lines(["*answer is ''*"])


def test_cli_answer_that_gives_a_key_twice_is_not_graded(project: pytest.Pytester) -> None:
    """Which text is the answer is unknown: neither one, nor the JSON as plain text."""
    write(project, "agent.py", """print('{"text": "wrong", "text": "30 days"}')\n""")
    write(project, ".agentv/targets.yaml", ANSWERS_TARGETS)
    write(project, "c.eval.yaml", "evalcases:" + expect_case("a", "30 days"))
    result = project.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*cli target 'default' printed a JSON object with a duplicate key 'text'*"]
    )


@pytest.mark.parametrize(
    ("command", "message"),
    [
        (
            "echo broken agent >&2; exit 4",
            "*cli target 'default' exited with code 4: broken agent*",
        ),
        (
            "echo $$ >> agent.pids; exec sleep 30",
            "*cli target 'default' timed out after 1s and was killed*",
        ),
        (
            "true {OUTPUT_FILE}",
            "*cli target 'default' exited 0 but wrote nothing to {OUTPUT_FILE}*",
        ),
        ("true", "*cli target 'default' exited 0 but produced an empty answer*"),
    ],
    ids=["exit-code", "timeout", "no-output", "empty-answer"],
)
def test_cli_target_failures_are_not_graded(
    project: pytest.Pytester, command: str, message: str
) -> None:
    write(
        project,
        ".agentv/targets.yaml",
        f"targets:\n  - {{name: default, provider: cli, command_template: '{command}', "
        "timeout_seconds: 1}\n",
    )
    write(project, "c.eval.yaml", "evalcases:" + expect_case("a", "x") + expect_case("b", "x"))
    result = project.runpytest()
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["*ERROR at setup of eval: a*", message, "*2 not graded*"])
    assert result.duration < 25  # well short of the 30 s sleep of the timeout case
    if "sleep" in command:
        file = project.path / "agent.pids"
        written = file.stat().st_mtime
        pids = [(int(pid), written) for pid in file.read_text().split()]
        assert len(pids) == 2
        assert still_running(pids) == []


def test_environment_references_resolve_when_used(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(
        project,
        ".agentv/targets.yaml",
        """
        targets:
          - name: default
            provider: mock
            response: ${{ AGENT_REPLY }}
          - name: remote
            provider: openai
            model: gpt-4o-mini
            api_key: ${{ MISSING_PROVIDER_KEY }}
        """,
    )
    monkeypatch.setenv("AGENT_REPLY", "from the environment")
    write(
        project,
        "e.eval.yaml",
        "evalcases:"
        + expect_case("local", "from the environment")
        + expect_case("remote", "x", "\n    execution: {target: remote}"),
    )
    result = project.runpytest()
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*.agentv/targets.yaml:9:*: targets.remote.api_key: environment variable "
            "MISSING_PROVIDER_KEY is not set*"
        ]
    )


def test_target_selection_precedence(project: pytest.Pytester) -> None:
    wrong = "We never give refunds."
    right = "Refunds are accepted within 30 days of purchase."
    write(
        project,
        "file-level.eval.yaml",
        "execution: {target: wrong}\nevalcases:"
        + expect_case("file", wrong)
        + expect_case("case", right, "\n    execution: {target: default}"),
    )
    write(project, "legacy.eval.yaml", "target: wrong\nevalcases:" + expect_case("legacy", wrong))
    project.runpytest().assert_outcomes(passed=3)
    result = project.runpytest("--agentv-target", "wrong")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*eval 'case' failed*", "target: wrong"])


def test_unknown_target_and_missing_targets_file(project: pytest.Pytester) -> None:
    write(
        project,
        "u.eval.yaml",
        "evalcases:" + expect_case("a", "x", "\n    execution: {target: nope}"),
    )
    result = project.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*target 'nope' is not defined in .agentv/targets.yaml (known: default, wrong)*"]
    )
    (project.path / ".agentv" / "targets.yaml").unlink()
    result = project.runpytest()
    result.stdout.fnmatch_lines(["*define an 'agentv_target' fixture in a conftest.py*"])


def test_targets_file_is_found_upwards_or_given(project: pytest.Pytester) -> None:
    answer = "Refunds are accepted within 30 days of purchase."
    write(
        project,
        "deep/er/t.eval.yaml",
        "evalcases:" + expect_case("a", answer, judge="../../expect.py"),
    )
    project.runpytest().assert_outcomes(passed=1)
    write(
        project,
        "alt/targets.yaml",
        "targets:\n  - {name: default, provider: mock, response: alt}\n",
    )
    write(
        project,
        "deep/er/t.eval.yaml",
        "evalcases:" + expect_case("a", "alt", judge="../../expect.py"),
    )
    project.runpytest("--agentv-targets", "alt/targets.yaml").assert_outcomes(passed=1)


def test_unsupported_provider(project: pytest.Pytester) -> None:
    write(project, ".agentv/targets.yaml", "targets:\n  - {name: default, provider: bard}\n")
    write(project, "u.eval.yaml", "evalcases:" + expect_case("a", "x"))
    result = project.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*.agentv/targets.yaml:2:*: provider 'bard' is not supported by pytest-agentv; "
            "known: anthropic, azure, claude, claude-cli, claude-code, cli, codex, codex-cli, "
            "copilot, copilot-cli, copilot-log, gemini, gemini-cli, litellm, mock, openai, "
            "openrouter, pi-cli, replay (or an agentv_target fixture; plugins add providers with "
            "the pytest_agentv_make_target hook)*"
        ]
    )


#: A conftest that adds an ``echo`` provider: it answers with its ``prefix`` setting and the
#: question, and refuses a target without one.
ECHO_PROVIDER = """
import pytest
from pytest_agentv import ConfigError


class Echo:
    timeout = None

    def __init__(self, target):
        if "prefix" not in target.settings:
            raise ConfigError(f"{target.what}: an echo target needs a 'prefix'")
        self.name = target.name
        self.judge_target = target.judge_target
        self.prefix = target.settings["prefix"]

    async def invoke(self, case, attempt):
        return f"{self.prefix} {case.question}"


@pytest.hookimpl
def pytest_agentv_make_target(config, target):
    return Echo(target) if target.provider == "echo" else None
"""


def test_a_plugin_adds_a_provider_through_the_hook_alone(project: pytest.Pytester) -> None:
    write(project, "conftest.py", ECHO_PROVIDER)
    write(
        project,
        ".agentv/targets.yaml",
        """
        targets:
          - {name: default, provider: echo, prefix: "echo:"}
          - {name: bare, provider: echo}
          - {name: other, provider: parrot}
        """,
    )
    write(
        project,
        "e.eval.yaml",
        "evalcases:"
        + expect_case("echoed", "echo: What is the refund window?")
        + expect_case("bare", "x", "\n    execution: {target: bare}")
        + expect_case("unknown", "x", "\n    execution: {target: other}"),
    )
    reprec = project.inline_run()
    passed, _, failed = reprec.listoutcomes()
    assert [r.nodeid.rpartition("::")[2] for r in passed] == ["echoed"]
    errors = {r.nodeid.rpartition("::")[2]: str(r.longrepr) for r in failed}
    assert "target 'bare'" in errors["bare"] and "an echo target needs a 'prefix'" in errors["bare"]
    # The providers known at that moment include the one the conftest answered.
    assert (
        "provider 'parrot' is not supported by pytest-agentv; known: anthropic, azure, claude, "
        "claude-cli, claude-code, cli, codex, codex-cli, copilot, copilot-cli, copilot-log, "
        "echo, gemini, gemini-cli, litellm, mock, openai, openrouter, pi-cli, replay"
        in errors["unknown"]
    )


def test_only_the_selected_cases_build_their_targets(project: pytest.Pytester) -> None:
    """A target is built (a plugin's may start a server) for a case the run will send it:
    never for one that -k or --deselect left out, nor by --collect-only."""
    logged = ECHO_PROVIDER.replace(
        "        self.name = target.name\n",
        "        self.name = target.name\n"
        "        with open('built.log', 'a') as log:\n"
        "            print(target.name, file=log)\n",
    )
    write(project, "conftest.py", logged)
    write(
        project,
        ".agentv/targets.yaml",
        """
        targets:
          - {name: default, provider: echo, prefix: "echo:"}
          - {name: other, provider: echo, prefix: "echo:"}
        """,
    )
    answer = "echo: What is the refund window?"
    write(
        project,
        "e.eval.yaml",
        "evalcases:"
        + expect_case("one", answer)
        + expect_case("two", answer, "\n    execution: {target: other}"),
    )
    log = project.path / "built.log"

    def built(*args: str) -> list[str]:
        log.unlink(missing_ok=True)
        project.inline_run(*args)
        return log.read_text().split() if log.exists() else []

    assert built("-k", "one") == ["default"]
    assert built("--deselect", "e.eval.yaml::one") == ["other"]
    assert built("--collect-only") == []
    assert built() == ["default", "other"]


def test_agentv_target_fixture_sync_and_async(project: pytest.Pytester) -> None:
    up = "../expect.py"
    write(
        project,
        "sync/s.eval.yaml",
        "evalcases:" + expect_case("a", "sync: What is the refund window?", judge=up),
    )
    write(project, "async/a.eval.yaml", "evalcases:" + expect_case("b", "async: a/b", judge=up))
    write(
        project,
        "file/f.eval.yaml",
        "evalcases:"
        + expect_case("c", "We never give refunds.", "\n    execution: {target: wrong}", up),
    )
    write(
        project,
        "sync/conftest.py",
        """
        import pytest

        @pytest.fixture
        def agentv_target():
            return lambda case: "sync: " + case.question
        """,
    )
    write(
        project,
        "async/conftest.py",
        """
        import asyncio
        import pytest

        @pytest.fixture
        def agentv_target():
            async def answer(case):
                await asyncio.sleep(0)
                return [{"role": "assistant", "content": f"async: {case.dataset}/{case.id}"}]
            return answer
        """,
    )
    write(
        project,
        "file/conftest.py",
        """
        import pytest

        @pytest.fixture
        def agentv_target():
            return None  # use the targets file here
        """,
    )
    project.runpytest().assert_outcomes(passed=3)
    # Under pytest-xdist, with the conversation aggregations of tests/test_conversation.py and
    # the workspaces of tests/test_workspaces.py (a file's cases dealt to both workers, each
    # starting its own shared workspace) in the same session (one xdist session for all three).
    aggregation_cases(project, "conversation")
    shared_and_own_workspaces(project, "workspaces")
    result = project.runpytest("-n", "2", "--agentv-results=r.jsonl")
    assert {
        nodeid: outcome
        for nodeid, outcome in outcomes(result.reprec).items()  # type: ignore[attr-defined]
        if not nodeid.startswith(("conversation/", "workspaces/"))
    } == {
        "sync/s.eval.yaml::a": "passed",
        "async/a.eval.yaml::b": "passed",
        "file/f.eval.yaml::c": "passed",
    }
    assert_aggregations(project, result, "conversation")
    assert_workspaces_graded(project, result, "workspaces")


def test_crashing_target_is_an_error_and_isolated(project: pytest.Pytester) -> None:
    write(
        project,
        "conftest.py",
        """
        import pytest

        @pytest.fixture
        def agentv_target():
            def answer(case):
                if case.id == "boom":
                    raise RuntimeError("agent crashed")
                if case.id == "odd":
                    return 42
                return "fine"
            return answer
        """,
    )
    write(
        project,
        "c.eval.yaml",
        "evalcases:"
        + expect_case("boom", "x")
        + expect_case("odd", "x")
        + expect_case("ok", "fine"),
    )
    result = project.runpytest()
    result.assert_outcomes(passed=1, errors=2)
    result.stdout.fnmatch_lines(
        [
            "*eval 'boom' was not graded: agentv_target fixture (answer) raised RuntimeError: "
            "agent crashed",
            "*eval 'odd' was not graded: agentv_target fixture (answer) returned int*",
        ]
    )
    assert "Traceback" not in result.stdout.str()


def test_target_fixture_under_another_function_name(project: pytest.Pytester) -> None:
    write(
        project,
        "conftest.py",
        """
        import pytest

        @pytest.fixture(name="agentv_target")
        def my_agent():
            return lambda case: "renamed"
        """,
    )
    write(project, "r.eval.yaml", "evalcases:" + expect_case("a", "renamed"))
    project.runpytest().assert_outcomes(passed=1)
