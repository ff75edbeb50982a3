"""Runs case work ahead of time on one background event loop, bounded and in item order.

pytest runs items one at a time; an eval suite mostly waits on models. Once collection is final,
the scheduler starts the target and evaluator work of upcoming items — at most twice
``concurrency`` at once, never more than a few windows ahead of the item pytest is running — and
each item then waits only for its own result. Outcomes and reports stay exactly those of a
sequential run. Work may belong to a group with a smaller cap of its own (an eval file's
``execution.workers``): its next piece then waits until one of the group's ends.

Child processes (``processes.limit_children``: CLI targets, code judges) and model calls
(``llm/limits.py``) are held to ``concurrency`` on their own: a case started early waits for a
slot, not for other cases.

The event loop lives in a daemon thread shared by every session of the process, because litellm
caches HTTP clients per loop; a session that ends cancels its own pending work.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import threading
from collections.abc import Awaitable, Callable, Coroutine, Hashable, Iterable, Sequence
from functools import partial
from typing import Any, TypeVar

T = TypeVar("T")
Work = Callable[[], Coroutine[Any, Any, Any]]
#: A group of work with its own cap on how much of it runs at once (an eval file's
#: ``execution.workers``): its name and the cap.
Cap = tuple[Hashable, int]

_loop: asyncio.AbstractEventLoop | None = None
#: How long closing waits for the loop to start cancelling the run's work (it does at once,
#: unless something holds the loop), and then for the work to stop and clean up.
LOOP_ANSWERS_WITHIN = 5.0
CLOSE_WITHIN = 30.0
_loop_lock = threading.Lock()


def shared_loop() -> asyncio.AbstractEventLoop:
    """The plugin's event loop, started in a daemon thread on first use."""
    global _loop
    with _loop_lock:
        if _loop is None:
            loop = asyncio.new_event_loop()
            ready = threading.Event()

            def run() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                while True:
                    try:
                        loop.run_forever()
                        return
                    except (SystemExit, KeyboardInterrupt):
                        # User code on the loop (an evaluator, a target) called sys.exit: the
                        # task that raised it holds it; the loop must keep serving the rest.
                        continue

            threading.Thread(target=run, name="agentv-loop", daemon=True).start()
            ready.wait()
            _loop = loop
        return _loop


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run, in this thread and without an event loop, a coroutine whose awaits all complete at
    once (its answers are called synchronously, its loop work is waited for with ``blocking``):
    one async code path serves the sync entry points too."""
    __tracebackhide__ = True
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coro.close()
    raise RuntimeError("run_sync: the coroutine waited for something; drive it on a loop")


async def awaited(value: Awaitable[T]) -> T:
    """An awaitable as a coroutine (what the loop's ``run`` and ``submit`` take)."""
    return await value


async def _done() -> None:
    """Stands in for work already started, so the plan does not keep its arguments alive."""


class Scheduler:
    def __init__(self, concurrency: int) -> None:
        self.concurrency = concurrency
        #: Twice the limit on child processes and model calls: when a call ends, a case that
        #: has its answer and its prompt waits for the slot, so the judge stays at the limit
        #: instead of idling while the next case gets ready.
        self.cases_at_once = 2 * concurrency
        self.lookahead = max(1, concurrency) * 4
        self._plan: list[tuple[Hashable, Work, Cap | None]] = []
        self._index: dict[Hashable, int] = {}
        self._futures: dict[Hashable, concurrent.futures.Future[Any]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._cursor = 0
        self._position = 0
        self._in_flight = 0
        #: Work of each capped group running now.
        self._group_flight: dict[Hashable, int] = {}
        self._halted = False

    @property
    def enabled(self) -> bool:
        return self.concurrency > 1

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run item-time work on the plugin loop and wait for it (from pytest's thread)."""
        return asyncio.run_coroutine_threadsafe(self._track(coro), shared_loop()).result()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(self._track(coro), shared_loop())

    async def blocking(self, coro: Coroutine[Any, Any, T]) -> T:
        """``run``, as an awaitable that never suspends: for ``run_sync`` drivers."""
        return self.run(coro)

    async def waiting(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run work on the plugin loop and await it from another event loop (a test's)."""
        return await asyncio.wrap_future(self.submit(coro))

    async def _track(self, coro: Coroutine[Any, Any, T]) -> T:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        try:
            return await task
        finally:
            self._tasks.discard(task)

    def plan(self, work: Sequence[tuple[Hashable, Work, Cap | None]]) -> None:
        """Register work that may start early, in the order its items will run, each piece with
        the group it counts against (None: only the scheduler's own limit).

        May be called again with more work (under xdist a worker learns its share piece by
        piece); keys already planned are ignored.
        """
        if not self.enabled or self._halted:
            return
        added = False
        for key, factory, cap in work:
            if key in self._index:
                continue
            # The future must exist before the loop thread can see the plan entry.
            self._futures[key] = concurrent.futures.Future()
            self._index[key] = len(self._plan)
            self._plan.append((key, factory, cap))
            added = True
        if added:
            shared_loop().call_soon_threadsafe(self._pump)

    def planned(self, key: Hashable) -> bool:
        """Whether early work for ``key`` is planned and its result not yet taken."""
        return key in self._futures

    def result(self, key: Hashable) -> Any:
        """Wait for the early work of ``key`` (starting it now if it has not started yet)."""
        index = self._index[key]
        self._position = max(self._position, index)
        future = self._futures[key]
        started = future.running() or future.done()
        # Waking the loop costs a system call: do it when this item still has to start, or when
        # the look-ahead window is half used up, not for every item.
        if not started or self._cursor <= self._position + self.lookahead // 2:
            shared_loop().call_soon_threadsafe(self._pump, index)
        try:
            return future.result()
        finally:
            del self._futures[key]

    def halt(self) -> None:
        """Start no more early work (``-x``, ``--maxfail``); what runs finishes or is cancelled."""
        self._halted = True

    def close(self, cleanup: Callable[[], Awaitable[None]] | None = None) -> None:
        """Cancel everything still pending or running, and wait for it to clean up; then run
        ``cleanup`` on the loop, for work the run's tasks shared (a target's healthcheck).

        Never raises, and never waits for long on a loop that does not answer: work that holds
        the loop (user code that blocks, a read that never ends) is left to the daemon thread,
        which ends with the process, so an interrupted run still writes its reports."""
        self._halted = True
        if _loop is None:
            return
        for future in self._futures.values():
            future.cancel()
        answered = threading.Event()
        closing = asyncio.run_coroutine_threadsafe(self._cancel_all(cleanup, answered), _loop)
        try:
            if answered.wait(LOOP_ANSWERS_WITHIN):
                closing.result(timeout=CLOSE_WITHIN)
        except (concurrent.futures.TimeoutError, concurrent.futures.CancelledError):
            pass
        if not closing.done():
            closing.cancel()

    async def _cancel_all(
        self, cleanup: Callable[[], Awaitable[None]] | None, answered: threading.Event
    ) -> None:
        answered.set()
        tasks = [task for task in self._tasks if not task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=10)
        if cleanup is not None:
            # The run is over: a cleanup that fails or hangs must not turn its end into an
            # INTERNALERROR (what it stops is a descendant, which the reaper kills anyway).
            with contextlib.suppress(Exception):
                await asyncio.wait_for(cleanup(), timeout=10)

    def _pump(self, required: int = -1) -> None:
        """Start work in order while the limits allow (the next piece's group's too); work up to
        ``required`` starts regardless."""
        while self._cursor < len(self._plan) and (
            self._cursor <= required
            or (
                not self._halted
                and self._in_flight < self.cases_at_once
                and self._cursor <= self._position + self.lookahead
                and self._group_has_room(self._plan[self._cursor][2])
            )
        ):
            key, work, cap = self._plan[self._cursor]
            self._plan[self._cursor] = (key, _done, None)
            self._cursor += 1
            future = self._futures.get(key)
            if future is None or not future.set_running_or_notify_cancel():
                continue
            self._in_flight += 1
            group = cap[0] if cap is not None else None
            if group is not None:
                self._group_flight[group] = self._group_flight.get(group, 0) + 1
            task = asyncio.ensure_future(work())
            self._tasks.add(task)
            task.add_done_callback(partial(self._finished, future=future, group=group))

    def _group_has_room(self, cap: Cap | None) -> bool:
        return cap is None or self._group_flight.get(cap[0], 0) < cap[1]

    def _finished(
        self,
        task: asyncio.Task[Any],
        *,
        future: concurrent.futures.Future[Any],
        group: Hashable | None,
    ) -> None:
        self._tasks.discard(task)
        self._in_flight -= 1
        if group is not None:
            self._group_flight[group] -= 1
        if future.done():
            pass
        elif task.cancelled():
            future.set_exception(concurrent.futures.CancelledError())
        elif (exc := task.exception()) is not None:
            future.set_exception(exc)
        else:
            future.set_result(task.result())
        self._pump()


def xdist_upcoming(session: Any, limit: int) -> Iterable[Any]:
    """The next ``limit`` items a pytest-xdist worker has been given but not yet run, in the
    order it will run them (as far ahead as the scheduler looks: no further).

    Read from xdist's worker queue when it can be found; without it a worker only plans the item
    it is running, which is always correct, just slower. pytest-xdist has no public API for
    this: ``test_each_xdist_worker_prefetches_its_share`` fails if its internals change.
    """
    for plugin in session.config.pluginmanager.get_plugins():
        queue: Any = getattr(plugin, "torun", None)
        if type(plugin).__name__ == "WorkerInteractor" and hasattr(queue, "lock"):
            try:
                with queue.lock() as pending:
                    indices = [i for i in itertools.islice(pending, limit) if isinstance(i, int)]
            except Exception:
                return []
            return [session.items[i] for i in indices if 0 <= i < len(session.items)]
    return []
