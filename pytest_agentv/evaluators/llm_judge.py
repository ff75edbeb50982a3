"""``llm_judge``: one evaluator for freeform, checklist-rubric and score-range grading.

Rubric mode when the evaluator has rubrics (score ranges if any criterion has them), freeform
otherwise (seeds 000, 002, 003). Each mode asks for one JSON object, parses the first valid
object in the reply and validates it, in up to three attempts. A reply that never
parses gives score 0 and an ``error`` saying so: the case is then reported as not graded, so
nobody mistakes a judge that could not answer for an answer that failed.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from ..errors import JudgeNotConfiguredError, NotGradedError
from ..judge import NONCE_PLACEHOLDER, LlmClient, Reply
from ..models import EvaluatorConfig, PromptScript, RubricItem, rubric_items
from ..processes import scrubbed_env
from . import prompts
from .base import (
    DEFAULT_SCRIPT_TIMEOUT,
    EvaluationContext,
    EvaluationScore,
    ResolveJudge,
    run_script,
    script_payload,
)

MAX_ATTEMPTS = 3
MAX_HITS = 4
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)

T = TypeVar("T")

NO_JUDGE = (
    "no LLM judge is configured: set AGENTV_JUDGE_MODEL (a litellm model such as "
    "openai/gpt-4o-mini) and the provider's API key (e.g. OPENAI_API_KEY), or pass "
    "--agentv-judge-model"
)


class ReplyError(ValueError):
    """The judge's reply was not a valid answer to the contract."""


def first_json_object(text: str) -> dict[str, Any]:
    """The first JSON object in a reply: the whole reply, a fenced block, or inside prose."""
    candidates = [text.strip(), *(m.strip() for m in _FENCE.findall(text))]
    decoder = json.JSONDecoder()
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    for start in (i for i, char in enumerate(text) if char == "{"):
        try:
            value, _ = decoder.raw_decode(text, start)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    raise ReplyError("no JSON object in the reply" if text.strip() else "the reply was empty")


def _strings(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(v.strip() for v in value if isinstance(v, str) and v.strip())[:MAX_HITS]


def parse_freeform(text: str) -> EvaluationScore:
    data = first_json_object(text)
    score = data.get("score")
    if isinstance(score, bool) or not isinstance(score, (int, float)):
        raise ReplyError(f"'score' must be a number, got {score!r}")
    reasoning = data.get("reasoning")
    return EvaluationScore.graded(
        float(score) if not math.isnan(score) else 0.0,
        hits=_strings(data.get("hits")),
        misses=_strings(data.get("misses")),
        reasoning=reasoning if isinstance(reasoning, str) else None,
    )


def _checks(text: str) -> tuple[list[dict[str, Any]], str | None]:
    data = first_json_object(text)
    checks = data.get("checks")
    if not isinstance(checks, list) or not all(isinstance(c, dict) for c in checks):
        raise ReplyError("'checks' must be a list of objects")
    for check in checks:
        if not isinstance(check.get("id"), str):
            raise ReplyError("every check needs a string 'id'")
        if check.get("reasoning") is not None and not isinstance(check["reasoning"], str):
            raise ReplyError("'reasoning' of a check must be a string")
    overall = data.get("overall_reasoning")
    return checks, overall if isinstance(overall, str) else None


def _by_id(checks: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for check in checks:
        found.setdefault(check["id"], check)
    return found


def parse_checklist(text: str, rubrics: Sequence[RubricItem]) -> EvaluationScore:
    checks, overall = _checks(text)
    for entry in checks:
        if not isinstance(entry.get("satisfied"), bool):
            raise ReplyError(f"check '{entry['id']}' needs a boolean 'satisfied'")
    by_id = _by_id(checks)
    total = sum(item.weight for item in rubrics)
    earned = 0.0
    hits: list[str] = []
    misses: list[str] = []
    rows: list[dict[str, Any]] = []
    gate_failed = False
    for item in rubrics:
        check = by_id.get(item.id)
        satisfied = bool(check and check["satisfied"])
        reasoning = (check or {}).get("reasoning") or (
            "not assessed by the judge" if not check else ""
        )
        line = f"[{item.id}] {item.expected_outcome}" + (f": {reasoning}" if reasoning else "")
        if satisfied:
            earned += item.weight
            hits.append(line)
        else:
            misses.append(line)
            gate_failed = gate_failed or item.is_required
        rows.append(
            {
                "id": item.id,
                "outcome": item.expected_outcome,
                "weight": item.weight,
                "required": item.is_required,
                "satisfied": satisfied,
                "reasoning": reasoning,
            }
        )
    return EvaluationScore.graded(
        earned / total if total > 0 else 0.0,
        gate_failed=gate_failed,
        hits=tuple(hits),
        misses=tuple(misses),
        expected_aspect_count=len(rubrics),
        reasoning=overall,
        raw_aspects=tuple(item.id for item in rubrics),
        details={"rubric": rows},
    )


def _range_text(item: RubricItem, raw: int) -> str:
    for entry in item.score_ranges or ():
        low, high = entry.score_range
        if low <= raw <= high:
            return entry.expected_outcome
    return ""


def parse_score_ranges(text: str, rubrics: Sequence[RubricItem]) -> EvaluationScore:
    checks, overall = _checks(text)
    for entry in checks:
        score = entry.get("score")
        if (
            isinstance(score, bool)
            or not isinstance(score, (int, float))
            or not math.isfinite(score)
            or score != int(score)
            or not 0 <= score <= 10
        ):
            raise ReplyError(f"check '{entry['id']}' needs an integer 'score' from 0 to 10")
    by_id = _by_id(checks)
    total = sum(item.weight for item in rubrics)
    weighted = 0.0
    hits: list[str] = []
    misses: list[str] = []
    rows: list[dict[str, Any]] = []
    raw_scores: dict[str, int] = {}
    gate_failed = False
    for item in rubrics:
        check = by_id.get(item.id)
        raw = int(check["score"]) if check else 0
        raw_scores[item.id] = raw
        weighted += item.weight * raw / 10
        gate = item.min_score
        gated = gate is not None and raw < gate
        gate_failed = gate_failed or gated
        reasoning = (check or {}).get("reasoning") or (
            "not assessed by the judge" if not check else ""
        )
        matched = _range_text(item, raw)
        line = (
            f"[{item.id}] {item.expected_outcome} - Score: {raw}/10"
            + (f" ({matched})" if matched else "")
            + (f": {reasoning}" if reasoning else "")
        )
        passed = raw >= 7 and not gated
        (hits if passed else misses).append(line)
        rows.append(
            {
                "id": item.id,
                "outcome": item.expected_outcome,
                "weight": item.weight,
                "raw_score": raw,
                "min_score": gate,
                "passed": passed,
                "reasoning": reasoning,
            }
        )
    return EvaluationScore.graded(
        weighted / total if total > 0 else 0.0,
        gate_failed=gate_failed,
        hits=tuple(hits),
        misses=tuple(misses),
        expected_aspect_count=len(rubrics),
        reasoning=overall,
        raw_aspects=tuple(item.id for item in rubrics),
        details={
            "raw_scores": raw_scores,
            "normalization": "score / 10",
            "aggregation": "weighted_average",
            "rubric": rows,
        },
    )


@dataclass(frozen=True)
class _Prompt:
    """A custom user prompt: a full template, or extra instructions for the default one."""

    text: str
    is_template: bool
    source: str


class LlmJudgeEvaluator:
    """Grade with an LLM judge through litellm (REQ-EVAL-002, unified evaluator)."""

    kind = "llm_judge"

    def __init__(
        self,
        resolve_judge_provider: ResolveJudge | None = None,
        *,
        max_output_tokens: int | None = None,
        temperature: float = 0.0,
        prompt: str | None = None,
        rubrics: Sequence[RubricItem | str | dict[str, Any]] | None = None,
        prompt_timeout: float = DEFAULT_SCRIPT_TIMEOUT,
    ) -> None:
        self.resolve_judge_provider = resolve_judge_provider
        self.max_output_tokens = max_output_tokens
        self.temperature = temperature
        self.prompt = prompt
        self.rubrics = tuple(rubric_items(rubrics or ()))
        self.prompt_timeout = prompt_timeout

    def judge_for(self, context: EvaluationContext) -> LlmClient:
        judge = self.resolve_judge_provider(context) if self.resolve_judge_provider else None
        if judge is None:
            raise JudgeNotConfiguredError(NO_JUDGE)
        return judge

    async def evaluate(
        self,
        context: EvaluationContext,
        *,
        template: str | None = None,
        data: Mapping[str, Any] | None = None,
    ) -> EvaluationScore:
        """Grade the case. ``template`` replaces the entry's prompt; ``data`` are more template
        variables, shown to the judge as JSON between the same markers as the candidate (a
        composite's aggregator passes its members' results this way)."""
        entry = context.evaluator
        judge = self.judge_for(context)
        rubrics = tuple(entry.rubrics) if entry is not None and entry.rubrics else self.rubrics
        custom = (
            _Prompt(template, is_template=True, source="aggregator")
            if template is not None
            else await self._custom_prompt(entry, context)
        )
        extra = dict(data or {})
        options = entry.options if entry is not None else {}
        temperature = _number(options.get("temperature"), self.temperature)
        max_tokens = options.get("max_output_tokens", self.max_output_tokens)
        max_tokens = int(max_tokens) if isinstance(max_tokens, int) else None

        inputs = {
            **context.prompt_inputs,
            "expected_messages": list(context.eval_case.expected_messages),
            "input_messages": list(context.eval_case.authored_input),
            "output_messages": list(context.output_messages or ()),
        }
        untrusted = [
            str(inputs["candidate_answer"]),
            json.dumps(inputs["output_messages"]),
            *(json.dumps(value, default=str) for value in extra.values()),
        ]
        if rubrics and any(item.score_ranges for item in rubrics):
            mode, schema = "score_ranges", prompts.SCORE_RANGE_SCHEMA
            system, build = prompts.score_range_system, prompts.score_range_prompt
            parse: Callable[[str], EvaluationScore] = lambda t: parse_score_ranges(t, rubrics)  # noqa: E731
        elif rubrics:
            mode, schema = "checklist", prompts.CHECKLIST_SCHEMA
            system, build = prompts.checklist_system, prompts.checklist_prompt
            parse = lambda t: parse_checklist(t, rubrics)  # noqa: E731
        else:
            mode, schema, system = "freeform", prompts.FREEFORM_SCHEMA, prompts.freeform_system
            build = None
            parse = parse_freeform

        def render(nonce: str) -> tuple[str, str]:
            values = prompts.template_values(inputs, nonce)
            values.update({k: prompts.fence(prompts.pretty(v), nonce) for k, v in extra.items()})
            if build is not None:
                user = build(values, rubrics, custom.text if custom else "")
            elif custom is not None and custom.is_template:
                user = prompts.substitute(custom.text, values)
            else:
                user = prompts.substitute(prompts.FREEFORM_TEMPLATE, values)
                if custom is not None:
                    user = f"{custom.text.strip()}\n\n{user}"
            return system(nonce), user

        structured = prompts.response_format(f"agentv_{mode}", schema)
        system_prompt, user_prompt = render(NONCE_PLACEHOLDER)
        request: dict[str, Any] = {
            "user_prompt": user_prompt,
            "system_prompt": system_prompt,
            "model": judge.model,
            "mode": mode,
        }
        if custom is not None:
            request["custom_prompt"] = custom.source
        problem = ""
        for _attempt in range(MAX_ATTEMPTS):
            nonce = prompts.new_nonce(*untrusted)
            system_text, user_text = render(nonce)
            try:
                score, reply = await judge.complete(
                    [
                        {"role": "system", "content": system_text},
                        {"role": "user", "content": user_text},
                    ],
                    accept=_rejecting(parse),
                    temperature=temperature,
                    max_tokens=max_tokens,
                    structured=structured,
                    nonce=nonce,
                    trial=context.attempt,
                    protocol=prompts.PROTOCOL_VERSION,
                    label=f"judge {judge.model}",
                )
            except ReplyError as exc:
                problem = str(exc)
                continue
            return _with_request(score, request, reply)
        return EvaluationScore(
            score=0.0,
            verdict="fail",
            reasoning=None,
            evaluator_raw_request=request,
            error=(
                f"the judge's reply could not be parsed after {MAX_ATTEMPTS} attempts "
                f"({problem}); this is not a verdict on the answer"
            ),
        )

    async def _custom_prompt(
        self, entry: EvaluatorConfig | None, context: EvaluationContext
    ) -> _Prompt | None:
        prompt = entry.prompt if entry is not None and entry.prompt is not None else self.prompt
        if prompt is None:
            return None
        case = context.eval_case
        if isinstance(prompt, PromptScript):
            return await self._scripted_prompt(prompt, entry, context)
        text = prompts.load_prompt_file(prompt, start=case.folder, rootdir=case.rootdir)
        if text is not None:
            return _Prompt(text, is_template=True, source=prompt.strip())
        return _Prompt(prompt, is_template=prompts.has_variables(prompt), source="inline")

    async def _scripted_prompt(
        self, prompt: PromptScript, entry: EvaluatorConfig | None, context: EvaluationContext
    ) -> _Prompt:
        payload = script_payload(context)
        payload["config"] = {**prompt.config, **(entry.options if entry else {})} or None
        script = prompt.script if isinstance(prompt.script, str) else list(prompt.script)
        result = await run_script(
            script,
            payload,
            cwd=context.eval_case.folder,
            env=scrubbed_env(),
            timeout=self.prompt_timeout,
        )
        failure = result.failure("prompt script", self.prompt_timeout)
        text = result.stdout.decode("utf-8", "replace").strip()
        if failure or not text:
            raise NotGradedError(failure or "prompt script printed no prompt on stdout")
        return _Prompt(text, is_template=True, source=f"script: {script}")


def _rejecting(parse: Callable[[str], T]) -> Callable[[str], T]:
    """Turn any parse problem into ``ReplyError`` so the client neither stores nor counts it."""

    def accept(text: str) -> T:
        try:
            return parse(text)
        except ReplyError:
            raise
        except (ValueError, TypeError, KeyError, OverflowError) as exc:
            raise ReplyError(str(exc)) from exc

    return accept


def _with_request(score: EvaluationScore, request: dict[str, Any], reply: Reply) -> EvaluationScore:
    details = {**(score.details or {}), **({"replayed": True} if reply.cached else {})}
    return replace(score, evaluator_raw_request=request, details=details or None)


def _number(value: Any, default: float) -> float:
    return (
        float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default
    )
