"""``assert_conversation`` and its async twin: a conversation graded turn by turn in a unit test.

The agent is a callable taking the messages so far (the shared ``input``, every earlier user
turn and the agent's own replies) and returning its reply, as an ``agentv_target`` fixture
answers a conversation case. Turns and assertions are written as in an eval file's ``mode:
conversation`` case, and the conversation runs the same path (``conversation/``) and ends
like ``assert_judged``: pass returns the score, borderline xfails, fail raises.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from ..errors import AgentvError
from ..keywords import check_options
from ..scheduler import awaited, run_sync
from . import AgentvJudge, _judge

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ..answers import TargetResponse
    from ..cases import PreparedCase
    from ..conversation import Conversation
    from ..evaluators.base import EvaluationScore
    from ..grading import OnLoop

#: An agent: the messages so far in, its reply out (text, messages, a mapping; or awaitable).
Agent = Callable[[list[dict[str, Any]]], Any]

CALLER = "assert_conversation"

#: What the conversation is: its turns, and how they are graded (an eval file's case keys).
Case = Mapping[str, Any]


def _text(segments: Sequence[Any], loc: tuple[int | str, ...]) -> str:
    """A message's text; a file segment is refused (a unit test passes the file's text)."""
    from ..schema.messages import render_content

    if any(segment.type == "file" for segment in segments):
        where = ".".join(map(str, loc))
        raise ValueError(f"assert_conversation(): {where}: pass a file's text, not its path")
    return "\n\n".join(render_content(segment.value) for segment in segments)


@dataclass(frozen=True)
class _Call:
    """One ``assert_conversation`` call: who plays and grades it, where, and what."""

    judge: AgentvJudge
    agent: Agent
    #: Runs grading on the plugin's loop; ``sync``: the agent is called in the test's thread.
    on_loop: OnLoop[Any]
    sync: bool
    case: Case
    trials: Any
    model: str | None


def _conversation(call: _Call) -> Conversation:
    """The conversation to run: the case validated as an eval file's (a mistake is a
    ``ValueError`` naming its place), its judgement prepared in the test's own thread."""
    __tracebackhide__ = True
    from pydantic import ValidationError

    from ..answers import response_from
    from ..casefiles import expected_replies
    from ..cases import PreparedCase, PreparedTurn, conversation_plan
    from ..conversation import Conversation
    from ..results import CaseResult
    from ..schema.base import problems
    from ..schema.evalfile import EvalSuite
    from ..targets.fixture import agent_call, callable_name
    from ..trials import trials_from_argument

    judge, agent, on_loop = call.judge, call.agent, call.on_loop
    try:
        suite = EvalSuite.model_validate({"tests": [call.case]})
    except ValidationError as exc:
        where = problems(exc).replace("tests.0.", "")
        raise ValueError(f"assert_conversation(): {where}") from None
    spec = suite.evalcases[0]
    plan = conversation_plan(spec, suite)
    assert plan is not None, "a conversation's case has turns"
    if not plan.entries:
        raise ValueError(
            "assert_conversation(): nothing grades this conversation: give a turn "
            "'assertions' or an 'expected_output', or the conversation 'assertions'"
        )
    turns = [
        PreparedTurn(
            _text(turn.input, ("turns", index, "input")),
            (),
            *expected_replies(turn.expected_output, _text, ("turns", index, "expected_output")),
        )
        for index, turn in enumerate(spec.turns or ())
    ]
    shared = tuple(
        {"role": m.role, "content": _text(m.content, ("input", index, "content"))}
        for index, m in enumerate(spec.input_messages)
    )
    prepared = PreparedCase(
        id=judge.item.name if judge.item is not None else spec.id,
        question="",
        input_messages=shared,
        expected_outcome=spec.expected_outcome,
        authored_input=shared,
        turns=tuple(turns),
        folder=judge.item.path.parent if judge.item is not None else Path.cwd(),
        rootdir=judge.run.rootdir,
        v4=True,
    )
    config = trials_from_argument(call.trials) if call.trials is not None else None
    judgement = judge.judgement_for(plan.entries, prepared, {"model": call.model}, config)
    result = partial(CaseResult, eval_id=judge.eval_id, evaluators_listed=True)
    what = f"assert_conversation agent ({callable_name(agent)})"

    async def ask(asked: PreparedCase) -> TargetResponse:
        with agent_call(what):
            reply = agent([dict(message) for message in asked.input_messages])
            if inspect.isawaitable(reply):
                reply = await (on_loop(awaited(reply)) if call.sync else awaited(reply))
        return response_from(reply, what)

    return Conversation(replace(judgement, result=result), plan, prepared, ask, on_loop)


async def _assert(call: _Call) -> EvaluationScore:
    """The one core: the conversation played and graded, its result recorded on the test,
    then pass (the score), xfail, skip or fail."""
    __tracebackhide__ = True
    from ..grading import not_graded
    from ..results import CaseResult

    judge = call.judge
    try:
        talk = _conversation(call)
    except AgentvError as exc:
        judge.settle(not_graded(partial(CaseResult, eval_id=judge.eval_id), exc), CALLER)
        raise AssertionError("unreachable: a conversation that was not graded") from exc
    judge.settle(await talk.run(), CALLER)
    return talk.grading.score()


class ConversationOptions(TypedDict, total=False):
    """The keys of an eval file's conversation case, as keywords (``input``: its shared
    messages, ``assertions``: over the transcript), and the judge's ``model``."""

    assertions: Sequence[str | Mapping[str, Any]] | None
    input: str | Sequence[Mapping[str, Any]] | None
    aggregation: str | None
    on_turn_failure: str | None
    window_size: int | None
    criteria: str | None
    model: str | None


def _case(turns: Sequence[str | Mapping[str, Any]], options: ConversationOptions) -> dict[str, Any]:
    """The keywords as an eval file's case: a turn may be just its message."""
    __tracebackhide__ = True
    check_options("assert_conversation", {"model": options.get("model")})
    unknown = sorted(set(options) - set(ConversationOptions.__annotations__))
    if unknown:
        raise TypeError(f"unexpected keyword argument(s): {', '.join(unknown)}")
    if isinstance(turns, (str, bytes)) or not isinstance(turns, Sequence):
        raise TypeError(
            "assert_conversation(): turns must be a list of messages or "
            f"{{'input': ..., 'assertions': [...]}} mappings, not {type(turns).__name__}"
        )
    given = {key: value for key, value in options.items() if value is not None}
    given.pop("model", None)
    turned = [turn if isinstance(turn, Mapping) else {"input": turn} for turn in turns]
    return {"id": "assert_conversation", "mode": "conversation", "turns": turned, **given}


def assert_conversation(
    agent: Agent,
    *,
    turns: Sequence[str | Mapping[str, Any]],
    trials: int | Mapping[str, Any] | None = None,
    **options: Unpack[ConversationOptions],
) -> EvaluationScore:
    """Play a conversation with ``agent`` and assert on its verdict, as a ``mode:
    conversation`` case of an eval file would be graded.

    ``agent`` is called once per turn with the messages so far (``{"role", "content"}``
    dicts: ``input``'s, then each user turn and the agent's earlier replies) and returns its
    reply. ``turns`` are messages, or ``{"input", "expected_output", "assertions"}`` mappings
    (plain-string assertions are criteria of one judge); ``assertions`` grade the whole
    transcript after the last turn. ``aggregation`` (mean, min, max), ``on_turn_failure``
    (continue, stop), ``window_size`` and ``criteria`` are the file's keys; ``trials`` repeat
    the whole conversation. Pass returns the ``EvaluationScore``; borderline calls
    ``pytest.xfail``; fail raises ``JudgedAssertionError`` with the per-turn table.
    """
    __tracebackhide__ = True
    case = _case(turns, options)
    judge = _judge()
    blocking = judge.run.scheduler.blocking
    model = options.get("model")
    return run_sync(_assert(_Call(judge, agent, blocking, True, case, trials, model)))


async def assert_conversation_async(
    agent: Agent,
    *,
    turns: Sequence[str | Mapping[str, Any]],
    trials: int | Mapping[str, Any] | None = None,
    **options: Unpack[ConversationOptions],
) -> EvaluationScore:
    """The awaitable ``assert_conversation``: an async agent is awaited in the test's own
    event loop, and several conversations can run at once with ``asyncio.gather``."""
    __tracebackhide__ = True
    case = _case(turns, options)
    judge = _judge()
    waiting = judge.run.scheduler.waiting
    model = options.get("model")
    return await _assert(_Call(judge, agent, waiting, False, case, trials, model))
