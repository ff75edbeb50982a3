"""CLI targets as AgentV writes them: files_format, {GUIDELINES}, provider_batching,
healthcheck, and the settings pytest-agentv does not implement."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.conftest import KEYWORDS_JUDGE
from tests.helpers import outcomes, recorded, still_running, write

ECHO_AGENT = """\
import json, sys
out = sys.argv[1]
with open(out, "w") as f:
    f.write(json.dumps(sys.argv[2:]))
"""

ARGS_JUDGE = """\
import json, sys
payload = json.load(sys.stdin)
expected = payload["config"]["argv"]
actual = json.loads(payload["candidate_answer"])
print(json.dumps({"score": 1.0 if actual == expected else 0.0,
                  "misses": [] if actual == expected else [repr(actual)]}))
"""


def rows(path) -> dict[str, dict]:
    return {row["eval_id"]: row for row in map(json.loads, path.read_text().splitlines())}


def test_files_format_and_guidelines_placeholders(project: pytest.Pytester) -> None:
    write(project, "agent.py", ECHO_AGENT)
    write(project, "args.py", ARGS_JUDGE)
    write(project, ".agentv/config.yaml", "guideline_patterns: ['**/*.instructions.md']\n")
    write(project, "style.instructions.md", "Be kind.\n")
    write(project, "my notes.txt", "notes")
    write(
        project,
        ".agentv/targets.yaml",
        """
        targets:
          - name: default
            provider: cli
            command_template: python agent.py {OUTPUT_FILE} {FILES} -- {GUIDELINES} {UNKNOWN}
            files_format: --file {path} --name {basename}
        """,
    )
    guide = str(project.path / "style.instructions.md")
    notes = str(project.path / "my notes.txt")
    argv = ["--file", guide, "--name", "style.instructions.md", "--file", notes]
    argv += [
        "--name",
        "my notes.txt",
        "--",
        '<file path="style.instructions.md">\nBe kind.\n</file>',
    ]
    argv += ["{UNKNOWN}"]
    write(
        project,
        "f.eval.yaml",
        f"""
        evalcases:
          - id: files
            input:
              - role: user
                content:
                  - {{type: text, value: "{{FILES}} is not expanded from the prompt"}}
                  - {{type: file, value: style.instructions.md}}
                  - {{type: file, value: my notes.txt}}
            evaluators:
              - name: args
                type: code_judge
                script: [python, args.py]
                argv: {json.dumps(argv)}
        """,
    )
    result = project.runpytest()
    result.assert_outcomes(passed=1)


BATCH_AGENT = """\
import json, sys
out, log = sys.argv[1], sys.argv[2]
files = sys.argv[3:]
with open(log, "a") as f:
    f.write(json.dumps(files) + "\\n")
with open(out, "w") as f:
    for case_id in ("a", "b", "c"):
        if case_id == "c":
            continue  # the batch leaves this case out
        f.write(json.dumps({"id": case_id, "text": f"answer {case_id} (30 days)"}) + "\\n")
    f.write("\\n")
"""


def batch_project(project: pytest.Pytester, agent: str = BATCH_AGENT, folder: str = "") -> None:
    """A batching CLI target and its cases a, b and c, in ``folder`` (a folder of its own:
    its own targets file and keywords judge)."""
    if folder:
        folder += "/"
        write(project, f"{folder}keywords.py", KEYWORDS_JUDGE)
    write(project, f"{folder}batch.py", agent)
    for name in ("a", "b", "c"):
        write(project, f"{folder}{name}.txt", name)
    write(
        project,
        f"{folder}.agentv/targets.yaml",
        """
        targets:
          - name: default
            provider: cli
            provider_batching: true
            command_template: python batch.py {OUTPUT_FILE} runs.log {FILES}
        """,
    )
    cases = "".join(
        f"""
  - id: {name}
    input: [{{role: user, content: [{{type: file, value: {name}.txt}}]}}]
    evaluators:
      - {{name: kw, type: code_judge, script: [python, keywords.py], keywords: ["{name} ("]}}
"""
        for name in ("a", "b", "c")
    )
    write(project, f"{folder}b.eval.yaml", "evalcases:" + cases)


def one_batch_without_c(
    project: pytest.Pytester, result: pytest.RunResult, folder: str = ""
) -> None:
    """The command ran once, for a, b and c; c, which has no line, was not graded."""
    eval_file = f"{folder}/b.eval.yaml" if folder else "b.eval.yaml"
    assert {
        nodeid: outcome
        for nodeid, outcome in outcomes(result.reprec).items()  # type: ignore[attr-defined]
        if nodeid.startswith(eval_file)
    } == {f"{eval_file}::a": "passed", f"{eval_file}::b": "passed", f"{eval_file}::c": "error"}
    result.stdout.fnmatch_lines(
        [
            "*eval 'c' was not graded: the batch output of cli target 'default' has no line "
            "with id 'c'*"
        ]
    )
    runs = (project.path / folder / "runs.log").read_text().splitlines()
    assert len(runs) == 1
    assert [path.rsplit("/", 1)[1] for path in json.loads(runs[0])] == ["a.txt", "b.txt", "c.txt"]


@pytest.mark.parametrize("concurrency", ["1", "8"])
def test_batch_runs_once_for_the_run_and_a_missing_id_is_not_graded(
    project: pytest.Pytester, concurrency: str
) -> None:
    batch_project(project)
    result = project.runpytest("--agentv-concurrency", concurrency, "--agentv-results", "o.jsonl")
    one_batch_without_c(project, result)
    assert rows(project.path / "o.jsonl")["a"]["candidate_answer"] == "answer a (30 days)"


def test_batch_sends_only_the_selected_cases(project: pytest.Pytester) -> None:
    batch_project(project)
    result = project.runpytest("--deselect", "b.eval.yaml::b")
    result.assert_outcomes(passed=1, errors=1, deselected=1)
    runs = (project.path / "runs.log").read_text().splitlines()
    assert [path.rsplit("/", 1)[1] for path in json.loads(runs[0])] == ["a.txt", "c.txt"]


PASSES_ON = """
import pytest

@pytest.fixture
def agentv_target():
    return None  # the targets file's target answers
"""


def passes_on(project: pytest.Pytester, folder: str = "") -> None:
    """The batch project in ``folder`` gets an agentv_target fixture returning None, and every
    answer passes every case's judge there: only the line a case is given decides."""
    cases = project.path / folder / "b.eval.yaml"
    cases.write_text(
        re.sub(r'keywords: \["[abc] \("\]', 'keywords: ["30 days"]', cases.read_text())
    )
    write(project, f"{folder}/conftest.py" if folder else "conftest.py", PASSES_ON)


def test_batch_under_xdist_runs_once_per_worker_at_most(project: pytest.Pytester) -> None:
    """Also for cases an agentv_target fixture passes on to the file's target: both projects in
    one session (``--dist loadfile``: each file's cases go to one worker)."""
    batch_project(project, folder="plain")
    batch_project(project, folder="fixture")
    passes_on(project, "fixture")
    result = project.runpytest("-n", "2", "--dist", "loadfile")
    result.assert_outcomes(passed=4, errors=2)
    for folder in ("plain", "fixture"):
        one_batch_without_c(project, result, folder)


def test_a_case_a_target_fixture_passes_on_is_batched(project: pytest.Pytester) -> None:
    """With an agentv_target fixture returning None (the file's target answers), each case ran
    the batch command alone and took its whole output as one answer: 'c', which has no line,
    got the others' answers and passed. (Under xdist: the test above.)"""
    batch_project(project)
    passes_on(project)
    one_batch_without_c(project, project.runpytest())


#: Batch outputs that cannot be used, by name, and what is said of each.
BAD_BATCH_OUTPUTS = {
    "duplicate": (
        '{"id": "a", "text": "x"}\n{"id": "a", "text": "y"}\n',
        "*line 2: id 'a' is given twice*",
    ),
    "no-id": (
        '{"text": "no id"}\n',
        "*line 1: each line must be a JSON object with a string 'id'*",
    ),
    "bad-json": (
        '{"id": "a", "text": \n',
        "*batch output of cli target 'default':1:*invalid JSON*",
    ),
    "key-twice": (
        '{"id": "a", "text": "x", "text": "y"}\n',
        "*batch output of cli target 'default':1:*duplicate key 'text'*",
    ),
}


def test_bad_batch_output_leaves_every_case_ungraded(project: pytest.Pytester) -> None:
    """Each output's batch project in a folder of its own: one session."""
    for name, (output, _) in BAD_BATCH_OUTPUTS.items():
        batch_project(project, f"import sys\nopen(sys.argv[1], 'w').write({output!r})\n", name)
    result = project.runpytest()
    assert outcomes(result.reprec) == {  # type: ignore[attr-defined]
        f"{name}/b.eval.yaml::{case}": "error" for name in BAD_BATCH_OUTPUTS for case in "abc"
    }
    for _, problem in BAD_BATCH_OUTPUTS.values():
        result.stdout.fnmatch_lines([problem])


@pytest.fixture
def health_server() -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200 if self.path == "/ok" else 503)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def health_targets(project: pytest.Pytester, healthcheck: str) -> None:
    write(project, "agent.py", "print('Refunds within 30 days')\n")
    write(
        project,
        ".agentv/targets.yaml",
        f"""
        targets:
          - name: default
            provider: cli
            command_template: python agent.py
            healthcheck: {healthcheck}
        """,
    )
    cases = "".join(
        f"""
  - id: {name}
    input: q
    evaluators:
      - {{name: kw, type: code_judge, script: [python, keywords.py], keywords: ["30 days"]}}
"""
        for name in ("a", "b")
    )
    write(project, "h.eval.yaml", "evalcases:" + cases)


def test_command_healthcheck_runs_once_before_the_first_case(project: pytest.Pytester) -> None:
    write(project, "check.py", "open('checks.log', 'a').write('x')\n")
    health_targets(project, "{type: command, command_template: python check.py}")
    project.runpytest().assert_outcomes(passed=2)
    assert (project.path / "checks.log").read_text() == "x"


def test_failing_healthcheck_leaves_its_cases_ungraded(project: pytest.Pytester) -> None:
    write(project, "check.py", "import sys\nprint('db is down', file=sys.stderr)\nsys.exit(3)\n")
    health_targets(project, "{type: command, command_template: python check.py}")
    result = project.runpytest()
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(
        ["*healthcheck of cli target 'default' failed: the command exited with code 3: db is down*"]
    )


@pytest.mark.parametrize(("path", "outcome"), [("/ok", {"passed": 2}), ("/down", {"errors": 2})])
def test_http_healthcheck(
    project: pytest.Pytester, health_server: str, path: str, outcome: dict[str, int]
) -> None:
    health_targets(project, f"{{url: '{health_server}{path}', timeout_seconds: 5}}")
    result = project.runpytest()
    result.assert_outcomes(**outcome)
    if "errors" in outcome:
        result.stdout.fnmatch_lines(["*healthcheck*failed: GET *answered HTTP 503*"])


def two_keyword_cases(project: pytest.Pytester, b_target: str = "") -> None:
    """Cases ``a`` and ``b`` graded by the keywords judge (``b`` answered by ``b_target``)."""
    b = (
        f"{{id: b, input: q, execution: {{target: {b_target}}}}}"
        if b_target
        else "{id: b, input: q}"
    )
    write(
        project,
        "w.eval.yaml",
        f"""
        execution:
          evaluators:
            - {{name: k, type: code_judge, script: [python, keywords.py], keywords: [days]}}
        evalcases:
          - {{id: a, input: q}}
          - {b}
        """,
    )


def test_settings_we_do_not_implement_warn_once_by_name(project: pytest.Pytester) -> None:
    write(project, "agent.py", "print('Refunds within 30 days')\n")
    write(
        project,
        ".agentv/targets.yaml",
        """
        targets:
          - name: default
            provider: cli
            commandTemplate: python agent.py
            workers: 4
            timout_seconds: 5
          - name: unused
            provider: mock
            log_format: json
        """,
    )
    two_keyword_cases(project)
    result = project.runpytest("-W", "always")
    result.assert_outcomes(passed=2)
    text = result.stdout.str()
    assert text.count("'workers' is an AgentV setting pytest-agentv does not implement") == 1
    assert text.count("'timout_seconds' is not a setting pytest-agentv or AgentV knows") == 1
    assert "(did you mean 'timeout_seconds'?)" in text
    assert "log_format" not in text  # a target no case uses says nothing


QUOTED_PLACEHOLDERS = """
targets:
  - name: default
    provider: cli
    command_template: python agent.py "{PROMPT}" --id='{EVAL_ID}' {FILES}
    healthcheck:
      command_template: test -n "x{OUTPUT_FILE}"
  - name: plain
    provider: cli
    command_template: python agent.py {PROMPT} --say="hi there"
"""


def test_a_placeholder_inside_quotes_warns_at_its_line(project: pytest.Pytester) -> None:
    """``"{PROMPT}"``: the value is already one shell-quoted argument, and inside double quotes
    its single quotes are literal, so a prompt's ``$(...)`` would run."""
    write(project, "agent.py", "import sys; print('Refunds within 30 days', sys.argv[1:])\n")
    write(project, ".agentv/targets.yaml", QUOTED_PLACEHOLDERS)
    two_keyword_cases(project, b_target="plain")
    result = project.runpytest("-W", "always")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "*.agentv/targets.yaml:5: target 'default': command_template writes {PROMPT}, "
            "{EVAL_ID} inside quotes, which is unsafe: placeholders are filled in as "
            "shell-quoted single arguments already*; write them without quotes",
            "*.agentv/targets.yaml:7: target 'default': healthcheck.command_template writes "
            "{OUTPUT_FILE} inside quotes*",
        ]
    )
    assert "target 'plain'" not in result.stdout.str()


def test_an_output_file_flood_is_not_read(project: pytest.Pytester) -> None:
    """stdout is capped at 1 MiB; an answer written to {OUTPUT_FILE} is bounded the same way."""
    write(project, "flood.py", "import sys\nopen(sys.argv[1], 'w').write('x' * 3_000_000)\n")
    write(
        project,
        ".agentv/targets.yaml",
        """
        targets:
          - name: default
            provider: cli
            command_template: python flood.py {OUTPUT_FILE}
        """,
    )
    write(
        project,
        "f.eval.yaml",
        """
        evalcases:
          - id: flood
            input: q
            evaluators: [{name: kw, type: code_judge, script: [python, keywords.py]}]
        """,
    )
    result = project.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*wrote more than 1024 KiB to {OUTPUT_FILE}; its output was not read*"]
    )


def test_a_healthcheck_still_running_when_the_run_stops_is_killed(
    project: pytest.Pytester,
) -> None:
    """Cases waiting on a slow healthcheck are cancelled with the run (here by ``-x``); the check
    must go with them, not run on after pytest returns (as it would in an IDE or pytester)."""
    write(
        project,
        "check.py",
        "import os, time\nopen('check.pid', 'w').write(str(os.getpid()))\ntime.sleep(120)\n",
    )
    health_targets(
        project, "{type: command, command_template: python check.py, timeout_seconds: 120}"
    )
    write(
        project,
        "test_first.py",
        """
        import pathlib, time

        def test_fails_once_the_check_runs():
            pid = pathlib.Path("check.pid")
            for _ in range(3000):
                if pid.exists() and pid.read_text():
                    break
                time.sleep(0.01)
            assert False, "stop the run"
        """,
    )
    (project.path / "h.eval.yaml").rename(project.path / "z.eval.yaml")
    reprec = project.inline_run("-x", "--agentv-concurrency", "4")
    reprec.assertoutcome(failed=1)
    [(pid, written)] = recorded(project.path / "check.pid")
    try:
        assert still_running([(pid, written)]) == []
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


#: Settings of a cli target ``default`` that cannot be used, by name, and what is said of each
#: (``{file}``: the targets file).
SETTING_ERRORS = {
    "command_template": (
        "",
        "cli target 'default' ({file}:2:5) needs a 'command' (or 'command_template') string",
    ),
    "timeout_seconds": (
        "command_template: python agent.py\n    timeout_seconds: soon",
        "cli target 'default' ({file}:5:22): timeout_seconds must be a number > 0",
    ),
    "files_format": (
        "command_template: python agent.py\n    files_format: 5",
        "cli target 'default' ({file}:5:19): files_format must be a string like '--file {path}'",
    ),
    "url": (
        "command_template: python agent.py\n    healthcheck:\n      type: http\n"
        "      url: localhost:8080",
        "healthcheck of cli target 'default' ({file}:7:12): 'url' must be an http(s) URL",
    ),
    "healthcheck_timeout": (
        "command_template: python agent.py\n    healthcheck: {command_template: ok, "
        "timeout_seconds: -1}",
        "healthcheck of cli target 'default' ({file}:5:*): timeout_seconds must be a number > 0",
    ),
    "cwd": (
        "command_template: python agent.py\n    cwd: no-such-folder",
        "cli target 'default' ({file}:5:10): cwd 'no-such-folder' not found",
    ),
}


def test_setting_errors_name_the_targets_file_and_line(project: pytest.Pytester) -> None:
    """Each setting's project in a folder of its own: one session."""
    for name, (settings, _) in SETTING_ERRORS.items():
        write(
            project,
            f"{name}/.agentv/targets.yaml",
            f"targets:\n  - name: default\n    provider: cli\n    {settings}\n",
        )
        write(project, f"{name}/c.eval.yaml", "evalcases:\n  - {id: a, input: q}\n")
    result = project.runpytest()
    assert outcomes(result.reprec) == {  # type: ignore[attr-defined]
        f"{name}/c.eval.yaml::a": "error" for name in SETTING_ERRORS
    }
    for name, (_, message) in SETTING_ERRORS.items():
        where = f"{name}/.agentv/targets.yaml"
        result.stdout.fnmatch_lines(["*" + message.replace("{file}", where) + "*"])


def test_a_prompt_too_long_for_a_command_says_to_use_the_prompt_file(
    project: pytest.Pytester,
) -> None:
    """A long conversation's history in ``{PROMPT}`` failed at turn 64 with "Argument list
    too long", an unexpected OSError; ``{PROMPT_FILE}`` has no such limit."""
    write(
        project,
        ".agentv/targets.yaml",
        """
        targets:
          - {name: default, provider: cli, command_template: "echo {PROMPT} | head -c 9"}
          - {name: file, provider: cli, command_template: "tail -c 9 {PROMPT_FILE}"}
        """,
    )
    turns = "".join(
        f"      - {{input: {'x' * 50_000}, assertions: [{{type: contains, value: x}}]}}\n"
        for _ in range(3)
    )
    chat = f"    mode: conversation\n    turns:\n{turns}"
    write(
        project,
        "c.eval.yaml",
        f"tests:\n  - id: arg\n{chat}  - id: file\n    execution: {{target: file}}\n{chat}",
    )
    result = project.runpytest()
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*eval 'arg' was not graded: turn 3: cli target 'default': its command is 1*,* bytes, "
            "more than the system lets a command be (Argument list too long); pass a long prompt"
            " (a long conversation's history) as a file: {PROMPT_FILE} instead of {PROMPT}"
        ]
    )
