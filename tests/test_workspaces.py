"""AgentV v4 workspaces: a template copied, repositories checked out, lifecycle hooks run with
v4's context on stdin, and the changes the agent made (``file_changes``) passed to graders with
``workspace_path``; hooks that fail, hang or leave processes behind leave their cases not graded.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.fake_openai import FakeOpenAI, freeform
from tests.helpers import (
    LOGGING_HOOK,
    agentv_results,
    hook_calls,
    judge_ini,
    outcomes,
    recorded,
    still_running,
    write,
)

#: The agents are shell commands (a CLI target runs its command with ``sh -c``): a test runs
#: them by the dozen, and a Python process costs ten times a shell's CPU.

#: A CLI agent that edits the template's file, adds one, and says where it ran.
EDITING_AGENT = (
    "printf 'changed\\n' > hello.txt; printf 'new\\n' > new.txt;"
    ' echo "$(pwd -P)" {WORKSPACE_PATH}'
)

#: An agent that adds a file named after its case and lists what it sees.
LISTING_AGENT = "printf x > {EVAL_ID}.txt; echo $(ls)"

#: A v4 code grader that checks the diff and the workspace it is told about.
DIFF_GRADER = """\
import json, os, sys
p = json.load(sys.stdin)
diff = p["file_changes"] or ""
ws = p["workspace_path"]
checks = {
    "edit": "a/hello.txt" in diff and "+changed" in diff,
    "create": "--- /dev/null" in diff and "b/new.txt" in diff,
    "where": bool(ws) and p["output"].split() == [ws, ws],
    "env": os.environ.get("AGENTV_WORKSPACE_PATH") == ws,
}
print(json.dumps({"assertions": [{"text": k, "passed": v} for k, v in checks.items()]}))
"""


def _files(pytester: pytest.Pytester) -> None:
    write(pytester, "tpl/hello.txt", "hello\n")
    write(pytester, "grader.py", DIFF_GRADER)
    _agents(pytester, default=EDITING_AGENT)


def _agent(pytester: pytest.Pytester, agent: str, args: str = "") -> None:
    """The ``default`` target: a CLI agent (a shell script's text, ``agent.sh``), run in the
    workspace."""
    script = write(pytester, "agent.sh", agent)
    _agents(pytester, default=f"sh {script} {args}")


def _agents(pytester: pytest.Pytester, folder: str = ".", **commands: str) -> None:
    """CLI targets (of the project, or of ``folder``) named after the keywords, each running its
    shell command in the workspace."""
    targets = [
        {"name": name, "provider": "cli", "command": command} for name, command in commands.items()
    ]
    write(pytester, f"{folder}/.agentv/targets.yaml", json.dumps({"targets": targets}))


#: Cases of their own that set their own template, and cases of the file's: the shared
#: workspace is the template of whichever ran first.
OWN_CASE = """
  - id: own
    input: q
    workspace: {template: ./tB}
    assertions:
      - {type: contains, value: from_b.txt}
      - {type: contains, value: from_a.txt, negate: true}"""
SHARED_CASE = """
  - id: shared
    input: q
    assertions:
      - {type: contains, value: from_a.txt}
      - {type: contains, value: from_b.txt, negate: true}"""


def shared_and_own_workspaces(pytester: pytest.Pytester, folder: str = ".") -> None:
    """Files in ``folder`` (with their own targets) whose graders check the diff and
    ``workspace_path`` of a shared workspace and of each case's own, and whose cases see the
    template of whichever case started the shared workspace. (Each file's workspace is its own:
    one session runs them all.)"""
    write(pytester, f"{folder}/tpl/hello.txt", "hello\n")
    write(pytester, f"{folder}/grader.py", DIFF_GRADER)
    write(pytester, f"{folder}/tA/from_a.txt", "a\n")
    write(pytester, f"{folder}/tB/from_b.txt", "b\n")
    _agents(pytester, folder, editing=EDITING_AGENT, listing=LISTING_AGENT)
    grader = "[{type: code-grader, command: [python, grader.py]}]"
    for isolation in ("shared", "per_test"):
        write(
            pytester,
            f"{folder}/{isolation}.eval.yaml",
            f"""
            execution: {{target: editing}}
            workspace:
              template: tpl
              isolation: {isolation}
              hooks:
                after_each: {{reset: fast}}
            tests:
              - {{id: one, criteria: c, input: edit, assertions: {grader}}}
              - {{id: two, criteria: c, input: edit, assertions: {grader}}}
            """,
        )
    for first, cases in (("own", OWN_CASE + SHARED_CASE), ("shared", SHARED_CASE + OWN_CASE)):
        write(
            pytester,
            f"{folder}/{first}-first.eval.yaml",
            "execution: {target: listing}\nworkspace: {template: ./tA}\ntests:" + cases,
        )


def assert_workspaces_graded(
    pytester: pytest.Pytester, result: pytest.RunResult, folder: str = "."
) -> None:
    """``shared_and_own_workspaces`` in ``folder``: every case passed, the template untouched."""
    prefix = "" if folder == "." else f"{folder}/"
    assert {
        nodeid: outcome
        for nodeid, outcome in outcomes(result.reprec).items()  # type: ignore[attr-defined]
        if nodeid.startswith(prefix)
    } == {
        f"{prefix}{name}.eval.yaml::{case}": "passed"
        for name, cases in (
            ("shared", ("one", "two")),
            ("per_test", ("one", "two")),
            ("own-first", ("own", "shared")),
            ("shared-first", ("shared", "own")),
        )
        for case in cases
    }
    template = pytester.path / folder / "tpl"
    assert (template / "hello.txt").read_text() == "hello\n"
    assert not (template / "new.txt").exists()


def test_graders_get_the_diff_and_a_shared_workspace_is_whatever_case_starts_it(
    project: pytest.Pytester,
) -> None:
    """The file's template made the shared workspace only when a case of its own ran first; a
    case that set its own template gave every case its template when it ran first. (Under
    pytest-xdist, where one file's cases are dealt to both workers: in the session of
    tests/test_targets.py's test_agentv_target_fixture_sync_and_async.)"""
    shared_and_own_workspaces(project)
    assert_workspaces_graded(project, project.runpytest())


def test_hooks_run_in_v4_order_with_its_context_and_reset_undoes_each_case(
    project: pytest.Pytester,
) -> None:
    write(project, "tpl/seed.txt", "seed\n")
    write(project, "hook.sh", LOGGING_HOOK)
    _agents(project, default=LISTING_AGENT)
    hooks = "\n".join(
        f"    {name}: {{command: [sh, hook.sh, {name}, '{{{{workspace_path}}}}']"
        + (", reset: fast}" if name == "after_each" else "}")
        for name in ("before_all", "before_each", "after_each", "after_all")
    )
    write(
        project,
        "ws.eval.yaml",
        "workspace:\n  template: tpl\n  hooks:\n"
        + hooks
        + """
tests:
  - {id: a, criteria: c, input: qa, assertions: [{type: equals, value: a.txt seed.txt}]}
  - {id: b, criteria: c, input: qb, assertions: [{type: equals, value: b.txt seed.txt}]}
""",
    )
    result = project.runpytest("-p", "no:randomly")
    result.assert_outcomes(passed=2)
    calls = [
        (name, context["test_id"], context["case_input"], path)
        for _, (name, path), context in hook_calls(project.path / "hooks.log")
    ]
    assert [(name, test_id, case_input) for name, test_id, case_input, _ in calls] == [
        ("before_all", "__before_all__", None),
        ("before_each", "a", "qa"),
        ("after_each", "a", "qa"),
        ("before_each", "b", "qb"),
        ("after_each", "b", "qb"),
        ("after_all", "__after_all__", None),
    ]
    assert len({path for *_, path in calls}) == 1  # one shared workspace, named in every call
    assert not Path(calls[0][3]).exists()  # and removed when the run ended


def test_a_failing_or_hanging_hook_leaves_every_case_it_serves_not_graded(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-canary-openai-0123456789abcdef")
    hooks = {
        "fails": (
            '{command: [python, -c, \'import sys; print("partial"); '
            'sys.exit("boom sk-canary-openai-0123456789abcdef")\']}',
            "workspace hook before_all (python -c *) exited with code 1: boom ?redacted?",
        ),
        "hangs": (
            "{command: [python, -c, 'import time; time.sleep(60)'], timeout_ms: 500}",
            "workspace hook before_all (python -c *) timed out after 0.5s and was killed*",
        ),
    }
    for name, (hook, _) in hooks.items():
        write(
            project,
            f"{name}.eval.yaml",
            f"""
            workspace:
              hooks:
                before_all: {hook}
            tests:
              - {{id: a, criteria: c, input: q, assertions: [{{type: contains, value: x}}]}}
              - {{id: b, criteria: c, input: q, assertions: [{{type: contains, value: x}}]}}
            """,
        )
    result = project.runpytest()
    assert outcomes(result.reprec) == {  # type: ignore[attr-defined]
        f"{name}.eval.yaml::{case}": "error" for name in hooks for case in "ab"
    }
    for name, (_, problem) in hooks.items():
        for case in "ab":
            result.stdout.fnmatch_lines([f"*not graded: {name}.eval.yaml::{case}: {problem}"])
    result.stdout.fnmatch_lines(["its output: partial"])  # what the failing hook printed
    assert "sk-canary-openai" not in result.stdout.str()


def _not_graded(project: pytest.Pytester, **workspaces: tuple[str, str]) -> None:
    """Files named after the keywords, each with its ``workspace`` (YAML flow text) and one case,
    run in one session: each case is not graded, and the summary gives its ``problem`` (an
    fnmatch pattern) as the reason."""
    case = "{id: a, criteria: c, input: q, assertions: [{type: contains, value: x}]}"
    for name, (workspace, _) in workspaces.items():
        write(project, f"{name}.eval.yaml", f"workspace: {workspace}\ntests:\n  - {case}\n")
    result = project.runpytest()
    assert outcomes(result.reprec) == {  # type: ignore[attr-defined]
        f"{name}.eval.yaml::a": "error" for name in workspaces
    }
    for name, (_, problem) in workspaces.items():
        result.stdout.fnmatch_lines([f"*not graded: {name}.eval.yaml::a: {problem}"])


def test_a_hook_that_leaves_a_process_running_fails_and_the_process_is_killed(
    project: pytest.Pytester,
) -> None:
    _not_graded(
        project,
        ws=(
            "{hooks: {before_each: {command: [sh, -c, 'sleep 60 & echo $! > left.pid']}}}",
            "workspace hook before_each (sh -c *) exited but left 1 process(es) running*",
        ),
    )
    assert still_running(recorded(project.path / "left.pid")) == []


def test_a_workspace_that_cannot_be_made_leaves_its_cases_not_graded(
    project: pytest.Pytester,
) -> None:
    write(project, "tpl/file.txt", "not a repository\n")
    _not_graded(
        project,
        unreachable_clone=(
            "{repos: [{path: ./repo, repo: ./tpl}]}",
            "workspace repo './tpl' could not be cloned: git clone exited with code *",
        ),
        missing_local_path=(
            # It was read as GitHub's ./upstream and cloned from github.com.
            "{repos: [{path: ./repo, repo: ./upstream}]}",
            "workspace repo './upstream' not found (searched from the eval file's folder up*",
        ),
        file_url_outside_rootdir=(
            "{repos: [{path: ./repo, repo: 'file:///nonexistent/agentv-missing.git'}]}",
            "workspace repo reference '/nonexistent/agentv-missing.git' resolves outside the "
            "rootdir; refused",
        ),
        template_outside_rootdir=(
            "{template: /}",
            "workspace template reference '/' resolves outside the rootdir; refused*",
        ),
        missing_command=(
            "{env: {required_commands: [agentv-no-such-command], required_python_modules: [json]}}",
            "workspace env check failed (missing_command.eval.yaml): missing command: "
            "agentv-no-such-command",
        ),
    )


def _git(folder: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.email=t@t", "-c", "user.name=t", *args],
        cwd=folder,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


@pytest.fixture
def upstream(project: pytest.Pytester) -> list[str]:
    """A real local git repository in the project, with two commits: their shas."""
    repo = project.path / "upstream"
    repo.mkdir()
    _git(repo, "init", "-q")
    shas = []
    for text in ("first", "second"):
        (repo / "file.txt").write_text(text)
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", text)
        shas.append(_git(repo, "rev-parse", "HEAD"))
    return shas


def test_a_docker_workspace_is_a_load_error_naming_the_feature(project: pytest.Pytester) -> None:
    write(
        project,
        "ws.eval.yaml",
        """
        tests:
          - id: a
            criteria: c
            input: q
            workspace:
              docker: {image: swebench/x}
        """,
    )
    result = project.runpytest("--co")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "ws.eval.yaml:7:*: tests.0.workspace.docker: 'docker' (a Docker workspace, AgentV v4)"
            " is not supported*"
        ]
    )


def _shared_workspace_file(project: pytest.Pytester) -> None:
    """``shared/workspace.yaml`` with its template beside it, and an agent that prints the
    template's README from wherever it runs."""
    write(project, "shared/tpl/README.md", "Shared Workspace Template\n")
    write(project, "shared/workspace.yaml", "template: ./tpl\n")
    _agents(project, default="cat README.md")


def test_a_workspace_file_is_read_from_its_own_folder(project: pytest.Pytester) -> None:
    _shared_workspace_file(project)
    write(
        project,
        "evals/ws.eval.yaml",
        """
        workspace: ../shared/workspace.yaml
        tests:
          - id: a
            criteria: c
            input: q
            assertions: [{type: contains, value: Shared Workspace Template}]
        """,
    )
    project.runpytest().assert_outcomes(passed=1)


def test_the_agentv_target_fixture_works_in_the_workspace(project: pytest.Pytester) -> None:
    write(project, "tpl/hello.txt", "hello\n")
    write(
        project,
        "grader.py",
        DIFF_GRADER.replace('"where"', '"skip"').replace(
            'bool(ws) and p["output"].split() == [ws, ws]', "True"
        ),
    )
    write(
        project,
        "conftest.py",
        """
        import pathlib, pytest

        def edit_in_workspace(case):
            for name, text in (("hello.txt", "changed\\n"), ("new.txt", "new\\n")):
                (pathlib.Path(case.workspace_path) / name).write_text(text)
            return "done"

        @pytest.fixture
        def agentv_target():
            return edit_in_workspace
        """,
    )
    write(
        project,
        "ws.eval.yaml",
        """
        workspace: {template: tpl}
        tests:
          - id: a
            criteria: c
            input: q
            assertions: [{type: code-grader, command: [python, grader.py]}]
        """,
    )
    reprec = project.inline_run()
    reprec.assertoutcome(passed=1)
    [row] = agentv_results(reprec).values()
    assert row["score"] == 1


def test_a_sync_fixture_that_raises_in_a_workspace_still_gets_its_after_each(
    project: pytest.Pytester,
) -> None:
    """The sync fixture runs in pytest's thread while the workspace's steps run on the plugin's
    loop: a fixture that raises leaves its case not graded, and ``after_each`` still runs."""
    write(project, "tpl/seed.txt", "seed\n")
    write(project, "hook.sh", LOGGING_HOOK)
    write(
        project,
        "conftest.py",
        """
        import pytest

        def broken(case):
            raise RuntimeError("the agent fell over")

        @pytest.fixture
        def agentv_target():
            return broken
        """,
    )
    write(
        project,
        "ws.eval.yaml",
        """
        workspace:
          template: tpl
          hooks:
            after_each: {command: [sh, hook.sh, after_each, '{{workspace_path}}']}
        tests:
          - {id: a, criteria: c, input: qa, assertions: [{type: contains, value: x}]}
        """,
    )
    result = project.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*the agent fell over*"])
    calls = hook_calls(project.path / "hooks.log")
    assert [(args[0], context["test_id"]) for _, args, context in calls] == [("after_each", "a")]


def test_an_llm_judge_is_shown_the_diff_fenced(
    project: pytest.Pytester, fake_llm: FakeOpenAI
) -> None:
    project.makeini(judge_ini(fake_llm))
    fake_llm.responder = lambda r: freeform(1.0)
    _files(project)
    write(
        project,
        "ws.eval.yaml",
        """
        workspace: {template: tpl}
        tests:
          - {id: a, criteria: Edits hello.txt, input: edit}
        """,
    )
    project.runpytest().assert_outcomes(passed=1)
    user = fake_llm.requests[0].user
    section = user.split("[[ ## file_changes ## ]]\n", 1)[1]
    assert section.startswith("<") and "nonce=" in section.splitlines()[0]  # fenced: untrusted
    assert "+changed" in section and "b/new.txt" in section


REPO_GRADER = """\
import json, sys
diff = json.load(sys.stdin)["file_changes"] or ""
ok = "repo/file.txt" in diff and "+edited" in diff
print(json.dumps({"assertions": [{"text": "repo edit in diff", "passed": ok}]}))
"""


def test_a_repo_is_checked_out_at_its_commit_and_changes_inside_it_are_in_the_diff(
    project: pytest.Pytester, upstream: list[str]
) -> None:
    """A repository pinned to a commit (or to an ancestor of one) is checked out there; the
    agent's changes inside a checked-out repository are in the diff, and ``reset`` undoes them
    for the next case. (Each file's workspace is its own: one session runs them all.)"""
    write(project, "grader.py", REPO_GRADER)
    _agents(project, default="cat repo/file.txt; printf edited > repo/file.txt")
    for name, pin in (
        ("at-first", f"commit: {upstream[0]}"),
        ("ancestor", f"commit: {upstream[1]}, ancestor: 1"),
    ):
        write(
            project,
            f"{name}.eval.yaml",
            f"""
            workspace:
              repos:
                - {{path: ./repo, repo: ./upstream, {pin}}}
            tests:
              - {{id: a, criteria: c, input: q, assertions: [{{type: equals, value: first}}]}}
            """,
        )
    checks = "[{type: equals, value: second}, {type: code-grader, command: [python, grader.py]}]"
    cases = "".join(f"  - {{id: {i}, criteria: c, input: q, assertions: {checks}}}\n" for i in "ab")
    write(
        project,
        "changes.eval.yaml",
        "workspace:\n  repos: [{path: ./repo, repo: ./upstream}]\n"
        "  hooks: {after_each: {reset: fast}}\ntests:\n" + cases,
    )
    result = project.runpytest("-p", "no:randomly")
    assert outcomes(result.reprec) == {  # type: ignore[attr-defined]
        "at-first.eval.yaml::a": "passed",
        "ancestor.eval.yaml::a": "passed",
        "changes.eval.yaml::a": "passed",
        "changes.eval.yaml::b": "passed",
    }


def test_a_failing_after_all_is_a_warning_once_the_cases_are_reported(
    project: pytest.Pytester,
) -> None:
    write(
        project,
        "ws.eval.yaml",
        """
        workspace:
          hooks: {after_all: {command: [python, -c, 'import sys; sys.exit("cleanup failed")']}}
        tests:
          - {id: a, criteria: c, input: q, assertions: [{type: contains, value: 30 days}]}
        """,
    )
    result = project.runpytest("-W", "default::pytest_agentv.AgentvWarning")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["*ws.eval.yaml: workspace hook after_all (python -c *) exited with code 1: cleanup failed"]
    )


def test_a_link_in_the_template_is_copied_as_a_link_not_followed_outside(
    project: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory
) -> None:
    outside = tmp_path_factory.mktemp("outside") / "secret.txt"
    outside.write_text("not for the workspace")
    (project.path / "tpl").mkdir()
    (project.path / "tpl" / "link").symlink_to(outside)
    _agents(project, default="[ -L link ] && echo True || echo False")
    write(
        project,
        "ws.eval.yaml",
        """
        workspace: {template: tpl}
        tests:
          - {id: a, criteria: c, input: q, assertions: [{type: equals, value: "True"}]}
        """,
    )
    project.runpytest().assert_outcomes(passed=1)


def _one_passing_one_failing(project: pytest.Pytester) -> None:
    """Two cases in workspaces of their own, whose agent notes where each ran (cwd.log)."""
    write(project, "tpl/seed.txt", "seed\n")
    # The agent notes, beside the project, the workspace it ran in.
    _agents(
        project, default=f'echo {{EVAL_ID}} "$(pwd -P)" >> {project.path}/cwd.log; echo {{EVAL_ID}}'
    )
    write(
        project,
        "ws.eval.yaml",
        """
        workspace: {template: tpl, isolation: per_test}
        tests:
          - {id: passes, input: q, assertions: [{type: contains, value: passes}]}
          - {id: fails, input: q, assertions: [{type: contains, value: never}]}
        """,
    )


def test_a_passing_case_s_own_workspace_goes_once_it_is_graded(project: pytest.Pytester) -> None:
    """AgentV v4's default: a case's own workspace (``isolation: per_test``) is removed once the
    case passed, so a suite of cloned repositories does not fill the disk until the run ends; a
    failed case's stays until then."""
    _one_passing_one_failing(project)
    project.makeconftest(
        """
        import pathlib

        def pytest_sessionfinish(session):
            lines = sorted(pathlib.Path("cwd.log").read_text().splitlines())
            print("ALIVE", [(case, pathlib.Path(path).is_dir()) for case, path in
                            (line.split(" ", 1) for line in lines)])
        """
    )
    result = project.runpytest("-s")
    result.assert_outcomes(passed=1, failed=1)
    assert "ALIVE [('fails', True), ('passes', False)]" in result.stdout.str()


@pytest.mark.parametrize(
    ("keep", "config", "alive"),
    [
        ("none", None, {"fails": False, "passes": False}),
        ("failed", None, {"fails": True, "passes": False}),
        ("all", None, {"fails": True, "passes": True}),
        (None, "true", {"fails": True, "passes": True}),
        ("none", "true", {"fails": False, "passes": False}),
        (None, "false", {"fails": False, "passes": False}),
    ],
    ids=["none", "failed", "all", "config", "option-over-config", "config-off"],
)
def test_workspaces_are_kept_after_the_run_as_asked(
    project: pytest.Pytester, keep: str | None, config: str | None, alive: dict[str, bool]
) -> None:
    """``--agentv-keep-workspaces``: AgentV's ``--keep-workspaces`` (all), or those of cases
    that did not pass, for a look at what the agent left; the summary says where. AgentV v4's
    ``execution.keep_workspaces: true`` in ``.agentv/config.yaml`` keeps them all, unless the
    option says otherwise."""
    if config is not None:
        write(project, ".agentv/config.yaml", f"execution: {{keep_workspaces: {config}}}\n")
    _one_passing_one_failing(project)
    result = project.runpytest(*([f"--agentv-keep-workspaces={keep}"] if keep else []))
    result.assert_outcomes(passed=1, failed=1)
    folders = dict(
        line.split(" ", 1) for line in (project.path / "cwd.log").read_text().split("\n") if line
    )
    assert {case: Path(folder).is_dir() for case, folder in folders.items()} == alive
    kept = [line for line in result.outlines if "(--agentv-keep-workspaces)" in line]
    if not alive["fails"]:
        assert kept == []
    else:
        root = Path(folders["fails"]).parent
        assert kept == [f"agentv: workspaces kept in {root} (--agentv-keep-workspaces)"]
        assert (Path(folders["fails"]) / "seed.txt").read_text() == "seed\n"
        shutil.rmtree(root)


@pytest.mark.parametrize(
    ("workspace_file", "problem"),
    [
        (None, "*ws.eval.yaml:2:*: workspace: workspace file*missing.yaml' not found*"),
        ("isolation: per_tset\n", "shared/workspace.yaml:1:12: isolation: must be*"),
    ],
    ids=["missing", "bad-value"],
)
def test_a_bad_workspace_file_is_a_collection_error(
    project: pytest.Pytester, workspace_file: str | None, problem: str
) -> None:
    """Found at collection, naming the file and line, rather than when a case first runs."""
    if workspace_file is not None:
        write(project, "shared/workspace.yaml", workspace_file)
    ref = "../shared/workspace.yaml" if workspace_file is not None else "../shared/missing.yaml"
    write(
        project,
        "evals/ws.eval.yaml",
        f"""
        workspace: {ref}
        tests: [{{id: a, criteria: c, input: q}}]
        """,
    )
    result = project.runpytest("--co", "-q")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([problem])


def test_an_unknown_key_in_a_workspace_file_is_a_warning_at_collection(
    project: pytest.Pytester,
) -> None:
    write(project, "shared/workspace.yaml", "templte: ./tpl\n")
    eval_file = "workspace: ../shared/workspace.yaml\ntests: [{id: a, input: q}]\n"
    write(project, "evals/ws.eval.yaml", eval_file)
    result = project.runpytest("--co", "-q")
    result.stdout.fnmatch_lines(
        ["*shared/workspace.yaml:1: templte: unknown key 'templte' is ignored*'template'*"]
    )


def test_a_workspace_file_is_read_once_at_collection(project: pytest.Pytester) -> None:
    """Its cases run with the workspace collection read, not a second reading of the file (a
    file changed or removed in between does not change the run)."""
    _shared_workspace_file(project)
    write(
        project,
        "conftest.py",
        """
        import pathlib

        def pytest_collection_finish(session):
            pathlib.Path("shared/workspace.yaml").unlink()
        """,
    )
    cases = "\n".join(
        f"  - {{id: c{n}, input: q, assertions: [{{type: contains, value: Shared}}]}}"
        for n in range(3)
    )
    write(project, "evals/ws.eval.yaml", f"workspace: ../shared/workspace.yaml\ntests:\n{cases}\n")
    project.runpytest().assert_outcomes(passed=3)


BATCH_IN_WORKSPACE = """\
import json, os, sys
out, where = sys.argv[1], sys.argv[2]
text = open("README.md").read().strip()
with open(out, "w") as f:
    for case_id in ("a", "b"):
        f.write(json.dumps({"id": case_id, "text": f"{case_id}: {text} at {where}"}) + "\\n")
with open(os.path.join(os.environ["LOG_DIR"], "cwd.log"), "a") as log:
    log.write(os.getcwd() + "\\n")
"""


def test_a_batch_cli_target_runs_in_the_workspace(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As AgentV's batches run: once, from the (shared) workspace, which ``{WORKSPACE_PATH}``
    names too; the target's own cwd is not used."""
    monkeypatch.setenv("LOG_DIR", str(project.path))
    write(project, "tpl/README.md", "Template Readme\n")
    write(project, "agent.py", BATCH_IN_WORKSPACE)
    write(project, "elsewhere/.keep", "")
    write(
        project,
        ".agentv/targets.yaml",
        f"""
        targets:
          - name: default
            provider: cli
            provider_batching: true
            cwd: elsewhere
            command_template: python {project.path / "agent.py"} {{OUTPUT_FILE}} {{WORKSPACE_PATH}}
        """,
    )
    cases = "\n".join(
        f"  - {{id: {name}, input: q, assertions: [{{type: contains, value: Template Readme}}]}}"
        for name in ("a", "b")
    )
    write(project, "ws.eval.yaml", f"workspace: {{template: tpl}}\ntests:\n{cases}\n")
    result = project.runpytest("--agentv-results", "o.jsonl")
    result.assert_outcomes(passed=2)
    (ran_in,) = (project.path / "cwd.log").read_text().splitlines()
    assert Path(ran_in) != project.path / "elsewhere"
    rows = map(json.loads, (project.path / "o.jsonl").read_text().splitlines())
    answers = {row["eval_id"]: row["candidate_answer"] for row in rows}
    assert answers == {name: f"{name}: Template Readme at {ran_in}" for name in ("a", "b")}


#: An agent that leaves a repository of its own in the workspace on case "one" (with a commit,
#: or none with ``bare``), then lists what it sees.
NESTING_AGENT = """\
set -e
if [ "$1" = one ]; then
  mkdir nested
  printf "one's work" > nested/work.txt
  git -C nested init -q
  if [ "$2" != bare ]; then
    git -C nested add -A
    git -C nested -c user.email=t@t -c user.name=t commit -qm w
  fi
fi
echo $(ls -A | grep -vx .git)
"""

#: A v4 grader that passes when the diff it is given names ``nested`` exactly when ``expect``.
NESTED_DIFF_GRADER = """\
import json, sys
diff = json.load(sys.stdin)["file_changes"] or ""
print(json.dumps({"score": int(("work.txt" in diff) == (sys.argv[1] == "yes"))}))
"""


def test_reset_removes_a_repository_the_agent_made(project: pytest.Pytester) -> None:
    """``git clean -fdx`` keeps a nested repository: case two's diff held case one's work.
    (Both resets, each in a file of its own: one session runs them.)"""
    write(project, "tpl/seed.txt", "seed\n")
    write(project, "grader.py", NESTED_DIFF_GRADER)
    _agent(project, NESTING_AGENT, "{EVAL_ID} committed")
    for reset in ("strict", "fast"):
        write(
            project,
            f"{reset}.eval.yaml",
            f"""
            workspace:
              template: tpl
              hooks: {{after_each: {{reset: {reset}}}}}
            tests:
              - id: one
                input: q
                assertions: [{{type: code-grader, command: [python, grader.py, "yes"]}}]
              - id: two
                input: q
                assertions:
                  - {{type: code-grader, command: [python, grader.py, "no"]}}
                  - {{type: contains, value: nested, negate: true}}
            """,
        )
    result = project.runpytest("-p", "no:randomly")
    assert outcomes(result.reprec) == {  # type: ignore[attr-defined]
        f"{reset}.eval.yaml::{case}": "passed"
        for reset in ("strict", "fast")
        for case in ("one", "two")
    }


def test_a_diff_that_cannot_be_taken_does_not_sink_the_cases(project: pytest.Pytester) -> None:
    """A repository without a commit made ``git add`` exit 128: every case after it, and the
    one that made it, was not graded. As in AgentV v4 the diff is best effort: null."""
    write(project, "tpl/seed.txt", "seed\n")
    write(project, "grader.py", NESTED_DIFF_GRADER)
    _agent(project, NESTING_AGENT, "{EVAL_ID} bare")
    cases = "".join(
        f"  - {{id: {i}, input: q, assertions: [{{type: contains, value: seed.txt}}]}}\n"
        for i in ("one", "two", "three")
    )
    write(project, "ws.eval.yaml", "workspace: {template: tpl}\ntests:\n" + cases)
    project.runpytest("-p", "no:randomly").assert_outcomes(passed=3)


def _user_repository(folder: Path) -> None:
    """A repository of the user's, with one commit, an edit not staged, an untracked file and
    an ignored ``.env``."""
    folder.mkdir(exist_ok=True)
    (folder / "app.txt").write_text("committed\n")
    (folder / ".gitignore").write_text(".env\n")
    _git(folder, "init", "-q", "-b", "main")
    _git(folder, "add", "-A")
    _git(folder, "commit", "-qm", "user's work")
    (folder / "app.txt").write_text("edited, not committed\n")
    (folder / "draft.txt").write_text("untracked\n")
    (folder / ".env").write_text("SECRET=1\n")


def _untouched(folder: Path, *new: str) -> None:
    """The user's repository as they left it: one commit, nothing staged, ``app.txt`` edited,
    ``draft.txt`` (and ``new``) untracked, ``.env`` there."""
    assert _git(folder, "log", "--format=%s") == "user's work"
    assert _git(folder, "diff", "--cached", "--name-only") == ""
    assert _git(folder, "diff", "--name-only") == "app.txt"
    untracked = _git(folder, "ls-files", "--others", "--exclude-standard").splitlines()
    assert untracked == sorted(["draft.txt", *new])
    assert (folder / ".env").read_text() == "SECRET=1\n"


@pytest.mark.parametrize("kind", ["worktree", "submodule"])
def test_a_template_that_is_a_worktree_or_submodule_never_touches_the_user_s_repository(
    project: pytest.Pytester, kind: str
) -> None:
    """Its ``.git`` file was copied: every run committed agentv-baseline onto the user's branch
    and staged the agent's files there; a submodule's left every case not graded."""
    user = project.path / "user"
    _user_repository(user)
    _git(user, "stash", "-q", "-u")  # a clean tree to take a worktree or submodule from
    if kind == "worktree":
        _git(user, "worktree", "add", "-q", str(project.path / "tpl"), "-b", "template")
    else:
        host = project.path / "host"
        host.mkdir()
        _git(host, "init", "-q")
        _git(host, "-c", "protocol.file.allow=always", "submodule", "add", "-q", "../user", "tpl")
    template = "tpl" if kind == "worktree" else "host/tpl"
    _git(user, "stash", "pop", "-q")
    _agents(project, default=EDITING_AGENT.replace("hello.txt", "app.txt"))
    write(
        project,
        "ws.eval.yaml",
        f"""
        workspace: {{template: {template}}}
        tests:
          - {{id: a, input: q, assertions: [{{type: contains, value: agentv-workspaces}}]}}
        """,
    )
    project.runpytest().assert_outcomes(passed=1)
    _untouched(user)
    tpl = project.path / template
    assert _git(tpl, "log", "--format=%s") == "user's work"
    assert _git(tpl, "status", "--porcelain") == ""


#: Passes when the diff holds the agent's new file and none of what the user had.
STATIC_GRADER = """\
import json, sys
diff = json.load(sys.stdin)["file_changes"]
print(json.dumps({"score": int("made.txt" in diff and "app.txt" not in diff)}))
"""


def test_a_static_path_in_the_user_s_repository_is_never_committed_to(
    project: pytest.Pytester,
) -> None:
    """``mode: static`` with ``path: .`` committed the user's edits, untracked files and
    ``.env`` to their branch as agentv-baseline."""
    _user_repository(project.path)
    write(project, "grader.py", STATIC_GRADER)
    _agents(project, default="printf x > made.txt; echo ok")
    write(
        project,
        "ws.eval.yaml",
        """
        workspace: {mode: static, path: .}
        tests:
          - id: a
            input: q
            assertions: [{type: code-grader, command: [python, grader.py]}]
        """,
    )
    (project.path / ".gitignore").write_text(".env\n.pytest_cache\n__pycache__\n")
    _git(project.path, "add", ".gitignore", ".agentv", "keywords.py", "expect.py")
    _git(project.path, "add", "tox.ini", "ws.eval.yaml", "grader.py")
    _git(project.path, "commit", "-qm", "user's work", "--amend")
    project.runpytest().assert_outcomes(passed=1)
    _untouched(project.path, "made.txt")


def test_a_hook_that_floods_stderr_is_stopped_at_its_cap(project: pytest.Pytester) -> None:
    """It was read until its deadline: a timeout on a busy machine, a pass on an idle one."""
    _not_graded(
        project,
        ws=(
            "{hooks: {before_each: {command: [sh, -c, 'yes | head -c 200000000 >&2']}}}",
            "workspace hook before_each (sh -c *) wrote more than 16 MiB to stderr and was stopped",
        ),
    )
