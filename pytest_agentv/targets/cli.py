"""CLI targets: a shell command per case (``command``, v2.5.8's ``command_template``, with
AgentV's placeholders; one command for a whole eval file is ``batch.py``), and the healthcheck
run before either. Placeholders: ``{PROMPT}``, ``{PROMPT_FILE}`` (a file holding
the prompt), ``{GUIDELINES}``, ``{EVAL_ID}``, ``{ATTEMPT}``, ``{OUTPUT_FILE}`` (shell-quoted) and
``{FILES}`` (guideline and input files, each through ``files_format``), ``{WORKSPACE_PATH}``
(the case's workspace, also the command's cwd). The answer is read from ``{OUTPUT_FILE}`` when
the template uses it, else from stdout."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import re
import shlex
import tempfile
from collections.abc import Iterable
from dataclasses import replace
from functools import partial
from math import inf
from pathlib import Path
from typing import Any

from ..answers import TargetResponse, parse_output_text
from ..cases import PreparedCase
from ..errors import ConfigError, NotGradedError
from ..paths import resolve_reference
from ..processes import MAX_STDOUT_BYTES, ProcessResult, run_process
from ..projectfiles import Where
from ..redaction import redact
from ..schema.targets import CLI_PLACEHOLDERS
from ..settings import special_file
from .base import TargetDefinition, TargetServices

DEFAULT_CLI_TIMEOUT = 120.0

log = logging.getLogger("pytest_agentv.targets")


def log_command(what: str, cwd: Path, command: str) -> None:
    """``verbose: true``: each command a target runs, and where, at INFO on the
    ``pytest_agentv.targets`` logger (``--log-cli-level=INFO`` shows them as they run)."""
    log.info("%s: cwd=%s command=%s", what, cwd, redact(command))


_PLACEHOLDER = re.compile(r"\{(" + "|".join(CLI_PLACEHOLDERS) + r")\}")

_FILE_PLACEHOLDER = re.compile(r"\{(path|basename)\}")


def render_command(template: str, values: dict[str, str]) -> str:
    """Fill ``{NAME}`` placeholders in one pass (a value is never scanned for placeholders);
    names the template does not know are left as written, as AgentV does."""
    return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), template)


def _quoted(values: dict[str, str], match: re.Match[str]) -> str:
    return values[match.group(1)]


def files_argument(files: Iterable[str], files_format: str | None) -> str:
    """``{FILES}``: each file (once) through ``files_format`` (``--file {path}``; default
    ``{path}``), with ``{path}`` and ``{basename}`` shell-quoted."""
    rendered = []
    for path in dict.fromkeys(files):
        quoted = {"path": shlex.quote(path), "basename": shlex.quote(Path(path).name)}
        rendered.append(_FILE_PLACEHOLDER.sub(partial(_quoted, quoted), files_format or "{path}"))
    return " ".join(rendered)


def _positive(value: Any, what: str, key: str, where: Where) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < inf:
        raise ConfigError(f"{what} ({where(key)}): {key.rpartition('.')[2]} must be a number > 0")
    return float(value)


def _template(value: Any, what: str, key: str, where: Where) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{what} ({where(key)}) needs a 'command' (or 'command_template') string")
    return value


class Healthcheck:
    """A CLI target's ``healthcheck`` (an HTTP URL that must answer 2xx, or a command that must
    exit 0), run once per run before the target's first case; every case waits for it, and
    all of them are not graded if it fails."""

    def __init__(
        self,
        target: str,
        spec: Any,
        folder: Path,
        rootdir: Path,
        default_timeout: float,
        where: Where,
    ) -> None:
        self.what = what = f"healthcheck of cli target '{target}'"
        if isinstance(spec, str):
            spec = {"url": spec} if "://" in spec else {"command_template": spec}
        if isinstance(spec, dict) and "command" in spec:  # AgentV v4's name
            if "command_template" in spec:
                at = where("healthcheck.command")
                raise ConfigError(f"{what} ({at}): give 'command_template' or 'command', not both")
            spec = {**spec, "command_template": spec["command"]}
        if not isinstance(spec, dict):
            raise ConfigError(
                f"{what} ({where('healthcheck')}): give {{url}} or {{command_template}}"
            )
        kind = spec.get("type") or ("http" if "url" in spec else "command")
        self.url: str | None = None
        self.command: str | None = None
        self.cwd = folder
        if kind == "http":
            url = spec.get("url")
            if not isinstance(url, str) or not url.startswith(("http://", "https://")):
                raise ConfigError(
                    f"{what} ({where('healthcheck.url')}): 'url' must be an http(s) URL"
                )
            self.url = url
        elif kind == "command":
            self.command = _template(
                spec.get("command_template"), what, "healthcheck.command_template", where
            )
            cwd = spec.get("cwd")
            if cwd is not None:
                at = f"{what} ({where('healthcheck.cwd')}): cwd"
                self.cwd = resolve_reference(str(cwd), start=folder, rootdir=rootdir, what=at)
        else:
            raise ConfigError(
                f"{what} ({where('healthcheck.type')}): type must be 'http' or 'command', "
                f"not {kind!r}"
            )
        timeout = spec.get("timeout_seconds")
        self.timeout = (
            _positive(timeout, what, "healthcheck.timeout_seconds", where)
            if timeout is not None
            else default_timeout
        )
        self._done: asyncio.Future[str | None] | None = None

    async def ensure(self) -> None:
        """Run the check the first time; later callers wait for that same run."""
        if self._done is None:
            self._done = asyncio.ensure_future(self._check())
        problem = await asyncio.shield(self._done)
        if problem is not None:
            raise NotGradedError(redact(f"{self.what} failed: {problem}"))

    async def aclose(self) -> None:
        """Stop a check still running when the run ends: the cases waiting for it are gone."""
        done = self._done
        if done is not None and not done.done():
            done.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await done

    async def _check(self) -> str | None:
        if self.url is not None:
            return await asyncio.to_thread(self._get, self.url)
        assert self.command is not None
        with tempfile.TemporaryDirectory(prefix="agentv-") as scratch:
            values = command_values("", "", "healthcheck", 0, "", Path(scratch))
            command = render_command(self.command, values)
            result = await run_process(command, cwd=self.cwd, timeout=self.timeout)
        return result.failure("the command", self.timeout)

    def _get(self, url: str) -> str | None:
        import urllib.error  # http.client and email: only a URL healthcheck needs them
        import urllib.request

        try:
            with urllib.request.urlopen(url, timeout=self.timeout) as reply:
                status = int(reply.status)
        except urllib.error.HTTPError as exc:
            return f"GET {url} answered HTTP {exc.code} {exc.reason}"
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            return f"GET {url} failed: {reason}"
        return None if 200 <= status < 300 else f"GET {url} answered HTTP {status}"


def cli_timeout(name: str, settings: dict[str, Any], where: Where) -> float:
    """A CLI target's ``timeout_seconds`` (its healthcheck's default too)."""
    timeout = settings.get("timeout_seconds", DEFAULT_CLI_TIMEOUT)
    return _positive(timeout, f"cli target '{name}'", "timeout_seconds", where)


def command_values(
    prompt: str,
    guidelines: str,
    eval_id: str,
    attempt: int,
    files: str,
    scratch: Path,
    output: str = "output.txt",
) -> dict[str, str]:
    """The placeholders' values: the prompt is also written to ``{PROMPT_FILE}`` (AgentV v4)."""
    prompt_file = scratch / "prompt.txt"
    prompt_file.write_text(prompt, encoding="utf-8")
    return {
        "PROMPT": shlex.quote(prompt),
        "PROMPT_FILE": shlex.quote(str(prompt_file)),
        "GUIDELINES": shlex.quote(guidelines),
        "EVAL_ID": shlex.quote(eval_id),
        "ATTEMPT": shlex.quote(str(attempt)),
        "FILES": files,
        "OUTPUT_FILE": shlex.quote(str(scratch / output)),
    }


class CliTarget:
    """Runs ``command_template`` through the shell with the case's values in its placeholders
    (see the module); the answer is read from ``{OUTPUT_FILE}`` if it is used, else stdout."""

    def __init__(
        self,
        name: str,
        settings: dict[str, Any],
        folder: Path,
        rootdir: Path,
        where: Where,
        judge_target: str | None = None,
        healthcheck: Healthcheck | None = None,
    ) -> None:
        self.name = name
        self.judge_target = judge_target
        self.rootdir = rootdir
        self.what = what = f"cli target '{name}'"
        self.template = _template(settings.get("command_template"), what, "command_template", where)
        cwd = settings.get("cwd")
        self.cwd = (
            resolve_reference(
                str(cwd), start=folder, rootdir=rootdir, what=f"{what} ({where('cwd')}): cwd"
            )
            if cwd is not None
            else folder
        )
        self.timeout = cli_timeout(name, settings, where)
        files_format = settings.get("files_format")
        if files_format is not None and not isinstance(files_format, str):
            raise ConfigError(
                f"{what} ({where('files_format')}): files_format must be a string like "
                "'--file {path}'"
            )
        self.files_format = files_format
        self.healthcheck = healthcheck
        self.verbose = settings.get("verbose", False)
        if not isinstance(self.verbose, bool):
            raise ConfigError(f"{what} ({where('verbose')}): verbose must be true or false")

    def _files(self, cases: Iterable[PreparedCase]) -> str:
        return files_argument(
            (f for case in cases for f in (*case.guideline_files, *case.input_files)),
            self.files_format,
        )

    async def _run(
        self, values: dict[str, str], output_file: Path, workspace: str | None
    ) -> tuple[str, float]:
        """Run the command from the case's workspace (AgentV v4: where its agent runs, whatever
        the target's cwd), else from the target's cwd; its output text (output file or stdout)
        and how long it took."""
        if self.healthcheck is not None:
            await self.healthcheck.ensure()
        command = render_command(
            self.template, {**values, "WORKSPACE_PATH": shlex.quote(workspace or "")}
        )
        cwd = Path(workspace) if workspace else self.cwd
        if self.verbose:
            log_command(self.what, cwd, command)
        try:
            result: ProcessResult = await run_process(command, cwd=cwd, timeout=self.timeout)
        except OSError as exc:
            if exc.errno != errno.E2BIG:
                raise
            raise NotGradedError(
                f"{self.what}: its command is {len(command.encode()):,} bytes, more than the "
                "system lets a command be (Argument list too long); pass a long prompt (a long "
                "conversation's history) as a file: {PROMPT_FILE} instead of {PROMPT}"
            ) from None
        failure = result.failure(self.what, self.timeout)
        if failure:
            raise NotGradedError(redact(failure))
        if "{OUTPUT_FILE}" in self.template:
            try:
                info = output_file.stat()
            except OSError:
                raise NotGradedError(
                    f"{self.what} exited 0 but wrote nothing to {{OUTPUT_FILE}}"
                ) from None
            kind = special_file(info.st_mode)
            if kind is not None:  # a FIFO would hold the loop until something wrote to it
                raise NotGradedError(
                    f"{self.what} left {kind} at {{OUTPUT_FILE}}, not a regular file; it was "
                    "not read"
                )
            if info.st_size > MAX_STDOUT_BYTES:
                raise NotGradedError(
                    f"{self.what} wrote more than {MAX_STDOUT_BYTES // 1024} KiB to "
                    "{OUTPUT_FILE}; its output was not read"
                )
            text = output_file.read_text(encoding="utf-8", errors="replace")
        else:
            text = result.stdout.decode("utf-8", errors="replace")
        return text, result.duration * 1000

    async def invoke(self, case: PreparedCase, attempt: int) -> TargetResponse:
        with tempfile.TemporaryDirectory(prefix="agentv-") as scratch:
            output_file = Path(scratch) / "output.txt"
            values = command_values(
                case.question,
                case.guidelines,
                case.id,
                attempt,
                self._files([case]),
                Path(scratch),
            )
            text, elapsed = await self._run(values, output_file, case.workspace_path)
        if not text.strip():
            raise NotGradedError(f"{self.what} exited 0 but produced an empty answer")
        response = parse_output_text(text, self.what)
        if response.duration_ms is None:
            response = replace(response, duration_ms=round(elapsed, 1))
        return response


def healthcheck(target: TargetDefinition, services: TargetServices) -> Healthcheck | None:
    """The target's healthcheck, one per targets file and target for the whole run, whichever
    folder builds the target."""
    settings = target.settings
    key = (target.file, target.name)
    check = services.healthchecks.get(key)
    if isinstance(check, Healthcheck):
        return check
    if settings.get("healthcheck") is not None:
        timeout = cli_timeout(target.name, dict(settings), target.where)
        check = services.healthchecks[key] = Healthcheck(
            target.name,
            settings["healthcheck"],
            target.folder,
            target.rootdir,
            timeout,
            target.where,
        )
        return check
    return None


def build(target: TargetDefinition, services: TargetServices) -> CliTarget:
    return CliTarget(
        target.name,
        dict(target.settings),
        target.folder,
        target.rootdir,
        target.where,
        target.judge_target,
        healthcheck(target, services),
    )
