"""AgentV v4's deterministic checks and the gates on any assertion (``negate``, ``required``,
``min_score``). The expected scores and texts of ``AGENTV`` were produced by AgentV v4.42.4's
own TypeScript (``graders/assertions.ts``) on the same inputs."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from pytest_agentv.cases import PreparedCase
from pytest_agentv.evaluators import build_evaluator_registry, textchecks
from pytest_agentv.evaluators.base import EvaluationContext, aggregate, evaluate_entries
from pytest_agentv.schema.grading import python_entries
from tests.helpers import assert_load_error, write

#: (entry, answer, AgentV's score, AgentV's assertion text)
AGENTV: list[tuple[dict[str, Any], str, int, str]] = [
    (
        {"type": "contains", "value": "\ufeffhello world"},
        "\ufeffhello world\ufeff",
        1,
        'Output contains "\ufeffhello world"',
    ),
    (
        {"type": "contains", "value": "\u001c"},
        "hello\u001cworld\u001c",
        1,
        'Output contains "\u001c"',
    ),
    (
        {"type": "contains", "value": "i\u0307"},
        "  [1, 2, 3]  ",
        0,
        'Output does not contain "i\u0307"',
    ),
    (
        {"type": "contains", "value": "REFUND"},
        "\u00dcn\u00efc\u00f6d\u00e9 42 \u0661\u0662\u0663 \u00e7af\u00e9 \u0130stanbul",
        0,
        'Output does not contain "REFUND"',
    ),
    (
        {"type": "icontains", "value": "y"},
        "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxy",
        1,
        'Output contains "y" (case-insensitive)',
    ),
    (
        {"type": "icontains", "value": "purchase."},
        "Refunds are accepted within 30 days of purchase.",
        1,
        'Output contains "purchase." (case-insensitive)',
    ),
    (
        {"type": "icontains", "value": "hello"},
        '{"a": 1, "b": [1, 2, {"c": null}]}',
        0,
        'Output does not contain "hello" (case-insensitive)',
    ),
    (
        {"type": "icontains", "value": "REFUND"},
        "hello\u001cworld\u001c",
        0,
        'Output does not contain "REFUND" (case-insensitive)',
    ),
    (
        {"type": "starts-with", "value": "hello"},
        "\ufeffhello world\ufeff",
        1,
        'Output starts with "hello"',
    ),
    ({"type": "starts-with", "value": "ERROR"}, "abc\n", 0, 'Output does not start with "ERROR"'),
    (
        {"type": "ends-with", "value": "\u001c"},
        "hello\u001cworld\u001c",
        1,
        'Output ends with "\u001c"',
    ),
    (
        {"type": "ends-with", "value": "\ufeffhello world"},
        "\ufeffhello world\ufeff",
        1,
        'Output ends with "\ufeffhello world"',
    ),
    (
        {"type": "ends-with", "value": "ERROR"},
        '"just a string"',
        0,
        'Output does not end with "ERROR"',
    ),
    (
        {"type": "ends-with", "value": " x "},
        "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxy",
        0,
        'Output does not end with " x "',
    ),
    (
        {"type": "equals", "value": "refunds"},
        "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxy",
        0,
        'Output does not equal "refunds"',
    ),
    (
        {"type": "contains-any", "value": ["abc", "\u001c", "REFUND"]},
        "hello\u001cworld\u001c",
        1,
        'Output contains "\u001c"',
    ),
    (
        {"type": "contains-any", "value": ["line two", "ERROR", "\ufeffhello world"]},
        "line one\nline two\n",
        1,
        'Output contains "line two"',
    ),
    (
        {"type": "contains-any", "value": ["line two", "world", "30 days"]},
        "NaN",
        0,
        'Output does not contain any of: "line two", "world", "30 days"',
    ),
    (
        {"type": "contains-any", "value": ["hello world", "$42"]},
        '{"a": 1, "b": [1, 2, {"c": null}]}',
        0,
        'Output does not contain any of: "hello world", "$42"',
    ),
    (
        {"type": "contains-all", "value": ["abc"]},
        "abc\n",
        1,
        "Output contains all 1 expected strings",
    ),
    ({"type": "contains-all", "value": ["hello", "42"]}, "NaN", 0, 'Output missing: "hello", "42"'),
    (
        {"type": "contains-all", "value": ["\u0130"]},
        "Refunds are accepted within 30 days of purchase.",
        0,
        'Output missing: "\u0130"',
    ),
    (
        {"type": "icontains-any", "value": ["world", "\u001c", "Refunds"]},
        "  refunds ARE accepted  \n",
        1,
        'Output contains "Refunds" (case-insensitive)',
    ),
    (
        {"type": "icontains-any", "value": ["y", "REFUND"]},
        "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxy",
        1,
        'Output contains "y" (case-insensitive)',
    ),
    (
        {"type": "icontains-any", "value": ["Refunds"]},
        "Infinity",
        0,
        'Output does not contain any of: "Refunds" (case-insensitive)',
    ),
    (
        {"type": "icontains-any", "value": ["\u0130", "$42", "42"]},
        "NaN",
        0,
        'Output does not contain any of: "\u0130", "$42", "42" (case-insensitive)',
    ),
    (
        {"type": "icontains-all", "value": ["30 days", "REFUND"]},
        "Refunds are accepted within 30 days of purchase.",
        1,
        "Output contains all 2 expected strings (case-insensitive)",
    ),
    (
        {"type": "icontains-all", "value": ["i\u0307"]},
        "1e999",
        0,
        'Output missing (case-insensitive): "i\u0307"',
    ),
    (
        {"type": "icontains-all", "value": ["30 days", "purchase.", "world"]},
        "ERROR: something failed",
        0,
        'Output missing (case-insensitive): "30 days", "purchase.", "world"',
    ),
    (
        {"type": "regex", "value": "\\w+"},
        "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxy",
        1,
        "Output matches pattern /\\w+/",
    ),
    (
        {"type": "regex", "value": "[^\\w]"},
        "\u00dcn\u00efc\u00f6d\u00e9 42 \u0661\u0662\u0663 \u00e7af\u00e9 \u0130stanbul",
        1,
        "Output matches pattern /[^\\w]/",
    ),
    (
        {"type": "regex", "value": "^$"},
        "hello\u001cworld\u001c",
        0,
        "Output does not match pattern /^$/",
    ),
    ({"type": "is-json"}, '"just a string"', 1, "Output is valid JSON"),
    ({"type": "is-json"}, "line one\nline two\n", 0, "Output is not valid JSON"),
    (
        {"type": "is-json"},
        "\u00dcn\u00efc\u00f6d\u00e9 42 \u0661\u0662\u0663 \u00e7af\u00e9 \u0130stanbul",
        0,
        "Output is not valid JSON",
    ),
]


def grade(entries: list[dict[str, Any]], answer: str) -> Any:
    case = PreparedCase(id="c", question="q", input_messages=({"role": "user", "content": "q"},))
    context = EvaluationContext(eval_case=case, candidate=answer)
    results = asyncio.run(
        evaluate_entries(context, python_entries(entries, None), build_evaluator_registry())
    )
    return aggregate(results), results


@pytest.mark.parametrize(("entry", "answer", "score", "text"), AGENTV)
def test_each_check_scores_as_agentv(
    entry: dict[str, Any], answer: str, score: int, text: str
) -> None:
    _, [result] = grade([entry], answer)
    assert result.score.score == score
    assert [dict(a) for a in result.score.assertions] == [{"text": text, "passed": bool(score)}]


def test_negate_inverts_the_score_and_each_check() -> None:
    total, [result] = grade([{"type": "contains", "value": "x", "negate": True}], "abc")
    assert result.score.score == 1.0 and total.score == 1.0
    assert [dict(a) for a in result.score.assertions] == [
        {"text": 'Output does not contain "x"', "passed": True}
    ]


@pytest.mark.parametrize(
    ("gates", "expected"),
    [
        ({"required": True}, 0.0),  # below the pass threshold 0.8: the case scores 0
        ({"required": True, "min_score": 0.5}, 0.0),
        ({"required": 0.4}, 0.0),
        ({"required": 1}, 0.0),  # a number, not true: the minimum is 1
        ({"min_score": 0.9}, 2 / 3),  # min_score alone gates nothing (AgentV v4.42.4)
        ({"required": True, "negate": True}, 1.0),
    ],
)
def test_required_makes_the_case_score_zero(gates: dict[str, Any], expected: float) -> None:
    entries = [
        {"type": "contains", "value": "nope", **gates},
        {"type": "icontains", "value": "ABC", "weight": 2},
    ]
    total, results = grade(entries, "abc")
    assert total.score == pytest.approx(expected)
    assert total.gate_failed == (expected == 0.0)
    assert results[0].required_failed == (expected == 0.0)


def test_a_failed_required_assertion_fails_the_case(project: pytest.Pytester) -> None:
    write(
        project,
        "gates.eval.yaml",
        """
        tests:
          - id: required
            criteria: c
            input: q
            assertions:
              - {type: contains, value: "never said", required: true}
              - {type: icontains, value: REFUNDS, weight: 9}
          - id: negated
            criteria: c
            input: q
            assertions:
              - {type: contains, value: "never said", negate: true, required: true}
        """,
    )
    result = project.runpytest("--agentv-results", "out.jsonl")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*required: score 0 is below its minimum 0.8*"])
    rows = {
        r["eval_id"]: r
        for r in map(json.loads, (project.path / "out.jsonl").read_text().splitlines())
    }
    assert rows["required"]["score"] == 0
    assert rows["required"]["evaluator_results"][0]["gate_failed"] is True


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ("{type: regex, value: '(unclosed'}", "*invalid regular expression /(unclosed/*"),
        ("{type: regex, value: a, flags: v}", "*regex flags 'v' are not supported*"),
        ("{type: contains, value: [a, b]}", "*'contains' needs 'value': a non-empty string*"),
        ("{type: contains}", "*'contains' needs 'value': a non-empty string (got nothing)*"),
        ("{type: contains-any, value: a}", "*needs 'value': a non-empty list of strings*"),
        ("{type: icontains-all, value: [a, 3]}", "*needs 'value': a non-empty list of strings*"),
        ("{type: equals, value: ''}", "*'equals' needs 'value': a non-empty string*"),
        ("{type: contains, value: a, flags: i}", "*'flags' applies to 'regex' only*"),
        ("{type: contains, value: a, min_score: 1.5}", "*min_score: must be a number above 0*"),
        ("{type: contains, value: a, min_score: 0}", "*min_score: must be a number above 0*"),
        ("{type: contains, value: a, required: 2}", "*required: must be true/false or a number*"),
        ("{type: contains, value: a, required: 0}", "*required: must be true/false or a number*"),
        ("{type: contains, value: a, negate: 'yes'}", "*negate: must be true or false*"),
        (
            "{type: composite, assertions: [{type: contains, value: a, negate: true}], "
            "aggregator: {type: weighted_average}}",
            "*'negate' on a composite member is ignored by AgentV v4.42.4*",
        ),
        (
            "{type: composite, assertions: [{type: is-json}], aggregator: {type: threshold}}",
            "*a threshold aggregator needs 'threshold'*",
        ),
    ],
)
def test_bad_settings_are_load_errors(project: pytest.Pytester, entry: str, problem: str) -> None:
    assert_load_error(project, entry, problem)


def test_a_runaway_regex_is_not_graded_rather_than_guessed(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The search is stopped at its time limit (2 s; a quarter of a second here, in-process)."""
    monkeypatch.setattr(textchecks, "REGEX_TIMEOUT", 0.25)
    (project.path / ".agentv" / "targets.yaml").write_text(
        "targets:\n  - {name: default, provider: mock, response: '" + "a" * 40 + "!'}\n"
    )
    write(
        project,
        "slow.eval.yaml",
        """
        tests:
          - id: slow
            input: q
            assertions: [{type: regex, value: "^(a|aa)+$"}]
        """,
    )
    result = project.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*regex /^(a|aa)+$/ did not finish within 0.25s*not be graded*"])


def test_is_json_refuses_to_judge_nesting_past_its_bound() -> None:
    with pytest.raises(Exception, match="deeper than 400 levels"):
        grade([{"type": "is-json"}], "[" * 401 + "]" * 401)
    _, [ok] = grade([{"type": "is-json"}], "[" * 400 + "]" * 400)
    assert ok.score.score == 1.0


def test_unnamed_assertions_get_names_that_never_collide(project: pytest.Pytester) -> None:
    write(
        project,
        "names.eval.yaml",
        """
        tests:
          - id: names
            input: q
            assertions:
              - {type: contains, value: Refunds}
              - {type: contains, value: Refunds}
              - {name: contains-Refunds-2, type: icontains, value: refunds}
              - {type: contains-any, value: [a, b]}
              - {type: regex, value: "Refunds are accepted within 30 days"}
        """,
    )
    project.runpytest("--agentv-results", "out.jsonl").assert_outcomes(passed=1)
    [row] = map(json.loads, (project.path / "out.jsonl").read_text().splitlines())
    assert [e["name"] for e in row["evaluator_results"]] == [
        "contains-Refunds",
        "contains-Refunds-3",
        "contains-Refunds-2",
        "contains-any-2",
        "regex-Refunds are accepted within 30",
    ]
