"""Keep credentials out of everything we write: reports, JUnit XML, results, the replay store.

Secrets are the values of environment variables whose names look like credentials, plus any
value registered at run time (an ``api_key`` written into a targets file). A secret is replaced
wherever its first eight characters appear, so masked or truncated echoes such as
``sk-canary1234****`` are caught too, along with common token shapes.
"""

from __future__ import annotations

import os
import re
import threading
from typing import Any

_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)", re.IGNORECASE)
_PATTERNS = (
    r"\bsk-[A-Za-z0-9_\-]{8,}",
    r"\bBearer\s+[A-Za-z0-9._\-]{8,}",
    r"\bAIza[0-9A-Za-z_\-]{20,}",
    r"\b(?i:api[_-]?key|access[_-]?token)=[^&\s\"']+",
)
_MIN_SECRET = 8
REDACTED = "[redacted]"

_lock = threading.Lock()
_registered: set[str] = set()
_cache: tuple[frozenset[str], re.Pattern[str]] | None = None


def register_secret(value: str) -> None:
    """Treat ``value`` as a secret from now on (for keys that do not come from the environment)."""
    if len(value) >= _MIN_SECRET:
        with _lock:
            _registered.add(value)


def _secrets() -> frozenset[str]:
    found = {
        value
        for name, value in os.environ.items()
        if _SECRET_NAME.search(name) and len(value) >= _MIN_SECRET
    }
    return frozenset(found | _registered)


def _pattern() -> re.Pattern[str]:
    global _cache
    secrets = _secrets()
    cached = _cache
    if cached is not None and cached[0] == secrets:
        return cached[1]
    prefixes = sorted({re.escape(s[:_MIN_SECRET]) for s in secrets}, key=len, reverse=True)
    parts = [f"{prefix}\\S*" for prefix in prefixes] + list(_PATTERNS)
    compiled = re.compile("|".join(f"(?:{part})" for part in parts))
    _cache = (secrets, compiled)
    return compiled


def redact(text: str) -> str:
    return _pattern().sub(REDACTED, text)


def redact_obj(value: Any) -> Any:
    """Redact every string inside a structure of builtins."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {key: redact_obj(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_obj(item) for item in value]
    return value
