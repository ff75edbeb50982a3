"""AgentV v4's external datasets: ``tests:`` as a path or ``file://`` entries (YAML, JSON Lines,
CSV, globs, case folders), the suite's ``input`` / ``input_files`` before every case's, and
``{{ vars }}`` templating."""

from __future__ import annotations

import json
from fnmatch import fnmatch
from pathlib import Path

import pytest

from tests.helpers import load_error, write


def collection_error(folder: Path, files: dict[str, str], problem: str) -> None:
    """Loading ``suite.eval.yaml`` among ``files`` (name: text) is ``problem`` (an fnmatch
    pattern); test_an_error_in_a_dataset_names_its_file_line_and_column shows it in a session."""
    datasets = dict(files)
    suite = datasets.pop("suite.eval.yaml")
    for name, text in datasets.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    error = load_error(folder, "suite.eval.yaml", suite)
    assert fnmatch(error, problem), error


def rows(pytester: pytest.Pytester, name: str = "out.jsonl") -> dict[str, dict[str, object]]:
    lines = (pytester.path / name).read_text().splitlines()
    return {row["eval_id"]: row for row in map(json.loads, lines)}


def test_file_entries_read_yaml_jsonl_csv_and_globs(project: pytest.Pytester) -> None:
    write(
        project,
        "cases/more/a.yaml",
        """
        - id: a1
          input: q
          assertions: [{type: contains, value: "30 days"}]
        """,
    )
    datasets = {
        "cases/more/b.yaml": "- {id: b1, input: q, criteria: c}\n",
        "cases/j.jsonl": '{"id": "j1", "input": "q", "criteria": "c"}\n',
        "cases/c.csv": 'id,input,__expected\nc1,"hi, there",contains:30 days\n',
    }
    for name, text in datasets.items():
        write(project, name, text)
    write(
        project,
        "suite.eval.yaml",
        """
        tests:
          - {id: inline, input: q, criteria: c}
          - file://cases/**/*.yaml
          - file://cases/j.jsonl
          - file://cases/c.csv
        """,
    )
    result = project.runpytest("--co", "-q")
    result.stdout.fnmatch_lines(
        [
            "suite.eval.yaml::inline",
            "suite.eval.yaml::a1",
            "suite.eval.yaml::b1",
            "suite.eval.yaml::j1",
            "suite.eval.yaml::c1",
            "5 tests collected*",
        ]
    )
    result = project.runpytest("-k", "a1 or c1", "--agentv-results", "out.jsonl")
    result.assert_outcomes(passed=2, deselected=3)
    assert rows(project)["c1"]["question"] == "hi, there"


def test_tests_as_a_path_and_case_folders(project: pytest.Pytester) -> None:
    write(project, "cases.yaml", "- {id: listed, input: q, criteria: c}\n")
    write(project, "list.eval.yaml", "tests: ./cases.yaml\n")
    write(project, "folders/first/case.yaml", "input: q\ncriteria: c\n")
    write(project, "folders/second/case.yaml", "id: named\ninput: q\ncriteria: c\n")
    (project.path / "folders" / "empty").mkdir()
    write(project, "folders.eval.yaml", "tests: ./folders\n")
    result = project.runpytest("--co", "-q", "-W", "always")
    result.stdout.fnmatch_lines(
        [
            "folders.eval.yaml::first",
            "folders.eval.yaml::named",
            "list.eval.yaml::listed",
            "*folders.eval.yaml:1: tests: folder 'empty' has no case.yaml; it is skipped*",
        ]
    )


def test_an_error_in_a_dataset_names_its_file_line_and_column(project: pytest.Pytester) -> None:
    write(project, "cases/a.yaml", "- id: a\n  input: q\n  criteria: c\n- id: b\n  input: 3\n")
    write(project, "suite.eval.yaml", "tests:\n  - file://cases/a.yaml\n")
    result = project.runpytest("--co", "-q")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["cases/a.yaml:5:10: tests.1.input: must be a list"])


def test_a_failing_case_from_a_dataset_is_reported_where_it_is_written(
    project: pytest.Pytester,
) -> None:
    write(project, "cases.jsonl", '{"id": "a", "input": "q"}\n{"id": "b", "input": "q"}\n')
    write(
        project,
        "suite.eval.yaml",
        """
        assertions: [{type: contains, value: never}]
        tests: ./cases.jsonl
        """,
    )
    result = project.runpytest("-k", "b")
    result.assert_outcomes(failed=1, deselected=1)
    result.stdout.fnmatch_lines(["*cases.jsonl:2: eval 'b' failed: score 0.00 (fail)*"])


CSV_SUITE = "tests: ./cases.csv\n"


def test_csv_missing_column_names_line_and_column(tmp_path: Path) -> None:
    files = {"cases.csv": "id,input,topic\nok,q,x\nshort,q\n", "suite.eval.yaml": CSV_SUITE}
    collection_error(tmp_path, files, "cases.csv:3:9: column 'topic' is missing from this row")


def test_csv_without_an_input_column_is_refused(tmp_path: Path) -> None:
    files = {"cases.csv": "id,question\na,q\n", "suite.eval.yaml": CSV_SUITE}
    collection_error(tmp_path, files, "cases.csv:1:1: input: the CSV has no 'input' column")


@pytest.mark.parametrize("reference", ["../outside.yaml", "file://../*.yaml"])
def test_a_dataset_outside_the_rootdir_is_refused(tmp_path: Path, reference: str) -> None:
    (tmp_path / "outside.yaml").write_text("- {id: x, input: q, criteria: c}\n")
    (tmp_path / "root").mkdir()
    entry = f"[{reference}]" if reference.startswith("file://") else reference
    collection_error(
        tmp_path / "root",
        {"suite.eval.yaml": f"tests: {entry}\n"},
        "suite.eval.yaml:1:*outside the rootdir*",
    )


FILES_JUDGE = """\
import json, os, sys
payload = json.load(sys.stdin)
names = [os.path.basename(path) for path in payload["input_files"]]
print(json.dumps({"score": float(names == payload["config"]["files"]), "hits": names}))
"""


def test_suite_input_and_input_files_come_before_each_case(project: pytest.Pytester) -> None:
    write(project, "context.md", "shared context\n")
    write(project, "files.py", FILES_JUDGE)
    write(
        project,
        "suite.eval.yaml",
        """
        input: "Use the context."
        input_files: [./context.md]
        assertions:
          - {type: code-grader, command: [python, files.py], files: [context.md]}
        tests:
          - {id: both, input: "Question?"}
          - id: opted-out
            input: "Plain?"
            execution: {skip_defaults: true}
            assertions:
              - {type: code-grader, command: [python, files.py], files: []}
        """,
    )
    project.runpytest("--agentv-results", "out.jsonl").assert_outcomes(passed=2)
    found = rows(project)
    assert found["both"]["question"] == "Use the context.\n\nQuestion?"
    assert found["opted-out"]["question"] == "Plain?"


def test_vars_fill_placeholders_in_the_case_and_the_suite_input(project: pytest.Pytester) -> None:
    write(
        project,
        "suite.eval.yaml",
        """
        input:
          - {role: system, content: "Answer {{ category }} questions."}
        tests:
          - id: templated
            vars: {category: billing, q: Refunds?, expected: {answer: "30 days"}, n: 2}
            input: "Question: {{q}} {{ unknown }}"
            expected_output: "{{ expected.answer }}"
            assertions: [{type: contains, value: "30 days"}]
        """,
    )
    project.runpytest("--agentv-results", "out.jsonl").assert_outcomes(passed=1)
    row = rows(project)["templated"]
    assert row["question"] == "Answer billing questions.\n\nQuestion: Refunds? {{ unknown }}"
