"""One eval case: what was written (``CaseSpec``), which evaluators grade it, and what targets
and evaluators receive once its files are read (``PreparedCase``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .loader import LoadedFile
from .schema.evalfile import EvalCase, EvalSuite, case_metadata, listed_evaluators
from .schema.evaluators import EvaluatorConfig, Preprocessor
from .schema.grading import evaluator_entries
from .schema.messages import render_content
from .schema.suite import MatrixEntry
from .schema.trials import TrialsConfig

_DATASET_SUFFIXES = (".eval.yaml", ".eval.yml", ".eval.jsonl", ".yaml", ".yml", ".jsonl")


@dataclass(frozen=True)
class PreparedTurn:
    """A conversation's turn with its files read: the user's message (files inlined), the
    files it names, and the reply expected (its messages, and their reference answer)."""

    input: str
    input_files: tuple[str, ...] = ()
    expected_messages: tuple[dict[str, Any], ...] = ()
    reference_answer: str = ""


@dataclass(frozen=True)
class PreparedCase:
    """An eval case with its file references read and its derived values computed.

    This is what targets (including an ``agentv_target`` fixture) and evaluators receive.
    """

    id: str
    question: str
    input_messages: tuple[dict[str, Any], ...]
    expected_outcome: str = ""
    reference_answer: str = ""
    expected_messages: tuple[dict[str, Any], ...] = ()
    authored_input: tuple[dict[str, Any], ...] = ()
    input_files: tuple[str, ...] = ()
    #: Input files matching ``.agentv/config.yaml`` ``guideline_patterns`` (not in input_files).
    guideline_files: tuple[str, ...] = ()
    #: Their text, as AgentV shows it to models: ``<file path="name">...</file>`` blocks.
    guidelines: str = ""
    conversation_id: str | None = None
    dataset: str = ""
    folder: Path = field(default_factory=Path.cwd)
    rootdir: Path = field(default_factory=Path.cwd)
    #: The eval file the case comes from.
    eval_file: Path | None = None
    #: Which trial of the case this is (0, 1, ...): the CLI target's ``{ATTEMPT}``.
    attempt: int = 0
    #: The file is written with AgentV v4's names, so v4's defaults apply where they differ
    #: from v2.5.8's (a trajectory's ``args`` compared exactly).
    v4: bool = False
    #: A conversation's turns (``conversation/`` asks and grades them one by one).
    turns: tuple[PreparedTurn, ...] = ()
    #: The turn of a conversation this case asks or grades (1, 2...); 0: not a turn.
    turn: int = 0
    #: The folder the case's target works in (AgentV v4 ``workspace:``), while it answers.
    workspace_path: str | None = None
    #: The target of this pair of a target matrix: what was recorded is looked up per pair.
    matrix_target: str | None = None
    #: The case's metadata, its file's merged in (``CaseSpec.metadata``).
    metadata: dict[str, Any] | None = None
    #: The file's content preprocessors (AgentV v4), which its LLM judges read files with.
    preprocessors: tuple[Preprocessor, ...] = ()


def _default_kind(case: EvalCase, suite: EvalSuite) -> str:
    return case.evaluator or case.grader or suite.evaluator or suite.grader or "llm_judge"


def effective_evaluators(case: EvalCase, suite: EvalSuite) -> tuple[EvaluatorConfig, ...]:
    """The listed evaluators (see ``listed_evaluators``), inline ``rubrics`` first, else the
    case's or file's default kind (``llm_judge`` unless the file says otherwise); a
    conversation's, every turn's too (``conversation_plan``)."""
    plan = conversation_plan(case, suite)
    if plan is not None:
        return plan.entries
    return evaluator_entries(
        listed_evaluators(case, suite), case.rubrics, _default_kind(case, suite)
    )


def prompt_text(messages: Iterable[Mapping[str, Any]]) -> str:
    """Messages as one prompt: their texts, one after another; when they hold a reply (an
    assistant or tool message: a conversation), each under its role (``@[User]:``), as AgentV
    shows a conversation to a model or agent."""
    said = [(str(m["role"]), text) for m in messages if (text := render_content(m["content"]))]
    if not any(role in ("assistant", "tool") for role, _ in said):
        return "\n\n".join(text for _, text in said)
    return "\n\n".join(f"@[{role.capitalize()}]:\n{text}" for role, text in said)


@dataclass(frozen=True)
class ConversationPlan:
    """What grades a conversation: each turn's entries (none: nothing checks that turn), the
    entries over its whole transcript, and how their scores make the case's."""

    turns: tuple[tuple[EvaluatorConfig, ...], ...]
    transcript: tuple[EvaluatorConfig, ...]
    aggregation: str = "mean"
    on_turn_failure: str = "continue"
    window_size: int | None = None

    @property
    def entries(self) -> tuple[EvaluatorConfig, ...]:
        """Every entry, once: the kinds the case needs, and the judges it calls."""
        return (*(entry for turn in self.turns for entry in turn), *self.transcript)


def conversation_plan(case: EvalCase, suite: EvalSuite) -> ConversationPlan | None:
    """A conversation's turns and transcript entries: a turn's assertions, else the default kind
    when it expects a reply; the case's listed entries (and inline rubrics) over the transcript
    (AgentV v4 ``runConversationMode``)."""
    if case.turns is None:
        return None
    kind = _default_kind(case, suite)
    listed = listed_evaluators(case, suite)
    transcript = evaluator_entries(listed, case.rubrics, kind) if listed or case.rubrics else ()
    return ConversationPlan(
        turns=tuple(
            tuple(turn.assertions or ())
            or (evaluator_entries((), None, kind) if turn.expected_output else ())
            for turn in case.turns
        ),
        transcript=transcript,
        aggregation=case.aggregation or "mean",
        on_turn_failure=case.on_turn_failure or "continue",
        window_size=case.window_size,
    )


@dataclass(frozen=True)
class CaseSpec:
    """A case as its file wrote it, and the evaluators that grade it; file data is shared."""

    loaded: LoadedFile
    index: int
    #: Every entry that grades the case (a conversation's: every turn's too).
    evaluators: tuple[EvaluatorConfig, ...]
    conversation: ConversationPlan | None = None
    #: The target of this (case, target) pair of a matrix (``execution.targets``).
    matrix_target: str | None = None

    @classmethod
    def all_of(cls, loaded: LoadedFile, *, matrix: bool = True) -> list[CaseSpec]:
        """The file's cases, a case once per target of its matrix (unless ``matrix`` is off:
        ``--agentv-target`` names the one target every case runs on)."""
        suite = loaded.suite
        specs = []
        for index, case in enumerate(suite.evalcases):
            evaluators = effective_evaluators(case, suite)
            plan = conversation_plan(case, suite)
            targets: list[str | None] = [*matrix_targets(loaded, index)] if matrix else []
            specs += [cls(loaded, index, evaluators, plan, target) for target in targets or [None]]
        return specs

    @property
    def case(self) -> EvalCase:
        return self.loaded.suite.evalcases[self.index]

    @property
    def matrix_entry(self) -> MatrixEntry | None:
        """This pair's entry of the matrix (its ``use_target`` and hooks)."""
        target = self.matrix_target
        return None if target is None else matrix_entry(self.loaded, self.index, target)

    @property
    def label(self) -> str:
        """The case's id, and a matrix pair's target: ``case[target]``."""
        target = self.matrix_target
        return self.case.id if target is None else f"{self.case.id}[{target}]"

    @property
    def listed(self) -> bool:
        """Whether the file lists this case's evaluators (rubrics count), rather than leaving
        it to the default kind: AgentV's results then carry ``evaluator_results`` (a
        conversation's: one per turn)."""
        listed = self.case.rubrics or listed_evaluators(self.case, self.loaded.suite)
        return bool(listed or self.conversation)

    @property
    def result_fields(self) -> dict[str, Any]:
        """What a ``CaseResult`` of the case says of it: its identity in its file, what it
        asked (and, when that is more than one user message, the messages with their roles:
        v4's results give them as ``input``) and what it expected."""
        texts = self._input_texts()
        return {
            "eval_id": self.case.id,
            "dataset": self.dataset,
            "file": self.loaded.display,
            "line": self.line + 1,
            "conversation_id": self.case.conversation_id,
            "evaluators_listed": self.listed,
            "question": prompt_text(texts),
            "input_messages": () if [m["role"] for m in texts] == ["user"] else tuple(texts),
            "expected_outcome": self.case.expected_outcome,
            "metadata": self.metadata,
        }

    @property
    def metadata(self) -> dict[str, Any] | None:
        """The case's ``metadata`` with the file's (its ``governance`` too) merged in."""
        return case_metadata(self.case, self.loaded.suite)

    @property
    def question(self) -> str:
        """The text of the case's input messages, without the files they name."""
        return prompt_text(self._input_texts())

    def _input_texts(self) -> list[dict[str, str]]:
        return [
            {
                "role": message.role,
                "content": "\n\n".join(
                    text
                    for segment in message.content
                    if segment.type != "file" and (text := render_content(segment.value))
                ),
            }
            for message in self.case.input_messages
        ]

    @property
    def line(self) -> int:
        """0-based line of the case in its file."""
        return self.loaded.case_lines[self.index]

    @property
    def where(self) -> str:
        """``file:line`` of the case (in the dataset it is written in), as failure headlines and
        not-graded reasons show it."""
        return f"{self.loaded.case_file(self.index)[0]}:{self.line + 1}"

    def located(self, problem: str) -> str:
        """``problem`` at the case (``file:line: problem``), unless it already names its place
        in the case's file (``file:line:col: field: ...``): the location is said once."""
        files = {self.loaded.display, self.loaded.case_file(self.index)[0]}
        own = problem.startswith(tuple(f"{file}:" for file in files))
        return problem if own else f"{self.where}: {problem}"

    @property
    def dataset(self) -> str:
        """The file's ``dataset``; in a v4 file, its ``name`` (AgentV v4 calls it the suite and
        writes it in its results); else the file's name without its suffix."""
        suite = self.loaded.suite
        if suite.dataset or (suite.v4 and suite.name):
            return str(suite.dataset or suite.name)
        name = self.loaded.path.name
        for suffix in _DATASET_SUFFIXES:
            if name.endswith(suffix):
                return name[: -len(suffix)]
        return name

    @property
    def trials(self) -> TrialsConfig | None:
        """The case's ``execution.trials``, else the file's: the case's block wins whole."""
        case, suite = self.case, self.loaded.suite
        return (case.execution.trials if case.execution else None) or (
            suite.execution.trials if suite.execution else None
        )

    @property
    def workers(self) -> tuple[str, int] | None:
        """The file's cap on its cases in flight at once (AgentV v4's ``execution.workers``),
        with the file it belongs to; None: only the run's limits hold."""
        execution = self.loaded.suite.execution
        cap = execution.workers if execution else None
        return None if cap is None else (self.loaded.display, cap)

    @property
    def budget_usd(self) -> float | None:
        """The file's ``execution.budget_usd`` (AgentV v4): what its cases may spend together."""
        execution = self.loaded.suite.execution
        return execution.budget_usd if execution else None

    def threshold(self, override: float | None) -> float | None:
        """The case's pass bar: ``override`` (``--agentv-threshold``), else the case's
        ``execution.threshold``, else the file's (AgentV v4: CLI > test > suite)."""
        case, suite = self.case, self.loaded.suite
        own = case.execution.threshold if case.execution else None
        file = suite.execution.threshold if suite.execution else None
        return next((t for t in (override, own, file) if t is not None), None)

    @property
    def target_name(self) -> str | None:
        case, suite = self.case, self.loaded.suite
        return (
            self.matrix_target
            or (case.execution.target if case.execution else None)
            or (suite.execution.target if suite.execution else None)
            or suite.target
        )


def matrix_targets(loaded: LoadedFile, index: int) -> list[str]:
    """The targets case ``index`` runs on, once each (AgentV v4): its ``execution.targets``,
    else the file's; where both are given, the case's among the file's (in the case's order)."""
    own, file = _matrices(loaded, index)
    if own is None or file is None:
        return [entry.name for entry in own or file or []]
    names = [entry.name for entry in file]
    shared = [entry.name for entry in own if entry.name in names]
    if not shared:
        loc = ("evalcases", index, "execution", "targets")
        problem = f"none of these is in the file's targets ({', '.join(names)})"
        raise loaded.error_at(loc, problem, index)
    return shared


def _matrices(
    loaded: LoadedFile, index: int
) -> tuple[list[MatrixEntry] | None, list[MatrixEntry] | None]:
    suite, case = loaded.suite, loaded.suite.evalcases[index]
    own = case.execution.targets if case.execution else None
    return own, suite.execution.targets if suite.execution else None


def matrix_entry(loaded: LoadedFile, index: int, name: str) -> MatrixEntry | None:
    """The matrix entry of target ``name`` for case ``index``: the case's own when it says more
    than the name (``use_target``, ``hooks``), else the file's."""
    found = [
        entry
        for entries in _matrices(loaded, index)
        for entry in entries or ()
        if entry.name == name
    ]
    return next(
        (entry for entry in found if entry.use_target or entry.hooks), found[0] if found else None
    )
