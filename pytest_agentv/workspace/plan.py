"""Which workspace a case runs in, as v4's loader works it out (``yaml-parser.ts``): the file's
``workspace:`` and the case's merged (the case's fields replace the file's, hook by hook), a
workspace file as the loader read it (``loader/workspacefile.py``), and every path it gives
(template, static path, hook ``cwd``) found inside the rootdir, refused outside it like every
other path an eval names.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..cases import CaseSpec
from ..errors import ConfigError
from ..paths import resolve_reference
from ..schema.workspace import HOOK_NAMES, HookConfig, WorkspaceConfig, WorkspaceHooks


def merged(suite: WorkspaceConfig | None, case: WorkspaceConfig | None) -> WorkspaceConfig | None:
    """v4's ``mergeWorkspaceConfigs``: the case's fields replace the file's; hooks merge one by
    one, a hook's keys the case gives replacing the file's."""
    if suite is None or case is None:
        return suite or case
    fields = {
        name: getattr(case, name) if getattr(case, name) is not None else getattr(suite, name)
        for name in ("template", "isolation", "repos", "mode", "path", "env")
    }
    if suite.hooks is not None or case.hooks is not None:
        hooks: dict[str, Any] = {}
        for name in HOOK_NAMES:
            ours, theirs = (getattr(h, name) if h else None for h in (suite.hooks, case.hooks))
            if ours is not None or theirs is not None:
                hooks[name] = HookConfig.model_validate(
                    {
                        **(ours.model_dump(exclude_none=True) if ours else {}),
                        **(theirs.model_dump(exclude_none=True) if theirs else {}),
                    }
                )
        source = case.hooks if case.hooks is not None else suite.hooks
        fields["hooks"] = WorkspaceHooks(enabled=source.enabled if source else True, **hooks)
    return WorkspaceConfig.model_validate(fields)


def _makes_shared(config: WorkspaceConfig | None) -> bool:
    """v4: a file-level workspace with a template, hooks, repos or a static path is shared."""
    if config is None or config.isolation == "per_test":
        return False
    return bool(config.template or config.hooks or config.repos or config.path)


@dataclass(frozen=True)
class WorkspacePlan:
    """A case's workspace, resolved: its config, where its relative paths start, whether the
    file's cases share it."""

    config: WorkspaceConfig
    folder: Path
    rootdir: Path
    shared: bool
    #: The eval file, as messages name it.
    where: str
    template: Path | None
    metadata: Any = None
    #: The file's own workspace, which its cases share (made from it alone, whichever case
    #: starts first); None when the case's workspace is its own.
    suite: WorkspacePlan | None = None

    @property
    def hooks_enabled(self) -> bool:
        return self.config.hooks is None or self.config.hooks.enabled

    def hook(self, name: str) -> HookConfig | None:
        hooks = self.config.hooks
        return getattr(hooks, name) if hooks is not None else None

    def hook_cwd(self, hook: HookConfig, name: str, start: Path | None = None) -> Path:
        """A hook runs from its ``cwd`` (from the workspace file's or eval file's folder, or
        ``start``), else from that folder (v4)."""
        folder = self.folder if start is None else start
        if hook.cwd is None:
            return folder
        return resolve_reference(
            hook.cwd, start=folder, rootdir=self.rootdir, what=f"hook {name}: cwd"
        )

    def static_path(self) -> Path | None:
        """``mode: static``'s folder, made if missing (inside the rootdir only)."""
        if self.config.path is None:
            return None
        path = (self.folder / self.config.path).resolve()
        if not path.is_relative_to(self.rootdir.resolve()):
            raise ConfigError(
                f"workspace path '{self.config.path}' resolves outside the rootdir; refused"
            )
        path.mkdir(parents=True, exist_ok=True)
        return path


def plan_for(spec: CaseSpec, rootdir: Path) -> WorkspacePlan | None:
    """The case's workspace, or None when neither its file nor the case sets one. The file's
    shared workspace is made from the file's settings alone; a case that sets its own template
    gets a workspace of its own. Raises ``ConfigError`` for a path that cannot be used (a
    workspace file's own problems are the loader's, at collection)."""
    suite_raw, case_raw = spec.loaded.suite.workspace, spec.case.workspace
    if suite_raw is None and case_raw is None:
        return None
    starts = [spec.loaded.path.parent] * 2  # where each one's relative paths start
    configs: list[WorkspaceConfig | None] = []
    for index, raw in enumerate((suite_raw, case_raw)):
        if isinstance(raw, str):
            read = spec.loaded.workspace_files[raw]  # read with the eval file
            configs.append(read.config)
            starts[index] = read.folder
        else:
            configs.append(raw)
    suite, case = configs
    start = starts[1] if isinstance(case_raw, str) else starts[0]
    config = merged(suite, case)
    if config is None:
        return None
    own_template = case is not None and case.template is not None
    plan = _plan(config, start, rootdir, spec, shared=False)
    if suite is None or own_template or not _makes_shared(suite):
        return plan
    return replace(plan, shared=True, suite=_plan(suite, starts[0], rootdir, spec, shared=True))


def _plan(
    config: WorkspaceConfig, start: Path, rootdir: Path, spec: CaseSpec, *, shared: bool
) -> WorkspacePlan:
    template = None
    if config.template is not None:
        template = resolve_reference(
            config.template, start=start, rootdir=rootdir, what="workspace template"
        )
        if template.is_file():  # a .code-workspace file: its folder is the template (v4)
            template = template.parent
    return WorkspacePlan(
        config=config,
        folder=start,
        rootdir=rootdir,
        shared=shared,
        where=spec.loaded.display,
        template=template,
        metadata=spec.metadata,
    )
