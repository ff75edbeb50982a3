"""field_accuracy: fields of a JSON answer against the expected output, with AgentV v2.5.8's
match types, missing-field rules and aggregation."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_agentv import AgentvJudge, EvaluationScore, JudgedAssertionError, assert_judged
from tests.helpers import write

EXPECTED = {
    "invoice_number": "INV-001",
    "amount": 1500,
    "date": "15-JAN-2025",
    "vendor": {"name": "Acme Shipping", "address": "123 Main St"},
    "items": [{"name": "Item A", "price": 100}, {"name": "Item B", "price": 200}],
}


def field(path: str, match: str = "exact", **more: Any) -> dict[str, Any]:
    return {"path": path, "match": match, **more}


def grade(
    judge: AgentvJudge, answer: Any, *fields: dict[str, Any], expected: Any = EXPECTED, **more: Any
) -> EvaluationScore:
    entry = {"name": "fields", "type": "field_accuracy", "fields": list(fields), **more}
    candidate = answer if isinstance(answer, str) else json.dumps(answer)
    result = judge.evaluate(candidate, reference_answer=expected, evaluators=[entry])
    return result.evaluator_results[0].score


def test_exact_fields(agentv_judge: AgentvJudge) -> None:
    fields = (field("invoice_number"), field("amount"))
    both = grade(agentv_judge, {"invoice_number": "INV-001", "amount": 1500.0}, *fields)
    assert (both.score, both.hits, both.reasoning) == (
        1.0,
        ("invoice_number", "amount"),
        "2/2 fields matched",
    )
    typed = grade(agentv_judge, {"invoice_number": "INV-001", "amount": "1500"}, *fields)
    assert typed.misses == ("amount (type mismatch: got string, expected number)",)
    other = grade(agentv_judge, {"invoice_number": "INV-002", "amount": 1500}, *fields)
    assert (other.score, other.misses) == (0.5, ("invoice_number (value mismatch)",))


def test_missing_fields_follow_agentv_rules(agentv_judge: AgentvJudge) -> None:
    required = grade(
        agentv_judge, {"invoice_number": "INV-001"}, field("invoice_number"), field("amount")
    )
    assert (required.score, required.verdict) == (0.5, "fail")
    assert required.misses == ("amount (required, missing)",)
    optional = grade(
        agentv_judge,
        {"invoice_number": "INV-001"},
        field("invoice_number"),
        field("amount", required=False, weight=5),
    )
    assert (optional.score, optional.hits[1]) == (1.0, "amount: optional field missing")
    unexpected = grade(
        agentv_judge, {"invoice_number": "X"}, field("po_number"), field("invoice_number")
    )
    assert unexpected.hits == ("po_number: no expected value",)
    assert unexpected.score == 0.5


def test_numeric_tolerance_absolute_and_relative(agentv_judge: AgentvJudge) -> None:
    def amount(value: Any, **tolerance: Any) -> EvaluationScore:
        return grade(
            agentv_judge, {"amount": value}, field("amount", "numeric_tolerance", **tolerance)
        )

    assert amount(1500.5, tolerance=1).hits == ("amount (within tolerance: diff=0.50)",)
    assert amount(1501, tolerance=1).score == 1.0  # at the tolerance passes
    assert amount(1502, tolerance=1).misses == (
        "amount (outside tolerance: diff=2.00, tolerance=1)",
    )
    assert amount("1500.4 USD", tolerance=1).score == 1.0
    assert amount(1530, tolerance=0.02, relative=True).score == 1.0
    assert amount(1531, tolerance=0.02, relative=True).score == 0.0
    assert amount("n/a", tolerance=1).misses == ("amount (non-numeric value)",)
    assert amount(True, tolerance=1).misses == ("amount (non-numeric value)",)
    zero = grade(
        agentv_judge,
        {"fee": 0.01},
        field("fee", "numeric_tolerance", tolerance=0.05, relative=True),
        expected={"fee": 0},
    )
    assert zero.score == 1.0  # expected 0: the difference is compared as is


@pytest.mark.parametrize(
    ("written", "formats", "score"),
    [
        ("2025-01-15", None, 1.0),
        ("2025-01-15T23:30:00-08:00", None, 1.0),
        ("15-Jan-2025", None, 1.0),
        ("January 15, 2025", None, 1.0),
        ("01/15/2025", None, 1.0),
        ("15/01/2025", None, 1.0),
        ("01/15/2025", ["DD/MM/YYYY"], 0.0),
        ("2025-01-16", None, 0.0),
        # What JavaScript's Date, which AgentV asks first, reads as well:
        ("Wed, 15 Jan 2025", None, 1.0),
        ("Wednesday, January 15, 2025", None, 1.0),
        ("2025-1-15", None, 1.0),
        ("Jan 15 2025 10:00 AM", None, 1.0),
        ("15 January, 2025", None, 1.0),
        ("2025.01.15", None, 1.0),
        ("01/15/25", None, 1.0),
        ("Jan-15-2025", None, 1.0),
        ("Wed 15 Jan 2025 10:00:00 +0100", None, 1.0),
        # ... and what it does not.
        ("January 15th, 2025", None, 0.0),
        ("15.01.2025", None, 0.0),
        # Longer than any date: not read at all (an agent's huge answer never meets the regexes).
        ("January 15, 2025" + " " * 70 + "10:00 AM", None, 0.0),
    ],
)
def test_dates_compare_year_month_day(
    agentv_judge: AgentvJudge, written: str, formats: list[str] | None, score: float
) -> None:
    settings = {"formats": formats} if formats else {}
    assert grade(agentv_judge, {"date": written}, field("date", "date", **settings)).score == score


def test_date_messages(agentv_judge: AgentvJudge) -> None:
    eu = grade(
        agentv_judge,
        {"date": "02/01/2025"},
        field("date", "date", formats=["DD/MM/YYYY"]),
        expected={"date": "2025-01-03"},
    )
    assert eu.misses == ("date (date mismatch: got 2025-01-02, expected 2025-01-03)",)
    assert grade(agentv_judge, {"date": "soon"}, field("date", "date")).misses == (
        "date (unparseable candidate date)",
    )


def test_paths_weights_and_aggregation(agentv_judge: AgentvJudge) -> None:
    answer = {"vendor": {"name": "Acme Shipping"}, "items": [{"price": 100}, {"price": 250}]}
    nested = grade(agentv_judge, answer, field("vendor.name"), field("items[0].price"))
    assert nested.score == 1.0
    weighted = grade(agentv_judge, answer, field("vendor.name", weight=2), field("items[1].price"))
    assert weighted.score == pytest.approx(2 / 3)
    assert weighted.verdict == "borderline"
    strict = grade(
        agentv_judge,
        answer,
        field("vendor.name"),
        field("items[1].price"),
        aggregation="all_or_nothing",
    )
    assert strict.score == 0.0
    zero = grade(
        agentv_judge, answer, field("vendor.name", weight=0), field("items[1].price", weight=0)
    )
    assert zero.score == 0.0
    assert zero.details is not None
    assert [f["path"] for f in zero.details["fields"]] == ["vendor.name", "items[1].price"]


def test_hits_and_misses_list_four_details_list_all(agentv_judge: AgentvJudge) -> None:
    expected = {f"f{i}": i for i in range(6)}
    score = grade(agentv_judge, {}, *(field(f"f{i}") for i in range(6)), expected=expected)
    assert len(score.misses) == 4 and score.reasoning == "0/6 fields matched"
    assert score.details is not None and len(score.details["fields"]) == 6


def test_answer_json_is_found_in_prose_or_fences(agentv_judge: AgentvJudge) -> None:
    fenced = 'Here you go:\n```json\n{"invoice_number": "INV-001"}\n```'
    assert grade(agentv_judge, fenced, field("invoice_number")).score == 1.0
    prose = 'The result is {"invoice_number": "INV-001"} as requested.'
    assert grade(agentv_judge, prose, field("invoice_number")).score == 1.0
    text = grade(agentv_judge, "This is not valid JSON", field("invoice_number"))
    assert (text.score, text.misses) == (0.0, ("Failed to parse candidate answer as JSON",))


def test_no_expected_values_is_not_graded() -> None:
    entry = {"name": "fields", "type": "field_accuracy", "fields": [field("a")]}
    with pytest.raises(pytest.fail.Exception, match="was not graded: field_accuracy evaluator"):
        assert_judged('{"a": 1}', evaluators=[entry])


def test_assert_judged_with_expected_object() -> None:
    entry = {"name": "fields", "type": "field_accuracy", "fields": [field("amount")]}
    assert (
        assert_judged('{"amount": 1500}', reference_answer=EXPECTED, evaluators=[entry]).score == 1
    )
    with pytest.raises(JudgedAssertionError, match=r"✗ amount \(value mismatch\)"):
        assert_judged('{"amount": 15}', reference_answer=EXPECTED, evaluators=[entry])


def test_eval_file_with_expected_output(project: pytest.Pytester) -> None:
    write(
        project,
        "extract.py",
        "import json, sys\n"
        'json.dump({"id": "INV-1", "total": 99.6, "due": "03/02/2025"}, sys.stdout)',
    )
    write(
        project,
        "x.eval.yaml",
        """
        execution:
          target: extractor
          evaluators:
            - name: fields
              type: field_accuracy
              fields:
                - {path: id, match: exact, weight: 2}
                - {path: total, match: numeric_tolerance, tolerance: 0.5}
                - {path: due, match: date, formats: ["MM/DD/YYYY"]}
        evalcases:
          - id: good
            input: Extract the invoice
            expected_output: {id: INV-1, total: 100, due: 2025-03-02}
          - id: json-text
            input: Extract the invoice
            expected_output: '{"id": "INV-2", "total": 100, "due": "2025-03-02"}'
        """,
    )
    targets = (project.path / ".agentv/targets.yaml").read_text()
    (project.path / ".agentv/targets.yaml").write_text(
        targets
        + "  - name: extractor\n    provider: cli\n    command_template: python extract.py\n"
    )
    result = project.runpytest()
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["*eval 'json-text' failed: score 0.50 (fail)", "*✗ id (value mismatch)"]
    )


def test_an_empty_expected_object_is_expected_data(agentv_judge: AgentvJudge) -> None:
    """``{}`` is expected data in AgentV (an object is true in JavaScript): every field then has
    no expected value, which passes, rather than the case not being graded."""
    score = grade(agentv_judge, {"amount": 5}, field("amount"), expected={})
    assert (score.score, score.hits) == (1.0, ("amount: no expected value",))


def test_hostile_json_in_an_answer(agentv_judge: AgentvJudge) -> None:
    """Nested deeper than the decoder goes is not JSON (it raised RecursionError and left the
    case not graded); braces in front of the object are skipped without trying each one."""
    deep = grade(agentv_judge, '{"a":' * 50_000, field("invoice_number"))
    assert (deep.score, deep.misses) == (0.0, ("Failed to parse candidate answer as JSON",))
    braces = "{" * 200_000 + json.dumps({"invoice_number": "INV-001"})
    assert grade(agentv_judge, braces, field("invoice_number")).score == 1.0


def test_json_that_gives_a_key_twice(agentv_judge: AgentvJudge) -> None:
    """An answer that gives a field twice says two things: it fails, naming the key, rather than
    the last value passing; expected text that does leaves the case not graded."""
    twice = grade(agentv_judge, '{"amount": 1, "amount": 1500}', field("amount"))
    assert (twice.score, twice.misses) == (
        0.0,
        (
            "Failed to parse candidate answer as JSON (it has a duplicate key 'amount'; "
            "JSON would silently keep only the last one)",
        ),
    )
    entry = {"name": "fields", "type": "field_accuracy", "fields": [field("amount")]}
    with pytest.raises(
        pytest.fail.Exception, match="fields: the expected JSON object has a duplicate key"
    ):
        assert_judged(
            '{"amount": 1500}', reference_answer='{"amount": 1, "amount": 1500}', evaluators=[entry]
        )


def test_a_huge_difference_prints_readably(agentv_judge: AgentvJudge) -> None:
    """``diff=1e+308``, as JavaScript's ``toFixed`` gives it: not 309 digits (nor a crash)."""
    huge = grade(
        agentv_judge, {"amount": 1e308}, field("amount", "numeric_tolerance", tolerance=1e300)
    )
    assert huge.misses == ("amount (outside tolerance: diff=1e+308, tolerance=1e+300)",)


HUGE = [1e27, 1.7e308, 10**400, -(10**400), "9" * 400]
MATCHES = [
    {"match": "exact"},
    {"match": "numeric_tolerance", "tolerance": 1},
    {"match": "numeric_tolerance", "tolerance": 0.01, "relative": True},
    {"match": "date"},
]


@pytest.mark.parametrize(
    "value", HUGE, ids=["1e27", "1.7e308", "400-digits", "-400-digits", "text"]
)
@pytest.mark.parametrize("match", MATCHES, ids=["exact", "absolute", "relative", "date"])
def test_a_wrong_number_fails_whatever_its_size(
    agentv_judge: AgentvJudge, value: Any, match: dict[str, Any]
) -> None:
    """A number far from the expected one was not graded (decimal InvalidOperation for 1e27,
    OverflowError for 400 digits): with --agentv-fail-on-error=no a skip, and the run green."""
    score = grade(agentv_judge, {"amount": value}, field("amount", **match))
    assert (score.score, score.verdict, score.error) == (0.0, "fail", None)


def test_numeric_tolerance_words_huge_differences_as_agentv(agentv_judge: AgentvJudge) -> None:
    def miss(value: Any, expected: float = 1500) -> str:
        spec = field("amount", "numeric_tolerance", tolerance=1)
        [text] = grade(agentv_judge, {"amount": value}, spec, expected={"amount": expected}).misses
        return text

    assert miss(1e27) == "amount (outside tolerance: diff=1e+27, tolerance=1)"
    assert miss(-1.7e308, expected=1.7e308) == (
        "amount (outside tolerance: diff=Infinity, tolerance=1)"
    )
    assert miss(10**400) == "amount (invalid numeric value)"  # JavaScript's Infinity


def test_weights_near_a_floats_limit_still_average(agentv_judge: AgentvJudge) -> None:
    """Two weights of 1e308 overflowed their sum: the mean was NaN, then a score of 0."""
    answer = {"invoice_number": "INV-001", "amount": 1}
    heavy = [field("invoice_number", weight=1e308), field("amount", weight=1e308)]
    assert grade(agentv_judge, answer, *heavy).score == 0.5


def test_a_huge_wrong_total_fails_the_case(project: pytest.Pytester) -> None:
    write(
        project,
        ".agentv/targets.yaml",
        """
        targets:
          - {name: default, provider: mock, response: '{"total": 1e27}'}
        """,
    )
    write(
        project,
        "f.eval.yaml",
        """
        evalcases:
          - id: total
            input: What is the total?
            expected_output: [{role: assistant, content: {total: 100}}]
            evaluators:
              - name: fields
                type: field_accuracy
                fields: [{path: total, match: numeric_tolerance, tolerance: 0.5}]
        """,
    )
    result = project.runpytest("--agentv-fail-on-error=no")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*✗ total (outside tolerance: diff=1e+27, tolerance=0.5)"])
