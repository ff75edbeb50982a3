"""AgentV v4's judge prompts: its template variable names, and the rubric operators (the
operator label and guidance AgentV v4.42.4 writes)."""

from __future__ import annotations

import pytest

from tests.fake_openai import FakeOpenAI, checklist, freeform
from tests.helpers import assert_load_error, write


def test_v4_template_variables_are_filled(judged: pytest.Pytester, fake_llm: FakeOpenAI) -> None:
    fake_llm.responder = lambda r: freeform(0.9)
    write(
        judged,
        "p.eval.yaml",
        """
        tests:
          - id: p
            criteria: States the window
            input: How long?
            expected_output: 30 days
            assertions:
              - type: llm-grader
                prompt: >-
                  Q={{ input }} A={{output}} REF={{expected_output}}
                  C={{criteria}} T={{tool_calls}}
        """,
    )
    judged.runpytest().assert_outcomes(passed=1)
    user = fake_llm.requests[0].user
    assert "Q=How long? A=<AGENTV-DATA nonce=" in user
    assert "Refunds are accepted within 30 days of purchase." in user
    assert "REF=30 days C=States the window T=<AGENTV-DATA" in user
    assert "{{" not in user


def test_a_contradiction_rubric_is_told_to_the_judge(
    judged: pytest.Pytester, fake_llm: FakeOpenAI
) -> None:
    fake_llm.responder = lambda r: checklist(nolie=True, window=True)
    write(
        judged,
        "r.eval.yaml",
        """
        tests:
          - id: r
            input: q
            assertions:
              - type: rubrics
                criteria:
                  - {id: nolie, outcome: Refunds are never given, operator: contradiction}
                  - {id: window, outcome: States 30 days}
        """,
    )
    judged.runpytest().assert_outcomes(passed=1)
    user = fake_llm.requests[0].user
    assert "Operator guidance:\n- Contradiction guard: mark satisfied when the answer" in user
    assert "- [nolie] (REQUIRED) (weight: 1) (operator: contradiction): Refunds are never" in user


def test_an_unknown_operator_is_a_load_error(project: pytest.Pytester) -> None:
    assertion = "{type: rubrics, criteria: [{outcome: x, operator: negation}]}"
    assert_load_error(project, assertion, "*operator: must be 'correctness' or*")


def test_prompt_files_in_v4_files_are_marked_file(
    judged: pytest.Pytester, fake_llm: FakeOpenAI
) -> None:
    """AgentV v4 reads ``prompt: grader.md`` as inline text and ``file://grader.md`` as the
    file; a v4 file gets both readings as v4 gives them, and a warning for the first."""
    fake_llm.responder = lambda r: freeform(0.9)
    write(judged, "grader.md", "Grade this: {{output}} against {{criteria}}")
    write(
        judged,
        "p.eval.yaml",
        """
        tests:
          - id: inline
            criteria: States the window
            input: q
            assertions: [{type: llm-grader, prompt: grader.md}]
          - id: file
            criteria: States the window
            input: q
            assertions: [{type: llm-grader, prompt: "file://grader.md"}]
        """,
    )
    result = judged.runpytest("-W", "always")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        ["*AgentV v4 reads 'prompt: grader.md' as inline text*write 'file://grader.md'*"]
    )
    users = sorted(request.user for request in fake_llm.requests)
    assert any(user.startswith("Grade this: <AGENTV-DATA") for user in users)
    assert any(user.startswith("grader.md") for user in users)
