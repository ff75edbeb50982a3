"""The project's other files: targets files, ``.agentv/config.yaml`` and calibration files, read
with the same ``path:line:col`` errors and unknown-key warnings as eval files. Each is found from
an eval file's folder up to the rootdir (the nearest wins) and read at collection.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .errors import AgentvError, did_you_mean
from .loader.validation import FileWarning, unknown_key_warnings, validate
from .paths import CONFIG_FILE_NAMES, NearestFiles, display_path, glob_match
from .schema.project import DEFAULT_EVAL_GLOBS, CalibrationFile, ProjectConfig
from .schema.targets import (
    CLI_PLACEHOLDERS,
    TARGET_SETTINGS,
    TargetConfig,
    TargetsFile,
    provider_settings,
)
from .spellings import AGENTV_ONLY_TARGET_SETTINGS, TARGET_SETTING_ALIASES, key_at, locate
from .versions import AGENTV_VERSION, satisfies
from .yamlfile import child_at, line_col, parse_yaml

#: Where a target's setting is written (``healthcheck.url`` inside a mapping), as
#: ``file:line:col``: settings errors point there.
Where = Callable[[str], str]


@dataclass(frozen=True)
class LoadedTargets:
    path: Path
    display: str
    model: TargetsFile
    positions: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: Per target: warnings about its settings, each with its line (settings pytest-agentv
    #: ignores, AgentV-only or unknown; a placeholder written inside quotes).
    notes: dict[str, tuple[FileWarning, ...]] = field(default_factory=dict)

    def where(self, target: TargetConfig, key: str | None = None) -> str:
        """``file:line:col`` of a setting (``healthcheck.url`` inside a mapping), else of the
        nearest enclosing setting the file has, else of the target."""
        parts = key.split(".") if key else []
        while parts and f"{target.name}.{'.'.join(parts)}" not in self.positions:
            parts.pop()
        name = ".".join([target.name, *parts])
        line, col = self.positions.get(name, (1, 1))
        return f"{self.display}:{line}:{col}"


def load_targets_file(path: Path, display: str) -> LoadedTargets:
    root, data = parse_yaml(path, display)
    if isinstance(data, list):
        data = {"targets": data}
        root_for_errors: yaml.Node = yaml.MappingNode(
            "tag:yaml.org,2002:map",
            [(yaml.ScalarNode("tag:yaml.org,2002:str", "targets"), root)],
            start_mark=root.start_mark,
            end_mark=root.end_mark,
        )
    else:
        root_for_errors = root
    model = validate(TargetsFile, data, display, root_for_errors)
    positions: dict[str, tuple[int, int]] = {}
    notes_by_target: dict[str, tuple[FileWarning, ...]] = {}
    known = [*TARGET_SETTINGS, *TARGET_SETTING_ALIASES, "name", "provider", "judge_target"]
    for index, target in enumerate(model.targets):
        node, _ = locate(root_for_errors, ("targets", index))
        positions[target.name] = line_col(node)
        for written in target.model_extra or {}:
            key_node = child_at(node, written)
            if key_node is not None:
                key = TARGET_SETTING_ALIASES.get(written, written)
                positions[f"{target.name}.{key}"] = line_col(key_node)
                if isinstance(key_node, yaml.MappingNode):  # healthcheck: {url: ...}
                    for inner, value in key_node.value:
                        if isinstance(inner, yaml.ScalarNode):
                            positions[f"{target.name}.{key}.{inner.value}"] = line_col(value)
        notes: list[FileWarning] = []
        for written in target.model_extra or {}:
            if written in known or written in provider_settings(target.provider):
                continue
            line = line_col(key_at(node, written) or node)[0]
            why = (
                "an AgentV setting pytest-agentv does not implement"
                if written in AGENTV_ONLY_TARGET_SETTINGS
                else f"not a setting pytest-agentv or AgentV knows{did_you_mean(written, known)}"
            )
            notes.append(
                FileWarning(
                    line, f"{display}:{line}: target '{target.name}': '{written}' is {why}; ignored"
                )
            )
        for key, template in _command_templates(target.settings):
            quoted = _quoted_placeholders(template)
            if quoted:
                line = positions.get(f"{target.name}.{key}", positions[target.name])[0]
                notes.append(
                    FileWarning(line, _quoted_note(display, line, target.name, key, quoted))
                )
        notes_by_target[target.name] = tuple(notes)
    return LoadedTargets(path, display, model, positions, notes_by_target)


def _command_templates(settings: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """A target's shell command templates: its own, and its healthcheck's."""
    template, check = settings.get("command_template"), settings.get("healthcheck")
    if isinstance(template, str):
        yield "command_template", template
    if isinstance(check, dict):
        check = check.get("command_template")
    if isinstance(check, str) and "://" not in check:
        yield "healthcheck.command_template", check


_PLACEHOLDER = re.compile(r"\{(?:" + "|".join(CLI_PLACEHOLDERS) + r")\}")


def _quoted_placeholders(template: str) -> list[str]:
    """The placeholders a shell command writes inside quotes (``"{PROMPT}"``, ``'q={PROMPT}'``)."""
    found: list[str] = []
    quote = ""
    index = 0
    while index < len(template):
        placeholder = _PLACEHOLDER.match(template, index) if quote else None
        if placeholder is not None:
            found.append(placeholder.group())
            index = placeholder.end()
            continue
        char = template[index]
        if char == "\\" and quote != "'":
            index += 1  # what a backslash escapes is no quote
        elif char in "'\"" and quote in ("", char):
            quote = "" if quote else char
        index += 1
    return found


def _quoted_note(display: str, line: int, target: str, key: str, quoted: list[str]) -> str:
    """Each value is already one shell-quoted argument: quotes around it open it up again (in
    double quotes a prompt's ``$(...)`` would run; in single quotes its own quotes end them)."""
    names = ", ".join(dict.fromkeys(quoted))
    return (
        f"{display}:{line}: target '{target}': {key} writes {names} inside quotes, which is "
        "unsafe: placeholders are filled in as shell-quoted single arguments already (a "
        "prompt's $(...) would run inside double quotes); write them without quotes"
    )


def load_calibration_file(path: Path, display: str) -> CalibrationFile:
    """The canaries of a calibration file; errors read ``path:line:col: field: problem``."""
    root, data = parse_yaml(path, display)
    return validate(CalibrationFile, data, display, root)


@dataclass(frozen=True)
class LoadedConfig:
    path: Path
    display: str
    model: ProjectConfig
    warnings: tuple[FileWarning, ...]
    #: ``file:line`` of ``hooks.before_session``, for its errors.
    hook_at: str


def load_project_config(path: Path, display: str) -> LoadedConfig:
    root, data = parse_yaml(path, display)
    model = validate(ProjectConfig, data, display, root)
    found = (
        *unknown_key_warnings(model, root, display, path),
        *_version_warnings(model, root, display, path),
        *_unused(model, root, display, path),
    )
    hook_line = line_col(locate(root, ("hooks", "before_session"))[0])[0]
    return LoadedConfig(path, display, model, tuple(found), f"{display}:{hook_line}")


def _version_warnings(
    model: ProjectConfig, root: yaml.Node, display: str, path: Path
) -> Iterator[FileWarning]:
    """``required_version`` checked against the AgentV release pytest-agentv implements: as in
    AgentV, a version outside the range is advisory; a range that is none is said too."""
    wanted = model.required_version
    if wanted is None:
        return
    line = line_col(locate(root, ("required_version",))[0])[0]
    try:
        if satisfies(AGENTV_VERSION, wanted):
            return
        problem = (
            f"'{wanted}' excludes AgentV {AGENTV_VERSION}, the version whose semantics "
            "pytest-agentv implements: files that rely on another version's behaviour may be "
            "read or graded differently"
        )
    except ValueError:
        problem = f"'{wanted}' is not a semver range (e.g. '>=4.0.0', '^4.2.0'); not checked"
    yield FileWarning(line, f"{display}:{line}: required_version: {problem}", path=path)


_TRACES = (
    "pytest-agentv writes no trace files of its own and exports no OpenTelemetry spans: each "
    "case's trace is in its --agentv-results row, and with --agentv-results-format agentv-v4 "
    "and a results file named index.jsonl in the run folder beside it (outputs/trace.json per "
    "test)"
)
_POOL = (
    "pytest-agentv pools no workspaces across runs: each run makes its workspaces afresh in a "
    "temporary folder"
)
#: What pytest-agentv does instead of a setting of AgentV v4's config it has no equivalent of,
#: by where the setting is; said when the setting asks for something (AgentV's defaults are off).
_INSTEAD = {
    ("execution", "verbose"): (
        "pytest-agentv's output is pytest's: -v lists each case, -rA gives every case's reason, "
        "and a target's own 'verbose: true' logs each command it runs (--log-cli-level=INFO)"
    ),
    ("execution", "trace_file"): _TRACES,
    ("execution", "otel_file"): _TRACES,
    ("execution", "export_otel"): _TRACES,
    ("execution", "otel_backend"): _TRACES,
    ("execution", "otel_capture_content"): _TRACES,
    ("execution", "otel_group_turns"): _TRACES,
    ("execution", "pool_workspaces"): _POOL,
    ("execution", "pool_slots"): _POOL,
    ("results",): (
        "pytest-agentv keeps no git-backed results store: each run writes its results file with "
        "--agentv-results, and python -m pytest_agentv report merges results files"
    ),
}


def _unused(
    model: ProjectConfig, root: yaml.Node, display: str, path: Path
) -> Iterator[FileWarning]:
    """A warning for the settings that ask AgentV for something pytest-agentv does otherwise,
    naming them and what pytest-agentv does instead: one for all that share an explanation (the
    OpenTelemetry settings), at the first of them."""
    named: dict[str, list[tuple[tuple[int, int], str]]] = {}
    for loc, instead in _INSTEAD.items():
        owner: Any = model
        for part in loc:
            owner = getattr(owner, part, None)
        if owner not in (None, False):
            at = line_col(key_at(locate(root, loc[:-1])[0], loc[-1]) or root)
            named.setdefault(instead, []).append((at, ".".join(loc)))
    for instead, settings in named.items():
        line = min(settings)[0][0]
        names = ", ".join(name for _, name in sorted(settings))
        yield FileWarning(line, f"{display}:{line}: {names}: {instead}; ignored", path=path)


#: Where targets files are looked for in each folder, nearest first.
TARGETS_FILE_NAMES = (".agentv/targets.yaml", ".agentv/targets.yml", "targets.yaml", "targets.yml")


class ProjectFiles:
    """The ``.agentv/config.yaml`` and targets file of each eval file's folder, found from that
    folder up to the rootdir (the nearest wins; ``--agentv-targets`` names one for every
    folder), each loaded once, at collection; config warnings are given out once."""

    def __init__(
        self,
        rootdir: Path,
        targets_file: Path | None = None,
        config_at: NearestFiles | None = None,
    ) -> None:
        self.rootdir = rootdir
        self.targets_file = targets_file
        self.config_at = config_at or NearestFiles(rootdir, CONFIG_FILE_NAMES)
        self._targets_at = NearestFiles(rootdir, TARGETS_FILE_NAMES)
        self._configs: dict[Path, LoadedConfig] = {}
        self._targets: dict[Path, LoadedTargets] = {}
        self._warned: set[Path] = set()

    def config_for(self, folder: Path) -> LoadedConfig | None:
        path = self.config_at(folder)
        if path is None:
            return None
        if path not in self._configs:
            self._configs[path] = load_project_config(path, display_path(path, self.rootdir))
        return self._configs[path]

    def targets_for(self, folder: Path) -> LoadedTargets | None:
        """The folder's targets file (raises ``AgentvError`` when it cannot be read)."""
        path = self.targets_file or self._targets_at(folder)
        if path is None:
            return None
        if path not in self._targets:
            self._targets[path] = load_targets_file(path, display_path(path, self.rootdir))
        return self._targets[path]

    def collects(self, path: Path) -> bool:
        """Whether the nearest config's ``eval_patterns`` (AgentV v4's defaults when it sets
        none) match the file's path from the config's project root (the folder holding its
        ``.agentv``). A config that cannot be read uses the defaults: its error is then each
        eval file's collection error."""
        found = self.config_at(path.parent)
        if found is None:
            return False
        try:
            config = self.config_for(path.parent)
            globs = config.model.eval_globs if config is not None else DEFAULT_EVAL_GLOBS
        except AgentvError:
            globs = DEFAULT_EVAL_GLOBS
        shown = display_path(path, found.parent.parent)
        return any(glob_match(glob, shown, ignore_case=True) for glob in globs)

    def new_warnings(self, config: LoadedConfig) -> tuple[FileWarning, ...]:
        if config.path in self._warned:
            return ()
        self._warned.add(config.path)
        return config.warnings
