"""Conversation cases (AgentV v4.15's ``mode: conversation``), turn by turn.

Each turn sends the target the whole history so far (the shared input, every earlier user turn
and the target's own earlier replies) and grades the reply through the one grading path
(``grading.grade_answers``), with ``window_size`` turns of the conversation in the graders'
view. The case's own entries then grade the whole transcript. The case's score aggregates the
turns' scores and the transcript's (mean, min or max, as AgentV v4 does); a gate in any of them
fails the case. ``on_turn_failure: stop`` leaves the turns after one that did not pass unsent,
each scoring 0. A turn that cannot be answered or graded leaves the case not graded, naming the
turn, with the turns graded before it kept. Trials repeat whole conversations.
"""

from __future__ import annotations

import statistics
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..answers import TargetResponse
from ..cases import ConversationPlan, PreparedCase
from ..errors import JudgeNotConfiguredError, NotGradedError
from ..evaluators.base import CaseEvaluation, EvaluationContext, EvaluationScore, EvaluatorResult
from ..grading import Grading, Judgement, OnLoop, grade_answers, not_graded
from ..llm.usage import Usage, current_usage
from ..results import CaseResult, Status, TurnRow
from ..schema.evaluators import EvaluatorConfig
from .turns import Step, joined, walk

#: Asks the target one turn: the case holds the history so far.
Ask = Callable[[PreparedCase], Awaitable[TargetResponse]]

#: The type AgentV v4 gives a turn's entry, and the conversation's, among a row's graders.
TURN_TYPE = "rubrics"

_AGGREGATES: dict[str, Callable[[Sequence[float]], float]] = {
    "mean": statistics.fmean,
    "min": min,
    "max": max,
}


def turn_row(
    number: int,
    said: str,
    answer: str | None,
    score: EvaluationScore | None = None,
    error: str | None = None,
) -> TurnRow:
    """A turn as results show it: None for the score of a turn nothing checks."""
    row = TurnRow(
        turn=number,
        input=said,
        answer=answer,
        score=score.score if score is not None else None,
        verdict=score.verdict if score is not None else None,
        gate_failed=score.gate_failed if score is not None else False,
        assertions=list(score.assertions) if score is not None else [],
    )
    if score is not None and score.reasoning:
        row["reasoning"] = score.reasoning
    if error:
        row["error"] = error
    return row


@dataclass
class Played:
    """One attempt at a conversation, as far as it went."""

    turns: list[TurnRow] = field(default_factory=list)
    #: ``turn-<n>`` for each turn that was graded or not sent, then ``conversation``.
    results: list[EvaluatorResult] = field(default_factory=list)
    #: What the turns' graders spent, not yet counted in the case.
    usage: Usage = field(default_factory=Usage)

    def evaluation(self, aggregation: str) -> CaseEvaluation:
        """The case's score: the turns' and the transcript's scores aggregated; a gate in any
        of them fails it; their checks, named by turn."""
        scores = [result.score for result in self.results]
        label = {r.name: r.name.replace("-", " ") for r in self.results}
        aggregate = EvaluationScore.graded(
            _AGGREGATES[aggregation]([s.score for s in scores]),
            gate_failed=any(s.gate_failed for s in scores),
            hits=[f"{label[r.name]}: {hit}" for r in self.results for hit in r.score.hits],
            misses=[f"{label[r.name]}: {miss}" for r in self.results for miss in r.score.misses],
            details={"aggregation": aggregation, "turns": list(self.turns)},
        )
        return CaseEvaluation(aggregate, tuple(self.results))

    def counted(self) -> None:
        """Count what the turns' graders spent in the case whose answer is being awaited."""
        usage = current_usage.get()
        if usage is not None:
            usage.merge(self.usage)
        self.usage = Usage()


class Conversation:
    """A conversation case run to its ``CaseResult``: ``judgement`` is the case's (its
    evaluators, how it is seen, its trials and calibration gate), ``ask`` gets the target's
    reply to a turn (where the case's answers are got) and ``on_loop`` grades on the plugin's
    loop."""

    def __init__(
        self,
        judgement: Judgement,
        plan: ConversationPlan,
        case: PreparedCase,
        ask: Ask,
        on_loop: OnLoop[Any],
    ) -> None:
        self.judgement = judgement
        self.plan = plan
        self.case = case
        self.ask = ask
        self.on_loop = on_loop
        self.played: dict[int, Played] = {}
        self.last = 0
        #: The case's grading: its usage, trials and score (``assert_conversation`` returns it).
        self.grading = Grading(replace(judgement, graded=self._concluded, result=self._result))

    async def run(self) -> CaseResult:
        """Every attempt (one, or the trials) plays the whole conversation."""
        grading = self.grading

        def answer(attempt: int) -> Awaitable[TargetResponse]:
            return grading.counted(self.play(attempt))

        return await grade_answers(grading, answer, self.on_loop)

    def _result(self, status: Status, **values: Any) -> CaseResult:
        """The case's result, with the turns of the attempt it shows."""
        aggregation = values.get("aggregation")
        shown = self.played.get(aggregation["shown_attempt"] if aggregation else self.last)
        return self.judgement.result(status, turns=tuple(shown.turns if shown else ()), **values)

    async def _concluded(self, context: EvaluationContext) -> CaseEvaluation:
        played = self.played[context.attempt]
        played.counted()
        return played.evaluation(self.plan.aggregation)

    async def play(self, attempt: int) -> TargetResponse:
        """One attempt: each turn asked with the history so far and graded, then the whole
        transcript graded; the replies are the attempt's answer."""
        played = self.played[attempt] = Played()
        self.last = attempt
        try:
            return await self._play(played, attempt)
        except BaseException:
            played.counted()
            raise

    async def _play(self, played: Played, attempt: int) -> TargetResponse:
        failed = 0

        async def take(step: Step) -> TargetResponse | None:
            nonlocal failed
            if failed:
                reason = f"not sent: turn {failed} did not pass (on_turn_failure: stop)"
                unsent = EvaluationScore.graded(0.0, misses=(reason,))
                played.turns.append(turn_row(step.number, step.said, None, unsent, reason))
                played.results.append(
                    EvaluatorResult(f"turn-{step.number}", TURN_TYPE, 1.0, unsent)
                )
                return None
            response = await self._answer(played, step.asked)
            if step.entries:
                name = f"turn-{step.number}"
                score = await self._grade(played, name, step.entries, step.view(), response)
                played.turns.append(turn_row(step.number, step.said, response.text, score))
                passed = score.verdict == "pass"
                failed = step.number if self.plan.on_turn_failure == "stop" and not passed else 0
            else:
                played.turns.append(turn_row(step.number, step.said, response.text))
            return response

        replies, transcript = await walk(self.case, self.plan, attempt, take)
        answer = joined(replies)
        if self.plan.transcript:
            whole = replace(answer, text=transcript.question)
            await self._grade(played, "conversation", self.plan.transcript, transcript, whole)
        return answer

    def _failed(
        self, played: Played, result: CaseResult, asked: PreparedCase, answer: str | None
    ) -> Exception:
        """Why the attempt ends where turn ``asked.turn`` (0: the transcript) could not be
        answered or graded; the turn is shown with the reason."""
        number = asked.turn
        if number:
            said = self.case.turns[number - 1].input
            played.turns.append(turn_row(number, said, answer, None, result.error))
        if result.status == "skipped":
            return JudgeNotConfiguredError(str(result.error))
        where = f"turn {number}" if number else "the conversation's assertions"
        return NotGradedError(f"{where}: {result.error}")

    async def _answer(self, played: Played, asked: PreparedCase) -> TargetResponse:
        try:
            return await self.ask(asked)
        except self.judgement.catches as exc:
            raise self._failed(played, not_graded(self.judgement.result, exc), asked, None) from exc

    async def _grade(
        self,
        played: Played,
        name: str,
        entries: Sequence[EvaluatorConfig],
        view: PreparedCase,
        response: TargetResponse,
    ) -> EvaluationScore:
        """Grade one turn's reply (or the transcript) through the one grading path."""
        case_context = self.judgement.context

        def context(answer: TargetResponse, _: int) -> EvaluationContext:
            return replace(case_context(answer, view.attempt), eval_case=view)

        grading = Grading(
            replace(
                self.judgement,
                entries=tuple(entries),
                context=context,
                policy=None,
                gate=None,
                graded=None,
            )
        )

        async def given(_: int) -> TargetResponse:
            return response

        result = await grade_answers(grading, given, self.on_loop)
        played.usage.merge(grading.usage)
        if result.status != "graded" or grading.evaluation is None:
            raise self._failed(played, result, view, response.text)
        evaluation = grading.evaluation
        score = replace(evaluation.score, evaluator_results=evaluation.evaluator_results)
        played.results.append(EvaluatorResult(name, TURN_TYPE, 1.0, score))
        return score
