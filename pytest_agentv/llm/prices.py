"""Model prices and capabilities from the table litellm ships, read without importing litellm.

litellm's package data holds ``model_prices_and_context_window_backup.json``, which its releases
keep current. It is located with ``importlib.util.find_spec`` (which does not run litellm's
``__init__``, a multi-second import) and read once, the first time a price or capability is
asked for: replayed runs never read it. Entries are decoded one at a time, as they are asked
for: parsing the whole 3 MB table would cost tens of milliseconds and tens of megabytes in every
process that makes a model call.

A model is looked up by its model string as written (``azure/gpt-4o``), then without its
provider prefix (``openai/gpt-4o-mini`` → ``gpt-4o-mini``) provided the table lists that entry
under the same provider. A model the table does not price has no ``Price``: its cost is unknown,
never zero.
"""

from __future__ import annotations

import importlib.util
import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

TABLE_NAME = "model_prices_and_context_window_backup.json"
#: Keys every model entry has; a nested object of the same name has neither.
_ENTRY_KEYS = ("litellm_provider", "mode")

_lock = threading.Lock()
_text: str | None = None
_parsed: dict[str, Any] | None = None
_entries: dict[str, dict[str, Any] | None] = {}
_decoder = json.JSONDecoder()


@dataclass(frozen=True)
class Price:
    """List prices of one model in US dollars per token."""

    input_per_token: float
    output_per_token: float

    @classmethod
    def per_million(cls, prompt: float, completion: float) -> Price:
        """From prices per million tokens, as providers list them."""
        return cls(prompt / 1_000_000, completion / 1_000_000)

    @property
    def free(self) -> bool:
        return self.input_per_token == 0 and self.output_per_token == 0

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return prompt_tokens * self.input_per_token + completion_tokens * self.output_per_token


def table_path() -> Path | None:
    """Where the installed litellm keeps its price table (None without litellm)."""
    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / TABLE_NAME
    return path if path.is_file() else None


def _table_text() -> str:
    global _text
    if _text is None:
        path = table_path()
        try:
            _text = path.read_text(encoding="utf-8") if path else ""
        except (OSError, ValueError):
            _text = ""
    return _text


def _is_entry(value: Any) -> TypeGuard[dict[str, Any]]:
    return isinstance(value, dict) and any(key in value for key in _ENTRY_KEYS)


def _scan(text: str, key: str) -> dict[str, Any] | None:
    """The entry of ``key``, decoded where its name opens a line of the (pretty-printed) table."""
    needle = json.dumps(key, ensure_ascii=False)
    start = text.find(needle)
    while start >= 0:
        line_start = text.rfind("\n", 0, start) + 1
        after = start + len(needle)
        if not text[line_start:start].strip() and text[after : after + 1] == ":":
            try:
                value, _ = _decoder.raw_decode(text, after + 1 + _spaces(text, after + 1))
            except ValueError:
                value = None
            if _is_entry(value):
                return value
        start = text.find(needle, after)
    return None


def _spaces(text: str, index: int) -> int:
    count = 0
    while text[index + count : index + count + 1] in (" ", "\t", "\n", "\r"):
        count += 1
    return count


def _entry(key: str) -> dict[str, Any] | None:
    global _parsed
    with _lock:
        if key in _entries:
            return _entries[key]
        text = _table_text()
        if text.startswith("{\n"):
            entry = _scan(text, key)
        else:  # not laid out one key per line: parse it whole, once
            if _parsed is None:
                try:
                    loaded = json.loads(text) if text else {}
                except ValueError:
                    loaded = {}
                _parsed = loaded if isinstance(loaded, dict) else {}
            found = _parsed.get(key)
            entry = found if _is_entry(found) else None
        _entries[key] = entry
        return entry


def model_info(model: str) -> Mapping[str, Any] | None:
    """The table's entry for ``model`` (see the module docstring for the lookup rule)."""
    entry = _entry(model)
    if entry is not None:
        return entry
    provider, slash, name = model.partition("/")
    if slash:
        entry = _entry(name)
        if entry is not None and entry.get("litellm_provider") == provider:
            return entry
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if value >= 0 else None


def price_for(model: str) -> Price | None:
    """The list price of ``model`` per input and output token, or None when it is unknown."""
    info = model_info(model)
    if info is None:
        return None
    prompt = _number(info.get("input_cost_per_token"))
    completion = _number(info.get("output_cost_per_token"))
    if prompt is None or completion is None:
        return None
    return Price(prompt, completion)


def supports(model: str, capability: str) -> bool:
    """Whether the table says ``model`` has ``capability`` (``supports_response_schema``...);
    an unknown model has none."""
    info = model_info(model)
    return bool(info and info.get(capability) is True)
