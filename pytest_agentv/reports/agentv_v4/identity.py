"""v4's ids: the hashes it gives a result's trace, spans and tool calls (``hashHex``), and its
projection identity (where a test sits in a run, as a key and that key's hash), made from the
same values as v4 makes them, so that v4 and we give a result the same ids."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote

from ...results import js_number

IDENTITY = "agentv.projection_identity.v1"
#: A projection identity's dimensions, in the order of its key; its wire form starts at
#: ``run_id`` and ends with the first two.
DIMENSIONS = ["projection_format", "projection_version", "run_id", "suite", "eval_path"]
DIMENSIONS += ["test_id", "target", "source_target", "attempt", "variant", "envelope_id"]
DIMENSIONS += ["trace_id", "root_span_id"]


def hash_hex(parts: Iterable[str | float | None], length: int) -> str:
    """v4's ``hashHex``: strings as they are, numbers as JSON writes them, undefined as nothing."""
    text = "\0".join("" if p is None else p if isinstance(p, str) else js_number(p) for p in parts)
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def projection_identity(dimensions: Mapping[str, Any]) -> dict[str, Any]:
    """v4's projection identity: where the test is in the run, as a key and its hash (text
    dimensions trimmed, blank ones left out; ``variant`` is null when there is none)."""
    given = {
        name: (value.strip() or None) if isinstance(value, str) else value
        for name, value in dimensions.items()
    }
    key = f"{IDENTITY}:" + "|".join(
        f"{name}=" + ("~" if given[name] is None else quote(str(given[name]), safe="!'()*"))
        for name in DIMENSIONS
    )
    found: dict[str, Any] = {
        "schema_version": IDENTITY,
        "id": "agentv-prj-" + hash_hex((key,), 32),
        "key": key,
        "dimensions": {
            name: given[name]
            for name in (*DIMENSIONS[2:], *DIMENSIONS[:2])
            if given[name] is not None or name == "variant"
        },
    }
    if given["suite"] is None and given["eval_path"] is None:
        found["issues"] = [
            {
                "code": "missing_suite_or_eval_path",
                "severity": "warning",
                "field": "suite/evalPath",
                "message": "Projection identity is more portable when at least one of suite "
                "or evalPath is present.",
            }
        ]
    return found
