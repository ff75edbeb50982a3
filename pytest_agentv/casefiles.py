"""A case's files read: its input files inlined, the guideline files taken out of its messages,
its expected replies, as ``PreparedCase`` carries them to targets and evaluators."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .cases import CaseSpec, PreparedCase, PreparedTurn
from .errors import ConfigError
from .paths import glob_match, read_reference, resolve_reference
from .schema.messages import ContentSegment, Message, render_content

#: The header under which AgentV puts guideline files in a model's system message.
GUIDELINES_HEADER = "[[ ## Guidelines ## ]]"


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
    segments: Sequence[ContentSegment],
    loc: tuple[int | str, ...],
    files: list[str],
    guidelines: dict[str, str] | None = None,
) -> str:
    """Message content's text with its files inlined; files that are guidelines (input messages
    only) go to ``guidelines`` instead, by path, as AgentV takes them out of the message."""
    parts: list[str] = []
    folder = spec.loaded.path.parent
    for s_index, segment in enumerate(segments):
        if segment.type == "file":
            seg_loc = (*loc, s_index, "value")
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
    here: tuple[int | str, ...] = ("evalcases", spec.index)
    for m_index, message in enumerate(case.input_messages):
        loc = (*here, "input_messages", m_index, "content")
        text = _segment_text(spec, rootdir, message.content, loc, files, guidelines)
        chat.append({"role": message.role, "content": text})

    def text_of(segments: Sequence[ContentSegment], loc: tuple[int | str, ...]) -> str:
        return _segment_text(spec, rootdir, segments, loc, [])

    at = (*here, "expected_messages")
    expected, reference = expected_replies(case.expected_messages, text_of, at)
    turns: list[PreparedTurn] = []
    for t_index, turn in enumerate(case.turns or ()):
        at = (*here, "turns", t_index)
        read: list[str] = []
        said = _segment_text(spec, rootdir, turn.input, (*at, "input"), read)
        replies, answer = expected_replies(turn.expected_output, text_of, (*at, "expected_output"))
        turns.append(PreparedTurn(said, tuple(read), replies, answer))
    return PreparedCase(
        id=case.id,
        question=spec.question,
        input_messages=tuple(chat),
        expected_outcome=case.expected_outcome,
        reference_answer=reference,
        expected_messages=expected,
        turns=tuple(turns),
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
        matrix_target=spec.matrix_target,
        metadata=spec.metadata,
        preprocessors=tuple(spec.loaded.suite.preprocessors or ()),
    )


#: Reads one message's content with its files inlined, at the content's place in the file.
TextOf = Callable[[Sequence[ContentSegment], tuple[int | str, ...]], str]


def expected_replies(
    messages: Sequence[Message], text_of: TextOf, at: tuple[int | str, ...] = ()
) -> tuple[tuple[dict[str, Any], ...], str]:
    """Expected messages as evaluators see them (files inlined by ``text_of``), and the
    reference answer: the last one's content, else its tool calls."""
    expected: list[dict[str, Any]] = []
    for m_index, message in enumerate(messages):
        has_files = any(s.type == "file" for s in message.content)
        content: Any = (
            text_of(message.content, (*at, m_index, "content"))
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
    return tuple(expected), reference
