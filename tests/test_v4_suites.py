"""AgentV v4's file-level ``assertions`` (added to every case's own, with ``skip_defaults``),
and plain-string assertion entries."""

from __future__ import annotations

import json

import pytest

from pytest_agentv.schema.entries import v4_entries
from tests.fake_openai import FakeOpenAI, checklist
from tests.helpers import write


def rows(project: pytest.Pytester) -> dict[str, dict]:
    lines = (project.path / "out.jsonl").read_text().splitlines()
    return {row["eval_id"]: row for row in map(json.loads, lines)}


def test_file_level_assertions_add_to_every_case(project: pytest.Pytester) -> None:
    write(
        project,
        "suite.eval.yaml",
        """
        assertions:
          - {type: icontains, value: refunds}
        tests:
          - id: own
            input: q
            assertions: [{type: contains, value: "30 days"}]
          - id: none
            criteria: c
            input: q
          - id: same-name
            input: q
            assertions: [{type: icontains, value: refunds, negate: true, weight: 0}]
          - id: opted-out
            input: q
            execution: {skip_defaults: true}
            assertions: [{type: contains, value: "never", negate: true}]
        """,
    )
    project.runpytest("--agentv-results", "out.jsonl").assert_outcomes(passed=4)
    found = {
        key: [e["name"] for e in row["evaluator_results"]] for key, row in rows(project).items()
    }
    assert found == {
        "own": ["contains-30 days", "icontains-refunds"],
        "none": ["icontains-refunds"],
        "same-name": ["icontains-refunds", "icontains-refunds-2"],
        "opted-out": ["contains-never"],
    }


def test_a_v4_file_adds_execution_assertions_too(project: pytest.Pytester) -> None:
    """In a file written with v4's names, ``execution.assertions`` add to a case's own (AgentV
    v2.5.8 used them only for cases with none: classic files keep that)."""
    write(
        project,
        "v4.eval.yaml",
        """
        execution:
          assertions: [{type: contains, value: Refunds}]
        tests:
          - {id: a, input: q, assertions: [{type: contains, value: purchase}]}
        """,
    )
    write(
        project,
        "classic.eval.yaml",
        """
        execution:
          evaluators: [{name: k, type: code_judge, script: [python, keywords.py]}]
        evalcases:
          - id: b
            input_messages: [{role: user, content: q}]
            expected_outcome: c
            evaluators: [{name: own, type: code_judge, script: [python, keywords.py]}]
        """,
    )
    project.runpytest("--agentv-results", "out.jsonl").assert_outcomes(passed=2)
    found = {
        key: [e["name"] for e in row["evaluator_results"]] for key, row in rows(project).items()
    }
    assert found == {"a": ["contains-purchase", "contains-Refunds"], "b": ["own"]}


def test_plain_strings_become_one_rubric_weighing_as_many() -> None:
    entries = v4_entries(["  Polite  ", {"type": "contains", "value": "x"}, "Brief", ""])
    assert entries == [
        {"name": "rubrics", "type": "rubrics", "criteria": ["Polite", "Brief"], "weight": 2},
        {"name": "contains-x", "type": "contains", "value": "x"},
    ]


def test_plain_strings_are_graded_by_the_judge(
    judged: pytest.Pytester, fake_llm: FakeOpenAI
) -> None:
    fake_llm.responder = lambda r: checklist(rubric_1=True)
    write(
        judged,
        "strings.eval.yaml",
        """
        tests:
          - id: s
            input: q
            assertions:
              - Mentions the 30-day window
              - {type: contains, value: Refunds}
        """,
    )
    result = judged.runpytest("--agentv-results", "out.jsonl")
    result.assert_outcomes(passed=1)
    [row] = rows(judged).values()
    [rubric, contains] = row["evaluator_results"]
    assert (rubric["name"], rubric["type"], rubric["weight"]) == ("rubrics", "llm_judge", 1)
    assert contains["score"] == 1
    assert "- [rubric-1] (REQUIRED) (weight: 1): Mentions the 30-day window" in (
        fake_llm.requests[0].user
    )
