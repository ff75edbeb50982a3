"""What a provider's rate-limit headers say, read into plain data (it crosses sockets to the
xdist controller, and could be kept in Redis): for requests and for tokens, the limit, what
remains of it, and the seconds until it is whole again.

Two families: OpenAI's ``x-ratelimit-{limit,remaining,reset}-{requests,tokens}`` (resets as Go
durations: ``6m0s``, ``1.5s``, ``20ms``), which OpenAI-compatible servers and gateways copy,
and Anthropic's ``anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset}`` (resets as
RFC 3339 times). Anthropic's ``tokens`` is the most restrictive of its token limits, so its
input and output token families add nothing here. A header that is missing or cannot be read
counts as absent: a reply without them changes nothing.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from functools import partial
from typing import TypedDict

#: The dimensions a limit counts: requests, and tokens (prompt and reply).
DIMENSIONS = ("requests", "tokens")


class Seen(TypedDict, total=False):
    """One dimension as a reply's headers told it."""

    limit: float
    remaining: float
    #: Seconds from the reply until the limit is whole again.
    reset: float


#: Each dimension a reply's headers spoke of: ``{"requests": {...}, "tokens": {...}}``.
Observed = dict[str, Seen]

_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(h|ms|us|µs|ns|m|s)")
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_FIELDS = ("limit", "remaining", "reset")
#: A bare number this large is a time (Unix seconds), not a count of seconds.
_EPOCH = 1e9


def duration(text: str) -> float | None:
    """Seconds in a Go duration (``1h2m3.5s``, ``20ms``, ``0s``) or a bare number of seconds."""
    text = text.strip()
    try:
        value = float(text)
    except ValueError:
        pass
    else:
        return value if math.isfinite(value) and value >= 0 else None
    position, total = 0, 0.0
    for match in _DURATION.finditer(text):
        if match.start() != position:
            return None
        total += float(match.group(1)) * _UNITS[match.group(2)]
        position = match.end()
    return total if position == len(text) and position else None


def until(text: str, now: Callable[[], float] = time.time) -> float | None:
    """Seconds from now until an RFC 3339 time (``2026-11-29T10:00:30Z``), a Unix time, or a
    duration; never negative."""
    text = text.strip()
    seconds = duration(text)
    if seconds is not None:
        return max(0.0, seconds - now()) if seconds >= _EPOCH else seconds
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    return max(0.0, moment.timestamp() - now())


def _count(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def _family(
    headers: Mapping[str, str], names: tuple[str, ...], reset: Callable[[str], float | None]
) -> Seen:
    seen: Seen = {}
    limit, remaining, when = (headers.get(name) for name in names)
    if (value := _count(limit)) is not None and value > 0:
        seen["limit"] = value
    if (value := _count(remaining)) is not None:
        seen["remaining"] = value
    if when is not None and (value := reset(when)) is not None:
        seen["reset"] = value
    return seen


def observed(
    headers: Mapping[str, str] | None, now: Callable[[], float] = time.time
) -> Observed | None:
    """The rate limits a reply's headers (lower-case names) tell, or None when they tell none."""
    if not headers:
        return None
    found: Observed = {}
    for dimension in DIMENSIONS:
        openai = tuple(f"x-ratelimit-{field}-{dimension}" for field in _FIELDS)
        anthropic = tuple(f"anthropic-ratelimit-{dimension}-{field}" for field in _FIELDS)
        for names, reset in ((openai, duration), (anthropic, partial(until, now=now))):
            seen = _family(headers, names, reset)
            if "limit" in seen or "remaining" in seen:
                found[dimension] = seen
                break
    return found or None
