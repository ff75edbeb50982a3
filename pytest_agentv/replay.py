"""The record/replay store: one small, stable, human-readable JSON file per model request.

The key is a SHA-256 of everything that can change a reply — model, rendered messages (with the
per-call prompt nonce replaced by a placeholder), temperature, max tokens, response format, the
judge protocol version and the trial index — and of nothing that cannot (API base, credentials).
Only replies that were accepted (called successfully and parsed) are stored, so errors and
unparseable replies never poison the store. Files are written atomically, so xdist workers can
share one store.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Literal, TypeGuard, get_args

from .redaction import redact_obj

STORE_FORMAT = 1

#: readwrite: reuse, call and store on a miss; replay: never call; refresh: always call and
#: overwrite; off: neither read nor write.
CacheMode = Literal["readwrite", "replay", "refresh", "off"]
CACHE_MODES: tuple[CacheMode, ...] = get_args(CacheMode)


def is_cache_mode(value: str) -> TypeGuard[CacheMode]:
    return value in CACHE_MODES


def request_key(request: dict[str, Any]) -> str:
    canonical = json.dumps(request, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class ReplayStore:
    def __init__(self, directory: Path, mode: str, label: str | None = None) -> None:
        if not is_cache_mode(mode):
            raise ValueError(f"cache mode must be one of {', '.join(CACHE_MODES)}, not {mode!r}")
        self.directory = directory
        self.mode: CacheMode = mode
        self.label = label or str(directory)

    @property
    def reads(self) -> bool:
        return self.mode in ("readwrite", "replay")

    @property
    def writes(self) -> bool:
        return self.mode in ("readwrite", "refresh")

    def path_for(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        if not self.reads:
            return None
        try:
            data = json.loads(self.path_for(key).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or data.get("format") != STORE_FORMAT:
            return None
        response = data.get("response")
        return response if isinstance(response, dict) else None

    def put(self, key: str, request: dict[str, Any], response: dict[str, Any]) -> None:
        if not self.writes:
            return
        path = self.path_for(key)
        document = {
            "format": STORE_FORMAT,
            "key": key,
            "request": redact_obj(request),
            "response": redact_obj(response),
        }
        text = json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as stream:
                stream.write(text)
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
