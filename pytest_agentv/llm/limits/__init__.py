"""The run's limits on model calls: calls in flight, and each model's pace — from
``--agentv-rpm``/``--agentv-tpm`` and from what the provider's rate-limit headers say.

``headers`` (what a reply's headers tell, as plain data), ``pacing`` (when a call may go: the
logic, apart from where its state lives), ``local`` (``CallLimits``: the state on one event
loop, concurrency with AIMD, the waiting) and ``shared`` (the xdist controller's limits served
to its workers); with ``--agentv-coordinator``, ``coordinator`` (the connection to Redis) and
``coordinated`` (the limits kept there, for every shard).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from ...settings import Settings
from .headers import Observed, observed
from .local import MINUTE, UNLIMITED, CallLimits, Grant, Held, Limits
from .shared import LimitServer, RemoteLimits, serve_limits, stop_limits

if TYPE_CHECKING:
    from .coordinator import Coordinator

__all__ = [
    "MINUTE",
    "UNLIMITED",
    "CallLimits",
    "Grant",
    "Held",
    "LimitServer",
    "Limits",
    "Observed",
    "RemoteLimits",
    "coordinator_for",
    "observed",
    "serve_limits",
    "stop_limits",
]


def coordinator_for(settings: Settings, *, check: bool) -> Coordinator:
    """The run's coordinator (``--agentv-coordinator``); Redis's client is imported only now."""
    try:
        from .coordinator import connect
    except ImportError as exc:
        raise pytest.UsageError(
            f"--agentv-coordinator needs Redis's client: pip install 'pytest-agentv[redis]' ({exc})"
        ) from None
    assert settings.coordinator is not None and settings.run_id is not None
    return connect(settings.coordinator, settings.run_id, settings.judge_timeout, check=check)
