"""JSONL datasets with their sidecar, guideline files, and case ids AgentV accepts."""

from __future__ import annotations

import json
from fnmatch import fnmatch
from pathlib import Path

import pytest

from tests.helpers import load_error, write

PAYLOAD_JUDGE = """\
import json, sys
payload = json.load(sys.stdin)
print(json.dumps({"score": 1.0, "hits": [json.dumps({k: payload[k] for k in
    ("guideline_files", "input_files", "question")})]}))
"""

JSONL = (
    '{"id": "refund", "expected_outcome": "30 days", "input": "Refund window?"}\n'
    "\n"
    '{"id": "no-refund", "expected_outcome": "says no",'
    ' "input": [{"role": "user", "content": "Hi"}], "execution": {"target": "wrong"}}\n'
)

SIDECAR = """\
description: defaults for every line of the .jsonl beside me
dataset: refunds-jsonl
execution:
  evaluators:
    - {name: kw, type: code_judge, script: [python, keywords.py], keywords: ["30 days"]}
"""


def rows(path) -> dict[str, dict]:
    return {row["eval_id"]: row for row in map(json.loads, path.read_text().splitlines())}


def test_jsonl_dataset_with_sidecar_is_one_eval_file(project: pytest.Pytester) -> None:
    write(project, "refunds.eval.jsonl", JSONL)
    write(project, "refunds.eval.yaml", SIDECAR)
    collected = project.runpytest("--co", "-q")
    collected.stdout.fnmatch_lines(
        ["refunds.eval.jsonl::refund", "refunds.eval.jsonl::no-refund", "2 tests *"]
    )
    result = project.runpytest("--agentv-results", "out.jsonl")
    # The case with its own `execution` (a target) keeps the sidecar's evaluators (YAML's rule).
    result.assert_outcomes(passed=1, failed=1)
    found = rows(project.path / "out.jsonl")
    assert {row["dataset"] for row in found.values()} == {"refunds-jsonl"}
    assert found["no-refund"]["target"] == "wrong"
    [entry] = found["no-refund"]["evaluator_results"]
    assert entry["evaluator_provider_request"]["script"] == ["python", "keywords.py"]


def test_jsonl_named_on_the_command_line_is_collected_when_its_rows_are_cases(
    project: pytest.Pytester,
) -> None:
    write(project, "cases.jsonl", '{"id": "a", "input": "q", "evaluators": []}\n')
    write(project, "logs.jsonl", '{"level": "info", "msg": "not an eval case"}\n')
    write(project, "elsewhere.jsonl", '{"id": "b", "input": "q"}\n')
    result = project.runpytest("--co", "-q", "cases.jsonl")
    result.stdout.fnmatch_lines(["cases.jsonl::a", "1 test collected*"])
    # Named but not eval cases: not collected (pytest then says it found nothing there).
    project.runpytest("--co", "-q", "logs.jsonl").stderr.fnmatch_lines(["*not found*logs.jsonl"])
    # Found while walking folders, only the eval patterns (*.eval.jsonl) count.
    assert "elsewhere" not in project.runpytest("--co", "-q").stdout.str()


@pytest.mark.parametrize(
    ("lines", "sidecar", "expected"),
    [
        ('{"id": "a", "input": "q"}\n{"id": "b", "input": "q",}\n', None, "d.eval.jsonl:2:26: *"),
        (
            '{"id": "a", "input": "q"}\n\n{"input": "q"}\n',
            None,
            "d.eval.jsonl:3:1: evalcases.1.id:*",
        ),
        ('{"id": "a", "input": "q", "id": "b"}\n', None, "d.eval.jsonl:1:1: *duplicate key 'id'*"),
        (
            '{"id": "a", "input": ' + "[" * 200 + "]" * 200 + "}\n",
            None,
            "d.eval.jsonl:1:1: *deeper*",
        ),
        ("[1, 2]\n", None, "d.eval.jsonl:1:1: each line must be a JSON object*"),
        ("\n\n", None, "d.eval.jsonl:1:1: no eval cases*"),
        (
            '{"id": "a", "input": "q"}\n{"id": "a", "input": "q"}\n',
            None,
            "d.eval.jsonl:2:1: evalcases.1.id: duplicate case id 'a' (first defined at line 1)",
        ),
        (
            '{"id": "a", "input": "q"}\n',
            "dataset: x\nexecution:\n  evaluators: [{name: x, type: code_judge}]\n",
            "d.eval.yaml:3:*: execution.evaluators.0: code_judge evaluator 'x' needs a 'script'*",
        ),
        (
            '{"id": "a", "input": "q"}\n',
            "evalcases: [{id: b, input: q}]\n",
            "d.eval.yaml:1:1: evalcases: a JSONL sidecar holds file-level defaults only*",
        ),
        (
            '{"id": "a", "input": "q"}\n{"id": "b", "input": "q", "input_messages": "r"}\n',
            None,
            "d.eval.jsonl:2:1: evalcases.1.input_messages: give either 'input' or "
            "'input_messages', not both",
        ),
        (
            '{"id": "a", "input": "q"}\n',
            "execution:\n  evaluators: [{type: latency, threshold: 1}]\n"
            "  assertions: [{type: cost, budget: 1}]\n",
            "d.eval.yaml:3:3: execution.assertions: give either 'evaluators' or 'assertions', "
            "not both",
        ),
        (
            '{"id": "a", "input": "q"}\n{"id": "b", "input": "q"}\n',
            "dataset: x\nexecution:\n  evaluators: [{name: j, type: llm_jugde}]\n",
            "d.eval.yaml:3:*: execution.evaluators.0.type: unknown evaluator type 'llm_jugde'*",
        ),
    ],
    ids=[
        "bad-json",
        "missing-id",
        "duplicate-key",
        "too-deep",
        "not-an-object",
        "blank",
        "duplicate-id",
        "sidecar-error",
        "sidecar-with-cases",
        "two-names",
        "sidecar-two-names",
        "sidecar-unknown-type",
    ],
)
def test_jsonl_errors_point_at_the_file_and_line(
    tmp_path: Path, lines: str, sidecar: str | None, expected: str
) -> None:
    if sidecar is not None:
        (tmp_path / "d.eval.yaml").write_text(sidecar)
    error = load_error(tmp_path, "d.eval.jsonl", lines)
    assert fnmatch(error, expected), error


def test_a_jsonl_error_reaches_the_terminal_as_one_collection_error(
    project: pytest.Pytester,
) -> None:
    """What pytest makes of such errors, a dataset's own and its sidecar's: one collection error
    each, shown at the file and line, never a traceback."""
    write(project, "d.eval.jsonl", '{"id": "a", "input": "q"}\n{"id": "b", "input": "q",}\n')
    write(project, "s.eval.jsonl", '{"id": "a", "input": "q"}\n')
    write(project, "s.eval.yaml", "evalcases: [{id: b, input: q}]\n")
    result = project.runpytest("--co", "-q")
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["d.eval.jsonl:2:26: *"])
    result.stdout.fnmatch_lines(
        ["s.eval.yaml:1:1: evalcases: a JSONL sidecar holds file-level defaults only*"]
    )
    assert "Traceback" not in result.stdout.str()


def test_jsonl_unknown_keys_warn_at_their_line(project: pytest.Pytester) -> None:
    write(
        project,
        "d.eval.jsonl",
        '{"id": "a", "input": "q", "evaluators": [{"name": "k", "type": "code_judge", '
        '"script": ["python", "keywords.py"], "keywords": ["x"]}]}\n'
        '{"id": "b", "input": "q", "expected_outcom": "typo", "evaluators": [{"name": "k", '
        '"type": "code_judge", "script": ["python", "keywords.py"], "keywords": ["x"]}]}\n',
    )
    write(project, "d.eval.yaml", "descripton: typo in the sidecar\n")
    result = project.runpytest("--co", "-q", "-W", "always")
    result.stdout.fnmatch_lines(
        [
            "*/d.eval.yaml:1: AgentvWarning: d.eval.yaml:1: descripton: unknown key "
            "'descripton' is ignored (did you mean 'description'?)",
            "*/d.eval.jsonl:2: AgentvWarning: d.eval.jsonl:2: evalcases.1.expected_outcom: "
            "unknown key 'expected_outcom' is ignored (did you mean 'expected_outcome'?)",
        ]
    )


# -- guideline files ------------------------------------------------------------------------

CONFIG = 'guideline_patterns: ["**/*.instructions.md"]\n'

GUIDED_CASE = """
evalcases:
  - id: guided
    input:
      - role: system
        content: Be brief.
      - role: user
        content:
          - {type: text, value: Review this.}
          - {type: file, value: style.instructions.md}
          - {type: file, value: code.txt}
    evaluators:
      - {name: payload, type: code_judge, script: [python, payload.py]}
"""


def test_guideline_files_reach_code_judges_apart_from_input_files(
    project: pytest.Pytester,
) -> None:
    write(project, ".agentv/config.yaml", CONFIG)
    write(project, "evals/style.instructions.md", "Always be polite.")
    write(project, "evals/code.txt", "print(1)")
    write(project, "evals/payload.py", PAYLOAD_JUDGE)
    write(project, "evals/g.eval.yaml", GUIDED_CASE)
    result = project.runpytest("--agentv-results", "out.jsonl")
    result.assert_outcomes(passed=1)
    payload = json.loads(rows(project.path / "out.jsonl")["guided"]["hits"][0])
    assert payload["guideline_files"] == [str(project.path / "evals/style.instructions.md")]
    assert payload["input_files"] == [str(project.path / "evals/code.txt")]
    assert payload["question"] == "Be brief.\n\nReview this."


def test_without_guideline_patterns_every_file_is_an_input_file(
    project: pytest.Pytester,
) -> None:
    write(project, "evals/style.instructions.md", "Always be polite.")
    write(project, "evals/code.txt", "print(1)")
    write(project, "evals/payload.py", PAYLOAD_JUDGE)
    write(project, "evals/g.eval.yaml", GUIDED_CASE)
    result = project.runpytest("--agentv-results", "out.jsonl")
    payload = json.loads(rows(project.path / "out.jsonl")["guided"]["hits"][0])
    assert payload["guideline_files"] == []
    assert len(payload["input_files"]) == 2
    result.assert_outcomes(passed=1)


def test_guidelines_go_to_model_targets_under_agentv_header(
    project: pytest.Pytester, fake_llm
) -> None:
    write(project, ".agentv/config.yaml", CONFIG)
    write(project, "evals/style.instructions.md", "  Always be polite.\n")
    write(project, "evals/code.txt", "print(1)")
    write(project, "evals/payload.py", PAYLOAD_JUDGE)
    write(project, "evals/g.eval.yaml", GUIDED_CASE)
    write(
        project,
        ".agentv/targets.yaml",
        f"targets:\n  - {{name: default, provider: litellm, model: openai/agent, "
        f"api_base: {fake_llm.api_base}}}\n",
    )
    fake_llm.responder = lambda request: "an answer"
    project.runpytest("-p", "no:cacheprovider", "--agentv-cache-mode", "off").assert_outcomes(
        passed=1
    )
    messages = fake_llm.requests[0].body["messages"]
    assert messages[0] == {
        "role": "system",
        "content": '[[ ## Guidelines ## ]]\n\n<file path="style.instructions.md">\n'
        "Always be polite.\n</file>\n\nBe brief.",
    }
    assert "Always be polite" not in messages[1]["content"]
    assert '<file path="code.txt">\nprint(1)\n</file>' in messages[1]["content"]


def test_invalid_config_file_is_a_clear_collection_error(project: pytest.Pytester) -> None:
    write(project, ".agentv/config.yaml", "guideline_patterns: '**/*.md'\n")
    write(project, "evals/g.eval.yaml", "evalcases: [{id: a, input: q}]\n")
    result = project.runpytest("--co", "-q")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([".agentv/config.yaml:1:21: guideline_patterns: must be a list*"])


def test_guideline_globs_follow_micromatch() -> None:
    from pytest_agentv.paths import glob_match

    assert glob_match("**/*.instructions.md", "a.instructions.md")
    assert glob_match("**/*.instructions.md", "x/y/a.instructions.md")
    assert not glob_match("*.md", "x/a.md")
    assert glob_match("docs/{a,b}/[!x]*.md", "docs/b/y.md")
    assert not glob_match("**/SKILL.md", "skills/skill.md")


# -- case ids -------------------------------------------------------------------------------


def test_ids_agentv_accepts_collect_with_safe_unique_names(project: pytest.Pytester) -> None:
    cases = "".join(
        f"""
  - id: {json.dumps(case_id)}
    input: Refund window?
    evaluators:
      - {{name: kw, type: code_judge, script: [python, keywords.py], keywords: [refund]}}
"""
        for case_id in ("a/b", "a_b", "x [1]", "with space", "one::two")
    )
    write(project, "ids.eval.yaml", "evalcases:" + cases)
    collected = project.runpytest("--co", "-q")
    collected.stdout.fnmatch_lines(
        [
            "ids.eval.yaml::a_b-2",
            "ids.eval.yaml::a_b",
            "ids.eval.yaml::x_1_",
            "ids.eval.yaml::with_space",
            "ids.eval.yaml::one_two",
        ]
    )
    result = project.runpytest("--agentv-results", "out.jsonl", "-k", "a_b or with_space")
    result.assert_outcomes(passed=3)
    assert set(rows(project.path / "out.jsonl")) == {"a/b", "a_b", "with space"}
