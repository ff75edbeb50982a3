"""Model targets: an LLM answers the case's messages (AgentV's LLM providers map onto model
strings); replies go through the record/replay store like judges'."""

from __future__ import annotations

from typing import Any

from ..answers import TargetResponse, response_from
from ..casefiles import GUIDELINES_HEADER
from ..cases import PreparedCase
from ..errors import ConfigError, NotGradedError
from ..llm.client import LlmClient
from ..llm.prices import Price
from ..llm.transports import ModelSpec
from ..llm.usage import PlannedCall, prompt_tokens, unknown_answer
from ..options import STRUCTURED_CHOICES
from ..schema.base import finite_number
from .base import TargetDefinition, TargetServices

#: AgentV providers that are LLM APIs, and the litellm prefix each maps onto.
LLM_PROVIDERS = {
    "litellm": "",
    "openai": "openai",
    "azure": "azure",
    "anthropic": "anthropic",
    "gemini": "gemini",
    "openrouter": "openrouter",
}


def chat_messages(case: PreparedCase) -> list[dict[str, str]]:
    """The case's messages for a model; guideline files go first in the system message, under
    AgentV's guidelines header."""
    messages = [{"role": m["role"], "content": str(m["content"])} for m in case.input_messages]
    if case.guidelines:
        block = f"{GUIDELINES_HEADER}\n\n{case.guidelines}"
        if messages and messages[0]["role"] == "system":
            rest = messages[0]["content"].strip()
            messages[0]["content"] = f"{block}\n\n{rest}" if rest else block
        else:
            messages.insert(0, {"role": "system", "content": block})
    return messages


class LlmTarget:
    """Asks an LLM (see ``llm/``); replies go through the record/replay store like judges'."""

    timeout: float | None = None

    def __init__(
        self,
        name: str,
        client: LlmClient,
        settings: dict[str, Any],
        judge_target: str | None = None,
    ) -> None:
        self.name = name
        self.client = client
        self.judge_target = judge_target
        temperature = settings.get("temperature")
        self.temperature = float(temperature) if isinstance(temperature, (int, float)) else None
        max_tokens = settings.get("max_tokens", settings.get("max_output_tokens"))
        self.max_tokens = int(max_tokens) if isinstance(max_tokens, int) else None

    def _accept(self, text: str) -> str:
        """An empty reply (a content filter, say) is no answer: never stored, not graded."""
        if not text.strip():
            raise NotGradedError(
                f"target '{self.name}' ({self.client.model}) returned an empty reply"
            )
        return text

    def planned(self, case: PreparedCase) -> tuple[TargetResponse, list[PlannedCall]]:
        """The reply when the store has it; one call of the model either way."""
        messages = chat_messages(case)
        stored = self.client.stored_reply(
            messages,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            trial=case.attempt,
            protocol="target",
        )
        call = PlannedCall(
            self.client.model,
            prompt_tokens(messages),
            stored is not None,
            self.max_tokens,
            self.client.price,
        )
        return response_from(stored if stored is not None else unknown_answer(), ""), [call]

    async def invoke(self, case: PreparedCase, attempt: int) -> TargetResponse:
        text, reply = await self.client.complete(
            chat_messages(case),
            accept=self._accept,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            trial=attempt,
            protocol="target",
            label=f"target '{self.name}' ({self.client.model})",
        )
        # A reply reused from the store reports what its recording used and cost, so a replayed
        # run grades the same answer, usage and cost as the recorded one.
        return TargetResponse(
            text=text,
            output_messages=({"role": "assistant", "content": text},),
            token_usage={"input": reply.prompt_tokens, "output": reply.completion_tokens}
            if reply.prompt_tokens is not None and reply.completion_tokens is not None
            else None,
            cost_usd=reply.cost_usd,
        )


def model_spec(provider: str, settings: dict[str, Any], what: str) -> ModelSpec:
    """Map AgentV's LLM providers (and plain litellm model strings) onto a litellm model, with
    what the entry says of it at its endpoint: its structured-output dialect, its price and its
    reply bound."""
    model = settings.get("model") or settings.get("deployment")
    if not isinstance(model, str) or not model.strip():
        raise ConfigError(f"{what} needs a 'model'")
    if settings.get("api_format", "chat") != "chat":
        raise ConfigError(
            f"{what}: api_format {settings['api_format']!r} is not supported: pytest-agentv "
            "asks models through their chat completions API (api_format: chat)"
        )
    prefix = LLM_PROVIDERS[provider]
    if prefix and not model.startswith(prefix + "/"):
        model = f"{prefix}/{model}"
    base = settings.get("api_base") or settings.get("endpoint") or settings.get("base_url")
    key = settings.get("api_key")
    version = settings.get("api_version") or settings.get("version")
    structured = settings.get("structured")
    if structured is not None and structured not in STRUCTURED_CHOICES:
        raise ConfigError(
            f"{what}: structured must be one of {', '.join(STRUCTURED_CHOICES)}, not {structured!r}"
        )
    max_tokens = settings.get("max_tokens", settings.get("max_output_tokens"))
    return ModelSpec(
        model=model,
        api_base=str(base) if base else None,
        api_key=str(key) if key else None,
        api_version=str(version) if version else None,
        structured=structured,
        price=_price(settings, what),
        max_tokens=max_tokens if isinstance(max_tokens, int) and max_tokens > 0 else None,
    )


def _price(settings: dict[str, Any], what: str) -> Price | None:
    """``input_cost_per_million`` and ``output_cost_per_million``, both or neither."""
    given = [settings.get(f"{side}_cost_per_million") for side in ("input", "output")]
    if given == [None, None]:
        return None
    numbers = [finite_number(value) for value in given]
    if any(number is None or number < 0 for number in numbers):
        raise ConfigError(
            f"{what}: input_cost_per_million and output_cost_per_million must both be given, "
            f"as US dollars per million tokens (0 for a local model), not {given[0]!r} and "
            f"{given[1]!r}"
        )
    prompt, completion = (float(n) for n in numbers if n is not None)
    return Price.per_million(prompt, completion)


def build(target: TargetDefinition, services: TargetServices) -> LlmTarget:
    spec = model_spec(target.provider.lower(), dict(target.settings), target.what)
    return LlmTarget(
        target.name, services.clients(spec), dict(target.settings), target.judge_target
    )
