"""Verdicts as pytest outcomes, failure reports, JUnit properties, results files and hooks."""

from __future__ import annotations

import json
import shlex
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from lxml import etree

from pytest_agentv.verdicts import outcome_for, score_to_verdict
from tests.helpers import outcomes, rows_in, write

SCORE_JUDGE = """\
import json, sys
config = json.load(sys.stdin)["config"]
print(json.dumps({"score": config["score"], "hits": config.get("hits", []),
                  "misses": config.get("misses", []), "reasoning": config.get("why")}))
"""


def scored(case_id: str, score: float, **extra: object) -> str:
    """A case whose code judge ``fixed`` answers what ``SCORE_JUDGE`` would for its config:
    written out in a shell command (a process of ~2 ms, a Python one's ~20)."""
    config = {"score": score, **extra}
    hits, misses, why = extra.get("hits", []), extra.get("misses", []), extra.get("why")
    said = {"score": score, "hits": hits, "misses": misses, "reasoning": why}
    script = ["sh", "-c", f"cat > /dev/null; echo {shlex.quote(json.dumps(said))}"]
    evaluator = f"name: fixed, type: code_judge, script: {json.dumps(script)}"
    return f"""
  - id: {case_id}
    input: q
    evaluators:
      - {{{evaluator}, config: {json.dumps(config)}}}
"""


@pytest.fixture
def scores(project: pytest.Pytester) -> pytest.Pytester:
    write(project, "score.py", SCORE_JUDGE)
    return project


@pytest.mark.parametrize(
    ("score", "verdict"),
    [
        (1.0, "pass"),
        (0.8, "pass"),
        (0.7999, "borderline"),
        (0.6, "borderline"),
        (0.5999, "fail"),
        (0.0, "fail"),
    ],
)
def test_verdict_thresholds(score: float, verdict: str) -> None:
    assert score_to_verdict(score) == verdict
    assert score_to_verdict(score, gate_failed=True) == "fail"


def test_outcome_mapping() -> None:
    assert [outcome_for(v, "xfail") for v in ("pass", "borderline", "fail")] == [
        "passed",
        "xfailed",
        "failed",
    ]
    assert outcome_for("borderline", "fail") == "failed"
    assert outcome_for("borderline", "pass") == "passed"


def test_verdicts_become_outcomes(scores: pytest.Pytester) -> None:
    write(
        scores,
        "v.eval.yaml",
        "evalcases:"
        + scored("good", 0.8)
        + scored("meh", 0.7, misses=["too long"])
        + scored("bad", 0.59, hits=["polite"], misses=["wrong window"], why="It says 14 days."),
    )
    result = scores.runpytest("-rx")
    result.assert_outcomes(passed=1, xfailed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*XFAIL v.eval.yaml::meh - borderline: score 0.70; misses: too long",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*_ eval: bad _*",
            "v.eval.yaml:12: eval 'bad' failed: score 0.59 (fail)",
            "target: default",
            "",
            "  evaluator  type        weight  score  verdict",
            "  fixed      code_judge       1   0.59  fail",
            "",
            "fixed (code_judge): score 0.59 (fail)",
            "    ✓ polite",
            "    ✗ wrong window",
            "    reasoning: It says 14 days.",
        ]
    )
    assert "Traceback" not in result.stdout.str()
    assert "def " not in result.stdout.str()


@pytest.mark.parametrize(
    ("args", "env", "ini", "outcome"),
    [
        (["--agentv-borderline=fail"], None, None, {"failed": 1}),
        ([], "pass", None, {"passed": 1}),
        ([], None, "fail", {"failed": 1}),
        (["--agentv-borderline", "xfail"], "fail", "fail", {"xfailed": 1}),
        ([], "fail", "pass", {"passed": 1}),
    ],
    ids=["cli", "env", "ini", "cli-wins", "ini-beats-env"],
)
def test_borderline_option_sources(
    scores: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    env: str | None,
    ini: str | None,
    outcome: dict[str, int],
) -> None:
    if env:
        monkeypatch.setenv("AGENTV_BORDERLINE", env)
    if ini:
        scores.makeini(
            f"[pytest]\nasyncio_default_fixture_loop_scope = function\nagentv_borderline = {ini}\n"
        )
    write(scores, "v.eval.yaml", "evalcases:" + scored("meh", 0.7))
    scores.runpytest(*args).assert_outcomes(**outcome)


def test_bad_option_values_are_usage_errors(scores: pytest.Pytester) -> None:
    result = scores.runpytest("--agentv-borderline=maybe")
    result.stderr.fnmatch_lines(
        ["ERROR: --agentv-borderline=maybe is invalid; choose one of: xfail, fail, pass"]
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result = scores.runpytest("--agentv-concurrency=0")
    result.stderr.fnmatch_lines(["ERROR: --agentv-concurrency=0 is invalid*an integer >= 1"])
    result = scores.runpytest("--agentv-require-judge", "v.eval.yaml")
    result.stderr.fnmatch_lines(
        [
            "ERROR: --agentv-require-judge=v.eval.yaml is invalid; use yes or no (write "
            "--agentv-require-judge=yes, or put test paths before --agentv-require-judge)"
        ]
    )


def test_not_graded_is_an_error_not_a_failure(scores: pytest.Pytester) -> None:
    write(
        scores,
        "e.eval.yaml",
        "evalcases:"
        + scored("fine", 1.0)
        + scored("broken", 1.0).replace("input: q", "input: q\n    execution: {target: nowhere}"),
    )
    result = scores.runpytest()
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*1 not graded*", "*not graded: e.eval.yaml::broken: target*"])
    result = scores.runpytest("--agentv-fail-on-error=no", "-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED [[]1] e.eval.yaml:*: eval 'broken' was not graded: *"])


def test_a_case_not_graded_or_skipped_has_no_score(scores: pytest.Pytester) -> None:
    """No ``agentv.score=0.0000`` and ``agentv.verdict=None`` for a skip or an error: neither
    has a score (nor has an evaluator that could not grade); status and error are kept."""
    write(scores, "twice.py", """print('{"score": 1, "score": 0}')\n""")
    write(
        scores,
        "n.eval.yaml",
        "evalcases:"
        + scored("broken", 1.0).replace("input: q", "input: q\n    execution: {target: nowhere}")
        + "\n  - {id: needs-judge, input: q, expected_outcome: x}\n"
        + scored("half", 1.0)
        + "      - {name: twice, type: code_judge, script: [python, twice.py]}\n",
    )
    scores.runpytest("--junitxml=junit.xml", "--agentv-results=out.jsonl")
    props = {
        case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
        for case in ET.parse(scores.path / "junit.xml").getroot().iter("testcase")
    }
    for name, status in [("broken", "error"), ("needs-judge", "skipped"), ("half", "error")]:
        assert props[name]["agentv.status"] == status
        assert props[name]["agentv.error"]
        assert "agentv.score" not in props[name] and "agentv.verdict" not in props[name]
    assert props["half"]["agentv.evaluator.fixed.score"] == "1.0000"
    assert not any(name.startswith("agentv.evaluator.twice") for name in props["half"])
    rows = {
        row["eval_id"]: row
        for row in map(json.loads, (scores.path / "out.jsonl").read_text().splitlines())
    }
    for name in ("broken", "needs-judge", "half"):
        assert (rows[name]["score"], rows[name]["verdict"]) == (None, None)
        assert rows[name]["status"] != "graded" and rows[name]["error"]


def test_junit_properties(scores: pytest.Pytester) -> None:
    write(
        scores,
        "j.eval.yaml",
        "evalcases:" + scored("good", 0.9, hits=["on topic"]) + scored("bad", 0.2, misses=["off"]),
    )
    result = scores.runpytest("--junitxml=junit.xml")
    assert "warning" not in result.stdout.str().lower()
    root = ET.parse(scores.path / "junit.xml").getroot()
    cases = {case.get("name"): case for case in root.iter("testcase")}
    assert set(cases) == {"good", "bad"}
    props = {
        name: {p.get("name"): p.get("value") for p in case.iter("property")}
        for name, case in cases.items()
    }
    assert props["good"]["agentv.score"] == "0.9000"
    assert props["good"]["agentv.verdict"] == "pass"
    assert props["good"]["agentv.evaluator.fixed.score"] == "0.9000"
    assert json.loads(props["good"]["agentv.hits"]) == ["on topic"]
    assert props["bad"]["agentv.verdict"] == "fail"
    assert json.loads(props["bad"]["agentv.misses"]) == ["off"]
    assert cases["bad"].find("failure") is not None


def test_junit_keys_of_dotted_evaluator_names_never_collide(scores: pytest.Pytester) -> None:
    """A composite ``a`` with member ``b.c`` and a composite ``a.b`` with member ``c`` both
    wrote ``agentv.evaluator.a.b.c.score``: a name holding a dot is quoted, others are not."""

    def fixed(name: str, score: float) -> str:
        config = json.dumps({"score": score})
        return f"{{name: '{name}', type: code_judge, script: [python, score.py], config: {config}}}"

    average = "aggregator: {type: weighted_average}"
    write(
        scores,
        "d.eval.yaml",
        f"""
        evalcases:
          - id: dotted
            input: q
            evaluators:
              - {{name: a, type: composite, evaluators: [{fixed("b.c", 0.2)}], {average}}}
              - {{name: a.b, type: composite, evaluators: [{fixed("c", 0.9)}], {average}}}
              - {fixed('"q', 0.7)}
        """,
    )
    scores.runpytest("--junitxml=junit.xml")
    pairs = [
        (p.get("name"), p.get("value"))
        for p in ET.parse(scores.path / "junit.xml").iter("property")
    ]
    names = [name for name, _ in pairs]
    assert len(names) == len(set(names)), names
    props = dict(pairs)
    assert props["agentv.evaluator.a.score"] == "0.2000"
    assert props['agentv.evaluator.a."b.c".score'] == "0.2000"
    assert props['agentv.evaluator."a.b".score'] == "0.9000"
    assert props['agentv.evaluator."a.b".c.score'] == "0.9000"
    assert props['agentv.evaluator."\\"q".score'] == "0.7000"


XUNIT2_SCHEMA = Path(__file__).with_name("junit-xunit2.xsd")


def test_junit_xml_matches_the_xunit2_schema(scores: pytest.Pytester) -> None:
    write(
        scores,
        "j.eval.yaml",
        "evalcases:"
        + scored("good", 0.9, hits=["on topic"])
        + scored("meh", 0.7)
        + scored("bad", 0.2, misses=["off topic"])
        + scored("broken", 1.0).replace("input: q", "input: q\n    execution: {target: nowhere}"),
    )
    # xunit2 is pytest's default junit_family; junit_logging adds system-out and system-err.
    reprec = scores.inline_run("--junitxml=junit.xml", "-o", "junit_logging=all")
    assert outcomes(reprec) == {
        "j.eval.yaml::good": "passed",
        "j.eval.yaml::meh": "xfailed",
        "j.eval.yaml::bad": "failed",
        "j.eval.yaml::broken": "error",
    }
    schema = etree.XMLSchema(etree.parse(XUNIT2_SCHEMA))
    document = etree.parse(scores.path / "junit.xml")
    assert schema.validate(document), schema.error_log
    cases = {case.get("name"): case for case in document.iter("testcase")}
    assert list(cases) == ["good", "meh", "bad", "broken"]
    props = {
        name: {p.get("name"): p.get("value") for p in case.findall("properties/property")}
        for name, case in cases.items()
    }
    for name, verdict, score in [
        ("good", "pass", "0.9000"),
        ("meh", "borderline", "0.7000"),
        ("bad", "fail", "0.2000"),
    ]:
        assert props[name]["agentv.status"] == "graded"
        assert props[name]["agentv.verdict"] == verdict
        assert props[name]["agentv.score"] == score
        assert props[name]["agentv.evaluator.fixed.verdict"] == verdict
    assert json.loads(props["good"]["agentv.hits"]) == ["on topic"]
    assert json.loads(props["bad"]["agentv.misses"]) == ["off topic"]
    assert props["broken"]["agentv.status"] == "error"
    assert props["broken"]["agentv.error"].startswith("target 'nowhere' is not defined")
    assert [child.tag for child in cases["meh"] if child.tag in OUTCOME_TAGS] == ["skipped"]
    assert [child.tag for child in cases["bad"] if child.tag in OUTCOME_TAGS] == ["failure"]
    assert [child.tag for child in cases["broken"] if child.tag in OUTCOME_TAGS] == ["error"]
    # The schema does reject what xunit2 leaves out (xunit1's file and line attributes).
    cases["good"].set("file", "j.eval.yaml")
    assert not schema.validate(document)


OUTCOME_TAGS = {"skipped", "failure", "error"}


RESULTS_CASES = (
    """dataset: support
evalcases:
  - id: one
    input: q
    conversation_id: c1
    evaluators:
      - {name: fixed, type: code_judge, script: [python, score.py], config: {score: 1.0}}
"""
    + scored("two", 0.3)
    + scored("three", 1.0).replace("input: q", "input: q\n    execution: {target: nowhere}")
    + """
  - id: several
    input: q
    evaluators:
      - {name: a, type: code_judge, script: [python, score.py], config: {score: 1}}
      - {name: b, type: code_judge, script: [python, score.py], config: {score: 0}}
"""
)


def test_results_file(scores: pytest.Pytester) -> None:
    """Under pytest-xdist too: tests/test_collection.py::test_runs_under_xdist."""
    write(scores, "r.eval.yaml", RESULTS_CASES)
    scores.runpytest("--agentv-results=out/results.jsonl")
    assert_results_rows(rows_in(scores.path / "out/results.jsonl"))


def assert_results_rows(found: list[dict[str, Any]]) -> None:
    """The rows ``RESULTS_CASES`` wrote: AgentV's fields, evaluator results, errors."""
    rows = {row["eval_id"]: row for row in found}
    assert set(rows) == {"one", "two", "three", "several"}
    one = rows["one"]
    for field in (
        "timestamp",
        "eval_id",
        "dataset",
        "conversation_id",
        "score",
        "verdict",
        "hits",
        "misses",
        "candidate_answer",
        "target",
        "reasoning",
        "error",
        "trace_summary",
    ):
        assert field in one
    assert (one["dataset"], one["conversation_id"], one["verdict"]) == ("support", "c1", "pass")
    # Listed evaluators are written under evaluator_results, one or several (as AgentV does).
    [fixed] = one["evaluator_results"]
    assert fixed["evaluator_provider_request"] == {"script": ["python", "score.py"], "cwd": "."}
    assert "evaluator_provider_request" not in one and "grader_raw_request" not in one
    assert rows["two"]["verdict"] == "fail"
    assert rows["three"]["error"].startswith("target 'nowhere' is not defined")
    assert (rows["three"]["score"], rows["three"]["verdict"]) == (None, None)
    several = rows["several"]
    assert [e["name"] for e in several["evaluator_results"]] == ["a", "b"]
    assert set(several["evaluator_results"][0]) >= {
        "name",
        "type",
        "score",
        "weight",
        "verdict",
        "hits",
        "misses",
        "reasoning",
        "evaluator_provider_request",
    }


CUSTOM_KIND = """
import pytest
from pytest_agentv import EvaluationScore

class Length:
    kind = "length"
    def evaluate(self, context):
        limit = context.evaluator.options["max"]
        ok = len(context.candidate) <= limit
        return EvaluationScore.graded(1.0 if ok else 0.0, misses=() if ok else ("too long",))

class Shouting:
    kind = "shouting"
    async def evaluate(self, context):
        return EvaluationScore.graded(float(context.candidate.isupper()))

@pytest.hookimpl
def pytest_agentv_make_evaluator(config, kind):
    return {"length": Length(), "shouting": Shouting()}.get(kind)
"""


def test_custom_evaluator_kinds_through_the_hook(project: pytest.Pytester) -> None:
    write(project, "custom/conftest.py", CUSTOM_KIND)
    write(
        project,
        "custom/c.eval.yaml",
        """
        evalcases:
          - id: short
            input: q
            evaluators: [{name: len, type: length, max: 100}]
          - id: loud
            input: q
            evaluators: [{name: loud, type: shouting}]
        """,
    )
    write(
        project,
        "elsewhere/e.eval.yaml",
        """
        evalcases:
          - id: unknown-here
            input: q
            evaluators: [{name: len, type: length}]
        """,
    )
    result = project.runpytest("--continue-on-collection-errors")
    result.assert_outcomes(passed=1, failed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*elsewhere/e.eval.yaml:5:*: evalcases.0.evaluators.0.type: "
            "unknown evaluator type 'length'*"
        ]
    )
