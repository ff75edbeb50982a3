"""Small helpers shared by the test modules."""

from __future__ import annotations

import gc
import textwrap
import time
from fnmatch import fnmatch
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil
import pytest

if TYPE_CHECKING:
    from tests.fake_openai import FakeOpenAI


def freeze_what_is_loaded() -> None:
    """Leave the objects loaded so far (modules, the collected tests, a transport's stack) out of
    every later garbage collection: a test process holds hundreds of thousands of them, and each
    full collection walked them all again (about a seventh of the suite's time, in the processes
    that run the tests)."""
    gc.collect()
    gc.freeze()


def write(pytester: pytest.Pytester, name: str, content: str) -> Path:
    """Write a (dedented) file under the pytester folder, creating folders as needed."""
    path = pytester.path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(content))
    return path


def cli_agent(pytester: pytest.Pytester, agent: str, key: str = "command") -> None:
    """A project whose ``default`` target runs ``agent`` (a Python script's text) as a CLI
    target (``key``: AgentV v4's ``command`` or v2.5.8's ``command_template``)."""
    write(pytester, "agent.py", agent)
    (pytester.path / ".agentv" / "targets.yaml").write_text(
        f"targets:\n  - {{name: default, provider: cli, {key}: python agent.py}}\n"
    )


def load_error(folder: Path, name: str, content: str) -> str:
    """The collection error of an eval file that must fail to load, as collection shows it,
    without a pytest session: what ``EvalFile.collect`` does (``load_specs``, the built-in
    evaluator kinds, the folder's project files). Sessions are for what pytest makes of it."""
    from pytest_agentv.collect import load_specs
    from pytest_agentv.errors import AgentvError
    from pytest_agentv.evaluators import EvaluatorRegistry, build_evaluator_registry
    from pytest_agentv.projectfiles import ProjectFiles
    from pytest_agentv.redaction import shown

    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(content))
    registry = EvaluatorRegistry(build_evaluator_registry())
    try:
        load_specs(path, name, folder, registry.scoped(registry.builtin), ProjectFiles(folder))
    except AgentvError as exc:
        return shown(str(exc))
    raise AssertionError(f"{name} loaded without an error")


def assert_load_error(pytester: pytest.Pytester, assertion: str, problem: str) -> None:
    """A v4 file whose one case has ``assertion`` (YAML flow text) fails to load with
    ``problem`` (an fnmatch pattern) at line 2."""
    case = f"{{id: a, input: q, assertions: [{assertion}]}}"
    error = load_error(pytester.path, "bad.eval.yaml", f"tests:\n  - {case}\n")
    assert fnmatch(error, "bad.eval.yaml:2:*" + problem.lstrip("*")), error


def judge_ini(server: FakeOpenAI, model: str = "openai/fake-judge", **extra: str) -> str:
    lines = [
        "[pytest]",
        "asyncio_default_fixture_loop_scope = function",
        f"agentv_judge_model = {model}",
        f"agentv_judge_api_base = {server.api_base}",
        "agentv_judge_backoff = 0.01",
        "agentv_cache_mode = off",
        *(f"agentv_{key} = {value}" for key, value in extra.items()),
    ]
    return "\n".join(lines) + "\n"


#: ``max_examples`` of the ``deep`` hypothesis profile (registered in ``tests/conftest.py``).
DEEP_EXAMPLES = 500


def examples(deep: int) -> int:
    """How many examples a property or fuzz test runs under the active hypothesis profile.

    ``deep`` under ``--hypothesis-profile=deep``; scaled by the profile's ``max_examples``
    otherwise (a tenth under the default profile).
    """
    from hypothesis import settings

    return max(1, deep * settings.default.max_examples // DEEP_EXAMPLES)


def outcomes(reprec: pytest.HookRecorder) -> dict[str, str]:
    """Each test's outcome by node id, from the reports of an inline run.

    One of passed, failed, skipped, xfailed, xpassed, or error (its setup or teardown failed).
    """
    found: dict[str, str] = {}
    for report in reprec.getreports("pytest_runtest_logreport"):
        if report.when == "call":
            outcome: str = report.outcome
            if hasattr(report, "wasxfail"):
                outcome = "xfailed" if report.skipped else "xpassed"
            found[report.nodeid] = outcome
        elif report.failed:
            found[report.nodeid] = "error"
        elif report.skipped:
            found[report.nodeid] = "skipped"
    return found


def agentv_results(reprec: pytest.HookRecorder) -> dict[str, dict[str, Any]]:
    """The agentv result (eval id, score, verdict, ...) each eval item's report carried."""
    found: dict[str, dict[str, Any]] = {}
    for report in reprec.getreports("pytest_runtest_logreport"):
        data = getattr(report, "agentv", None) or {}
        rows = [data["case"]] if isinstance(data.get("case"), dict) else data.get("summary", [])
        for row in rows:
            found[report.nodeid] = row
    return found


def recorded(*paths: Path) -> list[tuple[int, float]]:
    """The processes that wrote their pid into ``paths`` (files, or folders of files named by
    pid), with when each file was written: a process that has that pid now but started later is
    another one (pids are reused, within seconds when a suite starts thousands of processes)."""
    found = []
    for path in paths:
        for file in sorted(path.iterdir()) if path.is_dir() else [path]:
            pid = file.name if path.is_dir() else file.read_text().strip()
            found.append((int(pid), file.stat().st_mtime))
    return found


def still_running(pids: list[tuple[int, float]], within: float = 10.0) -> list[int]:
    """The recorded processes (``recorded``) still alive (zombies aside) after waiting up to
    ``within`` for them to go.

    A process killed with SIGKILL is gone a moment later, not at once: polling for that moment
    instead of sleeping a fixed time is quick on an idle machine and still right on a busy one.
    """

    def alive(pid: int, written: float) -> bool:
        try:
            process = psutil.Process(pid)
            return process.create_time() <= written + 1 and process.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    deadline = time.monotonic() + within
    while (running := [pid for pid, at in pids if alive(pid, at)]) and time.monotonic() < deadline:
        time.sleep(0.02)
    return running


# --- Logging workspace hooks (tests/test_workspaces.py, tests/test_v4_matrix.py) ---

#: A hook script (``[sh, hook.sh, ARGS...]``) that appends to ``hooks.log`` beside it one line
#: per call: its working folder, its arguments and v4's context from stdin, tab-separated (JSON
#: escapes tabs). A shell script, not Python: a test runs such hooks by the dozen, and each
#: Python process costs ten times a shell's CPU.
LOGGING_HOOK = """\
{ printf '%s\\t' "$(pwd -P)" "$@"; cat; echo; } >> "$(dirname "$0")/hooks.log"
"""


def hook_calls(log: Path) -> list[tuple[str, list[str], dict[str, Any]]]:
    """The calls ``LOGGING_HOOK`` logged in ``log``, in order: (working folder, arguments,
    context)."""
    import json

    calls = []
    for line in log.read_text().splitlines():
        cwd, *args, context = line.split("\t")
        calls.append((cwd, args, json.loads(context)))
    return calls


def run_report(capsys: pytest.CaptureFixture[str], *args: str) -> pytest.RunResult:
    """``python -m pytest_agentv report ARGS`` in this process: its ``main`` with what it printed,
    as the run of a real process would give them (tests/test_report.py keeps one such process).
    Relative paths are the current folder's, a pytester folder's in a pytester test."""
    from pytest_agentv.__main__ import main

    capsys.readouterr()  # what earlier in-process sessions printed
    started = time.monotonic()
    ret = main(["report", *args])
    out, err = capsys.readouterr()
    return pytest.RunResult(ret, out.splitlines(), err.splitlines(), time.monotonic() - started)


# --- Several features checked in one session (tests/test_collection.py::test_runs_under_xdist) ---
# Each feature's files sit in a folder of their own; these read one folder's share of the run.


def outcome_counts(result: pytest.RunResult, folder: str = "") -> dict[str, int]:
    """How many of the tests under ``folder`` (a node id prefix such as ``"matrix/"``) had each
    outcome (as ``outcomes`` names them) in an in-process run."""
    from collections import Counter

    found = outcomes(result.reprec)  # type: ignore[attr-defined]
    return dict(Counter(outcome for node, outcome in found.items() if node.startswith(folder)))


def rows_in(results: Path, folder: str = "") -> list[dict[str, Any]]:
    """The rows of a results file for the eval files under ``folder``."""
    import json

    rows = [json.loads(line) for line in results.read_text().splitlines()]
    return [row for row in rows if str(row["file"]).startswith(folder)]


def junit_cases_in(junit: Path, folder: str = "") -> list[Any]:
    """The ``testcase`` elements of a JUnit XML file for the tests under ``folder``."""
    from xml.etree import ElementTree

    classes = folder.replace("/", ".")
    cases = ElementTree.parse(junit).getroot().iter("testcase")
    return [case for case in cases if str(case.get("classname")).startswith(classes)]
