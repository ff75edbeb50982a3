"""Hostile eval files: every input collects, or is exactly one clear error naming the file."""

from __future__ import annotations

import os
import random
import string
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from os import PathLike
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_agentv.collect import load_specs
from pytest_agentv.errors import AgentvError
from pytest_agentv.evaluators import EvaluatorRegistry, build_evaluator_registry
from pytest_agentv.paths import MAX_FILE_BYTES
from tests.helpers import examples, outcome_counts, write

REGISTRY = EvaluatorRegistry(build_evaluator_registry())


def check(path: Path, root: Path) -> str | None:
    """Load like collection does: None when it collects, else the one error message."""
    try:
        load_specs(path, path.name, root, REGISTRY.scoped(REGISTRY.builtin))
    except AgentvError as exc:
        message = str(exc)
        assert message.startswith(f"{path.name}:"), message
        assert "\n" not in message.strip() or message.count(f"{path.name}:") == 1
        return message
    return None


def alias_bomb(levels: int = 9) -> str:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels):
        refs = ",".join([f"*a{i - 1}"] * 9)
        lines.append(f"a{i}: &a{i} [{refs}]")
    lines.append(f"evalcases: [{{id: x, input: q, description: *a{levels - 1}}}]")
    return "\n".join(lines) + "\n"


HOSTILE = {
    "alias-bomb": (alias_bomb(), "alias bomb"),
    "deep-nesting": ("evalcases: " + "[" * 150 + "]" * 150 + "\n", "nested deeper than 100"),
    "deep-mappings": (
        "evalcases:\n  - id: a\n    input: q\n    x: " + "{a: " * 120 + "1" + "}" * 120 + "\n",
        "nested deeper than 100",
    ),
    "recursive-alias": ("evalcases: &e [*e]\n", "recursive alias"),
    "duplicate-keys": ("evalcases: []\nevalcases: []\n", "duplicate key 'evalcases'"),
    "python-tag": (
        "evalcases: !!python/object/apply:os.system [echo hacked]\n",
        "could not determine a constructor",
    ),
    "nul-byte": ('evalcases: [{id: a, input: "q\x00"}]\n', "invalid YAML"),
    "tabs": ("evalcases:\n\t- id: a\n", "invalid YAML"),
    "huge-int": ("evalcases: [{id: 1" + "0" * 5000 + ", input: q}]\n", None),
    "nan-weight": (
        "evalcases: [{id: a, input: q, evaluators: [{name: j, type: llm_judge, weight: .nan}]}]\n",
        "weight: must be a finite number",
    ),
}


@pytest.mark.parametrize(("content", "expected"), HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_files_are_one_quick_clear_error(
    tmp_path: Path, content: str, expected: str | None
) -> None:
    path = tmp_path / "hostile.eval.yaml"
    path.write_text(content)
    started = time.monotonic()
    message = check(path, tmp_path)
    # Each takes about a millisecond; an expanded alias bomb or a runaway nesting would take
    # minutes, so a bound this generous still tells them apart on a busy machine.
    assert time.monotonic() - started < 10
    if expected is None:
        assert message is None or "hostile.eval.yaml:" in message
    else:
        assert message is not None and expected in message, message


_opened: list[Path] | None = None
_hooked = False


def _record_opens(event: str, args: tuple[Any, ...]) -> None:
    if event == "open" and _opened is not None and isinstance(args[0], (str, bytes, PathLike)):
        _opened.append(Path(os.fsdecode(args[0])).absolute())


@contextmanager
def files_opened() -> Iterator[list[Path]]:
    """The files this process opens in the block, by any means (``open``, ``os.open``, ...)."""
    global _opened, _hooked
    if not _hooked:
        sys.addaudithook(_record_opens)  # audit hooks cannot be removed: one per process
        _hooked = True
    _opened = []
    try:
        yield _opened
    finally:
        _opened = None


def test_oversized_file_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "big.eval.yaml"
    with path.open("w") as stream:
        stream.write("evalcases:\n")
        line = "  - {id: c, input: " + "x" * 1000 + "}\n"
        while stream.tell() <= MAX_FILE_BYTES:
            stream.write(line)
    with files_opened() as opened:
        message = check(path, tmp_path)
    assert message is not None and "the file is " in message
    assert message.endswith("bytes; the limit is 10,485,760")
    assert path not in opened  # refused from its size alone: never opened, let alone parsed
    small = tmp_path / "small.eval.yaml"
    small.write_text("evalcases: [{id: c, input: q}]\n")
    with files_opened() as opened:
        assert check(small, tmp_path) is None
    assert small in opened  # (the same check does open a file it reads)


def test_non_utf8_and_bom(tmp_path: Path) -> None:
    path = tmp_path / "enc.eval.yaml"
    path.write_bytes(b"evalcases: [{id: a, input: \xff\xfe}]\n")
    assert "not valid UTF-8" in (check(path, tmp_path) or "")
    path.write_bytes("\ufeffevalcases: [{id: a, input: q}]\n".encode())
    assert check(path, tmp_path) is None


# -- fuzzing ---------------------------------------------------------------------------------

KEYS = [
    "evalcases",
    "id",
    "input",
    "input_messages",
    "expected_outcome",
    "outcome",
    "expected_output",
    "expected_messages",
    "evaluators",
    "execution",
    "evaluator",
    "grader",
    "rubrics",
    "name",
    "type",
    "script",
    "weight",
    "score_ranges",
    "score_range",
    "required",
    "required_min_score",
    "role",
    "content",
    "value",
    "target",
    "dataset",
    "description",
    "prompt",
    "cwd",
    "config",
]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 15),
    st.floats(allow_nan=True),
    st.sampled_from(
        [
            "llm_judge",
            "code_judge",
            "code",
            "rubric",
            "user",
            "assistant",
            "text",
            "file",
            "python",
            "0",
            "",
            "../x",
            "a::b",
        ]
    ),
    st.text(max_size=8),
)
documents = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.one_of(st.sampled_from(KEYS), st.integers(0, 10)), children, max_size=5),
    ),
    max_leaves=25,
)

CORPUS = [
    path.read_text()
    for path in sorted((Path(__file__).parent.parent / "examples").rglob("*.eval.yaml"))
]
NASTY = "[]{}:,-&*!|>'\"%@`#?\t\n\x00\ufeff"


def mutate(text: str, rng: random.Random) -> str:
    chars = list(text)
    for _ in range(rng.randint(1, 8)):
        position = rng.randrange(len(chars) + 1)
        action = rng.random()
        if action < 0.4 and chars:
            del chars[min(position, len(chars) - 1)]
        elif action < 0.8:
            chars.insert(position, rng.choice(NASTY + string.ascii_letters))
        else:
            start = rng.randrange(len(chars)) if chars else 0
            chars[position:position] = chars[start : start + rng.randint(1, 40)]
    return "".join(chars)


@settings(
    max_examples=examples(1200),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    document=st.one_of(
        documents,
        st.fixed_dictionaries({"evalcases": st.lists(documents, max_size=3)}),
        st.fixed_dictionaries(
            {
                "evalcases": st.lists(
                    st.fixed_dictionaries({"id": scalars, "input": documents}), max_size=3
                )
            }
        ),
    )
)
def test_fuzz_generated_files(tmp_path: Path, document: object) -> None:
    path = tmp_path / "fuzz.eval.yaml"
    try:
        path.write_text(yaml.safe_dump(document, allow_unicode=True))
    except (yaml.YAMLError, UnicodeEncodeError):
        return
    check(path, tmp_path)


@settings(
    max_examples=examples(1000),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(seed=st.integers(0, 2**32 - 1), base=st.sampled_from(CORPUS))
def test_fuzz_mutated_real_files(tmp_path: Path, seed: int, base: str) -> None:
    path = tmp_path / "fuzz.eval.yaml"
    path.write_text(mutate(base, random.Random(seed)), errors="surrogatepass")
    check(path, tmp_path)


def test_many_hostile_files_in_one_session_never_internalerror(pytester: pytest.Pytester) -> None:
    rng = random.Random(1234)
    for index in range(examples(600)):
        write(pytester, f"f{index:03d}.eval.yaml", mutate(rng.choice(CORPUS), rng))
    for name, (content, _) in HOSTILE.items():
        (pytester.path / f"h-{name}.eval.yaml").write_text(content)
    # "-W default": warnings (unknown keys, say) stay warnings, as in a user's run, instead of
    # becoming errors through this suite's own filterwarnings = error.
    reprec = pytester.inline_run("--co", "-q", "--continue-on-collection-errors", "-W", "default")
    assert reprec.ret != pytest.ExitCode.INTERNAL_ERROR
    assert not reprec.getcalls("pytest_internalerror")
    errors = [r for r in reprec.getreports("pytest_collectreport") if r.failed]
    for report in errors:  # each error is the file's one clear message, not a traceback
        message = str(report.longrepr)
        assert message.startswith(f"{report.nodeid}:"), message
        assert "Traceback" not in message
    assert len({r.nodeid for r in errors}) == len(errors) >= len(HOSTILE) - 1


def write_deep_nesting(project: pytest.Pytester, folder: str = "") -> None:
    """A 50 KB file nested 25,000 deep used to overflow the C stack in the YAML composer (a
    segfault: no report, no JUnit, and under xdist the other test files never ran); so did a
    targets file. Beside them, in ``folder``: a fine eval file and a Python test. Run under
    pytest-xdist with the other features' files in tests/test_collection.py's
    test_runs_under_xdist (``assert_deep_nesting_refused``)."""
    if folder:
        write(project, f"{folder}keywords.py", (project.path / "keywords.py").read_text())
    deep = "[" * 25_000 + "]" * 25_000
    write(project, f"{folder}deep.eval.yaml", f"evalcases: [{{id: a, input: {deep}}}]\n")
    write(
        project, f"{folder}fine.eval.yaml", "evalcases: [{id: ok, input: q, expected_outcome: x}]\n"
    )
    write(project, f"{folder}test_other.py", "def test_other():\n    pass\n")
    targets = f"targets: {'[' * 30_000}{']' * 30_000}\n"
    write(project, f"{folder}deep-targets/.agentv/targets.yaml", targets)
    write(
        project,
        f"{folder}deep-targets/t.eval.yaml",
        """
        evalcases:
          - id: t
            input: q
            evaluators: [{name: kw, type: code_judge, script: [python, ../keywords.py]}]
        """,
    )


def assert_deep_nesting_refused(result: pytest.RunResult, folder: str = "") -> None:
    """Each deep file is its one clear error (the eval file's at collection, the targets file's
    for its case); the other tests in ``folder`` ran."""
    assert outcome_counts(result, folder) == {"passed": 1, "error": 1, "skipped": 1}
    collect = result.reprec.getreports("pytest_collectreport")  # type: ignore[attr-defined]
    failed = [report.nodeid for report in collect if report.failed]
    assert [node for node in failed if node.startswith(folder)] == [f"{folder}deep.eval.yaml"]
    result.stdout.fnmatch_lines(
        [
            f"*{folder}deep.eval.yaml:1:126: YAML is nested deeper than 100 levels*",
            f"*{folder}deep-targets/.agentv/targets.yaml:1:110: YAML is nested deeper than 100*",
        ]
    )


@pytest.mark.parametrize(
    ("text", "at"),
    [
        # Closers inside quoted strings do not close anything.
        ("evalcases: " + '[ "]", ' * 150 + "x" + "]" * 150 + "\n", "1:712"),
        # Spaced out, so that libyaml's own look-ahead would not reach its limit first.
        ("evalcases:\n  - id: a\n    input: " + "[ " * 150 + "]" * 150 + "\n", "3:212"),
        # A comment holding closers on each line.
        ("evalcases:\n- [ # ]]]\n" + "[" * 120, "3:100"),
    ],
    ids=["quoted-closers", "spaced", "commented-closers"],
)
def test_flow_nesting_is_measured_before_libyaml_reads(tmp_path: Path, text: str, at: str) -> None:
    """Our depth check runs on the text before PyYAML's parser (libyaml looks far ahead in flow
    collections and refuses deep ones with its own words, at its own limit)."""
    path = tmp_path / "deep.eval.yaml"
    path.write_text(text)
    message = check(path, tmp_path)
    assert message == f"deep.eval.yaml:{at}: YAML is nested deeper than 100 levels"


def test_the_exact_scan_reads_up_to_the_first_bracket_too_deep(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PyYAML's scanner looks ahead for keys at every open level: given the whole of 25,000
    nested brackets it took a sixth of a second to refuse them. A bracket in a block scalar
    still counts for nothing: then the whole text is read, and a deep collection after it is
    found all the same."""
    scanned: list[int] = []
    scan = yaml.scan

    def counting(text: str, **kwargs: Any) -> Iterator[yaml.Token]:
        scanned.append(len(text))
        return scan(text, **kwargs)

    monkeypatch.setattr(yaml, "scan", counting)
    path = tmp_path / "deep.eval.yaml"
    path.write_text("evalcases: " + "[" * 25_000 + "]" * 25_000 + "\n")
    assert check(path, tmp_path) == "deep.eval.yaml:1:112: YAML is nested deeper than 100 levels"
    assert scanned == [len("evalcases: ") + 101]

    scanned.clear()
    scalar = "evalcases:\n  - id: a\n    input: |\n      "
    path.write_text(scalar + "[" * 150 + "\n    tags: " + "[" * 150 + "]" * 150 + "\n")
    assert check(path, tmp_path) == "deep.eval.yaml:5:111: YAML is nested deeper than 100 levels"
    assert scanned == [len(scalar) + 101, path.stat().st_size]


def test_brackets_in_text_are_not_nesting(tmp_path: Path) -> None:
    """Brackets inside block scalars, quoted strings and comments are text: a prompt full of
    them loads (the lexical scan only picks which files the exact scan reads)."""
    brackets = "[" * 300 + "{" * 300
    path = tmp_path / "text.eval.yaml"
    path.write_text(
        "evalcases:\n"
        "  - id: a\n"
        "    input: |\n"
        f"      {brackets}\n"
        f"    expected_outcome: '{brackets}'  # {brackets}\n"
    )
    assert check(path, tmp_path) is None


def test_an_alias_byte_bomb_is_one_clear_error(tmp_path: Path) -> None:
    """A 1 MB scalar anchored once and aliased 1,500 times passed the node-count check and
    grew to 11.8 GB; its expanded text is bounded like a file."""
    path = tmp_path / "bomb.eval.yaml"
    aliases = ", ".join(["*big"] * 1_500)
    path.write_text(f'big: &big "{"x" * 1_000_000}"\nevalcases: [{{id: a, input: [{aliases}]}}]\n')
    message = check(path, tmp_path)
    assert message is not None
    assert "YAML aliases expand to more than 10,485,760 bytes of text" in message
