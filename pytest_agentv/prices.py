"""Model prices and capabilities from the table litellm ships, read without importing litellm.

litellm's package data holds ``model_prices_and_context_window_backup.json``, which its releases
keep current. It is located with ``importlib.util.find_spec`` (which does not run litellm's
``__init__``, a multi-second import) and parsed once, the first time a price or capability is
asked for: replayed runs never read it.

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
from typing import Any

TABLE_NAME = "model_prices_and_context_window_backup.json"

_lock = threading.Lock()
_table: dict[str, Any] | None = None


@dataclass(frozen=True)
class Price:
    """List prices of one model in US dollars per token."""

    input_per_token: float
    output_per_token: float

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


def _load() -> dict[str, Any]:
    global _table
    table = _table
    if table is None:
        with _lock:
            if _table is None:
                path = table_path()
                try:
                    data = json.loads(path.read_text(encoding="utf-8")) if path else {}
                except (OSError, ValueError):
                    data = {}
                _table = data if isinstance(data, dict) else {}
            table = _table
    return table


def model_info(model: str) -> Mapping[str, Any] | None:
    """The table's entry for ``model`` (see the module docstring for the lookup rule)."""
    table = _load()
    entry = table.get(model)
    if isinstance(entry, dict):
        return entry
    provider, slash, name = model.partition("/")
    if slash:
        entry = table.get(name)
        if isinstance(entry, dict) and entry.get("litellm_provider") == provider:
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
