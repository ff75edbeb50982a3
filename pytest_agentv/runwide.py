"""What the processes of one run share: the budget's ledger and the model-call limits, served by
the pytest-xdist controller to its workers, or held in Redis (``--agentv-coordinator``) for every
process of every shard. Made when pytest configures, handed to each worker, closed last."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .settings import Settings

if TYPE_CHECKING:
    from .llm.budget import RunLedger
    from .llm.limits import LimitServer
    from .llm.limits.coordinator import Coordinator

#: pytest-xdist: the controller's ledger file, which its workers charge too.
LEDGER_INPUT = "agentv_budget_ledger"
#: pytest-xdist: where the controller serves the run's model-call limits to its workers.
LIMITS_INPUT = "agentv_call_limits"


class RunWide:
    """This process's share of the run: ``workerinput`` is what the controller handed a
    pytest-xdist worker (None in the controller or a run without xdist)."""

    def __init__(self, settings: Settings, workerinput: dict[str, Any] | None) -> None:
        self.settings = settings
        self.workerinput = workerinput
        self.coordinator: Coordinator | None = None
        self.ledger: RunLedger | None = None
        #: The limits served to workers; None before the first worker, or when they cannot be.
        self.server: LimitServer | None = None
        self._serving_tried = False
        if settings.coordinator is not None:
            from .llm.limits import coordinator_for

            self.coordinator = coordinator_for(settings, check=workerinput is None)
        if settings.budget_usd is not None:
            from .llm.budget import run_ledger
            from .scheduler import shared_loop

            shared = (workerinput or {}).get(LEDGER_INPUT)
            self.ledger = run_ledger(self.coordinator, shared, shared_loop)

    @property
    def limits_socket(self) -> Path | None:
        """In a worker: where the controller serves the limits, if it does."""
        socket = (self.workerinput or {}).get(LIMITS_INPUT)
        return Path(socket) if socket else None

    def share_with(self, workerinput: dict[str, Any], warn: Callable[[Warning], None]) -> None:
        """A new pytest-xdist worker charges the controller's ledger and takes its slots from
        the controller's limits, served from the first worker on; with a coordinator it asks
        Redis itself."""
        path = getattr(self.ledger, "path", None)
        if path is not None:
            workerinput[LEDGER_INPUT] = str(path)
        if self.coordinator is not None:
            return
        if not self._serving_tried:
            self._serving_tried = True
            from .llm.limits import CallLimits, serve_limits
            from .scheduler import shared_loop

            try:
                self.server = serve_limits(CallLimits.for_run(self.settings), shared_loop())
            except OSError as exc:
                from .errors import AgentvWarning

                warn(
                    AgentvWarning(
                        f"agentv: the model-call limits cannot be shared between pytest-xdist "
                        f"workers ({exc}); each worker keeps its own --agentv-concurrency, "
                        "--agentv-rpm and --agentv-tpm"
                    )
                )
        if self.server is not None:
            workerinput[LIMITS_INPUT] = str(self.server.path)

    def finish(self) -> dict[str, Any] | None:
        """At the session's end: a worker's last spend counted now; in the controller, how the
        calls the workers made met the limits it served."""
        if self.ledger is not None and self.workerinput is not None:
            self.ledger.totals()
        return self.server.limits.report() if self.server is not None else None

    def close(self) -> None:
        path = getattr(self.ledger, "path", None)
        if path is not None and LEDGER_INPUT not in (self.workerinput or {}):
            path.unlink(missing_ok=True)  # this process made it
        if self.coordinator is not None or self.server is not None:
            from .scheduler import shared_loop

            if self.coordinator is not None:
                self.coordinator.close_on(shared_loop())
                self.coordinator = None
            if self.server is not None:
                from .llm.limits import stop_limits

                stop_limits(self.server, shared_loop())
                self.server = None
