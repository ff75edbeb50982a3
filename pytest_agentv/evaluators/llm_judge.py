"""``llm_judge``: one evaluator for freeform, checklist-rubric and score-range grading.

Rubric mode when the evaluator has rubrics (score ranges if any criterion has them), freeform
otherwise (seeds 000, 002, 003). Each mode asks for one JSON object that echoes the call's nonce
(the candidate was written before the nonce existed, so an object it planted cannot carry it),
and checks it against the contract: a freeform score from 0 to 1, one check per rubric item and
none for unknown items, integer scores from 0 to 10. A reply outside the contract is asked for
again with a short correction (one cut off at its length limit: afresh), up to three attempts
in all; then the case is not graded — a judge that answered on another scale, or skipped items,
said nothing about the answer. Every request carries a reply bound (``max_tokens``): the
entry's ``max_output_tokens``, else the judge target's ``max_tokens``, else what the longest
reply within the contract's schema takes. (Seed 000's "clamp the score" and "zero on
unparseable output" rules are replaced by this.)
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import ConfigError, JudgeNotConfiguredError, NotGradedError
from ..llm.client import LlmClient, ReplyError
from ..llm.replay import NONCE_PLACEHOLDER
from ..llm.reply import Reply
from ..llm.retry import Attempts
from ..llm.usage import PlannedCall, prompt_tokens
from ..loader import EntryProblem
from ..schema.base import finite_number
from ..schema.evaluators import EvaluatorConfig, PromptScript
from ..schema.rubrics import RubricItem, rubric_items
from . import prompts
from .base import EvaluationContext, EvaluationScore, ResolveJudge
from .contract import PROTOCOL_VERSION, Contract, contract_for, correction
from .fencing import new_nonce
from .preprocessors import judged_text
from .promptfiles import FILE_PREFIX, load_prompt_file, read_prompt
from .scripts import DEFAULT_SCRIPT_TIMEOUT, Scripts, script_payload

MAX_ATTEMPTS = 3

NO_JUDGE = (
    "no LLM judge is configured: set AGENTV_JUDGE_MODEL (a litellm model such as "
    "openai/gpt-4o-mini) and the provider's API key (e.g. OPENAI_API_KEY), or pass "
    "--agentv-judge-model"
)


@dataclass(frozen=True)
class JudgeRequest:
    """What an LLM judge evaluator sends: its judge, mode and settings, and its messages and
    response format rendered for a nonce (a fresh one per call)."""

    judge: LlmClient
    contract: Contract
    render: Callable[[str], tuple[str, str]]
    temperature: float
    max_tokens: int
    #: Texts a nonce must not occur in (the candidate, and any other data shown).
    untrusted: tuple[str, ...]
    custom_source: str | None

    def messages(self, nonce: str) -> list[dict[str, str]]:
        system, user = self.render(nonce)
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def structured(self, nonce: str) -> dict[str, Any]:
        return self.contract.response_format(nonce)


@dataclass(frozen=True)
class _Prompt:
    """A custom user prompt: a full template, or extra instructions for the default one."""

    text: str
    is_template: bool
    source: str


#: The user prompt of each rubric mode (freeform has a template of its own).
_USER_PROMPTS = {
    "checklist": prompts.checklist_prompt,
    "score_ranges": prompts.score_range_prompt,
}


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
        candidate variable; each preprocessor's script exists."""
        for index, preprocessor in enumerate(entry.preprocessors or ()):
            try:
                preprocessor.argv(folder, rootdir)
            except ConfigError as exc:
                yield EntryProblem(("preprocessors", index, "command"), str(exc))
        if isinstance(entry.prompt, str):
            try:
                load_prompt_file(entry.prompt, start=folder, rootdir=rootdir, v4=entry.v4)
            except ConfigError as exc:
                yield EntryProblem(("prompt",), str(exc))
            if entry.v4 and not entry.prompt.strip().startswith(FILE_PREFIX):
                with contextlib.suppress(ConfigError):
                    if read_prompt(entry.prompt, start=folder, rootdir=rootdir):
                        yield EntryProblem(
                            ("prompt",),
                            f"AgentV v4 reads 'prompt: {entry.prompt.strip()}' as inline text, "
                            "not as that file, and so does pytest-agentv in a file written with "
                            f"v4's names; write 'file://{entry.prompt.strip()}' for the file",
                            warning=True,
                        )

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
        contract = contract_for(rubrics)
        # Every request is bounded: the entry's, else the judge target's, else the schema's.
        max_tokens = (
            max_tokens
            if isinstance(max_tokens, int) and max_tokens > 0
            else judge.spec.max_tokens or contract.max_tokens
        )

        inputs = {
            **context.prompt_inputs,
            "expected_messages": list(context.eval_case.expected_messages),
            "input_messages": list(context.eval_case.authored_input),
            "output_messages": list(context.output_messages or ()),
            "file_changes": context.file_changes or "",
            "metadata": context.eval_case.metadata,
        }
        if run_scripts and (text := await judged_text(context, self.scripts)) is not None:
            inputs["candidate_answer"] = text  # the answer's files, as text (AgentV v4)
        untrusted = (
            str(inputs["candidate_answer"]),
            str(inputs["file_changes"]),
            json.dumps(inputs["output_messages"]),
            *(json.dumps(value, default=str) for value in extra.values()),
        )
        build = _USER_PROMPTS.get(contract.mode)

        memo: dict[str, str] = {}

        def render(nonce: str) -> tuple[str, str]:
            values = prompts.TemplateValues(inputs, nonce, rubrics, memo, extra)
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
                user += prompts.file_changes_section(values)
                if custom is not None:
                    user = f"{custom.text.strip()}\n\n{user}"
            return contract.system(nonce), user

        return JudgeRequest(
            judge=judge,
            contract=contract,
            render=render,
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
            protocol=PROTOCOL_VERSION,
        )
        return PlannedCall(
            model=request.judge.model,
            prompt_tokens=prompt_tokens(messages),
            stored=stored is not None,
            max_tokens=request.max_tokens,
            price=request.judge.price,
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
            "mode": request.contract.mode,
        }
        if request.custom_source is not None:
            raw_request["custom_prompt"] = request.custom_source
        problems: list[str] = []
        attempts = Attempts()
        rejected: tuple[str, str] | None = None  # the last reply outside the contract, its nonce
        for _attempt in range(MAX_ATTEMPTS):
            nonce = new_nonce(*request.untrusted)
            messages = request.messages(nonce)
            if rejected is not None:
                reply_text, old_nonce = rejected
                messages += [
                    {"role": "assistant", "content": reply_text.replace(old_nonce, nonce)},
                    {"role": "user", "content": correction(problems[-1], nonce)},
                ]
            try:
                score, reply = await judge.complete(
                    messages,
                    accept=request.contract.accept(nonce),
                    temperature=request.temperature,
                    max_tokens=request.max_tokens,
                    structured=request.structured(nonce),
                    nonce=nonce,
                    trial=context.attempt,
                    protocol=PROTOCOL_VERSION,
                    label=f"judge {judge.model}",
                    replay_as=messages[:2],
                    attempts=attempts,
                )
            except ReplyError as exc:
                problems.append(str(exc))
                # A reply cut off at its length limit is asked for afresh: sent back with a
                # correction it would only fill the model's context further.
                rejected = None if exc.cut_off else (exc.reply, nonce)
                continue
            return _with_request(score, raw_request, reply, problems)
        return EvaluationScore(
            score=0.0,
            verdict="fail",
            reasoning=None,
            evaluator_raw_request=raw_request,
            details={"outside_contract": problems},
            error=(
                f"the judge's reply could not be parsed after {MAX_ATTEMPTS} attempts "
                f"({problems[-1]}); this is not a verdict on the answer"
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
        text = load_prompt_file(
            prompt, start=case.folder, rootdir=case.rootdir, v4=bool(entry and entry.v4)
        )
        if text is not None:
            return _Prompt(text, is_template=True, source=prompt.strip())
        return _Prompt(prompt, is_template=prompts.has_variables(prompt), source="inline")

    async def _scripted_prompt(
        self, prompt: PromptScript, entry: EvaluatorConfig | None, context: EvaluationContext
    ) -> _Prompt:
        payload = script_payload(context)
        payload["config"] = {**prompt.config, **(entry.options if entry else {})} or None
        script = prompt.script if isinstance(prompt.script, str) else list(prompt.script)
        run = await self.scripts.run(script, payload, case=context.eval_case, what="prompt script")
        text = run.stdout.decode("utf-8", "replace").strip()
        if run.failure or not text:
            raise NotGradedError(run.failure or "prompt script printed no prompt on stdout")
        return _Prompt(text, is_template=True, source=f"script: {script}")


def _with_request(
    score: EvaluationScore, request: dict[str, Any], reply: Reply, problems: list[str]
) -> EvaluationScore:
    """The score with its request, and the replies before it that were outside the contract."""
    details = {
        **(score.details or {}),
        **({"replayed": True} if reply.cached else {}),
        **({"outside_contract": problems} if problems else {}),
    }
    return replace(score, evaluator_raw_request=request, details=details or None)


def _number(value: Any, default: float) -> float:
    number = finite_number(value)
    return default if number is None else number
