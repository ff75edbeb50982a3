"""One eval case: what was written (``CaseSpec``), which evaluators grade it, and what targets
and evaluators receive once its files are read (``PreparedCase``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ConfigError
from .loader import LoadedFile
from .paths import glob_match, read_reference, resolve_reference
from .schema.evalfile import EvalCase, EvalSuite, listed_evaluators
from .schema.evaluators import EvaluatorConfig, evaluator_entries
from .schema.messages import Message, render_content
from .schema.trials import TrialsConfig

_DATASET_SUFFIXES = (".eval.yaml", ".eval.yml", ".eval.jsonl", ".yaml", ".yml", ".jsonl")
#: The header under which AgentV puts guideline files in a model's system message.
GUIDELINES_HEADER = "[[ ## Guidelines ## ]]"


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
    #: The folder the case's target works in (AgentV v4 ``workspace:``), while it answers.
    workspace_path: str | None = None


def effective_evaluators(case: EvalCase, suite: EvalSuite) -> tuple[EvaluatorConfig, ...]:
    """The listed evaluators (see ``listed_evaluators``), inline ``rubrics`` first, else the
    case's or file's default kind (``llm_judge`` unless the file says otherwise)."""
    default = case.evaluator or case.grader or suite.evaluator or suite.grader or "llm_judge"
    return evaluator_entries(listed_evaluators(case, suite), case.rubrics, default)


@dataclass(frozen=True)
class CaseSpec:
    """A case as its file wrote it, and the evaluators that grade it; file data is shared."""

    loaded: LoadedFile
    index: int
    evaluators: tuple[EvaluatorConfig, ...]

    @classmethod
    def all_of(cls, loaded: LoadedFile) -> list[CaseSpec]:
        suite = loaded.suite
        return [
            cls(loaded, index, effective_evaluators(case, suite))
            for index, case in enumerate(suite.evalcases)
        ]

    @property
    def case(self) -> EvalCase:
        return self.loaded.suite.evalcases[self.index]

    @property
    def listed(self) -> bool:
        """Whether the file lists this case's evaluators (rubrics count), rather than leaving
        it to the default kind: AgentV's results then carry ``evaluator_results``."""
        return bool(self.case.rubrics or listed_evaluators(self.case, self.loaded.suite))

    @property
    def question(self) -> str:
        """The text of the case's input messages, without the files they name."""
        return "\n\n".join(
            text
            for message in self.case.input_messages
            for segment in message.content
            if segment.type != "file" and (text := render_content(segment.value))
        )

    @property
    def line(self) -> int:
        """0-based line of the case in its file."""
        return self.loaded.case_lines[self.index]

    @property
    def where(self) -> str:
        """``file:line`` of the case, as failure headlines and not-graded reasons show it."""
        return f"{self.loaded.display}:{self.line + 1}"

    def located(self, problem: str) -> str:
        """``problem`` at the case (``file:line: problem``), unless it already names its place
        in the case's file (``file:line:col: field: ...``): the location is said once."""
        own = problem.startswith(f"{self.loaded.display}:")
        return problem if own else f"{self.where}: {problem}"

    @property
    def dataset(self) -> str:
        name = self.loaded.path.name
        for suffix in _DATASET_SUFFIXES:
            if name.endswith(suffix):
                name = name[: -len(suffix)]
                break
        return self.loaded.suite.dataset or name

    @property
    def trials(self) -> TrialsConfig | None:
        """The case's ``execution.trials``, else the file's: the case's block wins whole."""
        case, suite = self.case, self.loaded.suite
        return (case.execution.trials if case.execution else None) or (
            suite.execution.trials if suite.execution else None
        )

    @property
    def target_name(self) -> str | None:
        case, suite = self.case, self.loaded.suite
        return (
            (case.execution.target if case.execution else None)
            or (suite.execution.target if suite.execution else None)
            or suite.target
        )


def _is_guideline(path: Path, rootdir: Path, patterns: tuple[str, ...]) -> bool:
    """AgentV matches guideline patterns against the file's path from the repository root."""
    try:
        relative = path.relative_to(rootdir.resolve()).as_posix()
    except ValueError:
        return False
    return any(glob_match(pattern, relative) for pattern in patterns)


def _segment_text(
    spec: CaseSpec,
    rootdir: Path,
    message: Message,
    loc: tuple[int | str, ...],
    files: list[str],
    guidelines: dict[str, str] | None = None,
) -> str:
    """A message's text with its files inlined; files that are guidelines (input messages only)
    go to ``guidelines`` instead, by path, as AgentV takes them out of the message."""
    parts: list[str] = []
    folder = spec.loaded.path.parent
    for s_index, segment in enumerate(message.content):
        if segment.type == "file":
            seg_loc = (*loc, "content", s_index, "value")
            try:
                path = resolve_reference(segment.value, start=folder, rootdir=rootdir)
                text = read_reference(path, segment.value)
            except ConfigError as exc:
                raise _FileProblem(seg_loc, str(exc)) from None
            if guidelines is not None and _is_guideline(
                path, rootdir, spec.loaded.guideline_patterns
            ):
                guidelines.setdefault(str(path), text)
                continue
            files.append(str(path))
            parts.append(f'<file path="{segment.value}">\n{text}\n</file>')
        else:
            parts.append(render_content(segment.value))
    return "\n\n".join(parts)


def guideline_block(guideline_files: dict[str, str]) -> str:
    """Guideline files as AgentV shows them to models: one ``<file path="name">`` block each,
    named by file name, text trimmed."""
    blocks = []
    for path, text in guideline_files.items():
        body = text.replace("\r\n", "\n").strip()
        blocks.append(f'<file path="{Path(path).name}">\n{body}\n</file>')
    return "\n\n".join(blocks)


class _FileProblem(Exception):
    """A file a case names cannot be read: where it is named, and why."""

    def __init__(self, loc: tuple[int | str, ...], message: str) -> None:
        super().__init__(message)
        self.loc = loc


def prepare_case(spec: CaseSpec, rootdir: Path) -> PreparedCase:
    """Read the case's file references (inside the rootdir only) and derive its values; a file
    that cannot be read is a ``ConfigError`` at the place the eval file names it."""
    try:
        return _prepared(spec, rootdir)
    except _FileProblem as problem:
        raise ConfigError(
            str(spec.loaded.error_at(problem.loc, str(problem), spec.index))
        ) from None


def _prepared(spec: CaseSpec, rootdir: Path) -> PreparedCase:
    case = spec.case
    files: list[str] = []
    guidelines: dict[str, str] = {}
    chat: list[dict[str, Any]] = []
    for m_index, message in enumerate(case.input_messages):
        loc = ("evalcases", spec.index, "input_messages", m_index)
        text = _segment_text(spec, rootdir, message, loc, files, guidelines)
        chat.append({"role": message.role, "content": text})
    expected: list[dict[str, Any]] = []
    for m_index, message in enumerate(case.expected_messages):
        has_files = any(s.type == "file" for s in message.content)
        content: Any = (
            _segment_text(
                spec, rootdir, message, ("evalcases", spec.index, "expected_messages", m_index), []
            )
            if has_files
            else message.authored_content()
        )
        entry: dict[str, Any] = {"role": message.role, "content": content}
        if message.tool_calls:
            entry["tool_calls"] = message.tool_calls
        expected.append(entry)
    reference = ""
    if expected:
        last = expected[-1]
        reference = (
            render_content(last["content"])
            if last["content"] not in ("", [], None)
            else render_content(last.get("tool_calls") or "")
        )
    return PreparedCase(
        id=case.id,
        question=spec.question,
        input_messages=tuple(chat),
        expected_outcome=case.expected_outcome,
        reference_answer=reference,
        expected_messages=tuple(expected),
        authored_input=tuple(
            {
                **m.model_dump(exclude_none=True, exclude={"content"}),
                "content": m.authored_content(),
            }
            for m in case.input_messages
        ),
        input_files=tuple(files),
        guideline_files=tuple(guidelines),
        guidelines=guideline_block(guidelines),
        conversation_id=case.conversation_id,
        dataset=spec.dataset,
        folder=spec.loaded.path.parent,
        rootdir=rootdir,
        eval_file=spec.loaded.path,
        v4=spec.loaded.suite.v4,
    )
