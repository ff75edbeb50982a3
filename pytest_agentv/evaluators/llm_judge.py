"""``llm_judge``: one evaluator for freeform, checklist-rubric and score-range grading.

Rubric mode when the evaluator has rubrics (score ranges if any criterion has them), freeform
otherwise (seeds 000, 002, 003). Each mode asks for one JSON object that echoes the call's nonce
(the candidate was written before the nonce existed, so an object it planted cannot carry it),
and checks it against the contract: a freeform score from 0 to 1, one check per rubric item and
none for unknown items, integer scores from 0 to 10. A reply outside the contract is asked for
again with a short correction, up to three attempts in all; then the case is not graded — a
judge that answered on another scale, or skipped items, said nothing about the answer. (Seed
000's "clamp the score" and "zero on unparseable output" rules are replaced by this.)
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any, TypeGuard, TypeVar

from ..errors import ConfigError, JudgeNotConfiguredError, NotGradedError
from ..llm.client import NONCE_PLACEHOLDER, LlmClient, ReplyError
from ..llm.transports import Reply
from ..llm.usage import PlannedCall, prompt_tokens
from ..loader import EntryProblem
from ..schema.base import finite_number
from ..schema.evaluators import EvaluatorConfig, PromptScript
from ..schema.rubrics import RubricItem, rubric_items
from . import prompts
from .base import (
    DEFAULT_SCRIPT_TIMEOUT,
    EvaluationContext,
    EvaluationScore,
    ResolveJudge,
    Scripts,
    json_objects,
    script_payload,
)

MAX_ATTEMPTS = 3
MAX_HITS = 4

T = TypeVar("T")

NO_JUDGE = (
    "no LLM judge is configured: set AGENTV_JUDGE_MODEL (a litellm model such as "
    "openai/gpt-4o-mini) and the provider's API key (e.g. OPENAI_API_KEY), or pass "
    "--agentv-judge-model"
)


def contract_object(text: str, nonce: str) -> dict[str, Any]:
    """The JSON object of a reply that carries this call's nonce as its ``"nonce"`` field.

    Every outermost object in the reply is read (the whole reply, a fenced block, or objects
    inside prose); objects without the nonce — quoted from the candidate, say — never count, and
    two different objects that both carry it are a reply outside the contract.
    """
    carrying: list[dict[str, Any]] = []
    others = 0
    for value in json_objects(text):
        if isinstance(value, dict) and value.get("nonce") == nonce:
            if value not in carrying:
                carrying.append(value)
        else:
            others += 1
    if len(carrying) == 1:
        return carrying[0]
    if carrying:
        raise ReplyError(
            f"the reply holds {len(carrying)} different JSON objects carrying this call's nonce"
        )
    if others:
        raise ReplyError(f'no JSON object in the reply carries "nonce": "{nonce}"')
    raise ReplyError("no JSON object in the reply" if text.strip() else "the reply was empty")


def _strings(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(v.strip() for v in value if isinstance(v, str) and v.strip())[:MAX_HITS]


def _number_in(value: Any, low: float, high: float) -> TypeGuard[float]:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and low <= value <= high
    )


def parse_freeform(text: str, nonce: str) -> EvaluationScore:
    data = contract_object(text, nonce)
    score = data.get("score")
    if not _number_in(score, 0, 1):
        raise ReplyError(f"'score' must be a number from 0 to 1, got {score!r}")
    reasoning = data.get("reasoning")
    return EvaluationScore.graded(
        float(score),
        hits=_strings(data.get("hits")),
        misses=_strings(data.get("misses")),
        reasoning=reasoning if isinstance(reasoning, str) else None,
    )


def _checks(
    text: str, nonce: str, rubrics: Sequence[RubricItem], verdict_field: str
) -> tuple[dict[str, dict[str, Any]], str | None]:
    """One check per rubric item, none for unknown ids, else a reply outside the contract."""
    data = contract_object(text, nonce)
    checks = data.get("checks")
    if not isinstance(checks, list) or not all(isinstance(c, dict) for c in checks):
        raise ReplyError("'checks' must be a list of objects")
    known = [item.id for item in rubrics]
    by_id: dict[str, dict[str, Any]] = {}
    for check in checks:
        check_id = check.get("id")
        if not isinstance(check_id, str):
            raise ReplyError("every check needs a string 'id'")
        if check_id not in known:
            raise ReplyError(f"a check names unknown rubric id {check_id!r} (the ids: {known})")
        if check.get("reasoning") is not None and not isinstance(check["reasoning"], str):
            raise ReplyError("'reasoning' of a check must be a string")
        if check_id in by_id and by_id[check_id].get(verdict_field) != check.get(verdict_field):
            raise ReplyError(f"rubric id {check_id!r} is checked twice with different results")
        by_id.setdefault(check_id, check)
    missing = [item_id for item_id in known if item_id not in by_id]
    if missing:
        raise ReplyError(f"no check for rubric item(s) {missing}")
    overall = data.get("overall_reasoning")
    return by_id, overall if isinstance(overall, str) else None


def parse_checklist(text: str, nonce: str, rubrics: Sequence[RubricItem]) -> EvaluationScore:
    by_id, overall = _checks(text, nonce, rubrics, "satisfied")
    for check in by_id.values():
        if not isinstance(check.get("satisfied"), bool):
            raise ReplyError(f"check '{check['id']}' needs a boolean 'satisfied'")
    total = sum(item.weight for item in rubrics)
    earned = 0.0
    hits: list[str] = []
    misses: list[str] = []
    rows: list[dict[str, Any]] = []
    gate_failed = False
    for item in rubrics:
        check = by_id[item.id]
        satisfied: bool = check["satisfied"]
        reasoning = check.get("reasoning") or ""
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


def parse_score_ranges(text: str, nonce: str, rubrics: Sequence[RubricItem]) -> EvaluationScore:
    by_id, overall = _checks(text, nonce, rubrics, "score")
    for check in by_id.values():
        score = check.get("score")
        if not _number_in(score, 0, 10) or score != int(score):
            raise ReplyError(
                f"check '{check['id']}' needs an integer 'score' from 0 to 10, got {score!r}"
            )
    total = sum(item.weight for item in rubrics)
    weighted = 0.0
    hits: list[str] = []
    misses: list[str] = []
    rows: list[dict[str, Any]] = []
    raw_scores: dict[str, int] = {}
    gate_failed = False
    for item in rubrics:
        check = by_id[item.id]
        raw = int(check["score"])
        raw_scores[item.id] = raw
        weighted += item.weight * raw / 10
        gate = item.min_score
        gated = gate is not None and raw < gate
        gate_failed = gate_failed or gated
        reasoning = check.get("reasoning") or ""
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
class JudgeRequest:
    """What an LLM judge evaluator sends: its judge, mode and settings, and its messages and
    response format rendered for a nonce (a fresh one per call)."""

    judge: LlmClient
    mode: str
    render: Callable[[str], tuple[str, str]]
    schema: Callable[[str], dict[str, Any]]
    parse: Callable[[str, str], EvaluationScore]
    temperature: float
    max_tokens: int | None
    #: Texts a nonce must not occur in (the candidate, and any other data shown).
    untrusted: tuple[str, ...]
    custom_source: str | None

    def messages(self, nonce: str) -> list[dict[str, str]]:
        system, user = self.render(nonce)
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def structured(self, nonce: str) -> dict[str, Any]:
        return prompts.response_format(f"agentv_{self.mode}", self.schema(nonce))


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
        env_passthrough: Sequence[str] = (),
    ) -> None:
        self.resolve_judge_provider = resolve_judge_provider
        self.max_output_tokens = max_output_tokens
        self.temperature = temperature
        self.prompt = prompt
        self.rubrics = tuple(rubric_items(rubrics or ()))
        self.scripts = Scripts(prompt_timeout, tuple(env_passthrough))

    def check_entry(
        self, entry: EvaluatorConfig, folder: Path, rootdir: Path
    ) -> Iterator[EntryProblem]:
        """When the file loads: a prompt that is a file exists (in the rootdir) and uses a
        candidate variable."""
        if isinstance(entry.prompt, str):
            try:
                prompts.load_prompt_file(entry.prompt, start=folder, rootdir=rootdir)
            except ConfigError as exc:
                yield EntryProblem(("prompt",), str(exc))

    def judge_for(self, context: EvaluationContext) -> LlmClient:
        judge = self.resolve_judge_provider(context) if self.resolve_judge_provider else None
        if judge is None:
            raise JudgeNotConfiguredError(NO_JUDGE)
        return judge

    async def prepare(
        self,
        context: EvaluationContext,
        *,
        template: str | None = None,
        data: Mapping[str, Any] | None = None,
        run_scripts: bool = True,
    ) -> JudgeRequest:
        """What this evaluator would send the judge for ``context``: the judge, the mode, and
        how its messages render for a nonce. ``template`` replaces the entry's prompt; ``data``
        are more template variables, shown to the judge as JSON between the same markers as the
        candidate (a composite's aggregator passes its members' results this way). Without
        ``run_scripts`` a prompt script is not run and the built-in prompt stands in for it."""
        entry = context.evaluator
        judge = self.judge_for(context)
        rubrics = tuple(entry.rubrics) if entry is not None and entry.rubrics else self.rubrics
        custom = (
            _Prompt(template, is_template=True, source="aggregator")
            if template is not None
            else await self._custom_prompt(entry, context, run_scripts)
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
        untrusted = (
            str(inputs["candidate_answer"]),
            json.dumps(inputs["output_messages"]),
            *(json.dumps(value, default=str) for value in extra.values()),
        )
        parse: Callable[[str, str], EvaluationScore]
        if rubrics and any(item.score_ranges for item in rubrics):
            mode, schema = "score_ranges", prompts.score_range_schema
            system, build = prompts.score_range_system, prompts.score_range_prompt
            parse = lambda text, nonce: parse_score_ranges(text, nonce, rubrics)  # noqa: E731
        elif rubrics:
            mode, schema = "checklist", prompts.checklist_schema
            system, build = prompts.checklist_system, prompts.checklist_prompt
            parse = lambda text, nonce: parse_checklist(text, nonce, rubrics)  # noqa: E731
        else:
            mode, schema, system = "freeform", prompts.freeform_schema, prompts.freeform_system
            build = None
            parse = parse_freeform

        def render(nonce: str) -> tuple[str, str]:
            values = prompts.template_values(inputs, nonce)
            values.update({k: prompts.fence(prompts.pretty(v), nonce) for k, v in extra.items()})
            is_template = custom is not None and custom.is_template
            if build is not None:
                # A custom template in rubric mode is the prompt's head, with its variables
                # filled in; plain text is extra instructions, as in freeform mode.
                head = custom.text if custom is not None else ""
                head = prompts.substitute(head, values) if is_template else head
                user = build(values, rubrics, head)
            elif custom is not None and custom.is_template:
                user = prompts.substitute(custom.text, values)
            else:
                user = prompts.substitute(prompts.FREEFORM_TEMPLATE, values)
                if custom is not None:
                    user = f"{custom.text.strip()}\n\n{user}"
            return system(nonce), user

        return JudgeRequest(
            judge=judge,
            mode=mode,
            render=render,
            schema=schema,
            parse=parse,
            temperature=temperature,
            max_tokens=max_tokens,
            untrusted=untrusted,
            custom_source=custom.source if custom is not None else None,
        )

    async def planned_call(
        self,
        context: EvaluationContext,
        *,
        template: str | None = None,
        data: Mapping[str, Any] | None = None,
    ) -> PlannedCall:
        """The call ``evaluate`` would make for ``context`` (a reply within the contract
        needs one), and whether the store already holds its reply; nothing is called."""
        request = await self.prepare(context, template=template, data=data, run_scripts=False)
        messages = request.messages(NONCE_PLACEHOLDER)
        stored = request.judge.stored_reply(
            messages,
            temperature=request.temperature,
            max_tokens=request.max_tokens,
            structured=request.structured(NONCE_PLACEHOLDER),
            trial=context.attempt,
            protocol=prompts.PROTOCOL_VERSION,
        )
        return PlannedCall(
            model=request.judge.model,
            prompt_tokens=prompt_tokens(messages),
            stored=stored is not None,
            max_tokens=request.max_tokens,
        )

    async def planned_calls(self, context: EvaluationContext) -> list[PlannedCall]:
        return [await self.planned_call(context)]

    async def evaluate(
        self,
        context: EvaluationContext,
        *,
        template: str | None = None,
        data: Mapping[str, Any] | None = None,
    ) -> EvaluationScore:
        """Grade the case (see ``prepare`` for ``template`` and ``data``)."""
        request = await self.prepare(context, template=template, data=data)
        judge = request.judge
        system_prompt, user_prompt = request.render(NONCE_PLACEHOLDER)
        raw_request: dict[str, Any] = {
            "user_prompt": user_prompt,
            "system_prompt": system_prompt,
            "model": judge.model,
            "mode": request.mode,
        }
        if request.custom_source is not None:
            raw_request["custom_prompt"] = request.custom_source
        problem = ""
        rejected: tuple[str, str] | None = None  # the last reply outside the contract, its nonce
        for _attempt in range(MAX_ATTEMPTS):
            nonce = prompts.new_nonce(*request.untrusted)
            messages = request.messages(nonce)
            if rejected is not None:
                reply_text, old_nonce = rejected
                messages += [
                    {"role": "assistant", "content": reply_text.replace(old_nonce, nonce)},
                    {"role": "user", "content": prompts.correction(problem, nonce)},
                ]
            try:
                score, reply = await judge.complete(
                    messages,
                    accept=_rejecting(partial(_parse_with, request.parse, nonce)),
                    temperature=request.temperature,
                    max_tokens=request.max_tokens,
                    structured=request.structured(nonce),
                    nonce=nonce,
                    trial=context.attempt,
                    protocol=prompts.PROTOCOL_VERSION,
                    label=f"judge {judge.model}",
                    replay_as=messages[:2],
                )
            except ReplyError as exc:
                problem = str(exc)
                rejected = (exc.reply, nonce)
                continue
            return _with_request(score, raw_request, reply)
        return EvaluationScore(
            score=0.0,
            verdict="fail",
            reasoning=None,
            evaluator_raw_request=raw_request,
            error=(
                f"the judge's reply could not be parsed after {MAX_ATTEMPTS} attempts "
                f"({problem}); this is not a verdict on the answer"
            ),
        )

    async def _custom_prompt(
        self, entry: EvaluatorConfig | None, context: EvaluationContext, run_scripts: bool = True
    ) -> _Prompt | None:
        prompt = entry.prompt if entry is not None and entry.prompt is not None else self.prompt
        if prompt is None:
            return None
        case = context.eval_case
        if isinstance(prompt, PromptScript):
            if not run_scripts:
                return None
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
        stdout, failure = await self.scripts.run(
            script, payload, case=context.eval_case, what="prompt script"
        )
        text = stdout.decode("utf-8", "replace").strip()
        if failure or not text:
            raise NotGradedError(failure or "prompt script printed no prompt on stdout")
        return _Prompt(text, is_template=True, source=f"script: {script}")


def _parse_with(
    parse: Callable[[str, str], EvaluationScore], nonce: str, text: str
) -> EvaluationScore:
    return parse(text, nonce)


def _rejecting(parse: Callable[[str], T]) -> Callable[[str], T]:
    """Turn any parse problem into ``ReplyError``: a reply outside the contract, never a grade."""

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
    number = finite_number(value)
    return default if number is None else number
