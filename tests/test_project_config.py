"""AgentV v4's ``.agentv/config.yaml`` (issue 34): every key read, each as a pytest user would
expect it, from the shape of the config v4.42.4's repository ships with its examples."""

from __future__ import annotations

import os
from collections.abc import Iterator
from fnmatch import fnmatch
from pathlib import Path

import pytest

from tests.helpers import load_error, outcome_counts, write

#: v4.42.4's own ``.agentv/config.yaml`` (its repository's root), comments aside.
V4_CONFIG = """\
$schema: agentv-config-v2
eval_patterns:
  - "**/evals/**/dataset*.yaml"
  - "**/evals/**/eval.yaml"
execution:
  verbose: false
  trace_file: .agentv/results/trace-{timestamp}.jsonl
  keep_workspaces: false
  otel_file: .agentv/results/otel-{timestamp}.json
"""

CASES = "tests:\n  - {id: a, criteria: says hi, input: hi}\n"


def collected(project: pytest.Pytester, *args: str) -> list[str]:
    reprec = project.inline_run("--co", "-W", "default", *args)
    return sorted(call.item.nodeid for call in reprec.getcalls("pytest_itemcollected"))


def warned(project: pytest.Pytester, *args: str) -> list[str]:
    reprec = project.inline_run("--co", "-W", "default", *args)
    return [
        str(call.warning_message.message) for call in reprec.getcalls("pytest_warning_recorded")
    ]


def test_eval_patterns_collect_the_files_they_match_from_the_project_root(
    project: pytest.Pytester,
) -> None:
    write(project, ".agentv/config.yaml", V4_CONFIG)
    write(project, "examples/basic/evals/dataset.yaml", CASES)
    write(project, "examples/tools/evals/eval.yaml", CASES)
    write(project, "examples/tools/evals/deep/Dataset-2.yaml", CASES)  # fast-glob: any case
    write(project, "examples/named.eval.yaml", CASES)  # agentv_eval_patterns still apply
    write(project, "examples/other/eval.yaml", CASES)  # not under an evals folder
    # v4's rubric example: matched, but grader score ranges, not cases.
    write(project, "examples/rubric/evals/dataset.grader-scores.yaml", "- {test_id: a}\n")
    assert collected(project) == [
        "examples/basic/evals/dataset.yaml::a",
        "examples/named.eval.yaml::a",
        "examples/tools/evals/deep/Dataset-2.yaml::a",
        "examples/tools/evals/eval.yaml::a",
    ]


def test_a_config_without_eval_patterns_uses_agentvs_defaults_and_the_nearest_config_wins(
    project: pytest.Pytester,
) -> None:
    write(project, ".agentv/config.yaml", "eval_patterns: ['**/suites/*.yaml']\n")
    write(project, "suites/s.yaml", CASES)
    write(project, "langfuse/.agentv/config.yaml", "execution: {verbose: false}\n")
    write(project, "langfuse/evals/eval.yaml", CASES)
    write(project, "langfuse/evals/dataset.yaml", CASES)  # not one of v4's defaults
    write(project, "langfuse/suites/s.yaml", CASES)  # the root config's, not this one's
    assert collected(project) == ["langfuse/evals/eval.yaml::a", "suites/s.yaml::a"]


def test_without_a_config_only_file_names_collect(project: pytest.Pytester) -> None:
    write(project, "evals/eval.yaml", CASES)
    write(project, "evals/x.eval.yaml", CASES)
    assert collected(project) == ["evals/x.eval.yaml::a"]


def test_v4s_own_config_warns_only_about_what_it_asks_for_and_pytest_agentv_does_otherwise(
    project: pytest.Pytester,
) -> None:
    write(project, ".agentv/config.yaml", V4_CONFIG)
    write(project, "evals/eval.yaml", CASES)
    found = warned(project)
    assert found == [
        ".agentv/config.yaml:7: execution.trace_file, execution.otel_file: pytest-agentv writes "
        "no trace files of its own and exports no OpenTelemetry spans: each case's trace is in "
        "its --agentv-results row, and with --agentv-results-format agentv-v4 and a results file "
        "named index.jsonl in the run folder beside it (outputs/trace.json per test); ignored"
    ]


#: Settings of v4's config that pytest-agentv does otherwise, and the start of what it says.
DONE_OTHERWISE = {
    "pool": (
        "execution: {pool_workspaces: true, pool_slots: 4}",
        "execution.pool_workspaces, execution.pool_slots: pytest-agentv pools no workspaces",
    ),
    "results": (
        "results: {repo_path: ., branch: results}",
        "results: pytest-agentv keeps no git-backed results store: each run writes its "
        "results file with --agentv-results, and python -m pytest_agentv report merges",
    ),
    "verbose": (
        "execution: {verbose: true}",
        "execution.verbose: pytest-agentv's output is pytest's",
    ),
}


def test_each_setting_pytest_agentv_does_otherwise_is_named_with_what_it_does(
    project: pytest.Pytester,
) -> None:
    """A project in a folder for each, in one session: one warning each."""
    for name, (setting, _) in DONE_OTHERWISE.items():
        write(project, f"{name}/.agentv/config.yaml", f"# a comment\n{setting}\n")
        write(project, f"{name}/evals/eval.yaml", CASES)
    for warning, (name, (_, said)) in zip(warned(project), DONE_OTHERWISE.items(), strict=True):
        assert warning.startswith(f"{name}/.agentv/config.yaml:2: {said}"), warning
        assert warning.endswith("; ignored")


@pytest.mark.parametrize(
    ("config", "error"),
    [
        ("eval_patterns: '**/evals/*.yaml'", ":1:16: eval_patterns: *list*"),
        ("eval_patterns: ['**/evals/*.yaml', 3]", ":1:36: eval_patterns.1: *string*"),
        (
            "execution:\n  keep_workspaces: 'yes'",
            ":2:20: execution.keep_workspaces: must be true or false",
        ),
        ("execution:\n  pool_slots: 51", ":2:15: execution.pool_slots: *50*"),
        ("execution: [verbose]", ":1:12: execution: *"),
        ("required_version: 4", ":1:19: required_version: *string*"),
        ("hooks: {before_session: ''}", ":1:25: hooks.before_session: *"),
    ],
    ids=["patterns", "pattern", "flag", "slots", "execution", "version", "hook"],
)
def test_a_wrong_value_is_a_collection_error_at_the_field(
    tmp_path: Path, config: str, error: str
) -> None:
    (tmp_path / ".agentv").mkdir()
    (tmp_path / ".agentv" / "config.yaml").write_text(config + "\n")
    found = load_error(tmp_path, "evals/eval.yaml", CASES)
    assert fnmatch(found, f".agentv/config.yaml{error}"), found


def test_a_config_that_cannot_be_read_keeps_its_eval_files_and_its_error(
    project: pytest.Pytester,
) -> None:
    """The error reaches the files the config's default patterns match: a config that cannot be
    read does not lose its eval files, nor its error."""
    write(project, ".agentv/config.yaml", "eval_patterns: '**/evals/*.yaml'\n")
    write(project, "evals/eval.yaml", CASES)
    result = project.runpytest("--co", "-q")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*.agentv/config.yaml:1:16: eval_patterns: *list*"])
    assert "Traceback" not in result.stdout.str()


def test_a_project_without_eval_files_reads_no_yaml_and_looks_once_per_folder(
    pytester: pytest.Pytester,
) -> None:
    """YAML files everywhere and no ``.agentv/config.yaml``: each folder is looked at once
    (two names each), and nothing heavy is imported, neither the YAML nor the schema machinery
    nor a model or HTTP client (the session imported the plugin: loading it imports none)."""
    for name in ("a/b/x.yaml", "a/b/y.yml", "a/c/z.jsonl", "d.yaml", "a/b/test_t.py"):
        write(pytester, name, "def test_t(): pass\n" if name.endswith(".py") else "k: v\n")
    pytester.makeconftest(
        """
        import sys
        from pytest_agentv import paths

        looked = []
        present = paths.present
        paths.present = lambda path: looked.append(path) or present(path)

        def pytest_sessionfinish(session):
            heavy = ("yaml", "pydantic", "pytest_agentv.projectfiles", "litellm", "openai")
            heavy += ("aiohttp",)
            print("IMPORTED", sorted(m for m in heavy if m in sys.modules))
            print("LOOKED", len(looked), len(set(looked)))
        """
    )
    result = pytester.runpytest_subprocess("-s", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    # a/b, a/c, a and the rootdir: 4 folders, .agentv/config.yaml and .yml in each.
    result.stdout.fnmatch_lines(["*IMPORTED []", "LOOKED 8 8"])


#: npm semver ranges and whether AgentV 4.42.4 is in each (None: no range), as node-semver
#: answers (``test_the_range_table_is_node_semvers``).
RANGES = {
    ">=4.0.0": True,
    ">= 4.2.0": True,
    ">=5": False,
    "^4.2.0": True,
    "^4.43": False,
    "^4.42.4-rc.1": True,
    "^0.2.3": False,
    "~4.42.0": True,
    "~4.41": False,
    "~> 4.42": True,
    "4.x": True,
    "4.42.x": True,
    "4": True,
    "v4.42.4": True,
    "=4.42.3": False,
    "<4.42.4": False,
    "<=4.42.4": True,
    "<=4.41": False,
    ">4.42": False,
    ">4.41": True,
    "<4.42.4-beta": False,
    "<4.42.5-0": True,
    ">=4.42.4-beta.1": True,
    "x": True,
    "<x": False,
    ">=4.0.0 <5.0.0": True,
    "3.x || 4.x": True,
    ">=5 || <4": False,
    "1 - 4": True,
    "1 - 4.42.3": False,
    "4.42.5 - 5": False,
    "": None,
    "latest": None,
    ">=1.2.3 <": None,
    "4.42.04": None,
    "1.x.3": None,
    "4.2.0+": None,
}


def test_required_version_ranges_are_read_as_npm_reads_them() -> None:
    from pytest_agentv.versions import satisfies

    def answer(spec: str) -> bool | None:
        try:
            return satisfies("4.42.4", spec)
        except ValueError:
            return None

    assert {spec: answer(spec) for spec in RANGES} == RANGES


def test_the_range_table_is_node_semvers() -> None:
    import json
    import shutil
    import subprocess

    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        pytest.skip("node and npm are not installed (apt-get install nodejs npm)")
    # npm's own semver, found from where npm's script is (``npm root -g`` was a process more).
    where = json.dumps(str(Path(npm).resolve().parent))
    script = (
        f"const s = require(require.resolve('semver', {{paths: [{where}]}}));"
        "const r = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
        "console.log(JSON.stringify(r.map(x => s.validRange(x) === null || !x.trim() ? null"
        " : s.satisfies('4.42.4', x))))"
    )
    answers = subprocess.run(
        ["node", "-e", script], input=json.dumps(list(RANGES)), capture_output=True, text=True
    )
    assert answers.returncode == 0, answers.stderr
    assert dict(zip(RANGES, json.loads(answers.stdout), strict=True)) == RANGES


#: How each ``required_version`` written is said (None: it is not).
REQUIRED_VERSIONS = {
    "either": ('"^4.0.0 || ^5.0.0"', None),
    "excluded": (
        '">=5.0.0"',
        "'>=5.0.0' excludes AgentV 4.42.4, the version whose semantics pytest-agentv "
        "implements: files that rely on another version's behaviour may be read or graded "
        "differently",
    ),
    "malformed": (
        "latest",
        "'latest' is not a semver range (e.g. '>=4.0.0', '^4.2.0'); not checked",
    ),
    "within": (">=4.2.0", None),
}


def test_required_version_is_checked_against_agentv_4_42_4_once(project: pytest.Pytester) -> None:
    """A project of two eval files in a folder for each, in one session: each config said once,
    or not at all."""
    for name, (written, _) in REQUIRED_VERSIONS.items():
        config = f"$schema: agentv-config-v2\nrequired_version: {written}\n"
        write(project, f"{name}/.agentv/config.yaml", config)
        write(project, f"{name}/evals/eval.yaml", CASES)
        write(project, f"{name}/evals/more.eval.yaml", CASES)
    assert warned(project) == [
        f"{name}/.agentv/config.yaml:2: required_version: {said}"
        for name, (_, said) in REQUIRED_VERSIONS.items()
        if said is not None
    ]


#: A before_session hook as v4's docs write one: secrets fetched, printed as exports.
SESSION = """\
$schema: agentv-config-v2
hooks:
  before_session: >-
    echo "export H40_TOKEN='s3cret value'"; echo H40_REGION=eu; echo '# H40_NOT=1';
    echo H40_KEPT=theirs; echo not an assignment; echo started >> session.log
"""

ENV_TEST = """\
import os

def test_env():
    assert os.environ["H40_TOKEN"] == "s3cret value"
    assert os.environ["H40_REGION"] == "eu"
    assert os.environ["H40_KEPT"] == "mine"
    assert "H40_NOT" not in os.environ
"""


#: The variables the before_session hooks here export. Their sessions run in this process (a
#: hook's exports are set in the process that runs it, and xdist's workers inherit them).
EXPORTED = ("H40_TOKEN", "H40_REGION", "H40_NOT", "H40_X", "H40_SEEN")


@pytest.fixture
def exports_removed() -> Iterator[None]:
    """Take the hooks' exports out of this process's environment after the test."""
    yield
    for name in EXPORTED:
        os.environ.pop(name, None)


@pytest.mark.usefixtures("exports_removed")
def test_before_session_runs_once_and_its_exports_reach_every_test(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once per session; a variable the environment already has keeps its value, as in AgentV
    v4. Under pytest-xdist (once, in the controller before its workers start): in
    tests/test_collection.py's test_runs_under_xdist."""
    write_before_session(pytester, monkeypatch)
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert_before_session_ran(result, pytester.path)


def write_before_session(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, folder: str = ""
) -> None:
    """The project's ``SESSION`` hook, and two test files in ``folder`` that read its exports
    (``H40_KEPT`` set beforehand: the hook's value must not replace it)."""
    monkeypatch.setenv("H40_KEPT", "mine")
    write(pytester, ".agentv/config.yaml", SESSION)
    write(pytester, f"{folder}tests/test_env.py", ENV_TEST)
    write(pytester, f"{folder}tests/test_more.py", ENV_TEST.replace("test_env", "test_more"))


def assert_before_session_ran(result: pytest.RunResult, root: Path, folder: str = "") -> None:
    """The hook ran once, in ``root``, and both tests of ``folder`` saw its exports (``result``
    may have run other files too)."""
    assert outcome_counts(result, folder) == {"passed": 2}
    result.stdout.fnmatch_lines(
        ["agentv: .agentv/config.yaml:3: before_session set H40_TOKEN, H40_REGION"]
    )
    assert (root / "session.log").read_text() == "started\n"


@pytest.mark.usefixtures("exports_removed")
def test_before_session_does_not_run_when_pytest_runs_nothing(pytester: pytest.Pytester) -> None:
    write(pytester, ".agentv/config.yaml", SESSION)
    write(pytester, "test_env.py", ENV_TEST)
    for args in (["--co"], ["--setup-plan"], ["--agentv-estimate"]):
        pytester.runpytest("-p", "no:cacheprovider", *args)
    assert not (pytester.path / "session.log").exists()


@pytest.mark.usefixtures("exports_removed")
def test_a_failing_before_session_stops_the_run_naming_the_setting(
    pytester: pytest.Pytester,
) -> None:
    write(
        pytester,
        ".agentv/config.yaml",
        "hooks:\n  before_session: echo export H40_X=1; echo vault sealed >&2; exit 3\n",
    )
    write(pytester, "test_env.py", "def test_t():\n    pass\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: .agentv/config.yaml:2: hooks.before_session (echo *) exited with code 3: "
            "vault sealed"
        ]
    )
    assert "passed" not in result.stdout.str()


@pytest.mark.usefixtures("exports_removed")
def test_before_session_runs_under_the_child_process_rules(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its environment is scrubbed: a variable of the shell is passed on only when named in
    agentv_code_judge_env."""
    monkeypatch.setenv("H40_SECRET", "secret")
    monkeypatch.setenv("H40_NAMED", "named")
    write(
        pytester,
        ".agentv/config.yaml",
        "hooks:\n  before_session: echo H40_SEEN=${H40_SECRET:-unset}${H40_NAMED:-unset}\n",
    )
    write(
        pytester,
        "test_env.py",
        "import os\n\ndef test_t():\n    assert os.environ['H40_SEEN'] == 'unsetnamed'\n",
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "--agentv-code-judge-env", "H40_NAMED")
    result.assert_outcomes(passed=1)


def test_exported_reads_lines_as_agentv_does() -> None:
    from pytest_agentv.workspace.session import exported

    assert exported(
        'export A="x y"\nB=\'z\'\n  C=1=2  \n# D=3\nexport\nE\n9F=1\nA=last\nG="unbalanced\n'
    ) == {"A": "last", "B": "z", "C": "1=2", "G": '"unbalanced'}
