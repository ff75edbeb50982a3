"""How a result row ends its test, for eval items and ``assert_judged`` alike: passed, xfailed
with the reason, failed with its report (the score and its gates, each evaluator's rubric items
and checks, the trials, a conversation's turns, the baseline), or, not graded, an error or a
skip.

Everything here works on plain builtins (the result dicts that travel on reports), so the same
text appears however the case ran, with or without xdist. Every text that reaches the terminal
is made printable here: judges and targets wrote parts of it, and their escape sequences must
not drive the terminal."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NoReturn

import pytest

from .baseline import regressed_by
from .redaction import printable
from .results import AggregationRow, EvaluatorRow, ResultRow, TurnRow, fmt, js_fixed
from .verdicts import outcome_for, score_to_verdict


def _table(rows: Sequence[Sequence[str]], right: set[int]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [
            cell.rjust(widths[i]) if i in right else cell.ljust(widths[i])
            for i, cell in enumerate(row)
        ]
        lines.append("  " + "  ".join(cells).rstrip())
    return lines


def _gate_note(result: ResultRow | EvaluatorRow) -> str:
    """Say why a score that would pass or be borderline failed: a gate."""
    score = result["score"]
    if result["gate_failed"] and score is not None and score_to_verdict(score) != "fail":
        return " (a required criterion or check was not met)"
    return ""


def summary_line(result: ResultRow | EvaluatorRow) -> str:
    return f"score {fmt(result['score'])} ({result['verdict']}){_gate_note(result)}"


def _rubric_lines(rows: Sequence[dict[str, object]]) -> list[str]:
    lines = []
    for row in rows:
        if "raw_score" in row:
            mark = "✓" if row.get("passed") else "✗"
            grade = f"{row['raw_score']}/10"
            if row.get("min_score") is not None:
                grade += f", needs {row['min_score']}"
        else:
            mark = "✓" if row.get("satisfied") else "✗"
            grade = "required" if row.get("required") else "optional"
        weight = row.get("weight", 1)
        weight_text = f"weight {weight:g}" if isinstance(weight, (int, float)) else "weight ?"
        reasoning = str(row.get("reasoning") or "").strip()
        text = f"    {mark} [{row.get('id')}] ({grade}, {weight_text}) {row.get('outcome', '')}"
        lines.append(text.rstrip() + (f" — {reasoning}" if reasoning else ""))
    return lines


def _check_lines(entry: EvaluatorRow) -> list[str]:
    """An evaluator's checks in the order it made them (AgentV v4's ``assertions``, with their
    evidence), then what its misses add (a gate's note); hits then misses without them."""
    checks = entry.get("assertions") or []
    if not checks:
        return [f"✓ {hit}" for hit in entry["hits"]] + [f"✗ {miss}" for miss in entry["misses"]]
    lines, shown = [], set()
    for check in checks:
        evidence = check.get("evidence")
        text = f"{check['text']}: {evidence}" if evidence else check["text"]
        shown.add(text)
        lines.append(f"{'✓' if check['passed'] else '✗'} {text}")
    return lines + [f"✗ {miss}" for miss in entry["misses"] if miss not in shown]


def evaluator_details(results: Sequence[EvaluatorRow], depth: int = 0) -> list[str]:
    """Per evaluator: rubric rows (or hits and misses), errors and reasoning; a composite's
    members follow it, indented."""
    lines: list[str] = []
    pad = "    " * depth
    for entry in results:
        lines.append(f"{pad}{entry['name']} ({entry['type']}): {summary_line(entry)}")
        if entry.get("error"):
            lines.append(f"{pad}    ! {entry['error']}")
        members = entry.get("evaluator_results") or []
        details = entry.get("details") or {}
        # A composite's own lines repeat its members' when it averaged them or one failed.
        own = not members or not (
            entry.get("error") or details.get("aggregator") == "weighted_average"
        )
        rubric = details.get("rubric")
        if rubric:
            lines.extend(pad + line for line in _rubric_lines(rubric))
        elif own:
            lines.extend(f"{pad}    {line}" for line in _check_lines(entry))
        reasoning = str(entry["reasoning"] or "").strip()
        if reasoning and own:
            lines.append(f"{pad}    reasoning: {reasoning}")
        lines.extend(evaluator_details(members, depth + 1))
    return lines


def _dollars(amount: float | None) -> str:
    """A cost: ``$1e+308`` rather than 309 digits; None where costs a target reported added up
    to more than a float holds (JSON, and so a row, has no infinity)."""
    return "an unknown amount" if amount is None else f"${js_fixed(amount, 4)}"


def _stop_reason(aggregation: AggregationRow) -> str:
    stopped = aggregation["stopped"]
    threshold = aggregation.get("threshold")
    unsettled = threshold is not None and not aggregation.get("settled")
    if stopped == "settled" and threshold is not None:
        side = "above" if aggregation["ci_low"] > threshold else "below"
        return f"settled {side} {threshold:g}"
    if stopped == "max":
        return f"unsettled: the interval still holds {threshold:g} after the most trials"
    if stopped == "passed":
        return "stopped at the first passing trial"
    if stopped == "failed":
        return "stopped at the first failing trial"
    if stopped == "cost_limit":
        spent = f"stopped by cost_limit_usd after {_dollars(aggregation['cost_usd'])}"
        return f"{spent}, unsettled" if unsettled else spent
    return f"spent {_dollars(aggregation['cost_usd'])}"


def trials_summary(aggregation: AggregationRow) -> str:
    """One line: strategy, trials run of planned, passes, the pass-rate interval, why it ended."""
    planned = aggregation["planned"]
    most = f"at most {planned}" if aggregation["strategy"] == "adaptive" else str(planned)
    interval = (
        f"{aggregation['confidence']:.0%} {aggregation['interval']} interval "
        f"[{fmt(aggregation['ci_low'])}, {fmt(aggregation['ci_high'])}]"
    )
    scores = ""
    if "score_ci_low" in aggregation:
        scores = (
            f"; mean score {fmt(aggregation.get('mean'))}, 95% t-interval "
            f"[{fmt(aggregation['score_ci_low'])}, {fmt(aggregation.get('score_ci_high'))}]"
        )
    elif "mean" in aggregation:
        scores = f"; mean score {fmt(aggregation['mean'])}"
    return (
        f"trials: {aggregation['strategy']}, {aggregation['trials']} of {most} run, "
        f"{aggregation['passed']} passed; pass rate {fmt(aggregation['pass_rate'])}, {interval}"
        f"{scores}; {_stop_reason(aggregation)}"
    )


def trials_lines(result: ResultRow) -> list[str]:
    """The trial table of a case that ran several times (nothing for a single run)."""
    trials = result["trials"]
    if not trials:
        return []
    aggregation = result["aggregation"]
    lines = [trials_summary(aggregation)] if aggregation else []
    rows = [("attempt", "score", "verdict", "cost")]
    rows += [
        (
            str(trial["attempt"]),
            fmt(trial["score"]),
            trial["verdict"] + (" (gate)" if trial["gate_failed"] else ""),
            _dollars(trial["cost_usd"]),
        )
        for trial in trials
    ]
    return [*lines, *_table(rows, right={0, 1, 3})]


def _brief(text: str | None, width: int = 32) -> str:
    """A message in brief, on one line: a table cell."""
    if text is None:
        return "-"
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


def _turn_failure(turn: TurnRow) -> str:
    """What made a turn fall short: its first failed check, else why it was not sent."""
    failed = [check["text"] for check in turn["assertions"] if not check["passed"]]
    return failed[0] if failed else turn.get("error", "")


def turns_lines(result: ResultRow) -> list[str]:
    """A conversation's turns: what the user said and the target replied (in brief), each
    turn's score, verdict and the check that failed; then the first turn that did not pass."""
    turns = result.get("turns") or []
    if not turns:
        return []
    rows = [("turn", "user", "reply", "score", "verdict", "failed")]
    rows += [
        (
            str(turn["turn"]),
            _brief(turn["input"]),
            _brief(turn["answer"]),
            fmt(turn["score"]),
            (turn["verdict"] or "-") + (" (gate)" if turn["gate_failed"] else ""),
            _brief(_turn_failure(turn), 64),
        )
        for turn in turns
    ]
    failing = [t["turn"] for t in turns if t["verdict"] not in (None, "pass") or "error" in t]
    first = f"first failing turn: {failing[0]}" if failing else "every turn passed"
    whole = [e for e in result["evaluator_results"] if e["name"] == "conversation"]
    if whole and whole[0]["verdict"] != "pass":
        first += "; the conversation's own assertions did not"
    return [f"conversation of {len(turns)} turns; {first}", *_table(rows, right={0, 3})]


def _table_rows(
    results: Sequence[EvaluatorRow], depth: int = 0
) -> list[tuple[str, str, str, str, str]]:
    rows: list[tuple[str, str, str, str, str]] = []
    for e in results:
        name = "  " * depth + e["name"]
        rows.append((name, e["type"], f"{e['weight']:g}", fmt(e["score"]), e["verdict"]))
        rows += _table_rows(e.get("evaluator_results") or [], depth + 1)
    return rows


def report_text(result: ResultRow, headline: str) -> str:
    """The failure report: headline, the trial table (if the case ran several times), the
    evaluator table (composite members indented under their composite), then each evaluator's
    details."""
    lines = [headline]
    if result["target"]:
        lines.append(f"target: {result['target']}")
    if "baseline_score" in result:
        lines.append(f"baseline: {baseline_text(result)}")
    for extra in (trials_lines(result), turns_lines(result)):
        if extra:
            lines += ["", *extra]
    aggregation = result["aggregation"]
    evaluators = result["evaluator_results"]
    if evaluators:
        rows = [("evaluator", "type", "weight", "score", "verdict"), *_table_rows(evaluators)]
        lines.append("")
        if aggregation is not None:
            lines.append(f"evaluators of attempt {aggregation['shown_attempt']}:")
        lines += [*_table(rows, right={2, 3}), ""]
        lines += evaluator_details(evaluators)
    else:
        lines.extend(f"  ✓ {hit}" for hit in result["hits"])
        lines.extend(f"  ✗ {miss}" for miss in result["misses"])
        if result["reasoning"]:
            lines.append(f"reasoning: {result['reasoning']}")
    return "\n".join(lines)


def baseline_text(result: ResultRow) -> str:
    """The case's score in the baseline, and the change (``--agentv-baseline``)."""
    baseline, delta = result.get("baseline_score"), result.get("delta")
    if baseline is None:
        return "no graded score for this case"
    change = f", delta {delta:+.2f}" if delta is not None else ""
    return f"score {fmt(baseline)}{change}"


def borderline_reason(result: ResultRow) -> str:
    aggregation = result["aggregation"]
    if aggregation is not None and aggregation["strategy"] == "adaptive":
        return f"borderline: {trials_summary(aggregation)}"
    misses = "; ".join(result["misses"][:4])
    reason = f"borderline: score {fmt(result['score'])}"
    if aggregation is not None:
        reason += f" over {aggregation['trials']} trials ({aggregation['strategy']})"
    return f"{reason}; misses: {misses}" if misses else reason


def settle_ungraded(
    row: ResultRow,
    *,
    subject: str,
    where: str,
    require_judge: bool,
    fail_on_error: bool,
    skip: Callable[[str], NoReturn],
) -> None:
    """End the test of a result that was not graded; return for a graded one.

    Skipped for want of a judge: a skip, or an error under ``--agentv-require-judge``. Not
    graded (target or judge unavailable): an error, or a skip with ``--agentv-fail-on-error=no``.
    The same words for eval cases and ``assert_judged``; ``row`` is already redacted.
    """
    error = printable(str(row["error"]))
    if row["status"] == "skipped":
        if require_judge:
            pytest.fail(
                f"{where}{subject} needs a judge: {error} (--agentv-require-judge is set)",
                pytrace=False,
            )
        skip(f"{subject} skipped: {error}")
    if row["status"] == "error":
        message = f"{subject} was not graded: {error}"
        if fail_on_error:
            pytest.fail(f"{where}{message}", pytrace=False)
        skip(message)


def apply_verdict(
    row: ResultRow,
    *,
    borderline: str,
    headline: str,
    failure: Callable[[str], BaseException],
    max_regression: float | None = None,
) -> None:
    """Turn a graded row's verdict into its pytest outcome: return on pass, ``pytest.xfail`` on
    borderline (per ``--agentv-borderline``), raise ``failure(report)`` on fail — and on a pass
    or borderline whose score dropped from its baseline by more than ``max_regression``."""
    __tracebackhide__ = True
    outcome = outcome_for(str(row["verdict"]), borderline)
    dropped = regressed_by(row, max_regression)
    if dropped is not None and outcome != "failed":
        why = (
            f"{summary_line(row)}, down {dropped:.2f} from the baseline's "
            f"{fmt(row.get('baseline_score'))}: more than --agentv-max-regression "
            f"{max_regression:g}"
        )
        raise failure(printable(report_text(row, f"{headline}: {why}")))
    if outcome == "xfailed":
        # Last statement of its branch: with --runxfail, pytest.xfail does nothing.
        pytest.xfail(printable(borderline_reason(row)))
    elif outcome == "failed":
        raise failure(printable(report_text(row, f"{headline}: {summary_line(row)}")))
