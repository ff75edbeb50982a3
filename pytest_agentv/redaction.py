"""Keep credentials out of everything we write: reports, JUnit XML, results, the replay store.

Secrets are the values of environment variables whose names look like credentials and whose
values look like keys (``looks_secret``: long enough, a letter and a digit, not a repeated
character; a word such as ``SORT_KEY_FIELD=refundable`` is not one), read when a session starts
(``refresh_secrets``), plus any value registered later (an ``api_key`` from a targets file). A
secret is replaced wherever its first eight characters appear, with the token characters after
them, so masked or truncated echoes such as ``sk-canary1234****`` are caught too, along with
common token shapes. A match never runs into quotes, backslashes, commas, brackets or spaces:
JSON text that is redacted stays JSON, with the same structure.

The compiled pattern is cached: redaction runs for every case, on the plugin's event-loop
thread as well as pytest's, and must neither rescan nor iterate an environment that pytest's
thread is changing (``PYTEST_CURRENT_TEST``) at that moment.
"""

from __future__ import annotations

import json
import math
import re
import threading
from collections import Counter
from typing import Any

from .settings import environment

_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)", re.IGNORECASE)
#: What never belongs to a secret in text: spaces, quotes, backslashes, JSON and text syntax.
_NOT_TOKEN = r"""\s"'\\`,;(){}\[\]<>"""
#: What may follow the start of a secret: characters of tokens.
_TAIL = f"[^{_NOT_TOKEN}]"
_PATTERNS = (
    rf"(?<=://)[^{_NOT_TOKEN}/@:]+:[^{_NOT_TOKEN}/@]+(?=@)",  # user:password@ in a URL
    r"\bsk-[A-Za-z0-9_\-]{8,}",
    r"\bBearer\s+[A-Za-z0-9._\-]{8,}",
    r"\bAIza[0-9A-Za-z_\-]{20,}",
    r"\b(?:gh[pousr]_|github_pat_)[A-Za-z0-9_]{20,}",
    r"\bxox[abprs]-[A-Za-z0-9\-]{10,}",
    r"\bAKIA[0-9A-Z]{16}\b",
    rf"\b(?i:api[_-]?key|access[_-]?token)=[^{_NOT_TOKEN}&]+",
)
#: Text that holds none of these (nor ``_ANY_CASE_MARKS``, nor the start of a secret) cannot
#: match ``_PATTERNS``: each pattern's match contains one. Most text holds none, and looking for
#: them is much cheaper than running the patterns.
_MARKS: tuple[str, ...] = ("://", "sk-", "Bearer", "AIza", "ghp_", "gho_", "ghu_", "ghs_")
_MARKS += ("ghr_", "github_pat_", "xox", "AKIA")
#: The case-insensitive pattern's marks, matched as it matches (``ı`` is an ``i`` to ``re``).
_ANY_CASE_WORDS = ("api", "access")
_ANY_CASE_MARKS = re.compile("|".join(_ANY_CASE_WORDS), re.IGNORECASE)
_JSON_ESCAPED = re.compile(r'["\\\x00-\x1f]')
#: Characters of a secret that are matched as written; the rest of it is matched as a token.
_MIN_SECRET = 8
#: The shortest environment value taken for a secret, and the least variety of characters it
#: has (bits per character: ``0000000000a1`` has less, any generated key more).
_MIN_ENV_SECRET = 12
_MIN_ENTROPY = 3.0
REDACTED = "[redacted]"

_lock = threading.Lock()
_environment: frozenset[str] = frozenset()
_registered: frozenset[str] = frozenset()
_compiled: _Redactor | None = None


def _entropy(value: str) -> float:
    """Shannon entropy of a value's characters, in bits per character."""
    counts = Counter(value)
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())


def looks_secret(name: str, value: str) -> bool:
    """Whether an environment variable holds a credential: its name says so, and its value
    looks generated — at least ``_MIN_ENV_SECRET`` characters with a letter and a digit and no
    space, varied enough (``_MIN_ENTROPY``), not a URL or a path (on CI runners
    ``ACTIONS_ID_TOKEN_REQUEST_URL`` would otherwise make every ``https://`` a secret). Words
    and names (``SORT_KEY_FIELD=refundable``, ``TOKENIZER=cl100k_base``) are not: redacting
    them would rewrite ordinary text everywhere, judges' replies included."""
    return (
        len(value) >= _MIN_ENV_SECRET
        and _SECRET_NAME.search(name) is not None
        and "://" not in value
        and not value.startswith(("/", "."))
        and not any(c.isspace() for c in value)
        and any(c.isdigit() for c in value)
        and any(c.isalpha() for c in value)
        and _entropy(value) >= _MIN_ENTROPY
    )


def _environment_secrets() -> frozenset[str]:
    return frozenset(value for name, value in environment().items() if looks_secret(name, value))


def refresh_secrets() -> None:
    """Read the environment's secrets again (called when a session starts)."""
    global _environment, _compiled
    found = _environment_secrets()
    with _lock:
        if found != _environment:
            _environment, _compiled = found, None


def register_secret(value: str) -> None:
    """Treat ``value`` as a secret from now on (for keys that do not come from the environment)."""
    global _registered, _compiled
    if len(value) >= _MIN_SECRET and value not in _registered:
        with _lock:
            _registered, _compiled = _registered | {value}, None


class _Redactor:
    """The run's secrets and token shapes as one pattern, run only on text that may match."""

    def __init__(self, secrets: frozenset[str]) -> None:
        starts = sorted({s[:_MIN_SECRET] for s in secrets}, key=len, reverse=True)
        parts = [f"{re.escape(start)}{_TAIL}*" for start in starts] + list(_PATTERNS)
        self.pattern = re.compile("|".join(f"(?:{part})" for part in parts))
        self.marks = (*starts, *_MARKS)
        #: Whether JSON text shows every mark as written (JSON escapes quotes, backslashes and
        #: control characters), so that a JSON text without marks holds no string with one.
        self.json_visible = not any(_JSON_ESCAPED.search(start) for start in starts)

    def may_match(self, text: str) -> bool:
        if any(mark in text for mark in self.marks):
            return True
        if text.isascii():  # the same answer as the pattern, several times faster
            lowered = text.lower()
            return any(word in lowered for word in _ANY_CASE_WORDS)
        return _ANY_CASE_MARKS.search(text) is not None

    def sub(self, text: str) -> str:
        return self.pattern.sub(REDACTED, text) if self.may_match(text) else text


def _pattern() -> _Redactor:
    global _compiled
    compiled = _compiled
    if compiled is None:
        with _lock:
            compiled = _compiled = _Redactor(_environment | _registered)
    return compiled


#: UTF-16 surrogates: in a str they stand alone (a JSON ``"\\ud800"`` escape decodes to one), and
#: text holding one cannot be written as UTF-8 (results files, reports sent by pytest-xdist).
_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_text(text: str) -> str:
    """Text that can be written: a lone surrogate a target or judge sent becomes U+FFFD."""
    return text if text.isascii() else _SURROGATE.sub("\ufffd", text)


def valid_data(value: Any) -> Any:
    """``valid_text`` for every string of a JSON structure."""
    if isinstance(value, str):
        return valid_text(value)
    if isinstance(value, dict):
        return {valid_text(str(key)): valid_data(item) for key, item in value.items()}
    if isinstance(value, list):
        return [valid_data(item) for item in value]
    return value


def has_surrogate(value: Any) -> bool:
    """Whether a JSON structure holds a string that is not Unicode text."""
    if isinstance(value, str):
        return not value.isascii() and _SURROGATE.search(value) is not None
    if isinstance(value, dict):
        return any(has_surrogate(key) or has_surrogate(item) for key, item in value.items())
    if isinstance(value, list):
        return any(has_surrogate(item) for item in value)
    return False


def redact(text: str) -> str:
    return _pattern().sub(valid_text(text))


#: Control characters (ANSI and OSC escapes start with ESC), except newline and tab; and the
#: invisible marks and controls that reorder text (U+202E shows ``evil\u202egnp`` as "evilpng").
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(found: re.Match[str]) -> str:
    code = ord(found.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: str) -> str:
    """Text that cannot drive the terminal nor reorder what is shown: control characters and
    bidirectional controls shown as ``\\x1b`` and ``\\u202e`` escapes.

    Judges and targets write what they like; nothing they wrote reaches the terminal as an
    escape sequence (clearing lines, setting the window title, hiding text), and no id or
    message is shown in another order than it is written.
    """
    return _CONTROL.sub(_escape, text)


def shown(text: str) -> str:
    """What may be printed: redacted, then made printable."""
    return printable(redact(text))


def redact_obj(value: Any) -> Any:
    """A structure as plain JSON builtins, with every string in it redacted.

    What evaluators and targets hand us (details, traces, usage) may hold any Python object;
    what leaves — reports that travel through pytest-xdist, results files, the replay store —
    must be JSON: keys become strings, tuples lists, non-finite numbers None, and any other
    object its (redacted) text. Keys are names, not data: they are not redacted.

    Most structures (a case's row) are JSON already and hold nothing to redact: one pass of
    the C encoder tells, and its text decoded is the copy; the rest are walked.
    """
    pattern = _pattern()
    if pattern.json_visible:
        try:
            text = json.dumps(value, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError, RecursionError):
            pass  # objects, non-finite numbers: walked
        else:
            if not pattern.may_match(text) and (text.isascii() or not _SURROGATE.search(text)):
                return json.loads(text)
    return _redact_with(pattern, value)


def _key(key: Any) -> str:
    """A key as JSON writes it (``true``, ``null``, ``1.5``)."""
    if key is None or isinstance(key, bool):
        return "null" if key is None else "true" if key else "false"
    return valid_text(str(key))


def _redact_with(pattern: _Redactor, value: Any) -> Any:
    if isinstance(value, str):
        return pattern.sub(valid_text(value))
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {_key(key): _redact_with(pattern, item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redact_with(pattern, item) for item in value]
    return pattern.sub(valid_text(str(value)))


refresh_secrets()
