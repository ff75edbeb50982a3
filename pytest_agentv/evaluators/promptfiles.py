"""Judge prompt files: a ``prompt:`` that names a file (``file://`` in AgentV v4's files), read
like every other file an eval names, never outside the rootdir; it must use a candidate
variable."""

from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError
from ..paths import read_reference, resolve_reference
from .prompts import TEMPLATE_VARIABLES, uses_required_variable

_PATH_SUFFIXES = (".md", ".txt", ".prompt", ".j2", ".jinja", ".tmpl", ".yaml", ".yml")


def looks_like_path(prompt: str) -> bool:
    """One word with a prompt-file suffix or a folder in it: meant as a file, not as text."""
    text = prompt.strip()
    if not text or any(c.isspace() for c in text) or "{{" in text:
        return False
    return text.lower().endswith(_PATH_SUFFIXES) or "/" in text


def read_prompt(prompt: str, *, start: Path, rootdir: Path) -> str | None:
    """The text of a prompt file (looked up like other file references, never outside the
    rootdir), or None when ``prompt`` is inline text. A path that is missing, or that leads
    outside the rootdir, is an error rather than inline text."""
    try:
        path = resolve_reference(prompt.strip(), start=start, rootdir=rootdir, what="prompt file")
    except ConfigError:
        if looks_like_path(prompt):
            raise
        return None
    return read_reference(path, prompt)


#: AgentV v4's mark of a prompt file: ``prompt: file://prompts/grader.md``.
FILE_PREFIX = "file://"


def load_prompt_file(prompt: str, *, start: Path, rootdir: Path, v4: bool = False) -> str | None:
    """A judge's prompt file (see ``read_prompt``), which must use a candidate variable; None
    when ``prompt`` is inline text. ``file://`` marks a file (AgentV v4); in a file written
    with v4's names, a prompt without it is inline text, as v4 reads it."""
    marked = prompt.strip().startswith(FILE_PREFIX)
    if v4 and not marked:
        return None
    name = prompt.strip()[len(FILE_PREFIX) :] if marked else prompt
    if marked:
        path = resolve_reference(name, start=start, rootdir=rootdir, what="prompt file")
        text: str | None = read_reference(path, name)
    else:
        text = read_prompt(name, start=start, rootdir=rootdir)
    if text is None:
        return None
    if not uses_required_variable(text):
        raise ConfigError(
            f"prompt file '{name}' must use {{{{candidate_answer}}}} or {{{{expected_messages}}}} "
            f"(AgentV v4: {{{{output}}}} or {{{{expected_output}}}}); it uses none of them. "
            f"Template variables: {', '.join(TEMPLATE_VARIABLES)}"
        )
    return text
