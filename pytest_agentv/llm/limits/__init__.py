"""The run's limits on model calls: calls in flight, and each model's pace — from
``--agentv-rpm``/``--agentv-tpm`` and from what the provider's rate-limit headers say.

``headers`` (what a reply's headers tell, as plain data), ``pacing`` (when a call may go: the
logic, apart from where its state lives), ``local`` (``CallLimits``: the state on one event
loop, concurrency with AIMD, the waiting) and ``shared`` (the xdist controller's limits served
to its workers).
"""

from .headers import Observed, observed
from .local import MINUTE, UNLIMITED, CallLimits, Grant, Held, Limits
from .shared import LimitServer, RemoteLimits, serve_limits, stop_limits

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
    "observed",
    "serve_limits",
    "stop_limits",
]
