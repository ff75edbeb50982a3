"""The record/replay store: one small, stable, human-readable JSON file per model request.

The key is a SHA-256 of everything that can change a reply — model, rendered messages (with the
per-call prompt nonce replaced by a placeholder), temperature, max tokens, response format, the
judge protocol version and the trial index — and of nothing that cannot (API base, credentials).
Only replies that were accepted (called successfully and parsed) are stored, so errors and
unparseable replies never poison the store; a file that is not JSON as it is read everywhere (one
that gives a key twice, say) holds no stored reply. Files are written atomically (a ``*.tmp`` file,
then a rename), so xdist workers can share one store; a temporary file that an interrupted run
(SIGKILL) left behind never ends in ``.json``, is ignored by the store's ``.gitignore``, and is
removed by the next run that writes to the store.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypeGuard, get_args

from ..jsonlines import json_decoder
from ..redaction import redact, redact_obj
from .reply import Reply

STORE_FORMAT = 1
#: Where a request's per-call nonce stands in its key and in the replies stored for it.
NONCE_PLACEHOLDER = "{nonce}"
#: A temporary file this old belongs to a write that was interrupted, not to one under way.
STALE_SECONDS = 60.0
_TEMPORARY = ("*/.*.tmp", "*/.tmp-*.json")  # ours, and those of earlier versions

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
        if self.writes:
            self._sweep()

    def _sweep(self) -> None:
        """Remove temporary files of interrupted writes."""
        stale = time.time() - STALE_SECONDS
        for pattern in _TEMPORARY:
            for path in self.directory.glob(pattern):
                with contextlib.suppress(OSError):
                    if path.stat().st_mtime < stale:
                        path.unlink()

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
        path = self.path_for(key)
        try:
            if not path.is_file():  # nor a FIFO, whose reading would hold the loop forever
                return None
            data = json_decoder().decode(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):  # a key given twice too: no stored reply
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
        ignore = self.directory / ".gitignore"
        if not ignore.exists():
            ignore.write_text("# temporary files of interrupted writes\n*.tmp\n", encoding="utf-8")
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{key}.", suffix=".tmp")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as stream:
                stream.write(text)
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise


def recorded_reply(text: str, stored: dict[str, Any]) -> Reply:
    """A stored reply, with the tokens and cost of the call that recorded it: what an answer
    took is part of the answer (a replayed agent's answer keeps its usage and cost). Usage that
    is not counts of tokens is unknown, as from a server (``Reply``)."""
    usage = stored.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    return Reply(
        text,
        cached=True,
        prompt_tokens=usage.get("prompt_tokens"),
        completion_tokens=usage.get("completion_tokens"),
        cost_usd=stored.get("cost_usd"),
    )


def keeps_meaning(text: str, value: Any, accept: Callable[[str], Any]) -> bool:
    """Whether the store may keep a reply: it keeps it redacted, as every report shows it, so
    the redacted reply must be read as the same answer (a judge's grade, whose texts reports
    redact anyway). A reply that is an answer as written (a model target's) is kept only when
    redaction leaves it alone: its text is graded as it is, and a replayed run must grade the
    same. A reply that is not kept is called for again: a replayed run says it is missing."""
    redacted = redact(text)
    if redacted == text:
        return True
    if isinstance(value, str):
        return False
    try:
        again = accept(redacted)
    except Exception:  # whatever the reader refuses, the redacted reply is another reply
        return False
    return bool(redact_obj(again) == redact_obj(value))


def stored_reply(reply: Reply, nonce: str | None) -> dict[str, Any]:
    """A reply as the store keeps it: the nonce as a placeholder, so that the file is the same
    every time it is recorded. A reply that already holds the placeholder text (quoted from an
    answer) keeps its nonce instead, so that replaying never turns that quote into the nonce."""
    response: dict[str, Any] = {
        "content": reply.text,
        "usage": {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
        },
    }
    if reply.cost_usd is not None:
        response["cost_usd"] = reply.cost_usd
    if nonce and NONCE_PLACEHOLDER in reply.text:
        response["nonce"] = nonce
    elif nonce:
        response["content"] = reply.text.replace(nonce, NONCE_PLACEHOLDER)
    return response
