"""--agentv-budget-usd against the loopback judge, the shared ledger, and --agentv-estimate
against the calls a real run makes."""

from __future__ import annotations

import re
import tempfile
import textwrap
from pathlib import Path

import pytest

from pytest_agentv.llm.budget import Ledger
from pytest_agentv.llm.prices import Price
from pytest_agentv.llm.usage import PlannedCall, Usage, prompt_tokens
from pytest_agentv.results import usd
from tests.fake_openai import FakeOpenAI, Request, WithUsage, checklist, freeform, ranges
from tests.helpers import judge_ini, write

MODEL = "openai/gpt-4o-mini"
#: The judge's price at the fake server's endpoint (gpt-4o-mini's list price, US dollars per
#: million tokens): a hosted model's name at another API base has no price of its own.
PRICE = Price.per_million(0.15, 0.6)


def priced_ini(server: FakeOpenAI, **extra: str) -> str:
    return judge_ini(server, model=MODEL, model_prices=f"{MODEL} 0.15 0.6", **extra)


def call_cost() -> float:
    """What one call to the fake server costs: it reports 100 prompt and 20 completion tokens."""
    return PRICE.cost(100, 20)


def cases(count: int) -> str:
    return "evalcases:\n" + "".join(
        f"  - id: case-{i:02}\n    expected_outcome: Gives the window\n    input: q{i}\n"
        for i in range(count)
    )


@pytest.mark.parametrize(("concurrency", "workers"), [(1, 0), (4, 0), (1, 2)])
def test_the_budget_stops_a_run_midway(
    project: pytest.Pytester,
    fake_llm: FakeOpenAI,
    monkeypatch: pytest.MonkeyPatch,
    concurrency: int,
    workers: int,
) -> None:
    fake_llm.responder = lambda request: freeform(0.9)
    ledgers = project.mkdir("tmp")
    monkeypatch.setattr(tempfile, "tempdir", str(ledgers))
    write(project, "s.eval.yaml", cases(12))
    # Three and a half calls' worth: the fourth call starts (3 spent < budget), then no more.
    budget = 3.5 * call_cost()
    project.makeini(priced_ini(fake_llm, concurrency=str(concurrency)))
    xdist = ["-n", str(workers)] if workers else []
    result = project.runpytest(
        *xdist, f"--agentv-budget-usd={budget!r}", "--agentv-fail-on-error=no"
    )
    made = len(fake_llm.requests)
    # Calls in flight when the budget is reached finish: at most one per slot of the run's limit,
    # which all workers share (the budget is read once a call holds its slot).
    in_flight = concurrency - 1
    assert 4 <= made <= 4 + in_flight
    assert list(ledgers.iterdir()) == []  # the run's ledger is gone with it
    outcomes = result.parseoutcomes()
    assert outcomes["passed"] == made
    assert outcomes["skipped"] == 12 - made
    # Ungraded cases were skips (--agentv-fail-on-error=no), yet the run fails.
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*the run's budget is spent: $0.0001* of $0.000* (--agentv-budget-usd); "
            "no more model calls are started",
            f"agentv budget: $0.0001* spent of {usd(budget)} (--agentv-budget-usd); "
            f"{12 - made} model calls were not started: the run fails",
        ]
    )


def test_usage_that_is_not_token_counts_stops_the_budget(
    project: pytest.Pytester, fake_llm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server reporting prompt_tokens -10000000 made every call "free": 10 calls ran under a
    budget of $0.02, and the summary said $-14.9999 spent."""
    usage = {"prompt_tokens": -10_000_000, "completion_tokens": 20}
    fake_llm.responder = lambda request: WithUsage(freeform(0.9), usage)
    monkeypatch.setattr(tempfile, "tempdir", str(project.mkdir("tmp")))
    write(project, "s.eval.yaml", cases(10))
    project.makeini(priced_ini(fake_llm, concurrency="1"))
    result = project.runpytest("--agentv-budget-usd=0.02")
    assert len(fake_llm.requests) == 1
    result.assert_outcomes(passed=1, errors=9)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*was not graded: 1 model calls were made without a known price or token counts "
            "(their replies did not report their usage as counts of tokens), so the run's spend "
            "cannot be counted against its budget of $0.0200 (--agentv-budget-usd): no more "
            "model calls are started",
            "agentv: 1 model calls made, 0 replies reused from the store, 20 tokens, cost "
            "unknown (1 of 1 calls without a known price or token counts)",
            "agentv budget: $0.0000 spent of $0.0200 (--agentv-budget-usd), and 1 model calls "
            "without a known price or token counts; 9 model calls were not started: the run fails",
        ]
    )


def test_a_model_without_a_price_is_not_called_under_a_budget(
    judged: pytest.Pytester, fake_llm: FakeOpenAI
) -> None:
    write(judged, "s.eval.yaml", cases(2))
    result = judged.runpytest("--agentv-budget-usd=1")
    result.assert_outcomes(errors=2)
    assert fake_llm.requests == []
    result.stdout.fnmatch_lines(
        [
            "*model 'openai/fake-judge' has no known price at its endpoint, so its calls cannot "
            "be counted *; give its price with --agentv-model-prices or its target's "
            "input_cost_per_million and output_cost_per_million (0 for a local model)"
        ]
    )


def test_replayed_calls_are_free(project: pytest.Pytester, fake_llm: FakeOpenAI) -> None:
    fake_llm.responder = lambda request: freeform(0.9)
    write(project, "s.eval.yaml", cases(5))
    project.makeini(priced_ini(fake_llm).replace("agentv_cache_mode = off", ""))
    project.runpytest().assert_outcomes(passed=5)
    fake_llm.stop()
    result = project.runpytest(f"--agentv-budget-usd={call_cost() / 2!r}")
    result.assert_outcomes(passed=5)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["agentv budget: $0.0000 spent of *"])


def test_every_process_shares_one_ledger(tmp_path: Path) -> None:
    path = tmp_path / "run.ledger"
    mine, theirs = Ledger(path), Ledger(path)
    mine.add(0.25)
    theirs.add(0.5)
    theirs.refuse()
    theirs.add(None)  # a call whose cost is unknown
    assert mine.totals() == (0.75, 1, 1)
    # A line still being written is not read until it ends.
    with path.open("ab") as stream:
        stream.write(b"0.2")
    assert theirs.totals() == (0.75, 1, 1)
    with path.open("ab") as stream:
        stream.write(b"5\n")
    assert mine.totals() == (1.0, 1, 1)


def test_estimate_arithmetic() -> None:
    assert prompt_tokens([{"role": "user", "content": "x" * 10}, {"role": "system"}]) == 3 + 4 + 4
    estimate = Usage()
    estimate.plan(
        [
            PlannedCall(MODEL, 1000, stored=False, price=PRICE),
            PlannedCall(MODEL, 1000, stored=True, price=PRICE),
            PlannedCall(MODEL, 1000, stored=False, max_tokens=100, price=PRICE),
        ]
    )
    assert (estimate.calls, estimate.reused, estimate.prompt_tokens) == (2, 1, 2000)
    assert estimate.completion_tokens == 256 + 100
    assert estimate.cost_usd == pytest.approx(PRICE.cost(2000, 356))
    estimate.plan([PlannedCall("openai/not-a-priced-model", 10, stored=False)])
    assert estimate.cost == "unknown (1 calls without a known price or token counts)"


SUITE = """
evalcases:
  - id: freeform
    expected_outcome: Gives the 30-day window
    input: Can I return my shoes?
  - id: checklist
    input: How do refunds work?
    rubrics:
      - Mentions 30 days
      - {id: tone, expected_outcome: Friendly, required: false}
  - id: ranges
    input: Summarise the refund policy
    rubrics:
      - id: accuracy
        expected_outcome: Accurate summary
        score_ranges: {0: Wrong, 5: Partly right, 8: Right}
  - id: code-only
    input: Refunds?
    evaluators:
      - {name: kw, type: code_judge, script: [python, keywords.py], config: {keywords: [refund]}}
  - id: composite
    input: Refunds?
    expected_outcome: Gives the window
    evaluators:
      - name: release
        type: composite
        evaluators:
          - {name: answer, type: llm_judge}
          - {name: kw, type: code_judge, script: [python, keywords.py], keywords: [refund]}
        aggregator: {type: llm_judge}
  - id: tried
    input: Can I get my money back?
    expected_outcome: Gives the window
    execution:
      trials: {count: 2, strategy: mean}
  - id: asked-a-model
    input: What is the refund window?
    expected_outcome: Gives the window
    execution: {target: model}
"""

CALIBRATION = """
canaries:
  - id: right
    input: Can I return my shoes?
    answer: Yes, within 30 days of purchase.
    expected_outcome: Gives the 30-day window
    verdict: pass
  - id: wrong
    input: Can I return my shoes?
    answer: No, we never take returns.
    expected_outcome: Gives the 30-day window
    verdict: fail
"""


def judge(request: Request) -> str:
    """A sane judge in every contract; a model target's request (no system message) gets an
    answer."""
    if not request.system:
        return "Refunds are accepted within 30 days of purchase."
    if '"satisfied"' in request.system:
        return checklist(rubric_1=True, tone=True)
    if '"score" (an integer from 0 to 10)' in request.system:
        return ranges(accuracy=9)
    return freeform(0.1 if "never" in request.user else 0.9)


TOTAL = re.compile(r"^total\s+(\d+)\s+(\d+)\s+([\d,]+)\s+([\d,]+)\s+(\S.*)$", re.MULTILINE)


def estimated(result: pytest.RunResult) -> tuple[int, int, int]:
    """Calls made, replies from the store, and prompt tokens of the estimate's total."""
    found = TOTAL.search(result.stdout.str())
    assert found is not None, result.stdout.str()
    return int(found[1]), int(found[2]), int(found[3].replace(",", ""))


@pytest.fixture
def estimated_suite(project: pytest.Pytester, fake_llm: FakeOpenAI) -> pytest.Pytester:
    fake_llm.responder = judge
    (project.path / ".agentv" / "targets.yaml").write_text(
        (project.path / ".agentv" / "targets.yaml").read_text()
        + textwrap.indent(
            f"- name: model\n  provider: openai\n  model: gpt-4o-mini\n"
            f"  api_base: {fake_llm.api_base}\n",
            "  ",
        )
    )
    write(project, "s.eval.yaml", SUITE)
    write(project, ".agentv/calibration.yaml", CALIBRATION)
    project.makeini(priced_ini(fake_llm).replace("agentv_cache_mode = off", ""))
    return project


def test_the_estimate_matches_a_real_run(
    estimated_suite: pytest.Pytester, fake_llm: FakeOpenAI
) -> None:
    before = estimated_suite.runpytest("--agentv-estimate")
    assert before.ret == pytest.ExitCode.OK
    assert fake_llm.requests == []
    calls, stored, tokens = estimated(before)
    # freeform, checklist, ranges: 1 each; the composite's member and aggregator: 2; two
    # trials: 2; a model target and its judge: 2; two canaries: 2. The code judges: none.
    assert (calls, stored) == (11, 0)
    before.stdout.fnmatch_lines(
        [
            "*calls  from store  prompt tokens  reply tokens  cost",
            "s.eval.yaml  *  9  *  0  * $0.00*",
            ".agentv/calibration.yaml  *  2  *  0  * $0.00*",
            "total  * 11  *  0  *  2,816  $0.00*",
            "no model was called; replies are counted as 256 tokens each *",
        ]
    )

    run = estimated_suite.runpytest()
    run.assert_outcomes(passed=7)
    assert len(fake_llm.requests) == calls
    sent = sum(prompt_tokens(request.body["messages"]) for request in fake_llm.requests)
    assert abs(tokens - sent) <= 0.2 * sent, (tokens, sent)

    # Recorded: the run would now reuse every reply but the aggregator's, whose prompt holds
    # its members' results (known only once they ran).
    after = estimated_suite.runpytest("--agentv-estimate")
    assert estimated(after)[:2] == (1, 10)
    assert len(fake_llm.requests) == calls


def test_the_estimate_counts_the_selection_in_one_process(
    estimated_suite: pytest.Pytester, fake_llm: FakeOpenAI
) -> None:
    result = estimated_suite.runpytest("--agentv-estimate", "-n", "2", "-k", "freeform or tried")
    assert result.ret == pytest.ExitCode.OK
    # Two trials and a freeform judge, and the canaries before them.
    assert estimated(result)[:2] == (5, 0)
    result.stdout.fnmatch_lines(["*7 deselected*"])
    assert "bringing up nodes" not in result.stdout.str()

    only_code = estimated_suite.runpytest("--agentv-estimate", "-k", "code")
    assert only_code.ret == pytest.ExitCode.OK
    assert estimated(only_code)[:2] == (0, 0)
    assert fake_llm.requests == []


def test_the_estimate_notes_what_it_cannot_count(
    estimated_suite: pytest.Pytester, fake_llm: FakeOpenAI
) -> None:
    write(
        estimated_suite,
        "more.eval.yaml",
        """
        evalcases:
          - id: until-it-passes
            input: q
            expected_outcome: x
            execution:
              trials: {count: 3}
          - id: until-it-costs-too-much
            input: q
            expected_outcome: x
            execution:
              trials: {count: 2, strategy: mean, cost_limit_usd: 0.01}
          - id: no-such-target
            input: q
            expected_outcome: x
            execution: {target: nowhere}
        """,
    )
    result = estimated_suite.runpytest(
        "more.eval.yaml", "--agentv-estimate", "--agentv-budget-usd=0.000001"
    )
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            "more.eval.yaml  *  5  *",
            "budget: $0.000001 (--agentv-budget-usd): the estimate is over it",
            "2 case(s) with trials that may stop early (*, or at cost_limit_usd) are counted at *",
            "1 case(s) could not be prepared: they would not be graded (the first: "
            "more.eval.yaml:*: *nowhere*)",
        ]
    )

    estimated_suite.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    skipped = estimated_suite.runpytest("s.eval.yaml", "--agentv-estimate")
    assert skipped.ret == pytest.ExitCode.OK
    skipped.stdout.fnmatch_lines(["6 case(s) need a judge that is not configured: they would skip"])
    assert fake_llm.requests == []


def test_the_estimate_says_a_case_problem_where_it_is_once(project: pytest.Pytester) -> None:
    """A problem that names its place in the file (``file:line:col: field``) is not prefixed
    with the case's own ``file:line`` again."""
    write(
        project,
        "m.eval.yaml",
        """
        evalcases:
          - id: missing-file
            input: [{role: user, content: [{type: file, value: missing.txt}]}]
            evaluators: [{name: kw, type: code_judge, script: [python, keywords.py]}]
        """,
    )
    result = project.runpytest("--agentv-estimate")
    assert result.ret == pytest.ExitCode.OK
    [note] = [line for line in result.stdout.lines if "could not be prepared" in line]
    assert note.count("m.eval.yaml:") == 1, note
    assert "(the first: m.eval.yaml:4:" in note
