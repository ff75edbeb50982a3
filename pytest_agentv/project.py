"""The project's AgentV files as the plugin reaches them, before any eval file is collected: each
folder's nearest ``.agentv/config.yaml`` (looked for once per folder), and its files read once
one is found. Importing this module must stay cheap, as the plugin's: a project without
``.agentv/config.yaml`` reads no YAML.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .paths import CONFIG_FILE_NAMES, NearestFiles, is_eval_file

if TYPE_CHECKING:
    from .projectfiles import ProjectFiles
    from .settings import Settings


class Project:
    """One per pytest process, from the plugin's first look at a file."""

    def __init__(self, rootdir: Path, settings: Settings) -> None:
        self.rootdir = rootdir
        self.settings = settings
        self.config_at = NearestFiles(rootdir, CONFIG_FILE_NAMES)
        self._files: ProjectFiles | None = None
        #: What ``hooks.before_session`` did, for the header.
        self.session_said: str | None = None

    @property
    def files(self) -> ProjectFiles:
        if self._files is None:
            from .projectfiles import ProjectFiles

            self._files = ProjectFiles(self.rootdir, self.settings.targets, self.config_at)
        return self._files

    def collects(self, path: Path) -> bool:
        """A YAML or JSONL file with cases that the nearest ``.agentv/config.yaml``'s
        ``eval_patterns`` match."""
        if path.suffix not in (".yaml", ".yml", ".jsonl") or self.config_at(path.parent) is None:
            return False
        return self.files.collects(path) and is_eval_file(path, (), named=True)

    def before_session(self, config: pytest.Config) -> None:
        """``hooks.before_session`` of the config nearest the folder pytest runs from (the
        rootdir, when that folder is outside it), in the controller, when pytest runs tests."""
        option = config.option
        runs_nothing = option.collectonly or option.setuponly or option.setupplan
        if hasattr(config, "workerinput") or runs_nothing or self.settings.estimate:
            return
        start = config.invocation_params.dir
        folder = start if start == self.rootdir or self.rootdir in start.parents else self.rootdir
        if self.config_at(folder) is not None:
            from .workspace.session import before_session

            self.session_said = before_session(self.files, folder, self.settings.code_judge_env)
