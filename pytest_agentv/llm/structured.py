"""How a reply's JSON Schema is asked of a model: the structured-output dialects servers speak,
and, under ``auto``, moving on from one a server refuses to the next, once per endpoint.

``json_schema`` is OpenAI's ``response_format`` (also llama.cpp's ``llama-server``, vLLM,
Ollama, LM Studio); ``json_object`` is ``{"type": "json_object", "schema": ...}``, the form
llama-cpp-python's server constrains its grammar with; ``tools`` asks for one call of a function
whose parameters are the schema (the reply is its arguments); ``off`` sends no schema: the prompt
alone describes the reply. ``auto`` starts with ``json_schema``; a reply that refuses the
request's format (an HTTP 400, 422 or 500 that names it) moves that endpoint to the next dialect
for the rest of the run, and the run's summary says so.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from ..options import STRUCTURED_CHOICES

#: The dialects in the order ``auto`` tries them.
DIALECTS = STRUCTURED_CHOICES[1:]

#: Statuses a server answers a request format it does not take with.
REFUSAL_STATUS = frozenset({400, 422, 500, 501})
#: Words a refusal of each dialect names (the request field, or the value it refused).
_NAMED = {
    "json_schema": ("response_format", "json_schema"),
    "json_object": ("response_format", "json_object"),
    "tools": ("tool_choice", "tools", "function"),
}


def request_fields(dialect: str, structured: Mapping[str, Any]) -> dict[str, Any]:
    """The request fields that ask for ``structured`` (an OpenAI ``json_schema`` response
    format: its ``json_schema`` holds the name and the schema) in ``dialect``."""
    spec = structured["json_schema"]
    name, schema = spec["name"], spec["schema"]
    if dialect == "json_schema":
        return {"response_format": dict(structured)}
    if dialect == "json_object":
        return {"response_format": {"type": "json_object", "schema": schema}}
    if dialect == "tools":
        function = {"name": name, "description": "Give your answer.", "parameters": schema}
        return {
            "tools": [{"type": "function", "function": function}],
            "tool_choice": {"type": "function", "function": {"name": name}},
        }
    return {}


def refuses(dialect: str, status: int | None, message: str) -> bool:
    """Whether an error answer refuses the request's format rather than failing it."""
    if status not in REFUSAL_STATUS or dialect not in _NAMED:
        return False
    lowered = message.lower()
    return any(word in lowered for word in _NAMED[dialect])


class StructuredOutput:
    """One endpoint's dialect: the one chosen, or under ``auto`` the first one not refused."""

    def __init__(self, choice: str) -> None:
        self.choice = choice
        self.dialect: str = DIALECTS[0] if choice == "auto" else choice
        #: What moved this endpoint from a dialect to the next, for the summary.
        self.notes: list[str] = []
        self._lock = threading.Lock()

    def fall_back(self, refused: str, message: str, where: str) -> bool:
        """After the server refused ``refused``: whether there is another dialect to try (only
        under ``auto``, and only forward: calls in flight may report the same refusal)."""
        if self.choice != "auto":
            return False
        with self._lock:
            if self.dialect == refused:
                following = DIALECTS[DIALECTS.index(refused) + 1]
                self.dialect = following
                self.notes.append(
                    f"{where} refused structured output as {refused} ({message}); "
                    f"{following} is used for the rest of the run"
                )
            return True
