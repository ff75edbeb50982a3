"""``composite``: member evaluators run concurrently (composites nest), then an aggregator turns
their results into one score.

* ``weighted_average``: ``weights: {member: w}`` (a member's own ``weight`` otherwise, default 1);
  hits and misses are prefixed ``[member]``; all-zero weights score 0, as in AgentV.
* ``code_judge``: a command gets ``{"results": {member: score...}}`` on stdin (AgentV's
  camelCase fields) and prints ``{score, verdict?, hits?, misses?, reasoning?}``, parsed like a
  code judge's output; a ``verdict: fail`` fails the composite whatever its score.
* ``llm_judge``: the judge reads the members' results through a prompt that places
  ``{{EVALUATOR_RESULTS_JSON}}``, with the LLM judge's own call, retries, reply parsing and
  record/replay.

Members keep their own settings (an ``llm_judge`` member its prompt and rubrics). A member that
could not be graded makes the composite not graded, and its aggregator does not run; a member's
failed required gate fails the composite (a member weighted 0 excepted).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..llm.client import LlmClient
from ..llm.usage import PlannedCall, unknown_answer
from ..loader import EntryProblem, zero_weights
from ..results import AssertionRow, js_number
from ..schema.evaluators import AggregatorSpec, CompositeSpec, EvaluatorConfig
from ..yamlfile import Loc
from .base import (
    NEEDS_SETTINGS,
    EvaluationContext,
    EvaluationScore,
    Evaluator,
    EvaluatorResult,
    entry_settings,
    evaluate_entries,
    plan_entries,
    weighted_mean,
)
from .code_judge import script_score
from .llm_judge import LlmJudgeEvaluator
from .promptfiles import read_prompt
from .scripts import DEFAULT_SCRIPT_TIMEOUT, Scripts

RESULTS_VARIABLE = "EVALUATOR_RESULTS_JSON"
_RESULTS_PLACED = re.compile(r"\{\{\s*" + RESULTS_VARIABLE + r"\s*\}\}")
DEFAULT_AGGREGATOR_PROMPT = """\
Review the following evaluation results:
{{EVALUATOR_RESULTS_JSON}}

Decide the final score and verdict based on all evaluator results.
Return a JSON object with: score (0.0-1.0), verdict (pass/fail/borderline), and reasoning.
"""


def wire_score(score: EvaluationScore, *, for_judge: bool = False) -> dict[str, Any]:
    """A member's score as AgentV's aggregators read it (camelCase; absent values left out).

    A judge sees the grade only: requests and details (which say whether a reply was replayed)
    would make the aggregator's prompt, and so its record/replay key, differ between runs.
    """
    wire: dict[str, Any] = {
        "score": score.score,
        "verdict": score.verdict,
        "hits": list(score.hits),
        "misses": list(score.misses),
        "expectedAspectCount": score.expected_aspect_count,
    }
    optional = {
        "reasoning": score.reasoning,
        "evaluatorRawRequest": None if for_judge else score.evaluator_raw_request,
        "details": None if for_judge else score.details,
    }
    wire.update({key: value for key, value in optional.items() if value is not None})
    if score.evaluator_results:
        wire["evaluatorResults"] = [
            {
                "name": r.name,
                "type": r.type,
                "weight": r.weight,
                **wire_score(r.score, for_judge=for_judge),
            }
            for r in score.evaluator_results
        ]
    return wire


class CompositeEvaluator:
    """Runs a composite entry. ``judge`` serves ``llm_judge`` aggregators; ``registry`` is used
    for members when the context carries none (a composite called outside a case run)."""

    kind = "composite"
    entry_needs = NEEDS_SETTINGS

    def __init__(
        self,
        judge: LlmJudgeEvaluator,
        registry: Mapping[str, Evaluator] | None = None,
        *,
        script_timeout: float = DEFAULT_SCRIPT_TIMEOUT,
        env_passthrough: Sequence[str] = (),
    ) -> None:
        self.judge = judge
        self.registry = registry
        self.scripts = Scripts(script_timeout, tuple(env_passthrough))

    @staticmethod
    def aggregator_entry(entry: EvaluatorConfig, aggregator: AggregatorSpec) -> EvaluatorConfig:
        """The ``llm_judge`` entry an LLM aggregator is graded as (its ``model``, if any)."""
        return EvaluatorConfig(name=entry.name, type="llm_judge", model=aggregator.model)

    def check_entry(
        self, entry: EvaluatorConfig, folder: Path, rootdir: Path
    ) -> Iterator[EntryProblem]:
        """When the file loads: an LLM aggregator's prompt file exists (in the rootdir), and
        averaged members do not all weigh 0."""
        spec = entry.spec
        if not isinstance(spec, CompositeSpec):
            return
        aggregator = spec.aggregator
        if aggregator.prompt:
            try:
                aggregator_prompt(aggregator, start=folder, rootdir=rootdir)
            except ConfigError as exc:
                yield EntryProblem(("aggregator", "prompt"), str(exc))
        if aggregator.type == "weighted_average":
            weights = aggregator.weights or {}
            where: Loc = ("aggregator", "weights") if weights else ("evaluators",)
            members = (weights.get(m.name, m.weight) for m in spec.evaluators)
            yield from filter(None, [zero_weights(where, "member", members)])

    def judge_for(self, context: EvaluationContext) -> LlmClient | None:
        """The judge of an LLM aggregator (None for other aggregators); raise
        ``JudgeNotConfiguredError`` now if it needs a judge nobody set."""
        spec = entry_settings(context, CompositeSpec)
        if context.evaluator is not None and spec.aggregator.type == "llm_judge":
            entry = self.aggregator_entry(context.evaluator, spec.aggregator)
            return self.judge.judge_for(replace(context, evaluator=entry))
        return None

    async def planned_calls(self, context: EvaluationContext) -> list[PlannedCall]:
        """The members' calls, then an LLM aggregator's: its prompt holds the members' results,
        which are known only once they ran, so each stands in as one reply allowance of text
        (and the call is not found in the store)."""
        spec = entry_settings(context, CompositeSpec)
        registry = context.registry if context.registry is not None else self.registry or {}
        calls = await plan_entries(context, spec.evaluators, registry)
        aggregator = spec.aggregator
        if aggregator.type == "llm_judge" and context.evaluator is not None:
            case = context.eval_case
            template = aggregator_prompt(aggregator, start=case.folder, rootdir=case.rootdir)
            unknown = EvaluationScore(0.0, reasoning=unknown_answer())
            results = {m.name: wire_score(unknown, for_judge=True) for m in spec.evaluators}
            entry = self.aggregator_entry(context.evaluator, aggregator)
            calls.append(
                await self.judge.planned_call(
                    replace(context, evaluator=entry),
                    template=template,
                    data={RESULTS_VARIABLE: results},
                )
            )
        return calls

    async def evaluate(self, context: EvaluationContext) -> EvaluationScore:
        spec = entry_settings(context, CompositeSpec)
        aggregator = spec.aggregator
        registry = context.registry if context.registry is not None else self.registry or {}
        weights = aggregator.weights or {}
        members = tuple(
            replace(result, weight=weights.get(result.name, result.weight))
            for result in await evaluate_entries(context, spec.evaluators, registry)
        )
        errors = [f"{m.name}: {m.score.error}" for m in members if m.score.error]
        if errors:
            return EvaluationScore.graded(
                0.0,
                misses=tuple(f"[{m.name}] {e}" for m in members if (e := m.score.error)),
                error="; ".join(errors),
                evaluator_results=members,
                details={"aggregator": aggregator.type},
            )
        if aggregator.type == "weighted_average":
            return self._weighted_average(members, aggregator)
        if aggregator.type == "threshold":
            return self._threshold(members, aggregator.threshold or 0.0)
        _, gate = weighted_mean(members)
        if aggregator.type == "code_judge":
            score = await self._code(members, aggregator, context)
        else:
            score = await self._llm(members, aggregator, context)
        return EvaluationScore.graded(
            score.score,
            gate_failed=gate or score.gate_failed,
            hits=score.hits,
            misses=score.misses,
            expected_aspect_count=max(len(score.hits) + len(score.misses), 1),
            reasoning=score.reasoning,
            evaluator_raw_request={
                "aggregator": aggregator.type,
                **(score.evaluator_raw_request or {}),
            },
            details={"aggregator": aggregator.type, **(score.details or {})},
            error=score.error,
            evaluator_results=members,
        )

    @staticmethod
    def _weighted_average(
        members: Sequence[EvaluatorResult], aggregator: AggregatorSpec
    ) -> EvaluationScore:
        score, gate_failed = weighted_mean(members)
        hits = tuple(f"[{m.name}] {hit}" for m in members for hit in m.score.hits)
        misses = tuple(f"[{m.name}] {miss}" for m in members for miss in m.score.misses)
        reasoning = "; ".join(
            f"{m.name}: {m.score.reasoning}" for m in members if m.score.reasoning
        )
        request: dict[str, Any] = {"aggregator": "weighted_average"}
        if aggregator.weights:
            request["weights"] = dict(aggregator.weights)
        return EvaluationScore.graded(
            score,
            gate_failed=gate_failed,
            hits=hits,
            misses=misses,
            expected_aspect_count=max(len(hits) + len(misses), 1),
            reasoning=reasoning or None,
            evaluator_raw_request=request,
            details={
                "aggregator": "weighted_average",
                "weights": {m.name: m.weight for m in members},
            },
            evaluator_results=members,
        )

    @staticmethod
    def _threshold(members: Sequence[EvaluatorResult], threshold: float) -> EvaluationScore:
        """AgentV's ``threshold`` aggregator: the share of members that pass is the score. Its
        own pass (share >= threshold) is reported, not a gate: in AgentV v4.42.4 the case's
        verdict comes from the scores alone."""
        passed = sum(1 for m in members if m.score.verdict == "pass")
        share = passed / len(members)
        met = share >= threshold
        head = AssertionRow(
            text=f"{passed}/{len(members)} evaluators passed (threshold: {js_number(threshold)})",
            passed=met,
        )
        checks = [
            AssertionRow(text=f"[{m.name}] {check['text']}", passed=check["passed"])
            for m in members
            for check in m.score.assertions
        ]
        return EvaluationScore.graded(
            share,
            assertions=(head, *checks),
            expected_aspect_count=len(checks) + 1,
            evaluator_raw_request={"aggregator": "threshold", "threshold": threshold},
            details={"aggregator": "threshold", "threshold": threshold, "threshold_met": met},
            evaluator_results=members,
        )

    async def _code(
        self,
        members: Sequence[EvaluatorResult],
        aggregator: AggregatorSpec,
        context: EvaluationContext,
    ) -> EvaluationScore:
        script = (
            aggregator.path if isinstance(aggregator.path, str) else list(aggregator.path or ())
        )
        request = {"script": script}
        payload = {"results": {m.name: wire_score(m.score) for m in members}}
        run = await self.scripts.run(
            script,
            payload,
            case=context.eval_case,
            what="code aggregator",
            cwd=aggregator.cwd,
            timeout=aggregator.timeout_seconds,
        )
        return replace(script_score(run), evaluator_raw_request=request)

    async def _llm(
        self,
        members: Sequence[EvaluatorResult],
        aggregator: AggregatorSpec,
        context: EvaluationContext,
    ) -> EvaluationScore:
        if context.evaluator is None:
            raise ConfigError("a composite needs its evaluator entry")
        case = context.eval_case
        template = aggregator_prompt(aggregator, start=case.folder, rootdir=case.rootdir)
        entry = self.aggregator_entry(context.evaluator, aggregator)
        results = {m.name: wire_score(m.score, for_judge=True) for m in members}
        return await self.judge.evaluate(
            replace(context, evaluator=entry), template=template, data={RESULTS_VARIABLE: results}
        )


def aggregator_prompt(aggregator: AggregatorSpec, *, start: Path, rootdir: Path) -> str:
    """An LLM aggregator's prompt: a file (looked up like other prompts, never outside the
    rootdir) or inline text. One that does not place ``{{EVALUATOR_RESULTS_JSON}}`` gets the
    results appended."""
    if aggregator.prompt is None:
        return DEFAULT_AGGREGATOR_PROMPT
    found = read_prompt(aggregator.prompt, start=start, rootdir=rootdir)
    text = aggregator.prompt if found is None else found
    if not _RESULTS_PLACED.search(text):
        text = f"{text.rstrip()}\n\n[[ ## evaluator_results ## ]]\n{{{{{RESULTS_VARIABLE}}}}}\n"
    return text
