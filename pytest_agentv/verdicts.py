"""Score → verdict → pytest outcome: the one verdict function, a case's own pass bar, and the
outcome each verdict has under ``--agentv-borderline`` (``outcomes.py`` ends a test with it)."""

from __future__ import annotations

from typing import Literal

from .results import ResultRow, Verdict

Outcome = Literal["passed", "xfailed", "failed"]

PASS_THRESHOLD = 0.8
BORDERLINE_THRESHOLD = 0.6


def score_to_verdict(
    score: float, *, gate_failed: bool = False, pass_at: float = PASS_THRESHOLD
) -> Verdict:
    """The one verdict function: ≥ 0.8 (or ``pass_at``, a case's threshold) pass, ≥ 0.6
    borderline, else fail; a failed gate fails."""
    if gate_failed:
        return "fail"
    if score >= pass_at:
        return "pass"
    if score >= BORDERLINE_THRESHOLD:
        return "borderline"
    return "fail"


def apply_threshold(row: ResultRow, threshold: float | None) -> None:
    """A graded row's verdict at its case's pass bar (AgentV v4's ``threshold``), if it has one."""
    score = row["score"]
    if threshold is not None and score is not None and row["status"] == "graded":
        row["verdict"] = score_to_verdict(score, gate_failed=row["gate_failed"], pass_at=threshold)


def outcome_for(verdict: str, borderline: str) -> Outcome:
    if verdict == "pass":
        return "passed"
    if verdict == "borderline":
        return {"xfail": "xfailed", "pass": "passed"}.get(borderline, "failed")  # type: ignore[return-value]
    return "failed"
