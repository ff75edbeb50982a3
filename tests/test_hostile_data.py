"""Hostile data besides eval files' own syntax: lines too long for memory, files that never end,
paths in results files that name something outside the run, and environment values that look
like words."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_agentv import scheduler
from pytest_agentv.errors import EvalFileError
from pytest_agentv.jsonlines import MAX_LINE_BYTES, json_lines
from pytest_agentv.llm.replay import ReplayStore
from pytest_agentv.redaction import looks_secret
from tests.fake_openai import FakeOpenAI
from tests.fake_openai import freeform as freeform_reply
from tests.helpers import judge_ini, write
from tests.test_hostile_yaml import check

KEYWORD_CASE = """
evalcases:
  - id: a
    input: q
    evaluators:
      - {name: kw, type: code_judge, script: [python, keywords.py], keywords: [30 days]}
"""


def rows(path: Path) -> dict[str, dict[str, object]]:
    found = [json.loads(line) for line in path.read_text().splitlines()]
    return {str(row["eval_id"]): row for row in found}


# -- line length -----------------------------------------------------------------------------


def test_a_line_longer_than_the_limit_is_refused_before_it_is_parsed() -> None:
    long_line = json.dumps({"eval_id": "b", "candidate_answer": "x" * MAX_LINE_BYTES})
    text = '{"eval_id": "a"}\n' + long_line + "\n"
    found = json_lines(text, "base.jsonl")
    assert next(found) == (1, {"eval_id": "a"})
    with pytest.raises(EvalFileError) as refused:
        next(found)
    assert str(refused.value) == (
        f"base.jsonl:2:1: the line is {len(long_line):,} bytes; the limit is {MAX_LINE_BYTES:,}"
    )
    # Counted in UTF-8 bytes, not characters.
    wide = json.dumps({"a": "é" * (MAX_LINE_BYTES // 2)}, ensure_ascii=False)
    with pytest.raises(EvalFileError, match=f"the line is {len(wide.encode()):,} bytes"):
        list(json_lines(wide, "wide.jsonl"))


def test_a_baseline_line_over_the_limit_is_a_usage_error(project: pytest.Pytester) -> None:
    write(project, "r.eval.yaml", KEYWORD_CASE)
    row = json.dumps({"eval_id": "a", "score": 1, "candidate_answer": "x" * MAX_LINE_BYTES})
    write(project, "base.jsonl", '{"eval_id": "z", "score": 1}\n' + row + "\n")
    result = project.runpytest("--agentv-baseline=base.jsonl")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            f"ERROR: --agentv-baseline: base.jsonl:2:1: the line is {len(row):,} bytes; "
            f"the limit is {MAX_LINE_BYTES:,}"
        ]
    )


def loading_peak(path: Path) -> int:
    """The most memory (bytes) loading an eval file that collects took at once."""
    tracemalloc.start()
    try:
        assert check(path, path.parent) is None
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_large_allowed_line_is_read_in_memory_linear_in_its_size(tmp_path: Path) -> None:
    """A 9.4 MB JSONL case (under the 10 MiB file limit) took 1.19 GB: a backtracking regex
    kept ~125 bytes per character while it looked for brackets outside strings."""
    path = tmp_path / "big.eval.jsonl"
    text = 'Say "hi" [not a bracket] \\ ' * 310_000
    path.write_text(json.dumps({"id": "big", "input": text, "tags": [[1]] * 120}) + "\n")
    assert 9_000_000 < path.stat().st_size < 10 * 1024 * 1024
    assert loading_peak(path) < 12 * path.stat().st_size


@pytest.mark.parametrize(
    ("text", "deep"),
    [
        ("[" * 100 + "]" * 100, True),
        ("[" * 99 + "]" * 99, False),
        (json.dumps({"a": "[" * 200 + '"\\' + "{" * 200}), False),
        (json.dumps({"a": "\\" * 7 + '"[[[' * 60, "b": [[[]]]}), False),
        ('{"a": ' * 120 + "1" + "}" * 120, True),
    ],
)
def test_nesting_is_counted_outside_strings(text: str, deep: bool) -> None:
    if deep:
        with pytest.raises(EvalFileError, match="JSON is nested deeper than 100 levels"):
            list(json_lines(text, "d.jsonl"))
    else:
        assert len(list(json_lines(text, "d.jsonl"))) == 1


def test_a_long_quoted_yaml_scalar_is_scanned_in_linear_memory(tmp_path: Path) -> None:
    """The flow-bracket scan of YAML files had the same regex for quoted scalars."""
    path = tmp_path / "long.eval.yaml"
    brackets = ", ".join(["[]"] * 120)
    text = 'say \\"hi\\" [x] ' * 50_000
    path.write_text(f'evalcases:\n  - id: a\n    tags: [{brackets}]\n    input: "{text}"\n')
    assert loading_peak(path) < 12 * path.stat().st_size


# -- files that never end ------------------------------------------------------------------------


@pytest.fixture
def fifo(project: pytest.Pytester) -> Path:
    path = project.path / "fifo"
    os.mkfifo(path)
    return path


@contextlib.contextmanager
def unless_it_waits_on(fifo: Path, after: float = 60) -> Iterator[None]:
    """Run the block (an in-process run) with a way out: should the run open ``fifo`` and wait
    for its other end (the failure under test), that end is opened after ``after`` seconds and
    closed at once, so the run goes on (and the test fails) instead of hanging the suite."""
    done = threading.Event()

    def release() -> None:
        if done.wait(after):
            return
        while not done.wait(0.1):
            for flags in (os.O_RDONLY | os.O_NONBLOCK, os.O_WRONLY | os.O_NONBLOCK):
                with contextlib.suppress(OSError):  # ENXIO: nothing waits to read it
                    os.close(os.open(fifo, flags))

    thread = threading.Thread(target=release, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


@pytest.mark.parametrize(
    "option", ["--agentv-answers", "--agentv-baseline", "--agentv-targets", "--agentv-calibration"]
)
def test_an_option_naming_a_fifo_is_a_usage_error(
    project: pytest.Pytester, fifo: Path, option: str
) -> None:
    """Reading a FIFO nothing writes to never ends: the run hung, and SIGTERM then ended it
    with a traceback."""
    write(project, "r.eval.yaml", KEYWORD_CASE)
    with unless_it_waits_on(fifo):
        result = project.runpytest(f"{option}=fifo")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            f"ERROR: {option}=fifo is invalid: it is a FIFO (named pipe), not a regular file "
            "(reading one may never end)"
        ]
    )


def test_a_results_path_that_is_a_fifo_nothing_reads_is_a_usage_error(
    project: pytest.Pytester, fifo: Path
) -> None:
    write(project, "r.eval.yaml", KEYWORD_CASE)
    with unless_it_waits_on(fifo):
        result = project.runpytest("--agentv-results=fifo")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: --agentv-results=*fifo cannot be written: it is a FIFO (named pipe) that nothing*"]
    )


@pytest.mark.parametrize(
    ("special", "eval_file", "shown"),
    [
        (".agentv/targets.yaml", ("r.eval.yaml", KEYWORD_CASE), ".agentv/targets.yaml:1:1"),
        (".agentv/config.yaml", ("r.eval.yaml", KEYWORD_CASE), ".agentv/config.yaml:1:1"),
        ("d.eval.yaml", ("d.eval.jsonl", '{"id": "a", "input": "q"}\n'), "d.eval.yaml:1:1"),
    ],
    ids=["targets", "config", "sidecar"],
)
def test_a_project_file_that_is_a_fifo_is_refused_not_passed_over(
    project: pytest.Pytester, special: str, eval_file: tuple[str, str], shown: str
) -> None:
    """Such a file used to be passed over as if it were not there (a FIFO is not a file):
    the run went on without its targets, configuration or the dataset's defaults."""
    write(project, *eval_file)
    (project.path / special).unlink(missing_ok=True)
    os.mkfifo(project.path / special)
    with unless_it_waits_on(project.path / special):
        result = project.runpytest()
    result.stdout.fnmatch_lines([f"*{shown}: a FIFO (named pipe), not a regular file*"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_a_cli_target_that_leaves_a_fifo_as_its_output_file_is_not_graded(
    project: pytest.Pytester,
) -> None:
    left = project.path / "left"  # where the FIFO is, for the way out
    command = f"mkfifo {{OUTPUT_FILE}} && ln -s {{OUTPUT_FILE}} {left}"
    write(
        project,
        ".agentv/targets.yaml",
        f"targets:\n  - {{name: default, provider: cli, command_template: '{command}'}}\n",
    )
    write(project, "r.eval.yaml", KEYWORD_CASE)
    with unless_it_waits_on(left):
        result = project.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*left a FIFO (named pipe) at {OUTPUT_FILE}, not a regular file; it was not read*"]
    )


def test_a_fifo_in_the_replay_store_is_no_stored_reply(tmp_path: Path) -> None:
    store = ReplayStore(tmp_path, "replay")
    path = store.path_for("ab" * 32)
    path.parent.mkdir(parents=True)
    os.mkfifo(path)
    found: list[object] = []
    reader = threading.Thread(target=lambda: found.append(store.get("ab" * 32)), daemon=True)
    reader.start()
    reader.join(30)
    if reader.is_alive():  # it waited for a writer: give it one, so that it ends
        with path.open("w"):
            pass
        pytest.fail("reading the replay store waited on a FIFO")
    assert found == [None]


async def _hold(started: threading.Event, release: threading.Event) -> None:
    started.set()
    release.wait()  # holds the loop's thread, as a blocking read would


def test_closing_does_not_wait_on_a_loop_something_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    """``close`` waited 30 s for such a loop and then raised ``TimeoutError``: an interrupted
    run ended with a traceback."""
    monkeypatch.setattr(scheduler, "LOOP_ANSWERS_WITHIN", 0.1)
    started, release = threading.Event(), threading.Event()
    work = scheduler.Scheduler(2)
    held = work.submit(_hold(started, release))
    try:
        assert started.wait(30)
        work.close()  # returns, and raises nothing
    finally:
        release.set()
    held.result(timeout=30)


HOLDING_EVALUATOR = """
import time
import pytest
from pytest_agentv import EvaluationScore

class Holding:
    kind = "holding"
    async def evaluate(self, context):
        open("holding", "w").close()
        time.sleep(120)  # holds the plugin's loop, as a read that never ends did
        return EvaluationScore(score=1.0)

@pytest.hookimpl
def pytest_agentv_make_evaluator(config, kind):
    return Holding() if kind == "holding" else None
"""


def test_sigterm_while_the_loop_is_held_writes_reports_without_a_traceback(
    project: pytest.Pytester,
) -> None:
    write(project, "conftest.py", HOLDING_EVALUATOR)
    write(project, "r.eval.yaml", "evalcases: [{id: a, input: q, evaluators: [{type: holding}]}]")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--junitxml=junit.xml",
            "--agentv-results=out.jsonl",
        ],
        cwd=project.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while not (project.path / "holding").exists():
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        output = process.communicate(timeout=90)[0].decode()
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == pytest.ExitCode.INTERRUPTED, output
    assert "Traceback" not in output and "TimeoutError" not in output, output
    assert (project.path / "junit.xml").exists()
    assert (project.path / "out.jsonl").exists()


# -- paths in results files --------------------------------------------------------------------


@pytest.mark.parametrize("named", ["/etc/passwd", "../outside.txt", "gone.eval.yaml"])
def test_a_path_a_results_row_names_is_compared_as_text_never_looked_up(
    project: pytest.Pytester, named: str
) -> None:
    """A row naming another eval file belongs to that file while the run has its case; a file
    that exists on disk (``/etc/passwd``) was stat'ed, and made the row another file's."""
    (project.path.parent / "outside.txt").write_text("x")
    write(project, "r.eval.yaml", KEYWORD_CASE)
    row = {"eval_id": "a", "dataset": "r", "file": named, "score": 0.25}
    write(project, "prev.jsonl", json.dumps({**row, "candidate_answer": "within 30 days"}) + "\n")
    result = project.runpytest(
        "--agentv-answers=prev.jsonl", "--agentv-baseline=prev.jsonl", "--agentv-results=o.jsonl"
    )
    result.assert_outcomes(passed=1)
    assert rows(project.path / "o.jsonl")["a"]["baseline_score"] == 0.25


# -- environment values that look like words ---------------------------------------------------

SECRET = "tok-4f8a2c9e1b7d3a6f"
REFUNDS = """
evalcases:
  - id: refunds
    input: Is the jacket refundable?
    expected_outcome: Says it is refundable within 30 days
"""


def store_texts(root: Path) -> list[str]:
    return [path.read_text() for path in sorted((root / ".agentv" / "cache").rglob("*.json"))]


def test_a_word_in_a_credential_named_variable_does_not_break_replay(
    project: pytest.Pytester, fake_llm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``SORT_KEY_FIELD=refundable`` made ``refundable`` a secret, and its pattern ate the JSON
    after it: the stored reply was no JSON, so the recorded run passed and its replay was not
    graded. A real secret in the same reply is still redacted, and the JSON stays JSON."""
    monkeypatch.setenv("SORT_KEY_FIELD", "refundable")
    monkeypatch.setenv("SHOP_API_TOKEN", SECRET)
    fake_llm.responder = (
        lambda request: freeform_reply(  # type: ignore[assignment]
            0.9, ["says it is refundable"], [f"echoed {SECRET}, {SECRET[:10]}****"], "refundable"
        )
    )
    project.makeini(judge_ini(fake_llm).replace("cache_mode = off", "cache_mode = readwrite"))
    write(project, "r.eval.yaml", REFUNDS)
    project.runpytest("--agentv-results=first.jsonl").assert_outcomes(passed=1)
    calls = len(fake_llm.requests)
    fake_llm.stop()
    replayed = project.runpytest("--agentv-cache-mode=replay", "--agentv-results=second.jsonl")
    replayed.assert_outcomes(passed=1)
    replayed.stdout.fnmatch_lines(["agentv: 0 model calls made, 1 replies reused from the store*"])
    assert len(fake_llm.requests) == calls
    keys = ("score", "verdict", "hits", "misses", "reasoning")
    first, second = rows(project.path / "first.jsonl"), rows(project.path / "second.jsonl")
    assert {k: first["refunds"][k] for k in keys} == {k: second["refunds"][k] for k in keys}
    assert first["refunds"]["misses"] == ["echoed [redacted], [redacted]"]
    (stored,) = store_texts(project.path)
    assert SECRET[:8] not in stored and "refundable" in stored
    assert json.loads(json.loads(stored)["response"]["content"])["hits"] == [
        "says it is refundable"
    ]


def test_a_model_answer_that_redaction_would_change_is_not_stored(
    project: pytest.Pytester, fake_llm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store keeps replies redacted; an agent's answer is graded as written, so a redacted
    copy would replay a different answer: it is not stored, and replay says it is missing."""
    monkeypatch.setenv("SHOP_API_TOKEN", SECRET)
    write(
        project,
        ".agentv/targets.yaml",
        "targets:\n  - {name: default, provider: litellm, model: openai/agent, "
        f"api_base: {fake_llm.api_base}}}\n",
    )
    fake_llm.responder = lambda request: (  # type: ignore[assignment]
        f"Refundable; your token is {SECRET}"
        if request.body["model"] == "agent"
        else freeform_reply(0.9)
    )
    project.makeini(judge_ini(fake_llm).replace("cache_mode = off", "cache_mode = readwrite"))
    write(project, "r.eval.yaml", REFUNDS)
    project.runpytest().assert_outcomes(passed=1)
    (judged,) = store_texts(project.path)  # the judge's reply; not the answer
    assert SECRET[:8] not in judged
    fake_llm.stop()
    result = project.runpytest("--agentv-cache-mode=replay")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*target 'default' (openai/agent): no stored reply*"])


@pytest.mark.parametrize(
    ("name", "value", "secret"),
    [
        ("SORT_KEY_FIELD", "refundable", False),
        ("PRIMARY_KEY", "customer_id_column", False),  # a name: no digit
        ("TOKENIZER", "cl100k_base", False),  # too short to be a generated key
        ("PADDED_TOKEN", "0000000000000a", False),  # too little variety
        ("CALLBACK_TOKEN_URL", "https://ci.example/token/1234567890", False),
        ("OPENAI_API_KEY", "sk-proj-4fA9c2E7b1D8", True),
        ("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", True),
        ("DB_PASSWORD", "Passw0rd2024!", True),
        ("PASSWORD", "correct horse 1 battery", False),  # spaces: not one token
    ],
)
def test_what_environment_values_are_secrets(name: str, value: str, secret: bool) -> None:
    assert looks_secret(name, value) is secret
