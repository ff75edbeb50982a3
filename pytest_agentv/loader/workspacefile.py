"""Workspace files an eval file names (``workspace: ./workspace.yaml``, the file's or a case's),
read with the eval file as v4's loader reads them: a missing file or a bad value is an error at
the reference, its unknown keys warnings, and a run reads none of them again."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError
from ..paths import display_path, resolve_reference
from ..schema.workspace import WorkspaceConfig
from ..yamlfile import parse_yaml
from .validation import FileWarning, unknown_key_warnings, validate


@dataclass(frozen=True)
class WorkspaceFile:
    """A workspace file's config (v4: the config object itself, no ``workspace:`` wrapper) and
    the folder its relative paths are read from."""

    config: WorkspaceConfig
    folder: Path
    warnings: tuple[FileWarning, ...]


def read_workspace_file(ref: str, folder: Path, rootdir: Path) -> WorkspaceFile:
    """Raises ``AgentvError`` for a file that is missing or holds a bad value."""
    path = resolve_reference(ref, start=folder, rootdir=rootdir, what="workspace file")
    shown = display_path(path, rootdir)
    root, data = parse_yaml(path, shown)
    if isinstance(data, dict) and set(data) == {"workspace"}:
        raise ConfigError(
            f"{shown}: a workspace file holds the workspace's keys directly; remove the "
            "top-level 'workspace:'"
        )
    config = validate(WorkspaceConfig, data, shown, root)
    return WorkspaceFile(
        config, path.parent, tuple(unknown_key_warnings(config, root, shown, path))
    )
