"""What an LLM judge reads of an answer given as content blocks (AgentV v4's
``content-preprocessor.ts``): its text blocks as written and each file block as its content,
under ``[[ file: path ]]`` — a preprocessor's output for the file's media type (``xlsx``,
``application/pdf``...), else the file read as UTF-8. What cannot be shown (a remote or binary
file, one outside the rootdir and the case's workspace) is said in a
``[file preprocessing warning]`` line, as v4 says it, so the judge knows what it did not see.

A preprocessor runs like a code judge (bounded, scrubbed environment), with
``{path, original_path, media_type}`` on its stdin. One that cannot start, or that fails, leaves
the case not graded (AgentV grades the answer with a warning line instead): the judge would
grade an answer it was not shown.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from ..errors import ConfigError, NotGradedError
from ..paths import MAX_FILE_BYTES, read_bounded
from ..schema.evaluators import Preprocessor
from .base import EvaluationContext
from .scripts import Scripts

#: Media type names AgentV v4 takes as the full type (``MIME_TYPE_ALIASES``).
_MEDIA_TYPES = {
    "csv": "text/csv",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "htm": "text/html",
    "html": "text/html",
    "json": "application/json",
    "markdown": "text/markdown",
    "md": "text/markdown",
    "pdf": "application/pdf",
    "sql": "application/sql",
    "txt": "text/plain",
    "xhtml": "application/xhtml+xml",
    "xls": "application/vnd.ms-excel",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "xml": "application/xml",
    "yaml": "application/yaml",
    "yml": "application/yaml",
}
_BLOCK_TYPES = frozenset({"text", "image", "file"})
_REMOTE = re.compile(r"^[a-z]+://", re.IGNORECASE)
_BINARY = "default UTF-8 read produced binary or invalid text; configure a preprocessor"


def media_type(name: str) -> str:
    normal = name.strip().lower()
    return _MEDIA_TYPES.get(normal, normal)


def content_blocks(content: Any) -> list[Mapping[str, Any]] | None:
    """Message content that is v4's content blocks (``{type: text|image|file, ...}``)."""
    if isinstance(content, list) and content:
        if all(isinstance(b, Mapping) and b.get("type") in _BLOCK_TYPES for b in content):
            return content
    return None


class _Unread(Exception):
    """Why a file block's content is not shown (a warning line, not an error)."""


async def judged_text(context: EvaluationContext, scripts: Scripts) -> str | None:
    """The answer as an LLM judge reads it when its last assistant message is content blocks;
    None when it is not (the judge reads the answer's text)."""
    messages = context.output_messages or ()
    last = next(
        (m for m in reversed(messages) if m.get("role") == "assistant" and m.get("content")),
        None,
    )
    blocks = content_blocks(last.get("content")) if last is not None else None
    if blocks is None:
        return None
    case, entry = context.eval_case, context.evaluator
    chosen = {
        media_type(p.type): p
        for p in (*case.preprocessors, *((entry.preprocessors or ()) if entry else ()))
    }
    parts: list[str] = []
    notes: list[str] = []
    for block in blocks:
        if block["type"] == "text":
            parts.append(str(block.get("text", "")))
        elif block["type"] == "file":
            shown = str(block.get("path", ""))
            kind = str(block.get("media_type", ""))
            try:
                text = await _file_text(context, shown, kind, chosen, scripts)
            except _Unread as why:
                notes.append(f"[file preprocessing warning] {shown} ({kind}): {why}")
                continue
            if text:
                parts.append(f"[[ file: {shown} ]]\n{text}")
    return "\n".join(part for part in ("\n".join(parts), *notes) if part)


def _located(context: EvaluationContext, shown: str) -> Path:
    """A file block's file: a ``file://`` URL, or a path from the case's workspace (else the
    rootdir); it must stay inside one of them."""
    if shown.lower().startswith("file://"):
        path = Path(unquote(urlparse(shown).path))
    elif _REMOTE.match(shown):
        raise _Unread("remote file paths are not supported for preprocessing")
    else:
        case = context.eval_case
        path = Path(context.workspace_path or case.rootdir) / shown
    real = path.resolve()
    roots = [Path(p).resolve() for p in (context.workspace_path, context.eval_case.rootdir) if p]
    if not any(real.is_relative_to(root) for root in roots):
        raise _Unread("outside the rootdir and the case's workspace; not read")
    return real


async def _file_text(
    context: EvaluationContext,
    shown: str,
    kind: str,
    chosen: Mapping[str, Preprocessor],
    scripts: Scripts,
) -> str:
    path = _located(context, shown)
    preprocessor = chosen.get(media_type(kind))
    if preprocessor is not None:
        return await _converted(context, path, shown, kind, preprocessor, scripts)
    try:
        data = read_bounded(path)
    except OSError as exc:
        raise _Unread(exc.strerror or str(exc)) from None
    if data is None:
        raise _Unread(f"larger than {MAX_FILE_BYTES:,} bytes; configure a preprocessor")
    text = data.decode("utf-8", "replace").replace("\r\n", "\n")
    if b"\0" in data or "\ufffd" in text:
        raise _Unread(_BINARY)
    return text


async def _converted(
    context: EvaluationContext,
    path: Path,
    shown: str,
    kind: str,
    preprocessor: Preprocessor,
    scripts: Scripts,
) -> str:
    case = context.eval_case
    what = f"preprocessor '{preprocessor.type}'"
    try:
        argv: Sequence[str] = preprocessor.argv(case.folder, case.rootdir)
    except ConfigError as exc:
        raise ConfigError(f"{what} cannot start: {exc}") from None
    payload = {"path": str(path), "original_path": shown, "media_type": kind}
    run = await scripts.run(argv, payload, case=case, what=what)
    if run.failure is not None:
        raise NotGradedError(f"{run.failure} (converting {shown} for the judge)")
    return run.stdout.decode("utf-8", "replace").strip()
