"""Coding agents as targets: what every agent module (``claude``, ``codex``, ``gemini``,
``copilot``, ``pi``) shares.

An agent target runs the agent's own program once per case, non-interactively, in the case's
workspace (else the target's ``cwd``, else an empty folder of its own: an agent left in the
eval's folder would edit the project), and reads its JSON event stream (``events.py``) into the
answer: the messages with every tool call, usage, cost, duration, model calls. The program runs
under the rules of every child process (``processes``): a deadline, its whole process tree
killed, its output bounded, and an environment of the allowlist plus the agent's own variables
(its vendor's prefixes, the target's ``env``), with a fresh ``HOME`` (``home: inherit`` keeps
the user's: no settings, sessions or memories of other runs reach the agent otherwise) and its
telemetry and updates off.

What goes wrong is not graded, saying what: a program that is not installed (naming its npm
package), one that exits non-zero, prints a broken or truncated stream, floods its output,
outlives its deadline, or was refused a tool it needed permission for.
"""

from __future__ import annotations

import shlex
import tempfile
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO, ClassVar

from ..answers import TargetResponse
from ..cases import PreparedCase
from ..errors import ConfigError, NotGradedError
from ..paths import resolve_reference
from ..processes import MAX_STDERR_BYTES, ProcessResult, run_process, scrubbed_env
from ..redaction import redact, register_secret
from ..settings import environment
from .base import TargetDefinition
from .catalog import ENV_REF
from .cli import log_command
from .events import Event, EventStream, Transcript

#: The most an agent may print in one run; its partial-message events are read and dropped.
MAX_STREAM_BYTES = 64 * 1024 * 1024
#: The deadline of an agent without ``timeout_seconds``: the run's ``--agentv-target-timeout``
#: stops it first.
_NO_DEADLINE = 24 * 3600.0


@dataclass(frozen=True)
class AgentProgram:
    """What a kind of agent is: its provider name, program and npm package, the environment
    variables of its vendor it is given, what keeps it quiet, the event types not kept (partial
    deltas) and the event that ends a run that finished."""

    provider: str
    program: str
    package: str
    env_prefixes: tuple[str, ...]
    final: str
    quiet: Mapping[str, str] = field(default_factory=dict)
    skip: frozenset[str] = frozenset()
    #: Variables of its vendor's prefixes it is never given (a parent agent's session markers).
    dropped: tuple[str, ...] = ()
    #: Variables that point at the user's own settings, not given with a fresh ``HOME``.
    home_vars: tuple[str, ...] = ()


@dataclass
class Ending:
    """How a run ended, as its stream tells: finished (its final event came), the agent's own
    error, the tools it was refused."""

    finished: bool = False
    error: str | None = None
    refused: list[str] = field(default_factory=list)


def prompt_document(case: PreparedCase) -> str:
    """The prompt AgentV v4 gives an agent (``buildPromptDocument``): the files to read first,
    then the question under ``[[ ## user_query ## ]]``."""
    files = dict.fromkeys(
        Path(name) if Path(name).is_absolute() else (case.folder / name).resolve()
        for name in (*case.guideline_files, *case.input_files)
    )
    query = f"[[ ## user_query ## ]]\n\n{case.question.strip()}"
    if not files:
        return query
    listing = "\n".join(f"* [{path.name}]({path.as_uri()})" for path in files)
    return (
        f"Read all input files:\n{listing}.\n"
        "If any file is missing, fail with ERROR: missing-file <filename> and stop.\n"
        f"Then apply system_instructions on the user query below.\n\n{query}"
    )


class AgentTarget:
    """One coding agent as a target (see the module). A kind says what its program is
    (``program``) and how to drive it: ``arguments`` (its command line and stdin),
    ``variables`` (its own environment, files it reads in its ``HOME``) and ``read`` (its
    events into the transcript)."""

    program: ClassVar[AgentProgram]

    def __init__(self, target: TargetDefinition) -> None:
        self.name = target.name
        self.judge_target = target.judge_target
        self.what = f"{self.program.provider} target '{target.name}'"
        self.settings = target.settings
        self.where = target.where
        self.executable = shlex.split(self._text("executable", "binary") or self.program.program)
        if "/" in self.executable[0] and not Path(self.executable[0]).is_absolute():
            self.executable[0] = str(target.folder / self.executable[0])
        self.model = self._text("model")
        cwd = self._text("cwd")
        self.cwd = (
            resolve_reference(cwd, start=target.folder, rootdir=target.rootdir, what=self.what)
            if cwd
            else None
        )
        timeout = self.settings.get("timeout_seconds")
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0
        ):
            raise self.invalid("timeout_seconds", "a number of seconds > 0")
        self.timeout: float | None = float(timeout) if timeout is not None else None
        args = self.settings.get("args", self.settings.get("arguments", []))
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise self.invalid("args", "a list of strings")
        self.args: list[str] = args
        self.system_prompt = self._text("system_prompt")
        self.base_url = self._text("base_url", "endpoint")
        self.api_key = self._text("api_key")
        if self.api_key:
            register_secret(self.api_key)
        self.bypass = self._flag("bypass_permissions", True)
        self.verbose = self._flag("verbose", False)
        self.env = self._env(self.settings.get("env"))
        home = self.settings.get("home", "fresh")
        if home not in ("fresh", "inherit"):
            raise self.invalid("home", "'fresh' or 'inherit'")
        self.fresh_home = home == "fresh"
        self.stream_log = self._stream_log()
        log_dir = self._text("log_dir", "log_directory")
        self.log_dir = target.rootdir / (log_dir or f".agentv/logs/{self.program.provider}")

    def invalid(self, key: str, expected: str) -> ConfigError:
        """The error of a setting that is not what it must be."""
        return ConfigError(f"{self.what} ({self.where(key)}): {key} must be {expected}")

    def _text(self, *keys: str) -> str | None:
        """The first of these settings that is given (a non-empty string)."""
        for key in keys:
            value = self.settings.get(key)
            if value is None:
                continue
            if not (isinstance(value, str) and value.strip()):
                raise self.invalid(key, "a non-empty string")
            return value.strip()
        return None

    def _flag(self, key: str, default: bool) -> bool:
        value = self.settings.get(key, default)
        if not isinstance(value, bool):
            raise self.invalid(key, "true or false")
        return value

    def _env(self, value: Any) -> dict[str, str]:
        """``env``: variables the agent is given as written (``${{ VAR }}``: from ours)."""
        if value is None:
            return {}
        at = f"{self.what} ({self.where('env')})"
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise ConfigError(f"{at}: env must map names to strings")
        found = {}
        for name, text in value.items():
            match = ENV_REF.match(text.strip())
            if match is not None:
                text = environment().get(match.group(1), "")
                if not text:
                    raise ConfigError(f"{at}: env.{name}: {match.group(1)} is not set")
                register_secret(text)
            found[str(name)] = text
        return found

    def _stream_log(self) -> str | None:
        """``stream_log`` (AgentV's deprecated ``log_format``: json is raw)."""
        value = self.settings.get("stream_log")
        if value is None:
            value = {"json": "raw", "summary": "summary"}.get(self.settings.get("log_format", ""))
        if value in (None, False, "false"):
            return None
        if value not in ("raw", "summary"):
            raise self.invalid("stream_log", "false, 'raw' or 'summary'")
        return str(value)

    # -- what each kind says ----------------------------------------------------------------

    def arguments(self, prompt: str) -> tuple[list[str], str]:
        """The program's arguments (after ``executable``, before ``args``) and its stdin."""
        raise NotImplementedError

    def variables(self, home: Path | None) -> dict[str, str]:
        """The agent's own environment (its base URL and key); it may write files into its
        fresh ``home`` (None: the user's)."""
        return {}

    def read(self, events: list[Event], transcript: Transcript) -> Ending:
        """The events into the transcript; how the run ended."""
        raise NotImplementedError

    def with_system_prompt(self, prompt: str) -> str:
        """The prompt with ``system_prompt`` before it (agents without a flag for it)."""
        return f"{self.system_prompt}\n\n{prompt}" if self.system_prompt else prompt

    # -- the run ----------------------------------------------------------------------------

    def environment(self, home: Path | None) -> dict[str, str]:
        dropped = (*self.program.dropped, *(self.program.home_vars if home else ()))
        names = [n for n in environment() if n.startswith(self.program.env_prefixes)]
        env = scrubbed_env([n for n in names if n not in dropped])
        if home is not None:
            env["HOME"] = str(home)
        env.update(self.program.quiet)
        env.update(self.variables(home))
        env.update(self.env)
        return env

    async def invoke(self, case: PreparedCase, attempt: int) -> TargetResponse:
        args, stdin = self.arguments(prompt_document(case))
        argv = [*self.executable, *args, *self.args]
        with tempfile.TemporaryDirectory(prefix="agentv-agent-") as scratch:
            home = Path(scratch, "home") if self.fresh_home else None
            work = Path(scratch, "work")
            for folder in (home, work):
                if folder is not None:
                    folder.mkdir()
            if case.workspace_path:
                work = Path(case.workspace_path)
            elif self.cwd is not None:
                work = self.cwd
            env = self.environment(home)
            if self.verbose:
                log_command(self.what, work, shlex.join(argv))
            result, stream, log_file = await self._run(argv, stdin, work, env, case, attempt)
        events = stream.close()
        transcript = Transcript(self.program.provider)
        ending = Ending()
        if stream.problem is None:
            try:
                ending = self.read(events, transcript)
            except (KeyError, TypeError, AttributeError, ValueError) as exc:
                stream.problem = f"printed an event it could not be read from ({exc!r})"
        if log_file is not None and self.stream_log == "summary":
            _summary(log_file, transcript, ending)
        problem = self._problem(result, stream, ending, len(events))
        if problem is not None:
            kept = f" (its stream: {log_file})" if log_file is not None else ""
            raise NotGradedError(redact(f"{self.what} {problem}{kept}"))
        return transcript.response(self.what, result.duration * 1000)

    async def _run(
        self,
        argv: list[str],
        stdin: str,
        cwd: Path,
        env: dict[str, str],
        case: PreparedCase,
        attempt: int,
    ) -> tuple[ProcessResult, EventStream, Path | None]:
        log_file = self._log_file(case, attempt)
        sink: BinaryIO | None = None
        if log_file is not None and self.stream_log == "raw":
            sink = log_file.open("wb")
        stream = EventStream(self.program.skip, partial(_copy, sink) if sink else None)
        try:
            result = await run_process(
                argv,
                stdin=stdin.encode(),
                cwd=cwd,
                env=env,
                timeout=self.timeout or _NO_DEADLINE,
                max_stdout=MAX_STREAM_BYTES,
                reader=stream.feed,
            )
        except FileNotFoundError:
            raise NotGradedError(
                f"{self.what}: the program '{argv[0]}' was not found; install it with "
                f"`npm install -g {self.program.package}`, or name it with 'executable'"
            ) from None
        except PermissionError:
            raise NotGradedError(f"{self.what}: '{argv[0]}' is not an executable program") from None
        finally:
            if sink is not None:
                sink.close()
        return result, stream, log_file

    def _log_file(self, case: PreparedCase, attempt: int) -> Path | None:
        """Where the run's stream is kept (``stream_log``), as AgentV names its log files."""
        if self.stream_log is None:
            return None
        self.log_dir.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y-%m-%dT%H-%M-%S", time.gmtime())
        safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in f"{self.name}_{case.id}")
        name = f"{stamp}_{safe}_attempt-{attempt + 1}_{uuid.uuid4().hex[:8]}.log"
        path = self.log_dir / name
        path.touch()
        return path

    def _problem(
        self, result: ProcessResult, stream: EventStream, ending: Ending, count: int
    ) -> str | None:
        """Why the run gave no answer to grade, or None."""
        if result.overflow == "stdout":
            return (
                f"printed more than {MAX_STREAM_BYTES // 2**20} MiB and was stopped; its answer "
                "was discarded"
            )
        if result.overflow == "stderr":
            return f"wrote more than {MAX_STDERR_BYTES // 2**20} MiB to stderr and was stopped"
        if result.timed_out:
            return f"timed out after {self.timeout:g}s and was killed"
        if result.signal_name:
            return f"was killed by {result.signal_name}"
        if result.returncode:
            said = ending.error or result.stderr_text() or stream.problem
            return f"exited with code {result.returncode}" + (f": {said}" if said else "")
        if stream.problem is not None:
            return stream.problem
        if ending.error is not None:
            return f"reported an error: {ending.error}"
        if ending.refused:
            return (
                f"was refused {', '.join(ending.refused)} (a test run has nobody to grant "
                "permissions; bypass_permissions: true lets the agent use every tool)"
            )
        if not ending.finished:
            return (
                f"stopped before its '{self.program.final}' event ({count} events read): its "
                "stream was cut short"
            )
        return None


def _copy(sink: BinaryIO, line: bytes) -> None:
    """``stream_log: raw``: each line as the agent printed it, its secrets masked."""
    sink.write(redact(line.decode("utf-8", "replace")).encode() + b"\n")


def _summary(path: Path, transcript: Transcript, ending: Ending) -> None:
    """``stream_log: summary``: one line per message and tool call, and how the run ended."""
    lines = []
    for message in transcript.messages:
        if message.get("content"):
            lines.append(f"[text] {str(message['content'])[:200]}")
        for call in message.get("tool_calls", ()):
            status = call.get("status", "no result")
            lines.append(f"[tool] {call['tool']} {status} {call.get('duration_ms', '')}".rstrip())
    lines.append(f"[end] finished={ending.finished} error={ending.error}")
    path.write_text(redact("\n".join(lines)) + "\n", encoding="utf-8")
