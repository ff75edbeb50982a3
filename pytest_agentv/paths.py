"""The rootdir policy for every file an eval names: message segments, prompts, scripts' cwd.

A reference is looked up from the eval file's folder up to the rootdir and may never lead
outside it, whatever the spelling: ``..``, an absolute path or a symlink.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
import stat
from collections.abc import Sequence
from pathlib import Path

from .errors import ConfigError

#: The largest file pytest-agentv reads: an eval, targets or config file, or one they name.
MAX_FILE_BYTES = 10 * 1024 * 1024
_SIDECAR_SUFFIXES = (".yaml", ".yml")


def present(path: Path) -> bool:
    """Whether a file the plugin looks for is there: anything but a folder (a FIFO or a device
    is found, and then refused when it is read, instead of being silently passed over)."""
    return path.exists() and not path.is_dir()


def sidecar_of(dataset: Path) -> Path | None:
    """The YAML sidecar of a JSONL dataset (``x.yaml`` or ``x.yml`` beside ``x.jsonl``)."""
    for suffix in _SIDECAR_SUFFIXES:
        candidate = dataset.with_suffix(suffix)
        if present(candidate):
            return candidate
    return None


def is_sidecar(path: Path) -> bool:
    """``x.yaml`` beside ``x.jsonl`` holds the JSONL dataset's defaults: part of that one eval
    file, never an eval file of its own."""
    return path.suffix in _SIDECAR_SUFFIXES and path.with_suffix(".jsonl").is_file()


def display_path(path: Path, rootdir: Path) -> str:
    try:
        return path.relative_to(rootdir).as_posix()
    except ValueError:
        return str(path)


#: Where a folder's ``.agentv/config.yaml`` is looked for.
CONFIG_FILE_NAMES = (".agentv/config.yaml", ".agentv/config.yml")


class NearestFiles:
    """The first of ``names`` found in a folder, then in each folder above it up to the rootdir
    (as targets and ``.agentv/config.yaml`` files are found), each folder looked at once: every
    YAML file pytest collects asks for its folder's config, so a project without one pays one
    look per folder."""

    def __init__(self, rootdir: Path, names: Sequence[str]) -> None:
        self.rootdir = rootdir
        self.names = tuple(names)
        self._found: dict[Path, Path | None] = {}

    def __call__(self, folder: Path) -> Path | None:
        if folder not in self._found:
            found = next((folder / n for n in self.names if present(folder / n)), None)
            if found is None and folder != self.rootdir and self.rootdir in folder.parents:
                found = self(folder.parent)
            self._found[folder] = found
        return self._found[folder]


def search_roots(start: Path, rootdir: Path) -> list[Path]:
    """The folder itself, then each ancestor up to and including the rootdir."""
    roots = [start]
    if start == rootdir or rootdir not in start.parents:
        return roots
    for parent in start.parents:
        roots.append(parent)
        if parent == rootdir:
            break
    return roots


_ENCODED_DOTS = re.compile(r"%2e", re.IGNORECASE)


def resolve_reference(ref: str, *, start: Path, rootdir: Path, what: str = "file") -> Path:
    """Find a referenced file inside the rootdir, or raise ``ConfigError`` saying why not.

    Relative paths are tried against ``start`` and each ancestor up to the rootdir. Whatever the
    spelling (``..``, an absolute path, a symlink), the real path must stay inside the rootdir.
    The message names the path as written, never the resolved absolute path.
    """
    if "\x00" in ref or not ref.strip():
        raise ConfigError(f"{what} reference {ref!r} is not a valid path")
    if _ENCODED_DOTS.search(ref):
        raise ConfigError(f"{what} reference '{ref}' contains URL-encoded dots; write a plain path")
    root = rootdir.resolve()
    written = Path(ref)
    candidates = (
        [written] if written.is_absolute() else [d / written for d in search_roots(start, root)]
    )
    for candidate in candidates:
        real = Path(os.path.realpath(candidate))
        if not real.exists():
            continue
        if not real.is_relative_to(root):
            raise ConfigError(f"{what} reference '{ref}' resolves outside the rootdir; refused")
        mode = real.stat().st_mode
        if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
            raise ConfigError(f"{what} reference '{ref}' is not a regular file")
        return real
    if all(not Path(os.path.realpath(c)).is_relative_to(root) for c in candidates):
        raise ConfigError(f"{what} reference '{ref}' resolves outside the rootdir; refused")
    raise ConfigError(
        f"{what} '{ref}' not found (searched from the eval file's folder up to the rootdir)"
    )


def read_bounded(path: Path) -> bytes | None:
    """A file's bytes, or None when it holds more than ``MAX_FILE_BYTES`` (read no further
    than that: a file may grow, or be a pipe, while it is read). ``OSError`` as ``open``."""
    with path.open("rb") as stream:
        data = stream.read(MAX_FILE_BYTES + 1)
    return data if len(data) <= MAX_FILE_BYTES else None


def read_reference(path: Path, ref: str) -> str:
    if path.is_dir():
        raise ConfigError(f"file reference '{ref}' is a directory, not a file")
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ConfigError(
                f"file reference '{ref}' is {size:,} bytes; the limit is {MAX_FILE_BYTES:,}"
            )
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"file reference '{ref}' is not UTF-8 text") from None
    except OSError as exc:
        raise ConfigError(f"file reference '{ref}' cannot be read: {exc.strerror}") from None


@functools.lru_cache(maxsize=256)
def _glob_regex(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """A glob as micromatch reads it: ``**/`` spans any folders (none included), ``*`` and ``?``
    stay within one path segment, ``[...]`` is a class and ``{a,b}`` an alternative."""
    out: list[str] = []
    i, depth = 0, 0
    while i < len(pattern):
        char = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[" and "]" in pattern[i + 1 :]:
            end = pattern.index("]", i + 1)
            body = pattern[i + 1 : end]
            negate = body[:1] in ("!", "^")
            body = body[1:] if negate else body
            out.append(f"[{'^' if negate else ''}{body.replace(chr(92), chr(92) * 2)}]")
            i = end
        elif char == "{":
            out.append("(?:")
            depth += 1
        elif char == "}" and depth:
            out.append(")")
            depth -= 1
        elif char == "," and depth:
            out.append("|")
        else:
            out.append(re.escape(char))
        i += 1
    return re.compile("".join(out) + ")" * depth + r"\Z", flags)


def glob_match(pattern: str, path: str, *, ignore_case: bool = False) -> bool:
    """Whether a ``/``-separated path matches a micromatch-style glob (``**/*.instructions.md``);
    ``ignore_case`` as AgentV finds eval files (fast-glob's ``caseSensitiveMatch: false``)."""
    regex = _glob_regex(pattern.removeprefix("./"), re.IGNORECASE if ignore_case else 0)
    return regex.match(path.replace("\\", "/")) is not None


_EVALCASES = re.compile(rb"^(evalcases|tests|eval_cases)\s*:", re.MULTILINE)
#: The start of a JSONL line that is an eval case: an object with an ``id``.
_JSONL_CASE = re.compile(rb'^\s*\{.*"id"\s*:', re.DOTALL)


def is_eval_file(path: Path, patterns: Sequence[str], named: bool) -> bool:
    """Whether pytest-agentv collects ``path``: a name the eval patterns match (a dataset's
    sidecar aside), or, for a file ``named`` on the command line, a YAML file with cases or a
    JSONL file whose first line is one."""
    if is_sidecar(path):
        return False
    if any(fnmatch.fnmatch(path.name, pattern) for pattern in patterns):
        return True
    if path.suffix in (".yaml", ".yml", ".jsonl") and named:
        try:
            with path.open("rb") as stream:
                head = stream.read(1 << 20)
        except OSError:
            return False
        if path.suffix == ".jsonl":
            first = next((line for line in head.splitlines() if line.strip()), b"")
            return _JSONL_CASE.match(first) is not None
        return _EVALCASES.search(head) is not None
    return False
