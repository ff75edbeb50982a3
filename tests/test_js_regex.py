"""``regex`` checks answer as JavaScript's ``RegExp`` does: a table of patterns, flags and texts
with JavaScript's answer to ``new RegExp(pattern, flags).test(text)`` (``true``, ``false``, or
``"SyntaxError"`` where the pattern is refused), checked against ``node`` itself."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from pytest_agentv.evaluators.textchecks import CHECKS
from pytest_agentv.schema.textchecks import TextCheckSpec
from tests.helpers import assert_load_error, write

TABLE = Path(__file__).with_name("js_regex.jsonl")
ROWS: list[list[Any]] = [json.loads(line) for line in TABLE.read_text("utf-8").split("\n") if line]

NODE_TEST = """
const lines = require("fs").readFileSync(process.argv[2], "utf8").split("\\n").filter(Boolean);
for (const line of lines) {
  const [pattern, flags, text] = JSON.parse(line);
  let answer;
  try { answer = new RegExp(pattern, flags).test(text); } catch (e) { answer = "SyntaxError"; }
  console.log(JSON.stringify(answer));
}
"""


def answer(pattern: str, flags: str, text: str) -> bool | str:
    """What the ``regex`` check says, as the table writes JavaScript's answers."""
    try:
        spec = TextCheckSpec(value=pattern, flags=flags or None).for_kind("regex")
    except ValueError:
        return "SyntaxError"
    check, _ = CHECKS["regex"]
    return check(text, spec, False)[0]


@pytest.mark.parametrize(
    ("pattern", "flags", "text", "javascript"),
    ROWS,
    ids=[f"line{number}" for number in range(1, len(ROWS) + 1)],
)
def test_each_pattern_answers_as_javascript(
    pattern: str, flags: str, text: str, javascript: bool | str
) -> None:
    assert answer(pattern, flags, text) == javascript


def test_node_gives_the_table_s_answers(tmp_path: Path) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: apt-get install -y nodejs (as .ci/run does)")
    script = tmp_path / "table.js"
    script.write_text(NODE_TEST)
    run = subprocess.run(
        [node, str(script), str(TABLE)], capture_output=True, text=True, check=True, timeout=120
    )
    answers = [json.loads(line) for line in run.stdout.splitlines()]
    assert [row[3] for row in ROWS] == answers


def test_a_repeat_count_a_javascript_engine_answers_at_once_is_a_load_error(
    project: pytest.Pytester,
) -> None:
    """``a{1000000000}`` grew pytest to 20 GB as the ``regex`` module compiled it."""
    assert_load_error(
        project,
        "{type: regex, value: 'a{1000000000}'}",
        "*invalid regular expression /a{1000000000}/: its repetitions add up to "
        "1,000,000,000 matches of its parts; pytest-agentv takes at most 100,000*",
    )


@pytest.mark.parametrize(
    "pattern",
    ["(?:(?:a{100}){100}){100}", "(?:a{1,2}){60000}", "x{99999}y{2}"],
    ids=["nested", "bounded-body", "sum"],
)
def test_repetitions_are_counted_through_nesting(pattern: str) -> None:
    with pytest.raises(ValueError, match="its repetitions add up to"):
        TextCheckSpec(value=pattern).for_kind("regex")


def test_non_ascii_word_boundaries_end_to_end(project: pytest.Pytester) -> None:
    """``\\bJos\\b`` on "José" passes in JavaScript (é is not a word character there), and
    without the ``u`` flag ``..`` matches one astral character (two code units)."""
    (project.path / ".agentv" / "targets.yaml").write_text(
        "targets:\n  - {name: default, provider: mock, response: 'José 😀'}\n"
    )
    write(
        project,
        "f.eval.yaml",
        r"""
        tests:
          - id: names
            input: q
            assertions:
              - {type: regex, value: '\bJos\b'}
              - {type: regex, value: '^Jos.\s..$'}
        """,
    )
    project.runpytest().assert_outcomes(passed=1)
