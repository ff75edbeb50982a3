"""The options of ``options.py`` resolved once per process into a frozen ``Settings``: the
command line wins over ini, ini over the environment. Bad values are a ``pytest.UsageError``
naming the option, where it came from and what would be valid.
"""

from __future__ import annotations

import math
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .options import DEFAULT_EVAL_PATTERNS, MAX_TRIALS, OPTIONS, BorderlineMode, Option


def environment() -> dict[str, str]:
    """A copy of ``os.environ`` that is safe to take while another thread changes it
    (pytest's thread sets ``PYTEST_CURRENT_TEST`` around every test)."""
    for _ in range(10):
        try:
            return dict(os.environ.items())
        except (KeyError, RuntimeError):
            continue
    return dict(os.environ.items())


def special_file(mode: int) -> str | None:
    """What a path that is not a regular file is (reading a FIFO or a device may never end),
    in the words refusals use; None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    kinds = (
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISCHR, "a device"),
        (stat.S_ISBLK, "a device"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((kind for test, kind in kinds if test(mode)), "a special file")


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


@dataclass(frozen=True)
class Settings:
    """The resolved options of this pytest process (see ``OPTIONS``)."""

    target: str | None
    targets: Path | None
    borderline: BorderlineMode
    results: Path | None
    #: pytest-agentv (our rows) or agentv-v4 (AgentV v4.42.4's), checked against the choices.
    results_format: str
    html: Path | None
    markdown: Path | None
    #: none, failed or all, checked against the option's choices; None: as the project's
    #: ``.agentv/config.yaml`` says (``AgentvRun``).
    keep_workspaces: str | None
    #: on or off, checked against the option's choices.
    step_summary: str
    eval_patterns: tuple[str, ...]
    code_judge_timeout: float
    code_judge_env: tuple[str, ...]
    judge_model: str | None
    judge_api_base: str | None
    #: One of ``judge.TRANSPORT_CHOICES``, checked against the option's choices.
    judge_transport: str
    #: One of ``options.STRUCTURED_CHOICES``.
    judge_structured: str
    #: Per model: US dollars per million input and output tokens.
    model_prices: tuple[tuple[str, float, float], ...]
    judge_timeout: float
    judge_attempt_timeout: float
    judge_retries: int
    judge_backoff: float
    target_timeout: float
    require_judge: bool
    #: One of ``replay.CACHE_MODES``, checked against the option's choices.
    cache_mode: str
    cache_dir: Path
    concurrency: int
    rpm: int | None
    tpm: int | None
    rate_window: float
    fail_on_error: bool
    trials: int | None
    answers: Path | None
    baseline: Path | None
    max_regression: float | None
    threshold: float | None
    budget_usd: float | None
    #: ``(K, N)``: run the K-th of N shards (1 <= K <= N).
    shard: tuple[int, int] | None
    shard_durations: Path | None
    #: ``--agentv-coordinator``: the Redis that holds the run's limits and budget.
    coordinator: str | None
    #: The run's id in the coordinator (set whenever ``coordinator`` is).
    run_id: str | None
    estimate: bool
    calibration: Path | None
    #: enforce, warn or off, checked against the option's choices.
    calibration_mode: str

    @classmethod
    def from_config(cls, config: pytest.Config) -> Settings:
        values: dict[str, Any] = {}
        for option in OPTIONS:
            values[option.name] = _resolve(config, option)
        if values["cache_dir"] is None:
            values["cache_dir"] = config.rootpath / ".agentv" / "cache"
        elif values["cache_mode"] != "off":
            _check_folder(
                values["cache_dir"], "--agentv-cache-dir", write=values["cache_mode"] != "replay"
            )
        for name in ("html", "markdown"):
            if values[name] is not None:
                _check_folder(
                    values[name].parent, f"--agentv-{name}", write=True, given=values[name]
                )
        if values["calibration"] is None:
            default = config.rootpath / ".agentv" / "calibration.yaml"
            if default.exists():
                _regular_file(default, f"{default} (read as --agentv-calibration)")
                values["calibration"] = default
        values["shard"] = _shard(values["shard"])
        if values["shard_durations"] is not None and values["shard"] is None:
            raise pytest.UsageError(
                "--agentv-shard-durations balances shards: give --agentv-shard K/N too"
            )
        if values["coordinator"] is not None:
            values["run_id"] = _run_id(values["run_id"])
        if values["max_regression"] is not None and values["baseline"] is None:
            raise pytest.UsageError(
                "--agentv-max-regression needs --agentv-baseline: the previous results file "
                "to compare scores with"
            )
        return cls(**values)

    def header(self) -> str:
        judge = self.judge_model or "not configured"
        if self.judge_model and self.judge_api_base:
            judge += f" at {self.judge_api_base}"
        return (
            f"agentv: judge={judge}, cache={self.cache_mode}, concurrency={self.concurrency}, "
            f"borderline={self.borderline}"
        )


def _shard(text: str | None) -> tuple[int, int] | None:
    """``K/N`` as ``(K, N)``, with ``1 <= K <= N``."""
    if text is None:
        return None
    index, slash, count = text.partition("/")
    if slash and index.strip().isdigit() and count.strip().isdigit():
        k, n = int(index), int(count)
        if 1 <= k <= n:
            return k, n
    raise pytest.UsageError(
        f"--agentv-shard={text} is invalid: give K/N, the shard to run (from 1) of how many "
        "there are, e.g. 2/4"
    )


def _run_id(given: str | None) -> str:
    """The run's id for its coordinator: given, else GitHub Actions' run (the same for every
    job of a matrix, new for each attempt)."""
    if given:
        return given
    run, attempt = os.environ.get("GITHUB_RUN_ID"), os.environ.get("GITHUB_RUN_ATTEMPT")
    if run:
        return f"{run}-{attempt or 1}"
    raise pytest.UsageError(
        "--agentv-coordinator needs the run's id, the same in every shard of one run and new "
        "for each run: give --agentv-run-id ID (or AGENTV_RUN_ID; GitHub Actions' "
        "GITHUB_RUN_ID is used when set)"
    )


def _check_folder(path: Path, flag: str, *, write: bool, given: Path | None = None) -> None:
    """A folder the run will write to (``path``, or the folder of the file ``given``), checked
    before anything is spent (a model call's reply would otherwise be paid for and then fail to
    be stored). It is created only when needed."""
    existing = path
    problem = None
    try:
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        if not existing.is_dir():
            problem = f"{existing} is not a folder"
        elif write and not os.access(existing, os.W_OK | os.X_OK):
            problem = f"{existing} is not writable"
    except OSError as exc:  # a folder on the way that cannot be looked into
        problem = f"{exc.filename or existing}: {exc.strerror or exc}"
    if problem is not None:
        raise pytest.UsageError(
            f"{flag}={given or path} cannot be used: {problem}; give a "
            f"{'file in a folder' if given else 'folder'} that exists or can be created"
        )


#: Options that name a file the run reads: anything there but a regular file is refused before
#: the run starts (reading a FIFO or a device may never end). A missing file is its reader's to
#: report.
#: The options that are fractions, 0 to 1 inclusive.
_FRACTIONS = ("max_regression", "threshold")
_READ_FILES = ("targets", "answers", "baseline", "calibration", "shard_durations")


def _regular_file(path: Path, source: str) -> Path:
    try:
        mode = path.stat().st_mode
    except OSError:
        return path
    kind = special_file(mode)
    if kind is not None:
        raise pytest.UsageError(
            f"{source} is invalid: it is {kind}, not a regular file (reading one may never end)"
        )
    return path


def _resolve(config: pytest.Config, option: Option) -> Any:
    cli = config.getoption(option.ini)
    if cli is not None:
        return _parse(option, str(cli), f"{option.flag}={cli}", config.invocation_params.dir)
    ini = config.getini(option.ini)
    if ini not in ("", None):
        base = config.inipath.parent if config.inipath else config.rootpath
        return _parse(option, str(ini), f"{option.ini} = {ini} (ini)", base)
    env = os.environ.get(option.env)
    if env not in (None, ""):
        return _parse(option, env, f"{option.env}={env}", config.invocation_params.dir)
    return option.default


def _parse(option: Option, raw: str, source: str, base: Path) -> Any:
    text = raw.strip()
    parsers: dict[str, Callable[[], Any]] = {
        "str": lambda: text or None,
        "path": lambda: _path(base / os.path.expanduser(text), option, source) if text else None,
        "list": lambda: _list(text, option, source),
        "int": lambda: _number(
            int,
            text,
            option,
            source,
            minimum=1 if option.name in ("concurrency", "trials", "rpm", "tpm") else 0,
            maximum=MAX_TRIALS if option.name == "trials" else None,
        ),
        "float": lambda: _number(
            float,
            text,
            option,
            source,
            minimum=0,
            exclusive=option.name not in _FRACTIONS,
            maximum=1 if option.name in _FRACTIONS else None,
        ),
        "bool": lambda: _boolean(text, source),
        "choice": lambda: _choice(text, option, source),
        "prices": lambda: _prices(text, option, source),
    }
    return parsers[option.kind]()


def _path(path: Path, option: Option, source: str) -> Path:
    return _regular_file(path, source) if option.name in _READ_FILES else path


def _number(
    kind: Callable[[str], float | int],
    text: str,
    option: Option,
    source: str,
    *,
    minimum: float,
    exclusive: bool = False,
    maximum: float | None = None,
) -> float | int:
    try:
        value = kind(text)
    except ValueError:
        value = None
    if (
        value is None
        or (isinstance(value, float) and not math.isfinite(value))
        or value < minimum
        or (exclusive and value == minimum)
        or (maximum is not None and value > maximum)
    ):
        bound = f"> {minimum}" if exclusive else f">= {minimum}"
        if maximum is not None:
            bound += f" and <= {maximum}"
        noun = "an integer" if kind is int else "a number"
        raise pytest.UsageError(f"{source} is invalid: {option.flag} must be {noun} {bound}")
    return value


def _list(text: str, option: Option, source: str) -> tuple[str, ...]:
    """Items split at commas and spaces. An empty list of eval patterns would collect nothing,
    and say nothing about why: it is refused."""
    items = tuple(text.replace(",", " ").split())
    if not items and option.name == "eval_patterns":
        raise pytest.UsageError(
            f"{source} is invalid: {option.flag} needs at least one file name pattern; leave it "
            f"unset for the default {','.join(DEFAULT_EVAL_PATTERNS)}"
        )
    return items


def _prices(text: str, option: Option, source: str) -> tuple[tuple[str, float, float], ...]:
    """``MODEL INPUT OUTPUT`` entries, one a line or between semicolons."""
    entries = []
    for entry in text.replace(";", "\n").splitlines():
        words = entry.split()
        if not words:
            continue
        try:
            model, prompt, completion = words[0], float(words[1]), float(words[2])
        except (IndexError, ValueError):
            prompt = completion = math.nan
        if len(words) != 3 or not all(math.isfinite(v) and v >= 0 for v in (prompt, completion)):
            raise pytest.UsageError(
                f"{source} is invalid: {option.flag} takes 'MODEL INPUT OUTPUT' entries (US "
                f"dollars per million tokens, >= 0), one a line or between semicolons, not "
                f"{entry.strip()!r}"
            )
        entries.append((model, prompt, completion))
    return tuple(entries)


def _boolean(text: str, source: str) -> bool:
    lowered = text.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    flag = source.split("=", 1)[0]
    hint = f" (write {flag}=yes, or put test paths before {flag})" if flag.startswith("--") else ""
    raise pytest.UsageError(f"{source} is invalid; use yes or no{hint}")


def _choice(text: str, option: Option, source: str) -> str:
    if text not in option.choices:
        raise pytest.UsageError(f"{source} is invalid; choose one of: {', '.join(option.choices)}")
    return text


settings_key: pytest.StashKey[Settings] = pytest.StashKey()
