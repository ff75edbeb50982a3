"""The loader and the JSON Schema (``python -m pytest_agentv schema eval|sidecar``) give eval files
the same answer: every example is accepted by both, and every eval file the test-suite refuses
is refused by both, except where the refusal is one no JSON Schema can make (each such file says
why).

The schema judges the data a file holds, read as the plugin reads it: a file whose syntax holds
no data (invalid YAML or JSON, duplicate keys, YAML tags, bad encoding, nesting or alias bombs)
is refused by both. The data is seen as JSON, as an editor sees it (a YAML map's number keys are
strings). A key nobody reads is a warning of the loader's and an error of the schema's, so that
an editor flags a typo: neither table holds one.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from pytest_agentv.collect import load_specs
from pytest_agentv.errors import AgentvError
from pytest_agentv.evaluators import EvaluatorRegistry, build_evaluator_registry
from pytest_agentv.jsonlines import json_lines
from pytest_agentv.paths import sidecar_of
from pytest_agentv.yamlfile import parse_yaml
from tests.test_agentv_names import validator

ROOT = Path(__file__).resolve().parent.parent
REGISTRY = EvaluatorRegistry(build_evaluator_registry())

#: Why only the loader refuses a file: what a JSON Schema cannot say.
UNIQUE = "an id or a name used twice: a JSON Schema cannot compare the items of a list"
KINDS = "evaluator kinds: plugins add kinds, and each kind says what it needs"
FILES = "the files an entry names: a JSON Schema sees no files"
ARITHMETIC = "arithmetic between values: ranges that overlap or leave a gap, names of members"


def refused(
    test: str,
    text: str | bytes,
    *,
    sidecar: str | None = None,
    jsonl: bool = False,
    loader_only: str | None = None,
) -> Any:
    """A file the loader refuses, as its test wrote it (blocks are dedented); ``loader_only``:
    why the schema cannot refuse it too."""
    return pytest.param(
        "d.eval.jsonl" if jsonl else "bad.eval.yaml",
        textwrap.dedent(text).lstrip("\n") if isinstance(text, str) else text,
        textwrap.dedent(sidecar).lstrip("\n") if sidecar is not None else None,
        loader_only,
        id=test,
    )


#: The case most refused files hold, before the key whose value is wrong.
CASE = "evalcases:\n  - id: a\n    input: q\n"


def case_with(key: str, block: str) -> str:
    """``CASE`` with ``key:`` and the (dedented) block under it."""
    return CASE + f"    {key}:\n" + textwrap.indent(textwrap.dedent(block).lstrip("\n"), "      ")


#: An eval file with one evaluator entry, whose last key is given.
EVALUATOR = "evalcases: [{{id: a, input: q, evaluators: [{{name: j, type: llm_judge, {}}}]}}]\n"
RUBRIC = "evalcases: [{{id: a, input: q, rubrics: [{{id: r, {}}}]}}]\n"

#: Every eval file the test-suite refuses, by the test that refuses it (``#n``: its n-th file),
#: then the disagreements of issue 25 that no test refused before.
REFUSED = [
    refused(
        "test_names_we_cannot_map_are_errors_naming_the_version[v5-kind]",
        """
            evalcases:
              - {id: a, input: q, assertions: [{name: c, type: llm-rubric, value: [Polite]}]}
        """,
    ),
    refused(
        "test_names_we_cannot_map_are_errors_naming_the_version[trajectory]",
        """
            evalcases:
              - {id: a, input: q, assertions: [{name: c, type: 'trajectory:tool-used'}]}
        """,
    ),
    refused(
        "test_bad_prompt_files_are_load_errors[auto-no-variables]",
        """
            evalcases:
              - id: a
                input: q
                evaluators: [{name: j, type: llm_judge, prompt: prompts/plain.md}]
        """,
        loader_only=FILES,
    ),
    refused(
        "test_bad_prompt_files_are_load_errors[auto-missing]",
        """
            evalcases:
              - id: a
                input: q
                evaluators: [{name: j, type: llm_judge, prompt: prompts/missing.md}]
        """,
        loader_only=FILES,
    ),
    refused(
        "test_bad_prompt_files_are_load_errors[auto-outside]",
        """
            evalcases:
              - id: a
                input: q
                evaluators: [{name: j, type: llm_judge, prompt: ../outside.md}]
        """,
        loader_only=FILES,
    ),
    refused(
        "test_a_field_written_under_two_names_is_an_error",
        """
            execution:
              trials: {count: 2, costLimitUsd: 1, cost_limit_usd: 2}
            tests: [{id: a, input: hi}]
        """,
    ),
    refused(
        "test_a_field_written_under_two_names_is_an_error#2",
        """
            tests:
              - id: a
                input: hi
                input_messages: hello
        """,
    ),
    refused(
        "test_a_field_written_under_two_names_is_an_error#3",
        """
            tests:
              - id: a
                input: hi
                evaluators:
                  - name: c
                    type: composite
                    evaluators: [{type: latency, threshold: 1}]
                    assertions: [{type: cost, budget: 1}]
                    aggregator: {type: weighted_average}
        """,
    ),
    refused(
        "test_a_field_written_under_two_names_is_an_error#4",
        """
            tests:
              - id: a
                input: hi
                assertions: [{type: latency, threshold: 1}]
                evaluators: [{type: cost, budget: 1}]
        """,
    ),
    refused(
        "test_a_field_written_under_two_names_is_an_error#5",
        """
            execution:
              evaluators: [{type: latency, threshold: 1}]
              assertions: [{type: cost, budget: 1}]
            tests: [{id: a, input: hi}]
        """,
    ),
    refused(
        "test_a_field_written_under_two_names_is_an_error#6",
        """
            tests:
              - id: a
                input: hi
                expected_outcome: x
                criteria: y
        """,
    ),
    refused(
        "test_a_field_written_under_two_names_is_an_error#7",
        """
            tests:
              - id: a
                input: hi
                evaluators:
                  - {name: j, type: llm_judge, rubrics: [a], criteria: [b]}
        """,
    ),
    refused(
        "test_a_field_written_under_two_names_is_an_error#8",
        """
            tests:
              - id: a
                input: hi
                rubrics:
                  - id: r
                    score_ranges:
                      - {score_range: [0, 10], outcome: good, description: fine}
        """,
    ),
    refused(
        "test_a_field_written_under_two_names_is_an_error#9",
        """
            tests:
              - id: a
                input: hi
                evaluators:
                  - name: j
                    type: code_judge
                    script: [python, a.py]
                    command: [python, b.py]
        """,
    ),
    refused(
        "test_a_field_written_under_two_names_is_an_error#10",
        """
            evalcases:
              - {id: c1, input: hi}
            tests:
              - {id: t1, input: hi}
        """,
    ),
    refused(
        "test_jsonl_errors_point_at_the_file_and_line[bad-json]",
        """
            {"id": "a", "input": "q"}
            {"id": "b", "input": "q",}
        """,
        jsonl=True,
    ),
    refused(
        "test_jsonl_errors_point_at_the_file_and_line[missing-id]",
        """
            {"id": "a", "input": "q"}

            {"input": "q"}
        """,
        jsonl=True,
    ),
    refused(
        "test_jsonl_errors_point_at_the_file_and_line[duplicate-key]",
        """
            {"id": "a", "input": "q", "id": "b"}
        """,
        jsonl=True,
    ),
    refused(
        "test_jsonl_errors_point_at_the_file_and_line[too-deep]",
        (
            '{"id": "a", "input": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[['
            "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
            "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]"
            "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]"
            "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]"
            "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}\n"
        ),
        jsonl=True,
    ),
    refused(
        "test_jsonl_errors_point_at_the_file_and_line[not-an-object]",
        """
            [1, 2]
        """,
        jsonl=True,
    ),
    refused(
        "test_jsonl_errors_point_at_the_file_and_line[blank]",
        "",
        jsonl=True,
    ),
    refused(
        "test_jsonl_errors_point_at_the_file_and_line[duplicate-id]",
        """
            {"id": "a", "input": "q"}
            {"id": "a", "input": "q"}
        """,
        jsonl=True,
        loader_only=UNIQUE,
    ),
    refused(
        "test_jsonl_errors_point_at_the_file_and_line[sidecar-error]",
        """
            {"id": "a", "input": "q"}
        """,
        sidecar="""
            dataset: x
            execution:
              evaluators: [{name: x, type: code_judge}]
        """,
        jsonl=True,
    ),
    refused(
        "test_jsonl_errors_point_at_the_file_and_line[sidecar-with-cases]",
        """
            {"id": "a", "input": "q"}
        """,
        sidecar="""
            evalcases: [{id: b, input: q}]
        """,
        jsonl=True,
    ),
    refused(
        "test_jsonl_errors_point_at_the_file_and_line[two-names]",
        """
            {"id": "a", "input": "q"}
            {"id": "b", "input": "q", "input_messages": "r"}
        """,
        jsonl=True,
    ),
    refused(
        "test_jsonl_errors_point_at_the_file_and_line[sidecar-two-names]",
        """
            {"id": "a", "input": "q"}
        """,
        sidecar="""
            execution:
              evaluators: [{type: latency, threshold: 1}]
              assertions: [{type: cost, budget: 1}]
        """,
        jsonl=True,
    ),
    refused(
        "test_jsonl_errors_point_at_the_file_and_line[sidecar-unknown-type]",
        """
            {"id": "a", "input": "q"}
            {"id": "b", "input": "q"}
        """,
        sidecar="""
            dataset: x
            execution:
              evaluators: [{name: j, type: llm_jugde}]
        """,
        jsonl=True,
        loader_only=KINDS,
    ),
    refused(
        "test_hostile_files_are_one_quick_clear_error[alias-bomb]",
        """
            a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
            a1: &a1 [*a0,*a0,*a0,*a0,*a0,*a0,*a0,*a0,*a0]
            a2: &a2 [*a1,*a1,*a1,*a1,*a1,*a1,*a1,*a1,*a1]
            a3: &a3 [*a2,*a2,*a2,*a2,*a2,*a2,*a2,*a2,*a2]
            a4: &a4 [*a3,*a3,*a3,*a3,*a3,*a3,*a3,*a3,*a3]
            a5: &a5 [*a4,*a4,*a4,*a4,*a4,*a4,*a4,*a4,*a4]
            a6: &a6 [*a5,*a5,*a5,*a5,*a5,*a5,*a5,*a5,*a5]
            a7: &a7 [*a6,*a6,*a6,*a6,*a6,*a6,*a6,*a6,*a6]
            a8: &a8 [*a7,*a7,*a7,*a7,*a7,*a7,*a7,*a7,*a7]
            evalcases: [{id: x, input: q, description: *a8}]
        """,
    ),
    refused(
        "test_hostile_files_are_one_quick_clear_error[deep-nesting]",
        (
            "evalcases: [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
            "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
            "[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]"
            "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]\n"
        ),
    ),
    refused(
        "test_hostile_files_are_one_quick_clear_error[deep-mappings]",
        (
            "evalcases:\n"
            "  - id: a\n"
            "    input: q\n"
            "    x: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a:"
            " {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {"
            "a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a:"
            " {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {"
            "a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a:"
            " {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {a: {"
            "a: {a: {a: {a: {a: 1}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}"
            "}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}\n"
        ),
    ),
    refused(
        "test_hostile_files_are_one_quick_clear_error[recursive-alias]",
        """
            evalcases: &e [*e]
        """,
    ),
    refused(
        "test_hostile_files_are_one_quick_clear_error[duplicate-keys]",
        """
            evalcases: []
            evalcases: []
        """,
    ),
    refused(
        "test_hostile_files_are_one_quick_clear_error[python-tag]",
        """
            evalcases: !!python/object/apply:os.system [echo hacked]
        """,
    ),
    refused(
        "test_hostile_files_are_one_quick_clear_error[nul-byte]",
        'evalcases: [{id: a, input: "q\x00"}]\n',
    ),
    refused(
        "test_hostile_files_are_one_quick_clear_error[tabs]",
        ("evalcases:\n\t- id: a\n"),
    ),
    refused(
        "test_hostile_files_are_one_quick_clear_error[nan-weight]",
        """
            evalcases: [{id: a, input: q, evaluators: [{name: j, type: llm_judge, weight: .nan}]}]
        """,
    ),
    refused(
        "test_invalid_settings_are_one_clear_collection_error[code-aggregator-without-path]",
        case_with(
            "evaluators",
            """
                - name: c
                  type: composite
                  evaluators:
                    - {name: fast, type: latency, threshold: 5}
                  aggregator: {type: code_judge}
            """,
        ),
    ),
    refused(
        "test_invalid_settings_are_one_clear_collection_error[no-members]",
        case_with(
            "evaluators",
            """
                - name: c
                  type: composite
                  evaluators: []
                  aggregator: {type: weighted_average}
            """,
        ),
    ),
    refused(
        "test_invalid_settings_are_one_clear_collection_error[duplicate-members]",
        case_with(
            "evaluators",
            """
                - name: c
                  type: composite
                  evaluators:
                    - {name: x, type: latency, threshold: 5}
                    - {name: x, type: cost, budget: 1}
                  aggregator: {type: weighted_average}
            """,
        ),
        loader_only=UNIQUE,
    ),
    refused(
        "test_invalid_settings_are_one_clear_collection_error[nested-member-setting]",
        case_with(
            "evaluators",
            """
                - name: outer
                  type: composite
                  aggregator: {type: weighted_average}
                  evaluators:
                    - name: inner
                      type: composite
                      aggregator: {type: weighted_average}
                      evaluators: [{name: slow, type: latency, threshold: -2}]
            """,
        ),
    ),
    refused(
        "test_invalid_settings_are_one_clear_collection_error[unknown-member-kind]",
        case_with(
            "evaluators",
            """
                - name: c
                  type: composite
                  aggregator: {type: weighted_average}
                  evaluators: [{name: m, type: latnecy, threshold: 5}]
            """,
        ),
        loader_only=KINDS,
    ),
    refused(
        "test_invalid_settings_are_one_clear_collection_error[missing-aggregator-prompt]",
        case_with(
            "evaluators",
            """
                - name: c
                  type: composite
                  aggregator: {type: llm_judge, prompt: prompts/missing.md}
                  evaluators: [{name: m, type: latency, threshold: 5}]
            """,
        ),
        loader_only=FILES,
    ),
    refused(
        "test_kinds_with_settings_cannot_be_the_default_kind[tool_trajectory]",
        """
            evaluator: tool_trajectory
            evalcases: [{id: a, input: q}]
        """,
        loader_only=KINDS,
    ),
    refused(
        "test_kinds_with_settings_cannot_be_the_default_kind[latency]",
        """
            evaluator: latency
            evalcases: [{id: a, input: q}]
        """,
        loader_only=KINDS,
    ),
    refused(
        "test_flow_nesting_is_measured_before_libyaml_reads[quoted-closers]",
        (
            'evalcases: [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]'
            '", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]"'
            ', [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]",'
            ' [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", '
            '[ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", ['
            ' "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ '
            '"]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "'
            ']", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]'
            '", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]"'
            ', [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]",'
            ' [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", '
            '[ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", ['
            ' "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", [ '
            '"]", [ "]", [ "]", [ "]", [ "]", [ "]", [ "]", x]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]'
            "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]"
            "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]\n"
        ),
    ),
    refused(
        "test_flow_nesting_is_measured_before_libyaml_reads[spaced]",
        (
            "evalcases:\n"
            "  - id: a\n"
            "    input: [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ ["
            " [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ ["
            " [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ ["
            " [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ [ ]"
            "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]"
            "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]\n"
        ),
    ),
    refused(
        "test_flow_nesting_is_measured_before_libyaml_reads[commented-closers]",
        (
            "evalcases:\n"
            "- [ # ]]]\n"
            "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
            "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
        ),
    ),
    refused(
        "test_kinds_with_settings_cannot_be_the_default_kind[composite]",
        """
            evaluator: composite
            evalcases: [{id: a, input: q}]
        """,
        loader_only=KINDS,
    ),
    refused(
        "test_invalid_yaml_names_file_line_and_column",
        """
            evalcases:
              - id: a
                input: [1, 2
        """,
    ),
    refused(
        "test_invalid_files_are_one_clear_collection_error[empty]",
        "",
    ),
    refused(
        "test_invalid_files_are_one_clear_collection_error[list-root]",
        """
            - a
            - b
        """,
    ),
    refused(
        "test_invalid_files_are_one_clear_collection_error[no-evalcases]",
        """
            description: x
        """,
    ),
    refused(
        "test_invalid_files_are_one_clear_collection_error[empty-evalcases]",
        """
            evalcases: []
        """,
    ),
    refused(
        "test_invalid_files_are_one_clear_collection_error[no-id]",
        """
            evalcases:
              - input: q
        """,
    ),
    refused(
        "test_invalid_files_are_one_clear_collection_error[no-input]",
        """
            evalcases:
              - id: a
        """,
    ),
    refused(
        "test_invalid_files_are_one_clear_collection_error[duplicate-id]",
        """
            evalcases:
              - {id: a, input: q}
              - {id: a, input: q}
        """,
        loader_only=UNIQUE,
    ),
    refused(
        "test_invalid_files_are_one_clear_collection_error[control-char-id]",
        ('evalcases:\n  - id: "a\\nb"\n    input: q\n'),
    ),
    refused(
        "test_invalid_files_are_one_clear_collection_error[bad-role]",
        """
            evalcases:
              - id: a
                input: [{role: robot, content: hi}]
        """,
    ),
    refused(
        "test_invalid_files_are_one_clear_collection_error[evaluator-no-type]",
        """
            evalcases:
              - id: a
                input: q
                evaluators: [{weight: 1}]
        """,
    ),
    refused(
        "test_invalid_files_are_one_clear_collection_error[code-judge-no-script]",
        """
            evalcases:
              - id: a
                input: q
                evaluators: [{name: x, type: code_judge}]
        """,
    ),
    refused(
        "test_invalid_files_are_one_clear_collection_error[negative-weight]",
        """
            evalcases:
              - id: a
                input: q
                evaluators: [{name: x, type: llm_judge, weight: -1}]
        """,
    ),
    refused(
        "test_invalid_files_are_one_clear_collection_error[duplicate-evaluator-name]",
        """
            evalcases:
              - id: a
                input: q
                evaluators: [{name: x, type: llm_judge}, {name: x, type: llm_judge}]
        """,
        loader_only=UNIQUE,
    ),
    refused(
        "test_invalid_files_are_one_clear_collection_error[duplicate-rubric-id]",
        case_with(
            "rubrics",
            """
                - {id: r1, expected_outcome: Mentions apples}
                - {id: r1, expected_outcome: Mentions bananas, weight: 5}
            """,
        ),
        loader_only=UNIQUE,
    ),
    refused(
        "test_invalid_files_are_one_clear_collection_error[rubric-id-like-a-generated-one]",
        case_with(
            "evaluators",
            """
                - {name: j, type: llm_judge, rubrics: [{id: rubric-2, outcome: a}, b]}
            """,
        ),
        loader_only=UNIQUE,
    ),
    refused(
        "test_invalid_files_are_one_clear_collection_error[unknown-type]",
        """
            evalcases:
              - id: a
                input: q
                evaluators: [{name: x, type: llm_jugde}]
        """,
        loader_only=KINDS,
    ),
    refused(
        "test_invalid_files_are_one_clear_collection_error[yaml-in-flow]",
        """
            evalcases:
              - {id: a, input: q}
              - {id: b, input: q, outcome: 1.5, x: [}
        """,
    ),
    refused(
        "test_invalid_files_are_one_clear_collection_error[duplicate-key]",
        """
            a: 1
            a: 2
            evalcases: [{id: x, input: q}]
        """,
    ),
    refused(
        "test_invalid_files_are_one_clear_collection_error[binary-in-evaluator]",
        case_with(
            "evaluators",
            (
                "- {name: ok, type: code_judge, script: [python, judges/ok.py], blob: !!binary "
                "aGVsbG8=}\n"
            ),
        ),
    ),
    refused(
        "test_invalid_files_are_one_clear_collection_error[binary-in-content]",
        """
            evalcases:
              - id: a
                input: {blob: !!binary aGVsbG8=}
        """,
    ),
    refused(
        "test_invalid_files_are_one_clear_collection_error[set]",
        """
            evalcases:
              - id: a
                input: q
                expected_output: {tags: !!set {a, b}}
        """,
    ),
    refused(
        "test_invalid_files_are_one_clear_collection_error[omap]",
        """
            evalcases:
              - id: a
                input: [!!omap [role: user, content: hi]]
        """,
    ),
    refused(
        "test_invalid_files_are_one_clear_collection_error[pairs]",
        """
            evalcases:
              - id: a
                input: q
                description: !!pairs [a: 1]
        """,
    ),
    refused(
        "test_invalid_files_are_one_clear_collection_error[code-judge-default-kind]",
        """
            evaluator: code_judge
            evalcases: [{id: a, input: q}]
        """,
        loader_only=KINDS,
    ),
    refused(
        "test_score_range_rules[overlap]",
        case_with(
            "rubrics",
            """
                - id: r
                  score_ranges:
                    - {score_range: [0, 5], expected_outcome: a}
                    - {score_range: [5, 10], expected_outcome: b}
            """,
        ),
        loader_only=ARITHMETIC,
    ),
    refused(
        "test_score_range_rules[bounds]",
        case_with(
            "rubrics",
            """
                - id: r
                  score_ranges:
                    - {score_range: [0, 5], expected_outcome: a}
                    - {score_range: [6, 11], expected_outcome: b}
            """,
        ),
    ),
    refused(
        "test_score_range_rules[min-gt-max]",
        case_with(
            "rubrics",
            """
                - id: r
                  score_ranges:
                    - {score_range: [5, 0], expected_outcome: a}
            """,
        ),
        loader_only=ARITHMETIC,
    ),
    refused(
        "test_score_range_rules[non-integer]",
        case_with(
            "rubrics",
            """
                - id: r
                  score_ranges:
                    - {score_range: [0, 4.5], expected_outcome: a}
            """,
        ),
    ),
    refused(
        "test_score_range_rules[coverage]",
        case_with(
            "rubrics",
            """
                - id: r
                  score_ranges:
                    - {score_range: [0, 3], expected_outcome: a}
                    - {score_range: [6, 10], expected_outcome: b}
            """,
        ),
        loader_only=ARITHMETIC,
    ),
    refused(
        "test_score_range_rules[shorthand-start]",
        case_with(
            "rubrics",
            """
                - id: r
                  score_ranges: {2: low, 7: high}
            """,
        ),
    ),
    refused(
        "test_score_range_rules[shorthand-bounds]",
        case_with(
            "rubrics",
            """
                - id: r
                  score_ranges: {0: low, 12: high}
            """,
        ),
    ),
    refused(
        "test_score_range_rules[min-score-float]",
        case_with(
            "rubrics",
            """
                - id: r
                  required_min_score: 7.5
                  score_ranges: {0: low, 5: high}
            """,
        ),
    ),
    refused(
        "test_score_range_rules[min-score-range]",
        case_with(
            "rubrics",
            """
                - id: r
                  required_min_score: 11
                  score_ranges: {0: low, 5: high}
            """,
        ),
    ),
    refused(
        "test_score_range_rules[entry-not-object]",
        case_with(
            "rubrics",
            """
                - id: r
                  score_ranges: [just text]
            """,
        ),
    ),
    refused(
        "test_score_range_rules[missing-outcome]",
        case_with(
            "rubrics",
            """
                - id: r
                  score_ranges:
                    - {score_range: [0, 10]}
            """,
        ),
    ),
    refused(
        "test_score_range_rules[not-a-pair]",
        case_with(
            "rubrics",
            """
                - id: r
                  score_ranges:
                    - {score_range: [0], expected_outcome: a}
            """,
        ),
    ),
    refused(
        "test_score_range_rules_apply_to_evaluator_rubrics",
        case_with(
            "evaluators",
            """
                - name: judge
                  type: llm_judge
                  rubrics:
                    - id: r
                      score_ranges: {0: low, 3: mid}
                      required_min_score: 12
            """,
        ),
    ),
    refused(
        "test_custom_evaluator_kinds_through_the_hook",
        """
            evalcases:
              - id: unknown-here
                input: q
                evaluators: [{name: len, type: length}]
        """,
        loader_only=KINDS,
    ),
    refused(
        "test_a_lone_surrogate_in_a_jsonl_dataset_is_refused_at_its_line",
        ('{"id": "fine", "input": "q"}\n{"id": "c\\ud800", "input": "q"}\n'),
        jsonl=True,
    ),
    refused(
        "test_invalid_settings_are_one_clear_collection_error[unknown-mode]",
        case_with(
            "evaluators",
            """
                - {name: t, type: tool_trajectory, mode: sorted}
            """,
        ),
    ),
    refused(
        "test_invalid_settings_are_one_clear_collection_error[any-order-without-minimums]",
        case_with(
            "evaluators",
            """
                - {name: t, type: tool_trajectory, mode: any_order}
            """,
        ),
    ),
    refused(
        "test_invalid_settings_are_one_clear_collection_error[exact-without-expected]",
        case_with(
            "evaluators",
            """
                - {name: t, type: tool_trajectory, mode: exact}
            """,
        ),
    ),
    refused(
        "test_invalid_settings_are_one_clear_collection_error[negative-minimum]",
        case_with(
            "evaluators",
            """
                - name: t
                  type: tool_trajectory
                  mode: any_order
                  minimums: {search: -1}
            """,
        ),
    ),
    refused(
        "test_invalid_settings_are_one_clear_collection_error[negative-max-duration]",
        case_with(
            "evaluators",
            """
                - name: t
                  type: tool_trajectory
                  mode: in_order
                  expected:
                    - {tool: read, max_duration_ms: -5}
            """,
        ),
    ),
    refused(
        "test_invalid_settings_are_one_clear_collection_error[bad-args]",
        case_with(
            "evaluators",
            """
                - name: t
                  type: tool_trajectory
                  mode: in_order
                  expected:
                    - {tool: read, args: everything}
            """,
        ),
    ),
    refused(
        "test_invalid_settings_are_one_clear_collection_error[step-without-tool]",
        case_with(
            "evaluators",
            """
                - name: t
                  type: tool_trajectory
                  mode: in_order
                  expected:
                    - {args: any}
            """,
        ),
    ),
    refused(
        "test_invalid_settings_are_one_clear_collection_error[no-fields]",
        case_with(
            "evaluators",
            """
                - {name: f, type: field_accuracy, fields: []}
            """,
        ),
    ),
    refused(
        "test_invalid_settings_are_one_clear_collection_error[unknown-match]",
        case_with(
            "evaluators",
            """
                - {name: f, type: field_accuracy, fields: [{path: a, match: fuzzy}]}
            """,
        ),
    ),
    refused(
        "test_invalid_settings_are_one_clear_collection_error[unknown-aggregation]",
        case_with(
            "evaluators",
            (
                "- {name: f, type: field_accuracy, fields: [{path: a, match: exact}], aggregati"
                "on: mean}\n"
            ),
        ),
    ),
    refused(
        "test_invalid_settings_are_one_clear_collection_error[negative-tolerance]",
        case_with(
            "evaluators",
            """
                - name: f
                  type: field_accuracy
                  fields: [{path: a, match: numeric_tolerance, tolerance: -1}]
            """,
        ),
    ),
    refused(
        "test_invalid_settings_are_one_clear_collection_error[negative-threshold]",
        case_with(
            "evaluators",
            """
                - {name: l, type: latency, threshold: -1}
            """,
        ),
    ),
    refused(
        "test_invalid_settings_are_one_clear_collection_error[no-threshold]",
        case_with(
            "evaluators",
            """
                - {name: l, type: latency}
            """,
        ),
    ),
    refused(
        "test_invalid_settings_are_one_clear_collection_error[non-numeric-budget]",
        case_with(
            "evaluators",
            """
                - {name: c, type: cost, budget: cheap}
            """,
        ),
    ),
    refused(
        "test_invalid_settings_are_one_clear_collection_error[no-token-limit]",
        case_with(
            "evaluators",
            """
                - {name: k, type: token_usage}
            """,
        ),
    ),
    refused(
        "test_invalid_settings_are_one_clear_collection_error[negative-token-limit]",
        case_with(
            "evaluators",
            """
                - {name: k, type: token_usage, max_total: -3}
            """,
        ),
    ),
    refused(
        "test_invalid_settings_are_one_clear_collection_error[weight-names-no-member]",
        case_with(
            "evaluators",
            """
                - name: c
                  type: composite
                  evaluators:
                    - {name: fast, type: latency, threshold: 5}
                  aggregator: {type: weighted_average, weights: {fats: 2}}
            """,
        ),
        loader_only=ARITHMETIC,
    ),
    refused(
        "test_invalid_settings_are_one_clear_collection_error[no-aggregator]",
        case_with(
            "evaluators",
            """
                - name: c
                  type: composite
                  evaluators:
                    - {name: fast, type: latency, threshold: 5}
            """,
        ),
    ),
    refused(
        "test_invalid_settings_are_one_clear_collection_error[unknown-aggregator]",
        case_with(
            "evaluators",
            """
                - name: c
                  type: composite
                  evaluators:
                    - {name: fast, type: latency, threshold: 5}
                  aggregator: {type: vote}
            """,
        ),
    ),
    refused(
        "test_bad_trials_blocks_are_collection_errors[{count:",
        """
            execution:
              target: flaky
              evaluators:
                - {name: kw, type: code_judge, script: [python, keywords.py], keywords: ["30 days"]}
            evalcases:
              - {id: p-x, input: Refunds, execution: {trials: {count: 3, threshold: 0.8}}}
        """,
    ),
    refused(
        "test_bad_trials_blocks_are_collection_errors[{strategy:",
        """
            execution:
              target: flaky
              evaluators:
                - {name: kw, type: code_judge, script: [python, keywords.py], keywords: ["30 days"]}
            evalcases:
              - {id: p-x, input: Refunds, execution: {trials: {strategy: adaptive, count: 5}}}
        """,
    ),
    refused(
        "test_bad_trials_blocks_are_collection_errors[{count:#2",
        """
            execution:
              target: flaky
              evaluators:
                - {name: kw, type: code_judge, script: [python, keywords.py], keywords: ["30 days"]}
            evalcases:
              - {id: p-x, input: Refunds, execution: {trials: {count: true}}}
        """,
    ),
    refused(
        "test_bad_trials_blocks_are_collection_errors[{count:#3",
        """
            execution:
              target: flaky
              evaluators:
                - {name: kw, type: code_judge, script: [python, keywords.py], keywords: ["30 days"]}
            evalcases:
              - {id: p-x, input: Refunds, execution: {trials: {count: 2, cost_limit_usd: .nan}}}
        """,
    ),
    refused(
        "test_bad_trials_blocks_are_collection_errors[{count:#4",
        """
            execution:
              target: flaky
              evaluators:
                - {name: kw, type: code_judge, script: [python, keywords.py], keywords: ["30 days"]}
            evalcases:
              - {id: p-x, input: Refunds, execution: {trials: {count: 3, strategy: best}}}
        """,
    ),
    refused("test_non_utf8_and_bom", b"evalcases: [{id: a, input: \xff\xfe}]\n"),
    refused("negative-weight", EVALUATOR.format("weight: -1")),
    refused("nan-weight", EVALUATOR.format("weight: .nan")),
    refused("infinite-weight", EVALUATOR.format("weight: .inf")),
    refused("quoted-weight", EVALUATOR.format("weight: '2'")),
    refused("boolean-weight", EVALUATOR.format("weight: true")),
    refused("quoted-timeout", EVALUATOR.format("timeout_seconds: '30'")),
    refused("required-min-score-11", RUBRIC.format("required_min_score: 11, score_ranges: {0: a}")),
    refused("quoted-required", RUBRIC.format("required: 'yes'")),
    refused(
        "image-segment", "evalcases: [{id: a, input: [{role: user, content: [{type: image}]}]}]\n"
    ),
    refused(
        "input-and-input-messages",
        "evalcases: [{id: a, input: q, input_messages: [{role: user, content: q}]}]\n",
    ),
    refused("boolean-id", "evalcases: [{id: true, input: q}]\n"),
    refused("docker-workspace", "workspace: {docker: {image: x}}\ntests: [{id: a, input: q}]\n"),
    refused(
        "removed-repo-key",
        "tests: [{id: a, input: q, workspace: {repos: [{path: r, repo: x, clone: {}}]}}]\n",
    ),
    refused("bad-reset", "workspace: {hooks: {after_each: {reset: soft}}}\ntests: [{id: a}]\n"),
    refused("fraction-id", "evalcases: [{id: 1.5, input: q}]\n"),
    refused(
        "sidecar-with-cases",
        '{"id": "a", "input": "q"}\n',
        sidecar="evalcases: [{id: b, input: q}]\n",
        jsonl=True,
    ),
    *(
        refused(f"test_bad_conversations_are_load_errors_at_their_place[{index}]", text)
        for index, text in enumerate(
            [
                "tests: [{id: a, input: q, turns: [{input: hi}]}]\n",
                "tests: [{id: a, mode: conversation, input: q}]\n",
                "tests: [{id: a, mode: conversation, turns: []}]\n",
                "tests: [{id: a, mode: conversation, window_size: 0, turns: [{input: hi}]}]\n",
                "tests: [{id: a, mode: conversation, aggregation: median, turns: [{input: hi}]}]\n",
                "tests: [{id: a, mode: chat, turns: [{input: hi, assertions: [x]}]}]\n",
                "tests: [{id: a, input: q, on_turn_failure: stop}]\n",
                "tests: [{id: a, mode: conversation, turns: [{input: []}]}]\n",
                "tests: [{id: a, mode: conversation, expected_output: x, turns: [{input: hi}]}]\n",
            ]
        )
    ),
    refused(
        "test_bad_conversations_are_load_errors_at_their_place[nothing-grades]",
        "tests: [{id: a, mode: conversation, turns: [{input: hi}]}]\n",
        loader_only="what grades a case: the default kind and the file's entries together",
    ),
]

#: Files both accept besides the examples: what the loader reads besides the plain spellings.
#: AgentV v4's assertions, as v4 writes them.
V4_ASSERTIONS = """
assertions: [{type: llm-grader}]
tests:
  - id: a
    input: q
    assertions:
      - {type: contains, value: refund}
      - Is polite
      - {type: is-json, negate: true}
      - {type: llm-grader, required: 0.8}
      - {type: rubrics, criteria: [{outcome: x, operator: contradiction}]}
      - type: composite
        assertions: [{type: code-grader, command: [x]}]
        aggregator: {type: threshold, threshold: 0.5}
"""

#: AgentV v4's workspace, inline at both levels and as a file's path.
V4_WORKSPACE = """
workspace:
  template: ../tpl
  hooks:
    before_all: {command: [node, setup.mjs], timeout_ms: 1000}
    after_each: {reset: fast}
  repos: [{path: ./repo, repo: org/name, commit: main, ancestor: 1, sparse: [src]}]
  env: {required_commands: [node], required_python_modules: [yaml]}
tests:
  - id: a
    input: q
    workspace: {isolation: per_test, hooks: {before_each: {script: [sh, x.sh]}}}
  - {id: b, input: q, workspace: workspace.yaml}
"""

ACCEPTED = [
    pytest.param(V4_ASSERTIONS, None, id="v4-assertions"),
    pytest.param(V4_WORKSPACE, None, id="v4-workspace"),
    pytest.param("evalcases: [{id: 5, input: q}, {id: 2.0, input: q}]\n", None, id="number-ids"),
    pytest.param("dataset: 2024\nevalcases: [{id: a, input: q}]\n", None, id="number-dataset"),
    pytest.param(
        "evalcases: [{id: a, input: [{role: user, content: {type: image, url: x}}]}]\n",
        None,
        id="json-content",
    ),
    pytest.param(EVALUATOR.format("weight: 2, timeout_seconds: 30"), None, id="numbers"),
    pytest.param(
        '{"id": "a", "input": "q"}\n'
        '{"id": 7, "input": "q", "execution": {"trials": {"count": 2}}}\n',
        "dataset: refunds\nexecution:\n  evaluators:\n"
        "    - {name: kw, type: code_judge, script: [python, kw.py], keywords: [a]}\n"
        "  trials: {count: 3, strategy: mean}\n",
        id="sidecar",
    ),
    pytest.param(
        "tests:\n  - id: a\n    mode: conversation\n    aggregation: max\n    window_size: 1\n"
        "    input: [{role: system, content: s}]\n    turns:\n      - {input: hi}\n"
        "      - {input: [{type: text, value: again}], expected_output: hello}\n"
        "      - {input: bye, assertions: [Polite, {type: contains, value: bye}]}\n"
        "    assertions: [Coherent]\n",
        None,
        id="conversation",
    ),
]


@pytest.fixture(scope="module")
def validators() -> dict[str, jsonschema.Draft202012Validator]:
    """The schemas ``python -m pytest_agentv schema`` prints, checked to be JSON Schemas."""
    evals = validator("eval")
    # A JSONL dataset's lines are its cases, as an eval file's ``evalcases`` are.
    lines = {"$defs": evals.schema["$defs"], **evals.schema["properties"]["evalcases"]}
    return {
        "eval": evals,
        "sidecar": validator("sidecar"),
        "lines": jsonschema.Draft202012Validator(lines),
    }


def write(folder: Path, name: str, text: str | bytes, sidecar: str | None) -> Path:
    path = folder / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    if sidecar is not None:
        path.with_suffix(".yaml").write_text(sidecar, encoding="utf-8")
    return path


def loader_accepts(path: Path, rootdir: Path) -> bool:
    try:
        load_specs(path, path.name, rootdir, REGISTRY.scoped(REGISTRY.builtin))
    except AgentvError:
        return False
    return True


def as_json(value: Any) -> Any:
    return json.loads(json.dumps(value))


def schema_accepts(path: Path, validators: dict[str, jsonschema.Draft202012Validator]) -> bool:
    """Whether the data ``path`` holds (with its sidecar) is valid under the printed schemas."""
    documents: list[tuple[str, Any]] = []
    try:
        if path.suffix == ".jsonl":
            sidecar = sidecar_of(path)
            if sidecar is not None:
                documents.append(("sidecar", parse_yaml(sidecar, sidecar.name)[1]))
            text = path.read_text(encoding="utf-8")
            documents.append(("lines", [value for _, value in json_lines(text, path.name)]))
        else:
            documents.append(("eval", parse_yaml(path, path.name)[1]))
    except AgentvError:
        return False  # the file holds no data: its syntax is refused
    return all(validators[kind].is_valid(as_json(value)) for kind, value in documents)


@pytest.mark.parametrize(("name", "text", "sidecar", "loader_only"), REFUSED)
def test_what_the_suite_refuses_the_schema_refuses(
    tmp_path: Path,
    validators: dict[str, jsonschema.Draft202012Validator],
    name: str,
    text: str | bytes,
    sidecar: str | None,
    loader_only: str | None,
) -> None:
    path = write(tmp_path, name, text, sidecar)
    assert not loader_accepts(path, tmp_path)
    # A file only the loader refuses says why; when the schema learns to refuse it, drop that.
    assert schema_accepts(path, validators) is (loader_only is not None)


@pytest.mark.parametrize(("text", "sidecar"), ACCEPTED)
def test_what_the_loader_reads_the_schema_accepts(
    tmp_path: Path,
    validators: dict[str, jsonschema.Draft202012Validator],
    text: str,
    sidecar: str | None,
) -> None:
    name = "d.eval.jsonl" if sidecar is not None else "a.eval.yaml"
    path = write(tmp_path, name, text, sidecar)
    (tmp_path / "workspace.yaml").write_text("isolation: shared\n")  # a case names it
    assert loader_accepts(path, tmp_path)
    assert schema_accepts(path, validators)


EXAMPLES = sorted((ROOT / "examples").rglob("*.eval.yaml")) + sorted(
    (ROOT / "examples").rglob("*.eval.jsonl")
)


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_every_example_is_accepted_by_both(
    validators: dict[str, jsonschema.Draft202012Validator], path: Path
) -> None:
    assert loader_accepts(path, ROOT / "examples")
    assert schema_accepts(path, validators)


def test_a_sidecar_is_not_an_eval_file(
    validators: dict[str, jsonschema.Draft202012Validator],
) -> None:
    """Every sidecar failed the eval-file schema (it has no cases); it has its own."""
    sidecar = {"dataset": "refunds", "execution": {"target": "default"}}
    assert validators["sidecar"].is_valid(sidecar)
    assert not validators["eval"].is_valid(sidecar)
