"""What is resolved for each selected case before it runs, so that running it never goes back
to a project file: its target (built by the ``pytest_agentv_make_target`` hook, the built-in
kinds last), its judge (its target's ``judge_target``, else the session's) and its workspace.
The files were read at collection; a case is planned once collection has chosen it (a case
``-k`` leaves out builds nothing). What cannot be had is kept as the reason the case will not be
graded, raised only when it runs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .cases import CaseSpec
from .errors import AgentvError
from .evaluators.base import Evaluator
from .llm.client import LlmClient
from .targets import Target, TargetCatalog, TargetDefinition, TargetServices, builtin_target
from .targets.catalog import Make
from .workspace import WorkspacePlan, plan_for


@dataclass(frozen=True)
class CasePlan:
    """A selected case with all a run needs of it resolved: its evaluators by kind, its target
    (or why it has none), its judge (its target's ``judge_target``, else the session's; or why
    it has none) and its workspace. Running it never goes back to a targets or workspace
    file."""

    spec: CaseSpec
    evaluators: Mapping[str, Evaluator]
    target: Target | AgentvError
    judge: LlmClient | AgentvError | None
    #: The workspace it runs in (None: none), or why its paths cannot be used.
    workspace: WorkspacePlan | AgentvError | None = None


#: An eval item's case as the scheduler gets it: its key (the item's node id), and its plan.
CaseWork = tuple[str, CasePlan]


class Planner:
    """Plans the run's selected cases, with the targets files collection read (``targets``),
    what the built-in target kinds share (``services``) and the session's judge (None:
    none)."""

    def __init__(
        self, targets: TargetCatalog, services: TargetServices, session: LlmClient | None
    ) -> None:
        self.targets = targets
        self.services = services
        self.session = session

    def make_target(self, target: TargetDefinition) -> Target | None:
        """A built-in kind's target (the hook's last answer)."""
        return builtin_target(target, self.services)

    def plan_case(
        self, spec: CaseSpec, evaluators: Mapping[str, Evaluator], make: Make
    ) -> CasePlan:
        """The case's target, built by ``make`` (the eval file's ``pytest_agentv_make_target``),
        its judge and its workspace; what cannot be had is kept as the reason the case will
        not be graded."""
        workspace: WorkspacePlan | AgentvError | None
        try:
            workspace = plan_for(spec, self.targets.rootdir)
        except AgentvError as exc:
            workspace = exc
        try:
            target = self.targets.target_for(spec, make)
        except AgentvError as exc:
            return CasePlan(spec, evaluators, exc, self.session, workspace)
        judge = self.judge_of(target, spec.loaded.path.parent)
        return CasePlan(spec, evaluators, target, judge, workspace)

    def judge_of(self, target: Target, folder: Path) -> LlmClient | AgentvError | None:
        """A target's cases' judge: its ``judge_target``'s model, else the session's."""
        if not target.judge_target:
            return self.session
        try:
            return self.services.clients(self.targets.judge_spec(target.judge_target, folder))
        except AgentvError as exc:
            return exc
