"""A conversation's turns in order: the history each turn's target sees, the window its
graders see, and the replies joined into the case's answer. One walk over the turns serves the
run (``Conversation``) and the estimate (``--agentv-estimate``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..answers import TargetResponse
from ..cases import ConversationPlan, PreparedCase, prompt_text
from ..schema.evaluators import EvaluatorConfig


def window(history: Sequence[dict[str, Any]], size: int | None) -> tuple[dict[str, Any], ...]:
    """What a turn's graders see of the history up to its user message: the system messages,
    then the last ``size`` turns (the current one included), as AgentV v4's window does."""
    if size is None:
        return tuple(history)
    others = [m for m in history if m["role"] != "system"]
    return (*(m for m in history if m["role"] == "system"), *others[-(2 * size - 1) :])


def seen(
    case: PreparedCase, messages: Sequence[dict[str, Any]], number: int, attempt: int
) -> PreparedCase:
    """The case as turn ``number``'s target sees it (the messages so far) or, with 0, as the
    transcript's graders see the whole conversation."""
    shown = tuple(dict(message) for message in messages)
    files = case.turns[number - 1].input_files if number else ()
    return replace(
        case,
        question=prompt_text(shown),
        input_messages=shown,
        authored_input=shown,
        input_files=(*case.input_files, *files),
        turn=number,
        attempt=attempt,
    )


def graded_view(
    case: PreparedCase,
    plan: ConversationPlan,
    history: Sequence[dict[str, Any]],
    number: int,
    attempt: int,
) -> PreparedCase:
    """The case as turn ``number``'s graders see it: the window of the history up to its user
    message, and the turn's expected reply."""
    turn = case.turns[number - 1]
    return replace(
        seen(case, window(history, plan.window_size), number, attempt),
        expected_messages=turn.expected_messages,
        reference_answer=turn.reference_answer,
    )


def joined(replies: Sequence[TargetResponse]) -> TargetResponse:
    """The replies of a conversation as one answer: the last reply's text, every reply's
    messages, and the cost and time they report together."""
    costs = [r.cost_usd for r in replies if r.cost_usd is not None]
    times = [r.duration_ms for r in replies if r.duration_ms is not None]
    return TargetResponse(
        text=replies[-1].text if replies else "",
        output_messages=tuple(m for r in replies for m in r.output_messages),
        cost_usd=sum(costs) if costs else None,
        duration_ms=sum(times) if times else None,
    )


@dataclass(frozen=True)
class Step:
    """One turn, as the walk reaches it: the case with the history up to the turn's user
    message, as its target sees it (``asked``), and the turn's graders."""

    case: PreparedCase
    plan: ConversationPlan
    history: Sequence[dict[str, Any]]
    number: int
    said: str
    entries: Sequence[EvaluatorConfig]
    asked: PreparedCase

    def view(self) -> PreparedCase:
        """The case as the turn's graders see it."""
        return graded_view(self.case, self.plan, self.history, self.number, self.asked.attempt)


async def walk(
    case: PreparedCase,
    plan: ConversationPlan,
    attempt: int,
    take: Callable[[Step], Awaitable[TargetResponse | None]],
) -> tuple[list[TargetResponse], PreparedCase]:
    """Every turn in order, answered by ``take`` (None: the turn was not sent, and the history
    does not grow); the replies, and the whole conversation as the transcript's graders see
    it."""
    history = [dict(message) for message in case.input_messages]
    replies: list[TargetResponse] = []
    for number, (turn, entries) in enumerate(zip(case.turns, plan.turns, strict=True), 1):
        said = [*history, {"role": "user", "content": turn.input}]
        asked = seen(case, said, number, attempt)
        response = await take(Step(case, plan, said, number, turn.input, entries, asked))
        if response is None:
            continue
        history = [*said, {"role": "assistant", "content": response.text}]
        replies.append(response)
    return replies, seen(case, history, 0, attempt)
