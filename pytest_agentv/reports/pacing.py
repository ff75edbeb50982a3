"""How the run met the rate limits, for the terminal summary and the HTML report: how long the
limits held calls back, and per model the requests sent, retries, 429s, and the rate achieved
against the limit known (``--agentv-rpm``, or learned from the provider's headers). Made from
``CallLimits.report()``: plain builtins, the controller's under pytest-xdist, else each
process's (merged here when workers kept their own)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def merge(reports: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """One report from several processes' (each worker's own limits, when they could not be
    shared): counts and rates add up, the longest hold and the lowest limits stand."""
    merged: dict[str, Any] | None = None
    for report in reports:
        if merged is None:
            merged = {
                **report,
                "models": {name: dict(model) for name, model in report["models"].items()},
            }
            continue
        merged["held_seconds"] = max(merged["held_seconds"], report["held_seconds"])
        for name, model in report["models"].items():
            known = merged["models"].get(name)
            if known is None:
                merged["models"][name] = dict(model)
                continue
            for key in ("calls", "retries", "refused", "rate"):
                known[key] = _sum(known.get(key), model.get(key))
            for key in ("learned_rpm", "learned_tpm"):
                known[key] = _lowest(known.get(key), model.get(key))
    return merged


def _sum(a: float | None, b: float | None) -> float | None:
    return None if a is None and b is None else (a or 0) + (b or 0)


def _lowest(a: float | None, b: float | None) -> float | None:
    known = [value for value in (a, b) if value is not None]
    return min(known) if known else None


def _number(value: float) -> str:
    return f"{value:,.0f}" if value >= 10 else f"{value:.1f}"


def _against(option: float | None, learned: float | None, flag: str) -> str:
    limits = []
    if option is not None:
        limits.append(f"{flag} {_number(option)}")
    if learned is not None:
        limits.append(f"the provider's {_number(learned)} (learned from its headers)")
    return " and ".join(limits)


def pacing_lines(report: Mapping[str, Any] | None) -> list[str]:
    """The summary's lines, or none when the limits had nothing to say (no call waited, none
    was refused or retried, and no limit was known)."""
    if report is None:
        return []
    models: dict[str, dict[str, Any]] = report["models"]
    lines = []
    for name, model in sorted(models.items()):
        requests = _against(model.get("rpm"), model.get("learned_rpm"), "--agentv-rpm")
        tokens = _against(model.get("tpm"), model.get("learned_tpm"), "--agentv-tpm")
        if not (requests or tokens or model["refused"] or model["retries"]):
            continue
        calls, retries = int(model["calls"]), int(model["retries"])
        line = f"  {name}: {calls:,} request{'s' * (calls != 1)}"
        if retries:
            line += f" ({retries:,} retr{'ies' if retries != 1 else 'y'})"
        line += f", {int(model['refused']):,} answered 429"
        rate = model.get("rate")
        if rate is not None:
            line += f"; {_number(rate)} a minute"
            line += f" against {requests}" if requests else " (no limit known)"
        if tokens:
            line += f"; tokens: {tokens} a minute"
        lines.append(line)
    held = float(report["held_seconds"])
    if not lines and not held:
        return []
    window = float(report["window"])
    scale = f" (a minute is {window:g} s here)" if report.get("scaled") else ""
    return [
        f"agentv pacing{scale}: the rate limits held calls back for {held:.1f} s",
        *lines,
    ]
