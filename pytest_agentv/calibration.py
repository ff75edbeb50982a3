"""The canaries graded before the first judged case, and whether the judge is trusted.

A calibration file (``--agentv-calibration``, default ``.agentv/calibration.yaml``) holds canary
cases: an answer, what it is graded against, and the verdict a sane judge must give it. Before
the first case that the session's judge grades, the canaries are graded with that judge, all at
once, through the same client as the cases (so the store replays them and the budget counts
them). If one comes back with another verdict, or cannot be graded, the judge is not trusted:
under ``enforce`` every case it would grade is not graded, with the canaries that went wrong;
under ``warn`` cases are graded anyway and the canaries are reported in a warning.

Each process calibrates once (every pytest-xdist worker: with the store, repeats are free).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .cases import PreparedCase
from .errors import AgentvError, NotGradedError
from .evaluators.base import EvaluationContext
from .evaluators.llm_judge import LlmJudgeEvaluator
from .llm.client import LlmClient
from .llm.usage import PlannedCall, Usage, current_usage
from .results import fmt
from .schema.evaluators import EvaluatorConfig
from .schema.project import Canary
from .verdicts import score_to_verdict

Submit = Callable[[Coroutine[Any, Any, Any]], "concurrent.futures.Future[Any]"]


@dataclass(frozen=True)
class CanaryResult:
    """How the judge graded one canary: its verdict and score, or why it could not."""

    id: str
    expected: str
    verdict: str | None
    score: float
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.verdict == self.expected

    def describe(self) -> str:
        if self.verdict is None:
            return f"{self.id}: expected {self.expected}, not graded ({self.error})"
        return f"{self.id}: expected {self.expected}, got {self.verdict} (score {fmt(self.score)})"

    def row(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "expected": self.expected,
            "verdict": self.verdict,
            "score": self.score,
            "error": self.error,
        }


class Calibration:
    """The run's calibration: its canaries, graded once, and the verdict on the judge."""

    def __init__(
        self,
        path: Path,
        display: str,
        mode: str,
        rootdir: Path,
        judge: LlmClient,
        submit: Submit,
    ) -> None:
        self.path = path
        self.display = display
        self.mode = mode
        self.rootdir = rootdir
        self.judge = judge
        self.submit = submit
        self.usage = Usage()
        self.results: tuple[CanaryResult, ...] | None = None
        #: Why the calibration file could not be read: then no judged case is graded.
        self.error: str | None = None
        self._future: concurrent.futures.Future[tuple[CanaryResult, ...]] | None = None
        self._warned = False

    def canaries(self) -> list[Canary]:
        """Raises ``EvalFileError`` (``path:line:col: field: problem``) for a bad file."""
        from .projectfiles import load_calibration_file

        return load_calibration_file(self.path, self.display).canaries

    def _evaluator(self) -> LlmJudgeEvaluator:
        judge = self.judge
        return LlmJudgeEvaluator(resolve_judge_provider=lambda context: judge)

    def _context(self, canary: Canary) -> EvaluationContext:
        message = {"role": "user", "content": canary.input}
        case = PreparedCase(
            id=canary.id,
            question=canary.input,
            input_messages=(message,),
            expected_outcome=canary.expected_outcome,
            authored_input=(message,),
            dataset="calibration",
            folder=self.path.parent,
            rootdir=self.rootdir,
        )
        entry = EvaluatorConfig(name=canary.id, type="llm_judge", rubrics=canary.rubrics)
        return EvaluationContext(
            eval_case=case,
            candidate=canary.answer,
            target="calibration",
            output_messages=({"role": "assistant", "content": canary.answer},),
            evaluator=entry,
        )

    async def _grade(self, canary: Canary) -> CanaryResult:
        try:
            score = await self._evaluator().evaluate(self._context(canary))
        except AgentvError as exc:
            return CanaryResult(canary.id, canary.verdict, None, 0.0, str(exc))
        if score.error:
            return CanaryResult(canary.id, canary.verdict, None, score.score, score.error)
        verdict = score_to_verdict(score.score, gate_failed=score.gate_failed)
        return CanaryResult(canary.id, canary.verdict, verdict, score.score)

    async def _grade_all(self) -> tuple[CanaryResult, ...]:
        current_usage.set(self.usage)
        try:
            canaries = self.canaries()
        except AgentvError as exc:
            self.error = str(exc)
            self.results = ()
            return self.results
        graded = await asyncio.gather(*(self._grade(canary) for canary in canaries))
        self.results = tuple(graded)
        return self.results

    async def outcome(self) -> tuple[CanaryResult, ...]:
        """The canaries' results, graded on the first call (on the plugin's loop); callers
        that are cancelled do not cancel the grading others wait for."""
        if self._future is None:
            self._future = self.submit(self._grade_all())
        return await asyncio.shield(asyncio.wrap_future(self._future))

    def failures(self) -> list[CanaryResult]:
        return [result for result in self.results or () if not result.ok]

    async def gate(self) -> None:
        """Return once the judge may grade; raise ``NotGradedError`` if it failed calibration
        and the mode is ``enforce``, or if the calibration file is invalid (in either mode)."""
        await self.outcome()
        if self.error is not None:
            raise NotGradedError(f"the calibration file cannot be used: {self.error}")
        failed = self.failures()
        if failed and self.mode == "enforce":
            raise NotGradedError(
                "judge failed calibration: " + "; ".join(result.describe() for result in failed)
            )

    def take_warning(self) -> str | None:
        """Under ``warn``, the failed canaries, once, after they were graded."""
        failed = self.failures()
        if self.mode != "warn" or self._warned or not failed:
            return None
        self._warned = True
        return (
            f"judge {self.judge.model} failed calibration ({self.display}): "
            + "; ".join(result.describe() for result in failed)
            + "; its verdicts were used anyway (--agentv-calibration-mode warn)"
        )

    async def planned_calls(self) -> list[PlannedCall]:
        """The calls grading the canaries would make (``--agentv-estimate``)."""
        evaluator = self._evaluator()
        return [await evaluator.planned_call(self._context(canary)) for canary in self.canaries()]

    def facts(self) -> dict[str, Any] | None:
        """What the summary shows, as plain builtins (sent from pytest-xdist workers)."""
        if self.results is None:
            return None
        return {
            "file": self.display,
            "judge": self.judge.model,
            "mode": self.mode,
            "canaries": [result.row() for result in self.results],
            "error": self.error,
            "usage": dict(self.usage.row()),
        }
