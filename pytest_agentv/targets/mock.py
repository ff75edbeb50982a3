"""The ``mock`` provider: a canned answer (or one per turn of a conversation), after an optional
delay; no API key, no network."""

from __future__ import annotations

import asyncio
import json
from math import inf
from typing import Any

from ..answers import TargetResponse, response_from
from ..cases import PreparedCase
from ..errors import ConfigError, NotGradedError
from ..llm.usage import PlannedCall
from ..projectfiles import Where
from .base import TargetDefinition, TargetServices

DEFAULT_MOCK_RESPONSE = "Mock target response. Set 'response' on the mock target to change it."


class MockTarget:
    """Answers every case with the same canned ``response`` after an optional delay; or, with
    ``responses`` (a list), each turn of a conversation with its own (a case: the first)."""

    timeout: float | None = None

    def __init__(
        self, name: str, settings: dict[str, Any], where: Where, judge_target: str | None = None
    ) -> None:
        self.name = name
        self.judge_target = judge_target
        response = settings.get("response", DEFAULT_MOCK_RESPONSE)
        self.response = response if isinstance(response, (str, dict, list)) else str(response)
        responses = settings.get("responses")
        if responses is not None and (not isinstance(responses, list) or not responses):
            raise ConfigError(
                f"mock target '{name}' ({where('responses')}): responses must be a list of "
                "answers, one per turn of a conversation"
            )
        self.responses: list[Any] = responses or []
        delay = settings.get("delay_ms", 0)
        if isinstance(delay, bool) or not isinstance(delay, (int, float)) or not 0 <= delay < inf:
            raise ConfigError(
                f"mock target '{name}' ({where('delay_ms')}): delay_ms must be a number of "
                f"milliseconds >= 0, not {delay!r}"
            )
        self.delay = float(delay) / 1000

    async def invoke(self, case: PreparedCase, attempt: int) -> TargetResponse:
        if self.delay:
            await asyncio.sleep(self.delay)
        return self.answer(case.turn)

    def answer(self, turn: int = 0) -> TargetResponse:
        value = self.response
        if self.responses:
            if turn > len(self.responses):
                raise NotGradedError(
                    f"mock target '{self.name}' has {len(self.responses)} responses: none for "
                    f"turn {turn}"
                )
            value = self.responses[max(turn, 1) - 1]
        if isinstance(value, dict) and not ("text" in value or "output_messages" in value):
            value = json.dumps(value)
        return response_from(value, f"mock target '{self.name}'")

    def planned(self, case: PreparedCase) -> tuple[TargetResponse, list[PlannedCall]]:
        return self.answer(case.turn), []


def build(target: TargetDefinition, services: TargetServices) -> MockTarget:
    return MockTarget(target.name, dict(target.settings), target.where, target.judge_target)
