"""``--agentv-estimate``: the model calls, tokens and cost the selected cases would need,
counted per eval file without calling any model, then printed instead of running them.

A case's calls are its target's (a model target's, known from the store when its reply is
there) and its evaluators' (each LLM judge, a composite's members and aggregator) over all its
trials (a conversation's: each turn's); what an answer would be when it cannot be known (a CLI
agent's, a fixture's) stands in as one reply allowance of text. Python tests calling
``assert_judged`` are not counted: their calls are known only when they run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import pytest

from .answers import TargetResponse
from .cases import ConversationPlan, PreparedCase
from .collect import EvalItem
from .conversation.turns import Step, joined, walk
from .errors import AgentvError, JudgeNotConfiguredError
from .evaluators.base import plan_entries
from .grading import Judgement
from .llm.usage import REPLY_TOKENS, PlannedCall, Usage
from .plan import CasePlan
from .redaction import shown
from .results import usd
from .runner import AgentvRun
from .targets import Target, planned_answer

#: A case's plan, and whether an ``agentv_target`` fixture answers it.
EstimateWork = tuple[CasePlan, bool]


def estimate_lines(run: AgentvRun, items: Sequence[pytest.Item]) -> list[str]:
    """The estimate of the selected items as the terminal shows it."""
    work = [
        (item.plan, "agentv_target" in item.fixturenames and item.run.settings.answers is None)
        for item in items
        if isinstance(item, EvalItem)
    ]
    by_file, notes = run.scheduler.run(estimate(run, work))
    others = len(items) - len(work)
    if others:
        notes = [
            *notes,
            f"{others} other test(s) not counted: their assert_judged calls are known only when "
            "they run",
        ]
    return table(by_file, notes, run.settings.budget_usd)


async def estimate(
    run: AgentvRun, work: Sequence[EstimateWork]
) -> tuple[dict[str, Usage], list[str]]:
    """What running these cases would ask of models, per eval file, and notes on what the
    counts include."""
    by_file: dict[str, Usage] = {}
    skipped = failing = early = 0
    first_failure = ""
    judged_any = False
    for plan, fixture in work:
        spec = plan.spec
        usage = by_file.setdefault(spec.loaded.display, Usage())
        try:
            calls, judged = await _planned_calls(run, plan, fixture)
        except JudgeNotConfiguredError:
            skipped += 1
            continue
        except AgentvError as exc:
            failing += 1
            first_failure = first_failure or shown(spec.located(str(exc)))
            continue
        usage.plan(calls)
        judged_any = judged_any or judged
        policy = run.trial_policy(spec)
        early += policy is not None and (
            policy.strategy in ("pass_at_k", "pass_all", "adaptive")
            or policy.cost_limit_usd is not None
        )
    notes: list[str] = []
    if early:
        notes.append(
            f"{early} case(s) with trials that may stop early (pass_at_k, pass_all, "
            "adaptive, or at cost_limit_usd) are counted at their most trials"
        )
    if skipped:
        notes.append(f"{skipped} case(s) need a judge that is not configured: they would skip")
    if failing:
        notes.append(
            f"{failing} case(s) could not be prepared: they would not be graded (the first: "
            f"{first_failure})"
        )
    if judged_any and run.calibration is not None:
        try:
            canaries = await run.calibration.planned_calls()
        except AgentvError as exc:
            notes.append(shown(f"calibration: {exc}"))
        else:
            by_file.setdefault(run.calibration.display, Usage()).plan(canaries)
    return by_file, notes


async def _planned_calls(
    run: AgentvRun, plan: CasePlan, fixture: bool
) -> tuple[list[PlannedCall], bool]:
    """A case's model calls over all its trials: its target's, then its evaluators'; and
    whether the session's judge grades it."""
    spec, evaluators = plan.spec, plan.evaluators
    judgement, prepared, target = run.start(plan, answered=not fixture)
    judged = judgement.gate is not None
    policy = run.trial_policy(spec)
    calls: list[PlannedCall] = []
    for attempt in range(policy.count if policy is not None else 1):
        case = replace(prepared, attempt=attempt)
        if spec.conversation is not None:
            calls += await _conversation_calls(judgement, spec.conversation, case, target)
            continue
        response, asked = planned_answer(target, case)
        calls += asked
        calls += await plan_entries(
            judgement.context(response, attempt), spec.evaluators, evaluators
        )
    return calls, judged


async def _conversation_calls(
    judgement: Judgement, plan: ConversationPlan, case: PreparedCase, target: Target | None
) -> list[PlannedCall]:
    """A conversation's calls: each turn's target call (with the history so far) and its
    graders', then the transcript's graders'; every turn counted, as if none stopped it."""
    calls: list[PlannedCall] = []

    async def take(step: Step) -> TargetResponse:
        response, asked = planned_answer(target, step.asked)
        calls.extend(asked)
        context = replace(judgement.context(response, case.attempt), eval_case=step.view())
        calls.extend(await plan_entries(context, step.entries, judgement.evaluators))
        return response

    replies, transcript = await walk(case, plan, case.attempt, take)
    if plan.transcript:
        answer = replace(joined(replies), text=transcript.question)
        context = replace(judgement.context(answer, case.attempt), eval_case=transcript)
        calls += await plan_entries(context, plan.transcript, judgement.evaluators)
    return calls


def table(
    by_file: Mapping[str, Usage], notes: Sequence[str], budget_usd: float | None
) -> list[str]:
    """One row per file that would ask a model, the total, then notes."""
    total = Usage()
    for usage in by_file.values():
        total.merge(usage)
    asking = {name: u for name, u in by_file.items() if u.calls or u.reused}
    header = ("", "calls", "from store", "prompt tokens", "reply tokens", "cost")
    rows = [header]
    for name, usage in [*asking.items(), ("total", total)]:
        rows.append(
            (
                name,
                str(usage.calls),
                str(usage.reused),
                f"{usage.prompt_tokens:,}",
                f"{usage.completion_tokens:,}",
                usage.cost,
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = [
        "  ".join(
            cell.ljust(widths[i]) if i in (0, 5) else cell.rjust(widths[i])
            for i, cell in enumerate(row)
        ).rstrip()
        for row in rows
    ]
    quiet = len(by_file) - len(asking)
    if quiet:
        lines.append(f"{quiet} more eval file(s) ask no model (code judges and checks only)")
    lines.append(
        f"no model was called; replies are counted as {REPLY_TOKENS} tokens each (or the call's "
        "max_tokens),"
    )
    lines.append("prompts as about 4 characters a token; replies already in the store are free")
    if budget_usd is not None and not total.unpriced_calls:
        fits = "within" if total.cost_usd < budget_usd else "over"
        lines.append(f"budget: {usd(budget_usd)} (--agentv-budget-usd): the estimate is {fits} it")
    lines.extend(notes)
    return lines
