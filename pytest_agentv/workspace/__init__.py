"""A case's workspace (AgentV v4 ``workspace:``): the folder its target works in, made from a
template, a static path and repositories checked out, with v4's lifecycle hooks around it, and
the changes the target made there (``file_changes``) for its graders.

How the lifecycle maps onto a pytest run (see docs/workspaces.md):

- A file whose own ``workspace:`` has a template, hooks, repos or a static path gives all its
  cases one *shared* workspace (v4's default), made when the first of them starts in this
  process: template copied, repos checked out, ``env`` checked, ``before_all`` run, a baseline
  commit made. Its cases then take turns in it, one at a time (v4 only warns that concurrent
  cases may corrupt each other). ``after_all`` runs when the run ends. Under pytest-xdist each
  worker is a process of its own, so each worker that runs cases of the file makes its own
  workspace and runs ``before_all`` and ``after_all`` for its share: a workspace is a folder on
  the machine that runs the target, which the controller does not share.
- Otherwise (``isolation: per_test``, a workspace only a case sets, or a case that sets its
  own template) each attempt of a case gets a fresh folder, with the case's ``before_all`` run
  in it.
- Around each attempt: ``before_each`` (reset, then command), the target, the diff since the
  baseline, then ``after_each`` (reset, then command); grading follows, as in v4.

The plan (which workspace a case gets) is ``plan.py``, the hooks ``hooks.py``, git (checkouts,
the baseline commit, the diff, resets) ``repos.py``; this module is the run's workspaces.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import shutil
import tempfile
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..answers import TargetResponse
from ..cases import CaseSpec, PreparedCase
from ..errors import NotGradedError
from ..schema.workspace import HookConfig, RepoConfig
from . import repos
from .hooks import MatrixHooks, deadline, hook_context, preflight, run_hook
from .plan import WorkspacePlan, plan_for

__all__ = ["Call", "Opened", "WorkspacePlan", "Workspaces", "plan_for"]

Call = Callable[[PreparedCase], Awaitable[TargetResponse]]
#: How the workspace's own steps reach the plugin's loop: awaited there, or, for a synchronous
#: ``agentv_target`` fixture called in pytest's thread, run there and waited for.
OnLoop = Callable[[Coroutine[Any, Any, Any]], Awaitable[Any]]


@dataclass
class _Made:
    """A workspace made and ready: where, its baseline commit, its repos' commits, and where
    its baseline repository is kept when not in it (a static path)."""

    path: Path
    since: str
    checkouts: list[tuple[RepoConfig, str]]
    repository: Path | None = None


@dataclass
class _Shared:
    plan: WorkspacePlan
    lock: asyncio.Lock
    ready: asyncio.Task[_Made]
    #: The matrix targets whose ``before_all`` ran here, in order (and why it failed, if it did).
    targets: dict[str, tuple[MatrixHooks, NotGradedError | None]] = field(default_factory=dict)

    def after_alls(self) -> list[tuple[HookConfig | None, MatrixHooks | None]]:
        """What runs here when the run ends: the ``after_all`` of each matrix target whose
        ``before_all`` ran, then the workspace's own."""
        found = [(t.hooks.after_all, t) for t, failed in self.targets.values() if failed is None]
        return [*found, (self.plan.hook("after_all"), None)]


@dataclass
class Opened:
    """A workspace a case's attempt runs in, until ``Workspaces.close``."""

    plan: WorkspacePlan
    made: _Made
    context: dict[str, Any]
    lock: asyncio.Lock | None
    target: MatrixHooks | None = None


def _key(spec: CaseSpec) -> tuple[str, str]:
    return (spec.loaded.display, spec.label)


class Workspaces:
    """The run's workspaces (one per pytest process), from the first case that needs one to
    ``finish``."""

    def __init__(
        self, rootdir: Path, env_passthrough: tuple[str, ...] = (), keep: str = "none"
    ) -> None:
        self.rootdir = rootdir
        #: ``--agentv-keep-workspaces``: none, failed (of cases that did not pass) or all.
        self.keep = keep
        self.env_names = env_passthrough
        self.run_id = uuid.uuid4().hex
        self._root: Path | None = None
        #: The folders made for each case's own attempts (not shared, not static), by case.
        self._own: dict[tuple[str, str], list[Path]] = {}
        self._shared: dict[Path, _Shared] = {}
        #: What went wrong after the cases were reported (``after_all``), for a warning.
        self.problems: list[str] = []
        #: Copies in threads, which cancelling their case cannot stop: ``finish`` waits for them.
        self._copies: set[asyncio.Future[Any]] = set()

    @property
    def env(self) -> dict[str, str]:
        """The hooks' and git's environment, read from this process's at each use."""
        return repos.git_env(self.env_names)

    def _context(
        self, plan: WorkspacePlan, path: Path, test_id: str, case: PreparedCase | None
    ) -> dict[str, Any]:
        return hook_context(plan, path, test_id, self.run_id, case)

    # -- making a workspace -------------------------------------------------------------------
    def _fresh(self, name: str) -> Path:
        if self._root is None:
            self._root = Path(tempfile.mkdtemp(prefix="agentv-workspaces-"))
        prefix = re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:40]
        return Path(tempfile.mkdtemp(prefix=f"{prefix}-", dir=self._root))

    async def _make(self, plan: WorkspacePlan, name: str, case: PreparedCase | None) -> _Made:
        """Template, repos, preflight checks, ``before_all``, baseline: a workspace ready."""
        static = plan.static_path()
        path = static or self._fresh(name)
        checkouts: list[tuple[RepoConfig, str]] = []
        if static is None or not any(path.iterdir()):
            if plan.template is not None:  # links stay links: nothing is read from outside
                copy = asyncio.ensure_future(
                    asyncio.to_thread(
                        shutil.copytree,
                        plan.template,
                        path,
                        symlinks=True,
                        dirs_exist_ok=True,
                        # A worktree's or submodule's .git file names the user's repository.
                        ignore=shutil.ignore_patterns(".git"),
                    )
                )
                self._copies.add(copy)
                copy.add_done_callback(self._copies.discard)
                await asyncio.shield(copy)
            for repo in plan.config.repos or ():
                checkouts.append(
                    (repo, await repos.checkout(repo, path, plan.folder, self.rootdir, self.env))
                )
        await preflight(plan, path, self.env)
        test_id = case.id if case is not None and not plan.shared else "__before_all__"
        context = self._context(plan, path, test_id, case if not plan.shared else None)
        await run_hook("before_all", plan.hook("before_all"), plan, context, self.env)
        outside = self._fresh("baseline") / "git" if static is not None else None
        since = await repos.baseline(path, self.env, outside)
        return _Made(path, since, checkouts, outside)

    def _shared_for(self, spec: CaseSpec, plan: WorkspacePlan) -> _Shared:
        """The file's shared workspace, made from the file's own plan (not the first case's)."""
        key = spec.loaded.path
        shared = self._shared.get(key)
        if shared is None:
            suite = plan.suite or plan
            made = asyncio.ensure_future(self._make(suite, spec.dataset, None))
            shared = self._shared[key] = _Shared(suite, asyncio.Lock(), made)
        return shared

    # -- a case's attempt ---------------------------------------------------------------------
    async def open(
        self, plan: WorkspacePlan | None, spec: CaseSpec, case: PreparedCase
    ) -> Opened | None:
        """The workspace for one attempt of the case (its ``plan``, made at collection), set
        up; None when it has none."""
        if plan is None:
            return None
        lock: asyncio.Lock | None = None
        if plan.shared:
            shared = self._shared_for(spec, plan)
            made = await asyncio.shield(shared.ready)
            lock = shared.lock
            await lock.acquire()
        else:
            made = await self._make(plan, case.id, case)
            if made.path.parent == self._root:
                self._own.setdefault(_key(spec), []).append(made.path)
        entry = spec.matrix_entry
        target = None
        if entry is not None and entry.hooks is not None:
            target = MatrixHooks(entry.name, entry.hooks, spec.loaded.path.parent)
        opened = Opened(plan, made, self._context(plan, made.path, case.id, case), lock, target)
        try:
            if plan.shared and target is not None:
                await self._target_started(self._shared_for(spec, plan), target, made)
            before_each = plan.hook("before_each")
            if before_each is not None and before_each.reset not in (None, "none"):
                await self._reset(made, before_each.reset)
            hooks = [(before_each, None), (target.hooks.before_each if target else None, target)]
            commands = [(hook, owner) for hook, owner in hooks if hook and hook.command]
            for hook, owner in commands:
                await run_hook("before_each", hook, plan, opened.context, self.env, owner)
            if commands:  # what the commands did is the case's starting point, not its changes
                since = await repos.baseline(made.path, self.env, made.repository)
                opened.made = replace(made, since=since)
        except BaseException:
            self._release(opened)
            raise
        return opened

    async def _target_started(self, shared: _Shared, target: MatrixHooks, made: _Made) -> None:
        """A matrix target's ``before_all``, once per shared workspace, after the workspace's
        (the caller holds its lock); a failed one leaves all that target's cases not graded."""
        started = shared.targets.get(target.name)
        if started is None:
            context = self._context(shared.plan, made.path, "__target_before_all__", None)
            try:
                await run_hook(
                    "before_all", target.hooks.before_all, shared.plan, context, self.env, target
                )
            except NotGradedError as exc:
                shared.targets[target.name] = (target, exc)
                raise
            shared.targets[target.name] = (target, None)
        elif started[1] is not None:
            raise NotGradedError(str(started[1]))

    async def settle(self, spec: CaseSpec, passed: bool) -> None:
        """After a case is graded, its own workspaces go at once when it passed (AgentV v4's
        default: a suite of cloned repositories would otherwise fill the disk until the run
        ends); a failed case's stay until then, for a look at what its target left."""
        folders = self._own.pop(_key(spec), [])
        if passed and self.keep != "all":
            for folder in folders:
                await asyncio.to_thread(shutil.rmtree, folder, True)
        elif folders:
            self._own[_key(spec)] = folders

    async def _reset(self, made: _Made, mode: str) -> None:
        await repos.reset(made.path, made.since, mode, made.checkouts, self.env, made.repository)

    @staticmethod
    def _release(opened: Opened) -> None:
        if opened.lock is not None and opened.lock.locked():
            opened.lock.release()

    async def close(self, opened: Opened, *, answered: bool = True) -> str | None:
        """After the target: the diff since the baseline, then ``after_each`` (reset, command).
        After an attempt that gave no answer the hooks still run and their failures are moot."""
        made, plan, env = opened.made, opened.plan, self.env
        try:
            diff = (
                await repos.changes(made.path, made.since, env, made.repository) if answered else ""
            )
            with contextlib.suppress(NotGradedError) if not answered else contextlib.nullcontext():
                target = opened.target
                if target is not None:
                    after = target.hooks.after_each
                    await run_hook("after_each", after, plan, opened.context, env, target)
                after_each = plan.hook("after_each")
                if after_each is not None and after_each.reset not in (None, "none"):
                    await self._reset(made, after_each.reset)
                await run_hook("after_each", after_each, plan, opened.context, env)
            return diff
        finally:
            self._release(opened)

    async def _abandon(self, opened: Opened) -> None:
        """``close`` after an attempt that gave no answer, even when its task is cancelled."""
        await asyncio.shield(self.close(opened, answered=False))

    async def around(
        self,
        plan: WorkspacePlan | None,
        spec: CaseSpec,
        case: PreparedCase,
        call: Call,
        on_loop: OnLoop,
    ) -> TargetResponse:
        """One attempt of the case answered in its workspace, with the workspace's path and the
        diff on the answer for its graders; ``call`` alone when the case has no workspace. The
        workspace's steps go through ``on_loop``, so that a synchronous fixture's ``call`` runs
        in pytest's thread, like test code, while they run on the plugin's loop."""
        opened: Opened | None = await on_loop(self.open(plan, spec, case))
        if opened is None:
            return await call(case)
        path = str(opened.made.path)
        try:
            response = await call(replace(case, workspace_path=path))
        except BaseException:
            await on_loop(self._abandon(opened))
            raise
        diff: str | None = await on_loop(self.close(opened))
        return replace(response, workspace_path=path, file_changes=diff)

    # -- the end of the run -------------------------------------------------------------------
    @property
    def used(self) -> bool:
        """Whether any case made a workspace in this process."""
        return self._root is not None or bool(self._shared)

    def kept(self) -> str | None:
        """The folder of the run's temporary workspaces when they stay after it
        (``--agentv-keep-workspaces``; with ``failed``, when a failed case's or a shared one
        is left in it)."""
        if self.keep == "none" or self._root is None:
            return None
        if self.keep == "failed" and not any(self._root.iterdir()):
            return None
        return str(self._root)

    def finish_within(self) -> float:
        """How long ``finish`` may take: each ``after_all``'s deadline, and time to clean up."""
        hooks = [hook for shared in self._shared.values() for hook, _ in shared.after_alls()]
        return 30.0 + sum(deadline("after_all", hook) for hook in hooks if hook is not None)

    async def finish(self) -> None:
        """``after_all`` in each shared workspace made; then the temporary folders go, once
        no workspace is still being made (a run that stopped early leaves none behind)."""
        for shared in self._shared.values():
            shared.ready.cancel()  # nothing, when it is made
        making = [shared.ready for shared in self._shared.values()]
        await asyncio.gather(*making, *self._copies, return_exceptions=True)
        for shared in self._shared.values():
            if not shared.ready.done() or shared.ready.cancelled() or shared.ready.exception():
                continue
            made = shared.ready.result()
            for hook, target in shared.after_alls():
                test_id = "__after_all__" if target is None else "__target_after_all__"
                context = self._context(shared.plan, made.path, test_id, None)
                try:
                    await run_hook("after_all", hook, shared.plan, context, self.env, target)
                except NotGradedError as exc:
                    self.problems.append(f"{shared.plan.where}: {exc}")
        if self._root is not None and self.kept() is None:
            await asyncio.to_thread(shutil.rmtree, self._root, True)
