"""Eval files: schema, aliases, derived values, file references and collection errors."""

from __future__ import annotations

import os
import textwrap
from fnmatch import fnmatch
from pathlib import Path

import pytest

from pytest_agentv.casefiles import prepare_case
from pytest_agentv.cases import CaseSpec, effective_evaluators
from pytest_agentv.errors import ConfigError, EvalFileError
from pytest_agentv.evaluators import EvaluatorRegistry, build_evaluator_registry
from pytest_agentv.loader import LoadedFile, load_eval_file
from pytest_agentv.paths import resolve_reference
from tests.helpers import load_error, write

BUILTINS = EvaluatorRegistry(build_evaluator_registry())
KINDS = BUILTINS.scoped(BUILTINS.builtin)


def load(tmp_path: Path, text: str, name: str = "x.eval.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return load_eval_file(path, name, KINDS, tmp_path)


def spec(loaded, index: int = 0) -> CaseSpec:
    case = loaded.suite.evalcases[index]
    return CaseSpec(loaded, index, effective_evaluators(case, loaded.suite))


def collect_error(tmp_path: Path, content: str) -> str:
    """The collection error of one eval file that must fail (``load_error``: what collection
    shows, without a session; test_invalid_yaml_names_file_line_and_column runs one)."""
    return load_error(tmp_path, "bad.eval.yaml", content)


def warned(loaded: LoadedFile) -> list[str]:
    """The warnings a loaded file gives, as collection shows them: ``CATEGORY: MESSAGE``
    (test_unknown_keys_warn_with_a_suggestion runs a session)."""
    return [f"{warning.category.__name__}: {warning.message}" for warning in loaded.warnings]


# -- aliases and derived values -------------------------------------------------------------


def test_legacy_aliases_and_string_shorthands(tmp_path: Path) -> None:
    loaded = load(
        tmp_path,
        """
        evalcases:
          - id: a
            outcome: Says hi
            input: Hello?
            expected_output: Hi there
          - id: b
            expected_outcome: Returns JSON
            input_messages:
              - role: system
                content: Be terse.
              - role: user
                content: [{type: text, value: Give me data}]
            expected_messages: {answer: 42}
        """,
    )
    first = loaded.suite.evalcases[0]
    assert first.expected_outcome == "Says hi"
    assert [m.role for m in first.input_messages] == ["user"]
    assert first.expected_messages[0].role == "assistant"
    prepared = prepare_case(spec(loaded, 1), tmp_path)
    assert prepared.question == "Be terse.\n\nGive me data"
    assert prepared.reference_answer == '{\n  "answer": 42\n}'
    assert prepared.expected_messages[0]["content"] == {"answer": 42}
    assert prepare_case(spec(loaded, 0), tmp_path).reference_answer == "Hi there"


def test_reference_answer_is_the_last_expected_message(tmp_path: Path) -> None:
    loaded = load(
        tmp_path,
        """
        evalcases:
          - id: a
            input: q
            expected_messages:
              - {role: assistant, content: first}
              - {role: assistant, content: final}
        """,
    )
    assert prepare_case(spec(loaded), tmp_path).reference_answer == "final"


def test_evaluator_precedence_and_inline_rubrics_first(tmp_path: Path) -> None:
    loaded = load(
        tmp_path,
        """
        evaluator: code_judge
        execution:
          evaluators: [{name: suite, type: llm_judge}]
        evalcases:
          - id: exec-wins
            input: q
            evaluators: [{name: case, type: llm_judge}]
            execution:
              evaluators: [{name: exec, type: llm_judge}]
          - id: case-wins
            input: q
            evaluators: [{name: case, type: llm_judge}]
            rubrics: [Is polite]
          - id: suite-wins
            input: q
          - id: kind-default
            input: q
            evaluator: llm_judge
        """,
    )
    names = [
        [e.name for e in effective_evaluators(c, loaded.suite)] for c in loaded.suite.evalcases
    ]
    assert names[:3] == [["exec"], ["rubric", "case"], ["suite"]]
    bare = load(
        tmp_path,
        """
        evaluator: llm_judge
        grader: code_judge
        evalcases: [{id: a, input: q}, {id: b, input: q, evaluator: rubric}]
        """,
        "bare.eval.yaml",
    )
    entries = [effective_evaluators(c, bare.suite) for c in bare.suite.evalcases]
    assert [(e[0].name, e[0].kind) for e in entries] == [
        ("llm_judge", "llm_judge"),
        ("rubric", "llm_judge"),
    ]


def test_rubric_items_defaults(tmp_path: Path) -> None:
    loaded = load(
        tmp_path,
        """
        evalcases:
          - id: a
            input: q
            rubrics:
              - Mentions refunds
              - {id: tone, description: Is polite, weight: 2, required: false}
              - id: brevity
                required_min_score: 7
                score_ranges: {0: rambling, 5: okay, 8: tight}
        """,
    )
    first, tone, brevity = loaded.suite.evalcases[0].rubrics or []
    assert (first.id, first.is_required, first.weight) == ("rubric-1", True, 1.0)
    assert (tone.expected_outcome, tone.is_required, tone.weight) == ("Is polite", False, 2.0)
    ranges = [(r.score_range, r.expected_outcome) for r in brevity.score_ranges or []]
    assert ranges == [((0, 4), "rambling"), ((5, 7), "okay"), ((8, 10), "tight")]
    assert brevity.min_score == 7


def test_unknown_evaluator_keys_become_config(tmp_path: Path) -> None:
    loaded = load(
        tmp_path,
        """
        evalcases:
          - id: a
            input: q
            evaluators:
              - name: kw
                type: code
                script: [python, judge.py]
                keywords: [refund]
                config: {threshold: 0.5}
        """,
    )
    entry = (loaded.suite.evalcases[0].evaluators or [])[0]
    assert entry.kind == "code_judge"
    assert entry.options == {"threshold": 0.5, "keywords": ["refund"]}
    assert entry.weight == 1.0


def test_yaml_timestamps_stay_strings(tmp_path: Path) -> None:
    loaded = load(
        tmp_path,
        "dataset: 2025-01-01\nevalcases: [{id: a, input: q, "
        "expected_output: {issued: 2025-03-02, at: 2025-03-02T10:00:00Z}}]\n",
    )
    assert loaded.suite.dataset == "2025-01-01"
    expected = loaded.suite.evalcases[0].expected_messages[0].content[0].value
    assert expected == {"issued": "2025-03-02", "at": "2025-03-02T10:00:00Z"}


def test_file_segments_resolve_from_folder_then_ancestors(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "policy.md").write_text("30 days")
    (tmp_path / "evals" / "deep").mkdir(parents=True)
    (tmp_path / "evals" / "deep" / "local.txt").write_text("local")
    path = tmp_path / "evals" / "deep" / "f.eval.yaml"
    path.write_text(
        textwrap.dedent(
            """
            evalcases:
              - id: a
                input:
                  - role: user
                    content:
                      - {type: text, value: Read these}
                      - {type: file, value: docs/policy.md}
                      - {type: file, value: local.txt}
            """
        )
    )
    loaded = load_eval_file(path, "f.eval.yaml", KINDS, tmp_path)
    prepared = prepare_case(spec(loaded), tmp_path)
    content = prepared.input_messages[0]["content"]
    assert '<file path="docs/policy.md">\n30 days\n</file>' in content
    assert "local" in content
    assert prepared.question == "Read these"
    assert prepared.input_files == (
        str(tmp_path / "docs" / "policy.md"),
        str(tmp_path / "evals" / "deep" / "local.txt"),
    )


@pytest.mark.parametrize(
    "reference",
    ["../outside.txt", "sub/../../outside.txt", "{outside}", "link.txt"],
    ids=["dotdot", "nested-dotdot", "absolute", "symlink"],
)
def test_file_references_may_not_escape_the_rootdir(tmp_path: Path, reference: str) -> None:
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    outside = tmp_path / "outside.txt"
    outside.write_text("secret")
    os.symlink(outside, root / "link.txt")
    reference = reference.format(outside=outside)
    with pytest.raises(ConfigError, match="outside the rootdir") as info:
        resolve_reference(reference, start=root, rootdir=root)
    assert str(tmp_path) not in str(info.value).replace(reference, "")


def test_file_references_inside_the_rootdir_are_accepted(tmp_path: Path) -> None:
    (tmp_path / "..foo").mkdir()
    (tmp_path / "..foo" / "a.txt").write_text("x")
    found = resolve_reference("..foo/a.txt", start=tmp_path, rootdir=tmp_path)
    assert found == (tmp_path / "..foo" / "a.txt").resolve()
    with pytest.raises(ConfigError, match="not found"):
        resolve_reference("missing.txt", start=tmp_path, rootdir=tmp_path)


def test_missing_file_is_an_error_on_its_case_only(project: pytest.Pytester) -> None:
    write(
        project,
        "f.eval.yaml",
        """
        evalcases:
          - id: fine
            input: q
            evaluators: [{name: kw, type: code_judge, script: [python, keywords.py]}]
          - id: broken
            input:
              - role: user
                content: [{type: file, value: nope.md}]
            evaluators: [{name: kw, type: code_judge, script: [python, keywords.py]}]
        """,
    )
    result = project.runpytest()
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*f.eval.yaml:9:39: evalcases.1.input_messages.0.content.0.value: "
            "file 'nope.md' not found*"
        ]
    )


# -- collection errors ----------------------------------------------------------------------


def test_invalid_yaml_names_file_line_and_column(pytester: pytest.Pytester) -> None:
    """The one session of these errors: how a load error reaches the terminal."""
    write(pytester, "bad.eval.yaml", "evalcases:\n  - id: a\n    input: [1, 2\n")
    result = pytester.runpytest("--co", "-q")
    result.assert_outcomes(errors=1)
    text = result.stdout.str()
    assert "Traceback" not in text and "INTERNALERROR" not in text
    assert "bad.eval.yaml:4:1: invalid YAML" in text


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("", "bad.eval.yaml:1:1: file is empty*"),
        ("- a\n- b\n", "bad.eval.yaml:1:1: expected a mapping at the top level, got a list"),
        ("description: x\n", "bad.eval.yaml:1:1: evalcases: required field is missing"),
        ("evalcases: []\n", "bad.eval.yaml:1:12: evalcases: must not be empty*"),
        (
            "evalcases:\n  - input: q\n",
            "bad.eval.yaml:2:5: evalcases.0.id: required field is missing",
        ),
        (
            "evalcases:\n  - id: a\n",
            "bad.eval.yaml:2:5: evalcases.0.input_messages: required field is missing",
        ),
        (
            "evalcases:\n  - {id: a, input: q}\n  - {id: a, input: q}\n",
            "bad.eval.yaml:3:10: evalcases.1.id: duplicate case id 'a' (first defined at line 2)",
        ),
        (
            'evalcases:\n  - id: "a\\nb"\n    input: q\n',
            "bad.eval.yaml:2:9: evalcases.0.id: case id 'a\\nb' contains a control character*",
        ),
        (
            "evalcases:\n  - id: a\n    input: [{role: robot, content: hi}]\n",
            "bad.eval.yaml:3:20: evalcases.0.input.0.role: must be 'system', 'user',*",
        ),
        (
            "evalcases:\n  - id: a\n    input: q\n    evaluators: [{weight: 1}]\n",
            "bad.eval.yaml:4:18: evalcases.0.evaluators.0.name: required field is missing (+1*",
        ),
        (
            "evalcases:\n  - id: a\n    input: q\n    evaluators: [{name: x, type: code_judge}]\n",
            "*evalcases.0.evaluators.0: code_judge evaluator 'x' needs a 'script'*",
        ),
        (
            "evalcases:\n  - id: a\n    input: q\n"
            "    evaluators: [{name: x, type: llm_judge, weight: -1}]\n",
            "*evalcases.0.evaluators.0.weight: must be at least 0",
        ),
        (
            "evalcases:\n  - id: a\n    input: q\n"
            "    evaluators: [{name: x, type: llm_judge}, {name: x, type: llm_judge}]\n",
            "*evalcases.0.evaluators: evaluator name 'x' is used twice*",
        ),
        (
            "evalcases:\n  - id: a\n    input: q\n    rubrics:\n"
            "      - {id: r1, expected_outcome: Mentions apples}\n"
            "      - {id: r1, expected_outcome: Mentions bananas, weight: 5}\n",
            "bad.eval.yaml:6:14: evalcases.0.rubrics.1.id: rubric id 'r1' is used twice; "
            "ids must be unique",
        ),
        (
            "evalcases:\n  - id: a\n    input: q\n    evaluators:\n"
            "      - {name: j, type: llm_judge, rubrics: [{id: rubric-2, outcome: a}, b]}\n",
            "bad.eval.yaml:5:*: evalcases.0.evaluators.0.rubrics.1: rubric id 'rubric-2' is used "
            "twice (an item without an id is named rubric-<its position>); ids must be unique",
        ),
        (
            "evalcases:\n  - id: a\n    input: q\n    evaluators: [{name: x, type: llm_jugde}]\n",
            "bad.eval.yaml:4:34: evalcases.0.evaluators.0.type: unknown evaluator type "
            "'llm_jugde' (did you mean 'llm_judge'?); known: *",
        ),
        (
            "evalcases:\n  - {id: a, input: q}\n  - {id: b, input: q, outcome: 1.5, x: [}\n",
            "bad.eval.yaml:3:*: invalid YAML*",
        ),
        (
            "a: 1\na: 2\nevalcases: [{id: x, input: q}]\n",
            "bad.eval.yaml:2:1: duplicate key 'a' (first defined at line 1)*",
        ),
        (
            "evalcases:\n  - id: a\n    input: q\n    evaluators:\n      - {name: ok, "
            "type: code_judge, script: [python, judges/ok.py], blob: !!binary aGVsbG8=}\n",
            "bad.eval.yaml:5:*: evalcases.0.evaluators.0.blob: !!binary is not supported: values "
            "must be JSON data (*); write this one as a string",
        ),
        (
            "evalcases:\n  - id: a\n    input: {blob: !!binary aGVsbG8=}\n",
            "bad.eval.yaml:3:19: evalcases.0.input.blob: !!binary is not supported*",
        ),
        (
            "evalcases:\n  - id: a\n    input: q\n    expected_output: {tags: !!set {a, b}}\n",
            "bad.eval.yaml:4:29: evalcases.0.expected_output.tags: !!set is not supported*"
            "write this one as a list",
        ),
        (
            "evalcases:\n  - id: a\n    input: [!!omap [role: user, content: hi]]\n",
            "bad.eval.yaml:3:13: evalcases.0.input.0: !!omap is not supported*as a mapping",
        ),
        (
            "evalcases:\n  - id: a\n    input: q\n    description: !!pairs [a: 1]\n",
            "bad.eval.yaml:4:18: evalcases.0.description: !!pairs is not supported*",
        ),
        (
            "evaluator: code_judge\nevalcases: [{id: a, input: q}]\n",
            "bad.eval.yaml:1:12: evaluator: 'code_judge' as the default kind needs a script*",
        ),
    ],
    ids=[
        "empty",
        "list-root",
        "no-evalcases",
        "empty-evalcases",
        "no-id",
        "no-input",
        "duplicate-id",
        "control-char-id",
        "bad-role",
        "evaluator-no-type",
        "code-judge-no-script",
        "negative-weight",
        "duplicate-evaluator-name",
        "duplicate-rubric-id",
        "rubric-id-like-a-generated-one",
        "unknown-type",
        "yaml-in-flow",
        "duplicate-key",
        "binary-in-evaluator",
        "binary-in-content",
        "set",
        "omap",
        "pairs",
        "code-judge-default-kind",
    ],
)
def test_invalid_files_are_one_clear_collection_error(
    tmp_path: Path, content: str, expected: str
) -> None:
    text = collect_error(tmp_path, content)
    assert any(fnmatch(line, expected) for line in text.splitlines()), text


def _rubric_file(rubric: str) -> str:
    return (
        "evalcases:\n  - id: a\n    input: q\n    rubrics:\n"
        + textwrap.indent(textwrap.dedent(rubric).strip(), "      ")
        + "\n"
    )


@pytest.mark.parametrize(
    ("rubric", "expected"),
    [
        (
            """
            - id: r
              score_ranges:
                - {score_range: [0, 5], expected_outcome: a}
                - {score_range: [5, 10], expected_outcome: b}
            """,
            "Overlapping score_ranges in rubric 'r': [0, 5] overlaps with [5, 10]",
        ),
        (
            """
            - id: r
              score_ranges:
                - {score_range: [0, 5], expected_outcome: a}
                - {score_range: [6, 11], expected_outcome: b}
            """,
            "Invalid score_range entry at index 1 for rubric 'r': "
            "values must be 0-10 (got [6, 11])",
        ),
        (
            """
            - id: r
              score_ranges:
                - {score_range: [5, 0], expected_outcome: a}
            """,
            "Invalid score_range entry at index 0 for rubric 'r': min must be <= max (got [5, 0])",
        ),
        (
            """
            - id: r
              score_ranges:
                - {score_range: [0, 4.5], expected_outcome: a}
            """,
            "Invalid score_range entry at index 0 for rubric 'r': "
            "values must be integers (got [0, 4.5])",
        ),
        (
            """
            - id: r
              score_ranges:
                - {score_range: [0, 3], expected_outcome: a}
                - {score_range: [6, 10], expected_outcome: b}
            """,
            "Incomplete score_ranges coverage in rubric 'r': missing coverage for scores: 4, 5. "
            "Ranges must cover all integers 0-10.",
        ),
        (
            """
            - id: r
              score_ranges: {2: low, 7: high}
            """,
            "score_ranges shorthand map must start at 0 (got 2)",
        ),
        (
            """
            - id: r
              score_ranges: {0: low, 12: high}
            """,
            "score_ranges values must be 0-10 in rubric 'r' (got 12)",
        ),
        (
            """
            - id: r
              required_min_score: 7.5
              score_ranges: {0: low, 5: high}
            """,
            "Invalid required_min_score for rubric 'r': must be an integer 0-10 (got 7.5)",
        ),
        (
            """
            - id: r
              required_min_score: 11
              score_ranges: {0: low, 5: high}
            """,
            "Invalid required_min_score for rubric 'r': must be an integer 0-10 (got 11)",
        ),
        (
            """
            - id: r
              score_ranges: [just text]
            """,
            "Invalid score_range entry at index 0 for rubric 'r': expected object",
        ),
        (
            """
            - id: r
              score_ranges:
                - {score_range: [0, 10]}
            """,
            "Missing expected_outcome for score_range [0, 10] in rubric 'r'",
        ),
        (
            """
            - id: r
              score_ranges:
                - {score_range: [0], expected_outcome: a}
            """,
            "Invalid score_range entry at index 0 for rubric 'r': "
            "must be [min, max] array of two numbers",
        ),
    ],
    ids=[
        "overlap",
        "bounds",
        "min-gt-max",
        "non-integer",
        "coverage",
        "shorthand-start",
        "shorthand-bounds",
        "min-score-float",
        "min-score-range",
        "entry-not-object",
        "missing-outcome",
        "not-a-pair",
    ],
)
def test_score_range_rules(tmp_path: Path, rubric: str, expected: str) -> None:
    text = collect_error(tmp_path, _rubric_file(rubric))
    assert f"evalcases.0.rubrics.0.score_ranges: {expected}" in text or (
        f"evalcases.0.rubrics.0.required_min_score: {expected}" in text
    ), text


def test_score_range_rules_apply_to_evaluator_rubrics(tmp_path: Path) -> None:
    text = collect_error(
        tmp_path,
        """
        evalcases:
          - id: a
            input: q
            evaluators:
              - name: judge
                type: llm_judge
                rubrics:
                  - id: r
                    score_ranges: {0: low, 3: mid}
                    required_min_score: 12
        """,
    )
    assert "bad.eval.yaml:11:" in text
    assert (
        "evalcases.0.evaluators.0.rubrics.0.required_min_score: Invalid required_min_score" in text
    )


def test_unknown_keys_warn_with_a_suggestion(pytester: pytest.Pytester) -> None:
    write(
        pytester,
        "w.eval.yaml",
        """
        evalcases:
          - id: a
            input: q
            expected_outcom: typo
            reference_answer: kept anyway
        """,
    )
    result = pytester.runpytest("--co", "-q", "-W", "always")
    result.stdout.fnmatch_lines(
        [
            "*w.eval.yaml:5: AgentvWarning: w.eval.yaml:5: evalcases.0.expected_outcom: unknown "
            "key 'expected_outcom' is ignored (did you mean 'expected_outcome'?)",
            "*w.eval.yaml:6: AgentvWarning: *unknown key 'reference_answer'*",
        ]
    )
    result.assert_outcomes()


def test_lists_whose_weights_are_all_zero_warn(tmp_path: Path) -> None:
    """A total weight of 0 scores 0 (as in AgentV, whose scores we keep): such a list fails
    whatever its items earn, so the file says so when it loads."""
    loaded = load(
        tmp_path,
        """
        execution:
          evaluators:
            - {type: latency, threshold: 1000, weight: 0}
        evalcases:
          - id: rubrics
            input: q
            rubrics:
              - {id: a, expected_outcome: x, weight: 0}
              - {id: b, expected_outcome: y, weight: 0, required: false}
          - id: suite-evaluators
            input: q
          - id: members
            input: q
            evaluators:
              - name: fields
                type: field_accuracy
                fields: [{path: a, match: exact, weight: 0}]
              - name: both
                type: composite
                evaluators: [{type: latency, threshold: 1}, {type: cost, budget: 1}]
                aggregator: {type: weighted_average, weights: {latency: 0, cost: 0}}
          - id: weighed
            input: q
            evaluators:
              - {type: latency, threshold: 1000, weight: 0}
              - {type: cost, budget: 1}
        """,
        "z.eval.yaml",
    )
    tail = "has weight 0, so the score is always 0 (as in AgentV); give at least one"
    said = warned(loaded)
    assert len(said) == 4, said
    for pattern in [
        f"*z.eval.yaml:3: execution.evaluators: every evaluator {tail} evaluator a weight > 0",
        f"*z.eval.yaml:8: evalcases.0.rubrics: every item {tail} item a weight > 0",
        f"*z.eval.yaml:18: evalcases.2.evaluators.0.fields: every field {tail} field a*",
        f"*z.eval.yaml:22: evalcases.2.evaluators.1.aggregator.weights: every member {tail}*",
    ]:
        assert [line for line in said if fnmatch(line, pattern)], (pattern, said)


def test_grader_is_deprecated_and_evaluator_wins(tmp_path: Path) -> None:
    loaded = load(
        tmp_path,
        """
        grader: code_judge
        evaluator: llm_judge
        evalcases: [{id: a, input: q}]
        """,
    )
    [said] = warned(loaded)
    assert fnmatch(said, "AgentvDeprecationWarning: *'grader' is deprecated; use 'evaluator'*"), (
        said
    )
    assert "use 'evaluator' ('evaluator' wins" in said
    assert effective_evaluators(loaded.suite.evalcases[0], loaded.suite)[0].kind == "llm_judge"


def test_rubric_type_is_deprecated(tmp_path: Path) -> None:
    loaded = load(
        tmp_path,
        """
        evalcases:
          - id: a
            input: q
            evaluators: [{name: r, type: rubric, rubrics: [Polite]}]
        """,
    )
    said = warned(loaded)
    assert [
        line
        for line in said
        if fnmatch(line, "*evaluator type 'rubric' is deprecated; use 'llm_judge'*")
    ], said


def test_eval_file_error_carries_position() -> None:
    error = EvalFileError("a.eval.yaml", 3, 5, "evalcases.0.id: bad")
    assert str(error) == "a.eval.yaml:3:5: evalcases.0.id: bad"
    assert (error.line, error.col) == (3, 5)


@pytest.mark.parametrize(
    ("version", "defers"),
    [("2.7.0", False), ("2.13.5", False), ("2.14.0", True), ("2.14.0b1", True), ("3.1", True)],
)
def test_models_defer_their_build_only_where_pydantic_locks_it(version: str, defers: bool) -> None:
    """Before pydantic 2.14 a model built at first use could be used half-built by another
    thread (pytest's and the plugin's event loop both validate): those build at import."""
    from pytest_agentv.schema import base

    assert base._rebuilds_under_a_lock(version) is defers
