"""Where candidate answers come from: mock, CLI (one case at a time, or one batch for a whole
eval file), litellm, ``agentv_target`` fixture and recorded-answers targets.

All targets share one async interface, ``invoke(case, attempt) -> TargetResponse``. A target that
cannot produce an answer raises ``NotGradedError``: the case is then reported as not graded,
never as a quality failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import os
import re
import shlex
import tempfile
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from math import inf
from pathlib import Path
from typing import Any, Protocol

from .baseline import PreviousResults
from .budget import PlannedCall, prompt_tokens, unknown_answer
from .cases import GUIDELINES_HEADER, CaseSpec, PreparedCase, prepare_case
from .errors import AgentvError, ConfigError, EvalFileError, NotGradedError
from .judge import LlmClient, ModelSpec
from .loader import FileWarning, LoadedTargets, load_targets_file
from .models import TargetConfig, finite_number, render_content
from .paths import display_path, nearest_file, resolve_reference
from .processes import MAX_STDOUT_BYTES, ProcessResult, run_process
from .redaction import redact, valid_data
from .yamlfile import json_lines

DEFAULT_MOCK_RESPONSE = "Mock target response. Set 'response' on the mock target to change it."
DEFAULT_CLI_TIMEOUT = 120.0
TARGETS_FILE_NAMES = (".agentv/targets.yaml", ".agentv/targets.yml", "targets.yaml", "targets.yml")
_ENV_REF = re.compile(r"^\$\{\{\s*([A-Za-z0-9_]+)\s*\}\}$")

#: AgentV providers that are LLM APIs, and the litellm prefix each maps onto.
LLM_PROVIDERS = {
    "litellm": "",
    "openai": "openai",
    "azure": "azure",
    "anthropic": "anthropic",
    "gemini": "gemini",
    "openrouter": "openrouter",
}


@dataclass(frozen=True)
class ToolCall:
    """One tool call an answer reports: AgentV's ``{tool, input, output, duration_ms}``, or an
    OpenAI-style ``{function: {name, arguments}}`` as Python agents often return them."""

    name: str
    args: Any = None
    duration_ms: float | None = None
    error: bool = False


def tool_calls(messages: Iterable[Mapping[str, Any]]) -> list[ToolCall]:
    """The tool calls of ``output_messages``, in order."""
    found: list[ToolCall] = []
    for message in messages:
        calls = message.get("tool_calls") if isinstance(message, Mapping) else None
        for call in calls if isinstance(calls, list) else ():
            if not isinstance(call, Mapping):
                continue
            function = call.get("function")
            function = function if isinstance(function, Mapping) else {}
            name = call.get("tool", call.get("name", function.get("name", "unknown")))
            if "input" in call:
                args = call["input"]
            elif "args" in call or "arguments" in call:
                args = call.get("args", call.get("arguments"))
            else:
                args = function.get("arguments")
            if isinstance(args, str):
                try:
                    args = json.loads(args)
                except (ValueError, RecursionError):
                    pass
            found.append(
                ToolCall(
                    name=str(name),
                    args=args,
                    duration_ms=finite_number(call.get("duration_ms")),
                    error=bool(call.get("error")),
                )
            )
    return found


@dataclass(frozen=True)
class TargetResponse:
    text: str
    output_messages: tuple[dict[str, Any], ...] = ()
    token_usage: dict[str, Any] | None = None
    cost_usd: float | None = None
    duration_ms: float | None = None
    #: A ``trace_summary`` recorded with the answer (``--agentv-answers``), used as it was.
    recorded_trace: dict[str, Any] | None = None

    def trace_summary(self) -> dict[str, Any] | None:
        """AgentV's ``trace_summary``: tool calls by name, errors, usage, cost and duration,
        and the durations of each tool's calls when the answer reports them."""
        if self.recorded_trace is not None:
            return self.recorded_trace
        calls = tool_calls(self.output_messages)
        if (
            not self.output_messages
            and self.token_usage is None
            and self.cost_usd is None
            and self.duration_ms is None
        ):
            return None
        by_name: dict[str, int] = {}
        durations: dict[str, list[float]] = {}
        for call in calls:
            by_name[call.name] = by_name.get(call.name, 0) + 1
            if call.duration_ms is not None:
                durations.setdefault(call.name, []).append(call.duration_ms)
        summary: dict[str, Any] = {
            "event_count": len(calls),
            "tool_names": sorted(by_name),
            "tool_calls_by_name": by_name,
            "error_count": sum(1 for call in calls if call.error),
        }
        if self.token_usage is not None:
            summary["token_usage"] = self.token_usage
        if self.cost_usd is not None:
            summary["cost_usd"] = self.cost_usd
        if self.duration_ms is not None:
            summary["duration_ms"] = self.duration_ms
        if durations:
            summary["tool_durations"] = durations
        return summary


class Target(Protocol):
    name: str
    judge_target: str | None

    @property
    def timeout(self) -> float | None:
        """Seconds the target enforces itself (a CLI target's ``timeout_seconds``); None: the
        run's ``--agentv-target-timeout`` applies."""

    async def invoke(self, case: PreparedCase, attempt: int) -> TargetResponse: ...


def _candidate(messages: list[dict[str, Any]]) -> str:
    """The answer in messages, as AgentV takes it: the content of the last assistant message
    that has one (a message with only tool calls is skipped); no such message: no answer."""
    for message in reversed(messages):
        if message.get("role") == "assistant" and message.get("content") is not None:
            return render_content(message["content"])
    return ""


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def response_from(value: Any, what: str) -> TargetResponse:
    """Accept text, a list of messages, or ``{text}`` / ``{output_messages, token_usage, ...}``."""
    if isinstance(value, TargetResponse):
        return value
    value = valid_data(value)  # what the agent wrote must survive UTF-8: payloads, reports
    if isinstance(value, str):
        return TargetResponse(
            text=value, output_messages=({"role": "assistant", "content": value},)
        )
    if isinstance(value, list) and all(isinstance(m, dict) for m in value):
        return TargetResponse(text=_candidate(value), output_messages=tuple(value))
    if isinstance(value, dict):
        messages = value.get("output_messages")
        if messages is not None and not (
            isinstance(messages, list) and all(isinstance(m, dict) for m in messages)
        ):
            raise NotGradedError(
                f"{what} returned 'output_messages' that is not a list of messages"
            )
        # As AgentV: messages, when there are any, are the answer and ``text`` is ignored.
        if messages:
            text = _candidate(messages)
        elif "text" in value:
            text = _text(value["text"])
            messages = [{"role": "assistant", "content": text}]
        else:
            raise NotGradedError(f"{what} returned an object without 'text' or 'output_messages'")
        cost = finite_number(value.get("cost_usd"))
        duration = finite_number(value.get("duration_ms"))
        return TargetResponse(
            text=text,
            output_messages=tuple(messages),
            token_usage=value.get("token_usage")
            if isinstance(value.get("token_usage"), dict)
            else None,
            cost_usd=cost if cost is not None and cost >= 0 else None,
            duration_ms=duration if duration is not None and duration >= 0 else None,
        )
    raise NotGradedError(
        f"{what} returned {type(value).__name__}; return text, a list of messages, "
        "or a mapping with 'text' or 'output_messages'"
    )


def parse_output_text(text: str, what: str) -> TargetResponse:
    """CLI output: JSON ``{text}`` / ``{output_messages, ...}``, or plain text."""
    stripped = text.strip()
    if stripped.startswith("{"):
        # What cannot be parsed (nested too deep included) is plain text, as in AgentV.
        try:
            data = json.loads(stripped)
        except (ValueError, RecursionError):
            data = None
        if isinstance(data, dict) and ("text" in data or data.get("output_messages")):
            return response_from(data, what)
    return response_from(text.rstrip("\n"), what)


#: Where a target's setting is written (``healthcheck.url`` inside a mapping), as
#: ``file:line:col``: settings errors point there.
Where = Callable[[str], str]


class MockTarget:
    """Answers every case with the same canned ``response`` after an optional delay."""

    timeout: float | None = None

    def __init__(
        self, name: str, settings: dict[str, Any], where: Where, judge_target: str | None = None
    ) -> None:
        self.name = name
        self.judge_target = judge_target
        response = settings.get("response", DEFAULT_MOCK_RESPONSE)
        self.response = response if isinstance(response, (str, dict, list)) else str(response)
        delay = settings.get("delay_ms", 0)
        if isinstance(delay, bool) or not isinstance(delay, (int, float)) or not 0 <= delay < inf:
            raise ConfigError(
                f"mock target '{name}' ({where('delay_ms')}): delay_ms must be a number of "
                f"milliseconds >= 0, not {delay!r}"
            )
        self.delay = float(delay) / 1000

    async def invoke(self, case: PreparedCase, attempt: int) -> TargetResponse:
        if self.delay:
            await asyncio.sleep(self.delay)
        return self.answer()

    def answer(self) -> TargetResponse:
        value = self.response
        if isinstance(value, dict) and not ("text" in value or "output_messages" in value):
            value = json.dumps(value)
        return response_from(value, f"mock target '{self.name}'")


_PLACEHOLDER = re.compile(r"\{([A-Z_]+)\}")
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
        raise ConfigError(f"{what} ({where(key)}) needs a 'command_template' string")
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
            values = _values("", "", "healthcheck", 0, "", str(Path(scratch) / "output.txt"))
            command = render_command(self.command, values)
            result = await run_process(command, cwd=self.cwd, timeout=self.timeout)
        return result.failure("the command", self.timeout)

    def _get(self, url: str) -> str | None:
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


def _values(
    prompt: str, guidelines: str, eval_id: str, attempt: int, files: str, output: str
) -> dict[str, str]:
    return {
        "PROMPT": shlex.quote(prompt),
        "GUIDELINES": shlex.quote(guidelines),
        "EVAL_ID": shlex.quote(eval_id),
        "ATTEMPT": shlex.quote(str(attempt)),
        "FILES": files,
        "OUTPUT_FILE": shlex.quote(output),
    }


class CliTarget:
    """Runs ``command_template`` through the shell with the case's values substituted.

    Placeholders: ``{PROMPT}``, ``{GUIDELINES}``, ``{EVAL_ID}``, ``{ATTEMPT}``, ``{OUTPUT_FILE}``
    (shell-quoted) and ``{FILES}`` (guideline and input files, each through ``files_format``).
    The answer is read from ``{OUTPUT_FILE}`` when the template uses it, else from stdout.
    """

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

    def _files(self, cases: Iterable[PreparedCase]) -> str:
        return files_argument(
            (f for case in cases for f in (*case.guideline_files, *case.input_files)),
            self.files_format,
        )

    async def _run(self, values: dict[str, str], output_file: Path) -> tuple[str, float]:
        """Run the command; its output text (output file or stdout) and how long it took."""
        if self.healthcheck is not None:
            await self.healthcheck.ensure()
        command = render_command(self.template, values)
        result: ProcessResult = await run_process(command, cwd=self.cwd, timeout=self.timeout)
        failure = result.failure(self.what, self.timeout)
        if failure:
            raise NotGradedError(redact(failure))
        if "{OUTPUT_FILE}" in self.template:
            if not output_file.exists():
                raise NotGradedError(f"{self.what} exited 0 but wrote nothing to {{OUTPUT_FILE}}")
            if output_file.stat().st_size > MAX_STDOUT_BYTES:
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
            values = _values(
                case.question,
                case.guidelines,
                case.id,
                attempt,
                self._files([case]),
                str(output_file),
            )
            text, elapsed = await self._run(values, output_file)
        if not text.strip():
            raise NotGradedError(f"{self.what} exited 0 but produced an empty answer")
        response = parse_output_text(text, self.what)
        if response.duration_ms is None:
            response = replace(response, duration_ms=round(elapsed, 1))
        return response


class BatchCliTarget(CliTarget):
    """``provider_batching: true``: one run of the command answers every case of an eval file.

    The cases are the ones this run will run (``expect``, called when the run is planned, so
    deselected cases are never sent). The first case that needs an answer starts the batch for
    all of them; the others wait for it. ``{FILES}`` lists every case's files, ``{EVAL_ID}`` is
    ``batch`` and the output (``{OUTPUT_FILE}`` or stdout) is JSON Lines, one object with an
    ``id`` per case, each shaped like a single CLI answer. A case whose id has no line is not
    graded. Cases that arrive after a batch started (pytest-xdist hands a worker its share piece
    by piece) go into the next one. A case the run did not announce (one that runs several
    times, for trials) is answered by a run of the command for that case alone.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lock = threading.Lock()
        self._expected: dict[Path, dict[str, CaseSpec]] = {}
        self._answers: dict[tuple[Path | None, str], asyncio.Future[TargetResponse | str]] = {}

    def expect(self, spec: CaseSpec) -> None:
        with self._lock:
            self._expected.setdefault(spec.loaded.path, {})[spec.case.id] = spec

    async def invoke(self, case: PreparedCase, attempt: int) -> TargetResponse:
        key = (case.eval_file, case.id)
        if key not in self._answers:
            with self._lock:
                expected = (
                    case.id in self._expected.get(case.eval_file, {}) if case.eval_file else False
                )
            if not expected:
                # Not part of a batch (a case run several times, for trials): the command
                # answers this case alone, as AgentV runs trials without batching.
                return await super().invoke(case, attempt)
            await self._batch(case)
        outcome = await asyncio.shield(self._answers[key])
        if isinstance(outcome, str):
            raise NotGradedError(outcome)
        return outcome

    def _members(self, case: PreparedCase) -> list[PreparedCase]:
        with self._lock:
            specs = self._expected.pop(case.eval_file, {}) if case.eval_file else {}
        members = [case]
        for spec in specs.values():
            if spec.case.id == case.id or (case.eval_file, spec.case.id) in self._answers:
                continue
            try:
                members.append(prepare_case(spec, self.rootdir))
            except AgentvError:
                continue  # the case reports its own problem when it runs
        return members

    async def _batch(self, case: PreparedCase) -> None:
        members = self._members(case)
        loop = asyncio.get_running_loop()
        futures = {m.id: loop.create_future() for m in members}
        for member in members:
            self._answers[(case.eval_file, member.id)] = futures[member.id]
        try:
            try:
                answers = await self._run_batch(members)
            except (AgentvError, OSError) as exc:
                answers = {m.id: str(exc) for m in members}
            for member_id, future in futures.items():
                future.set_result(answers[member_id])
        finally:
            for future in futures.values():
                if not future.done():
                    future.set_result(f"the batch of {self.what} did not finish")

    async def _run_batch(self, members: list[PreparedCase]) -> dict[str, TargetResponse | str]:
        with tempfile.TemporaryDirectory(prefix="agentv-") as scratch:
            output_file = Path(scratch) / "output.jsonl"
            values = _values("", "", "batch", 0, self._files(members), str(output_file))
            text, elapsed = await self._run(values, output_file)
        records = self._records(text)
        share = round(elapsed / len(members), 1)
        answers: dict[str, TargetResponse | str] = {}
        for member in members:
            record = records.get(member.id)
            if record is None:
                answers[member.id] = (
                    f"the batch output of {self.what} has no line with id '{member.id}'"
                )
                continue
            try:
                response = response_from(record, f"{self.what} (batch line '{member.id}')")
            except NotGradedError as exc:
                answers[member.id] = str(exc)
                continue
            if response.duration_ms is None:
                response = replace(response, duration_ms=share)
            answers[member.id] = response
        return answers

    def _records(self, text: str) -> dict[str, dict[str, Any]]:
        shown = f"batch output of {self.what}"
        records: dict[str, dict[str, Any]] = {}
        try:
            for line, value in json_lines(text, shown, repair=True):
                record_id = value.get("id") if isinstance(value, dict) else None
                if not isinstance(record_id, str) or not record_id:
                    raise NotGradedError(
                        f"{shown}, line {line}: each line must be a JSON object with a string 'id'"
                    )
                if record_id in records:
                    raise NotGradedError(f"{shown}, line {line}: id '{record_id}' is given twice")
                records[record_id] = {k: v for k, v in value.items() if k != "id"}
        except EvalFileError as exc:
            raise NotGradedError(str(exc)) from None
        return records


def chat_messages(case: PreparedCase) -> list[dict[str, str]]:
    """The case's messages for a model; guideline files go first in the system message, under
    AgentV's guidelines header."""
    messages = [{"role": m["role"], "content": str(m["content"])} for m in case.input_messages]
    if case.guidelines:
        block = f"{GUIDELINES_HEADER}\n\n{case.guidelines}"
        if messages and messages[0]["role"] == "system":
            rest = messages[0]["content"].strip()
            messages[0]["content"] = f"{block}\n\n{rest}" if rest else block
        else:
            messages.insert(0, {"role": "system", "content": block})
    return messages


class LlmTarget:
    """Asks an LLM through litellm; replies go through the record/replay store like judges'."""

    timeout: float | None = None

    def __init__(
        self,
        name: str,
        client: LlmClient,
        settings: dict[str, Any],
        judge_target: str | None = None,
    ) -> None:
        self.name = name
        self.client = client
        self.judge_target = judge_target
        temperature = settings.get("temperature")
        self.temperature = float(temperature) if isinstance(temperature, (int, float)) else None
        max_tokens = settings.get("max_tokens", settings.get("max_output_tokens"))
        self.max_tokens = int(max_tokens) if isinstance(max_tokens, int) else None

    def _accept(self, text: str) -> str:
        """An empty reply (a content filter, say) is no answer: never stored, not graded."""
        if not text.strip():
            raise NotGradedError(
                f"target '{self.name}' ({self.client.model}) returned an empty reply"
            )
        return text

    async def invoke(self, case: PreparedCase, attempt: int) -> TargetResponse:
        text, reply = await self.client.complete(
            chat_messages(case),
            accept=self._accept,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            trial=attempt,
            protocol="target",
            label=f"target '{self.name}' ({self.client.model})",
        )
        # A reply reused from the store reports what its recording used and cost, so a replayed
        # run grades the same answer, usage and cost as the recorded one.
        return TargetResponse(
            text=text,
            output_messages=({"role": "assistant", "content": text},),
            token_usage={"input": reply.prompt_tokens, "output": reply.completion_tokens},
            cost_usd=reply.cost_usd,
        )


def planned_answer(target: Target, case: PreparedCase) -> tuple[TargetResponse, list[PlannedCall]]:
    """The answer a target would give, as far as it is known without running anything, and the
    model calls it would make (``--agentv-estimate``). A mock's or a recorded answer is known; a
    model target's is known when its reply is in the store; any other answer (a CLI agent's, a
    fixture's) stands in as one reply allowance of text."""
    if isinstance(target, MockTarget):
        return target.answer(), []
    if isinstance(target, RecordedTarget):
        return target.answer(case), []
    if isinstance(target, LlmTarget):
        messages = chat_messages(case)
        stored = target.client.stored_reply(
            messages,
            temperature=target.temperature,
            max_tokens=target.max_tokens,
            trial=case.attempt,
            protocol="target",
        )
        call = PlannedCall(
            target.client.model, prompt_tokens(messages), stored is not None, target.max_tokens
        )
        return response_from(stored if stored is not None else unknown_answer(), ""), [call]
    return response_from(unknown_answer(), ""), []


TargetFunction = Callable[[PreparedCase], Any]


class FixtureTarget:
    """The callable returned by an ``agentv_target`` fixture (sync or async).

    A sync callable is called in pytest's own thread, like any test code; an async one is
    awaited on the plugin's event loop. It is called once per trial, with the case whose
    ``attempt`` is that trial's index.
    """

    judge_target: str | None = None
    timeout: float | None = None

    def __init__(self, function: TargetFunction) -> None:
        self.name = "agentv_target"
        self.function = function
        self.what = (
            f"agentv_target fixture ({getattr(function, '__name__', type(function).__name__)})"
        )

    @property
    def is_async(self) -> bool:
        method = type(self.function).__call__
        return inspect.iscoroutinefunction(self.function) or inspect.iscoroutinefunction(method)

    def _failed(self, exc: BaseException) -> NotGradedError:
        return NotGradedError(f"{self.what} raised {type(exc).__name__}: {redact(str(exc))}")

    def call_sync(self, case: PreparedCase) -> TargetResponse:
        try:
            value = self.function(case)
        except NotGradedError:
            raise
        except (Exception, SystemExit) as exc:
            raise self._failed(exc) from exc
        if inspect.isawaitable(value):
            close = getattr(value, "close", None)
            if callable(close):
                close()
            raise NotGradedError(f"{self.what} returned an awaitable; define it with 'async def'")
        return response_from(value, self.what)

    async def invoke(self, case: PreparedCase, attempt: int) -> TargetResponse:
        try:
            value = self.function(case)
            if inspect.isawaitable(value):
                value = await value
        except NotGradedError:
            raise
        except (Exception, SystemExit) as exc:
            raise self._failed(exc) from exc
        return response_from(value, self.what)


class RecordedTarget:
    """``--agentv-answers``: each case's answer comes from a previous results file (ours, or
    AgentV's: ``candidate_answer``, ``output_messages``, ``trace_summary``), matched by dataset
    and eval id (``test_id`` in later AgentV rows), instead of calling the case's target.

    A case with no recorded answer, or whose recorded row is itself an error or a skip, is not
    graded. When a file has several rows for one case, the last one is used.
    """

    judge_target: str | None = None
    timeout: float | None = None

    def __init__(self, path: Path, display: str, rootdir: Path | None = None) -> None:
        self.path = path
        self.display = display
        self.name = f"recorded:{path.name}"
        self.results = PreviousResults(path, display, "--agentv-answers", rootdir=rootdir)

    def find(self, case: PreparedCase) -> dict[str, Any] | None:
        file = display_path(case.eval_file, case.rootdir) if case.eval_file else None
        return self.results.find(case.dataset, case.id, file)

    async def invoke(self, case: PreparedCase, attempt: int) -> TargetResponse:
        return self.answer(case)

    def answer(self, case: PreparedCase) -> TargetResponse:
        row = self.find(case)
        where = f"in {self.display} (--agentv-answers)"
        if row is None:
            raise NotGradedError(
                f"no recorded answer for dataset '{case.dataset}', eval_id '{case.id}' {where}"
            )
        status = row.get("status")
        if row.get("error") or status in ("error", "skipped"):
            problem = row.get("error") or f"status {status}"
            raise NotGradedError(
                f"the recorded answer for '{case.id}' {where} is not an answer: {problem}"
            )
        messages = row.get("output_messages")
        text = row.get("candidate_answer")
        if not messages and not isinstance(text, str):
            raise NotGradedError(
                f"the recorded row for '{case.id}' {where} has no 'candidate_answer' or "
                "'output_messages'"
            )
        value = {"output_messages": messages} if messages else {"text": text}
        response = response_from(value, f"the recorded row for '{case.id}'")
        trace = row.get("trace_summary")
        # The recorded answer is what was graded, whatever its messages would give today.
        return replace(
            response,
            text=text if isinstance(text, str) else response.text,
            recorded_trace=trace if isinstance(trace, dict) else None,
        )


def interpolate(target: TargetConfig, loaded: LoadedTargets) -> dict[str, Any]:
    """Resolve values that are entirely ``${{ VAR }}`` from the environment, at use time."""
    settings: dict[str, Any] = {}
    for key, value in target.settings.items():
        if isinstance(value, str) and (match := _ENV_REF.match(value.strip())):
            variable = match.group(1)
            resolved = os.environ.get(variable, "")
            if not resolved:
                raise ConfigError(
                    f"{loaded.where(target, key)}: targets.{target.name}.{key}: environment "
                    f"variable {variable} is not set (the file says {value.strip()})"
                )
            value = resolved
        settings[key] = value
    return settings


def model_spec(provider: str, settings: dict[str, Any], what: str) -> ModelSpec:
    """Map AgentV's LLM providers (and plain litellm model strings) onto a litellm model."""
    model = settings.get("model") or settings.get("deployment")
    if not isinstance(model, str) or not model.strip():
        raise ConfigError(f"{what} needs a 'model'")
    prefix = LLM_PROVIDERS[provider]
    if prefix and not model.startswith(prefix + "/"):
        model = f"{prefix}/{model}"
    base = settings.get("api_base") or settings.get("endpoint") or settings.get("base_url")
    key = settings.get("api_key")
    version = settings.get("api_version") or settings.get("version")
    return ModelSpec(
        model=model,
        api_base=str(base) if base else None,
        api_key=str(key) if key else None,
        api_version=str(version) if version else None,
    )


def build_target(
    target: TargetConfig,
    loaded: LoadedTargets,
    *,
    folder: Path,
    rootdir: Path,
    llm_client: Callable[[ModelSpec], LlmClient],
    healthchecks: dict[tuple[Path, str], Healthcheck] | None = None,
) -> Target:
    """Build a target; a CLI target's healthcheck is shared through ``healthchecks`` (by targets
    file and name), so that it runs once per run whichever folder builds the target."""
    what = f"target '{target.name}' ({loaded.where(target)})"
    where: Where = partial(loaded.where, target)
    provider = target.provider.lower()
    settings = interpolate(target, loaded)
    if provider == "mock":
        return MockTarget(target.name, settings, where, target.judge_target)
    if provider == "cli":
        checks = {} if healthchecks is None else healthchecks
        check = checks.get((loaded.path, target.name))
        if check is None and settings.get("healthcheck") is not None:
            timeout = cli_timeout(target.name, settings, where)
            check = checks[(loaded.path, target.name)] = Healthcheck(
                target.name, settings["healthcheck"], folder, rootdir, timeout, where
            )
        batching = settings.get("provider_batching", False)
        if not isinstance(batching, bool):
            raise ConfigError(
                f"target '{target.name}' ({where('provider_batching')}): provider_batching "
                "must be true or false"
            )
        kind = BatchCliTarget if batching else CliTarget
        return kind(target.name, settings, folder, rootdir, where, target.judge_target, check)
    if provider in LLM_PROVIDERS:
        spec = model_spec(provider, settings, what)
        return LlmTarget(target.name, llm_client(spec), settings, target.judge_target)
    raise ConfigError(
        f"{what}: provider '{target.provider}' is not supported by pytest-agentv; use mock, cli, "
        f"an LLM provider ({', '.join(sorted(LLM_PROVIDERS))}) or an agentv_target fixture"
    )


class TargetCatalog:
    """Targets files found from an eval file's folder up to the rootdir (or named by
    ``--agentv-targets``), loaded once each, and the targets built from them, once per folder."""

    def __init__(
        self,
        rootdir: Path,
        clients: Callable[[ModelSpec], LlmClient],
        *,
        targets_file: Path | None = None,
        override: str | None = None,
        answers: RecordedTarget | None = None,
    ) -> None:
        self.rootdir = rootdir
        self.clients = clients
        self.targets_file_option = targets_file
        self.override = override
        self.answers = answers
        self._paths: dict[Path, Path | None] = {}
        self._loaded: dict[Path, LoadedTargets] = {}
        self._built: dict[tuple[str, Path], Target] = {}
        self._healthchecks: dict[tuple[Path, str], Healthcheck] = {}
        self._warned: set[tuple[Path, str]] = set()
        self._lock = threading.Lock()
        self._build_lock = threading.Lock()

    async def aclose(self) -> None:
        """End what the targets still run for the run as a whole (their healthchecks)."""
        for check in list(self._healthchecks.values()):
            await check.aclose()

    def _path(self, folder: Path) -> Path | None:
        if self.targets_file_option is not None:
            return self.targets_file_option
        if folder not in self._paths:
            self._paths[folder] = nearest_file(folder, self.rootdir, TARGETS_FILE_NAMES)
        return self._paths[folder]

    def targets_file(self, folder: Path) -> LoadedTargets | None:
        path = self._path(folder)
        if path is None:
            return None
        with self._lock:
            if path not in self._loaded:
                self._loaded[path] = load_targets_file(path, display_path(path, self.rootdir))
            return self._loaded[path]

    def target_name(self, spec: CaseSpec) -> str:
        """``--agentv-target`` > case ``execution.target`` > file target > ``default``."""
        return self.override or spec.target_name or "default"

    def target_for(self, spec: CaseSpec) -> Target:
        """The case's target (recorded answers under ``--agentv-answers``), built once per
        folder: pytest's thread (planning) and the plugin's loop may ask at the same time."""
        if self.answers is not None:
            return self.answers
        name = self.target_name(spec)
        folder = spec.loaded.path.parent
        built = self._built.get((name, folder))
        if built is None:
            with self._build_lock:
                built = self._built.get((name, folder))
                if built is None:
                    built = self._built[(name, folder)] = self._build(spec, name, folder)
        return built

    def expect(self, spec: CaseSpec) -> None:
        """Tell a batching target about a case this run will run; a case whose target cannot be
        built is left alone (it reports that itself when it runs)."""
        try:
            target = self.target_for(spec)
        except AgentvError:
            return
        if isinstance(target, BatchCliTarget):
            target.expect(spec)

    def ignored_settings(self, spec: CaseSpec) -> list[tuple[str, FileWarning]]:
        """Warnings, the first time a case uses a target, about its settings pytest-agentv
        ignores (AgentV settings it does not implement, or keys nobody knows)."""
        if self.answers is not None:
            return []
        try:
            loaded = self.targets_file(spec.loaded.path.parent)
        except AgentvError:
            return []
        name = self.target_name(spec)
        if loaded is None or (loaded.path, name) in self._warned:
            return []
        self._warned.add((loaded.path, name))
        return [(str(loaded.path), warning) for warning in loaded.ignored.get(name, ())]

    def _build(self, spec: CaseSpec, name: str, folder: Path) -> Target:
        loaded = self.targets_file(folder)
        if loaded is None:
            raise ConfigError(
                f"no target for case '{spec.case.id}': define an 'agentv_target' fixture in a "
                f"conftest.py, or a target named '{name}' in .agentv/targets.yaml"
            )
        target = next((t for t in loaded.model.targets if t.name == name), None)
        if target is None:
            known = ", ".join(t.name for t in loaded.model.targets) or "none"
            raise ConfigError(
                f"target '{name}' is not defined in {loaded.display} (known: {known})"
            )
        return build_target(
            target,
            loaded,
            folder=folder,
            rootdir=self.rootdir,
            llm_client=self.clients,
            healthchecks=self._healthchecks,
        )

    def judge_target(self, name: str, folder: Path) -> ModelSpec:
        """The model of a target's ``judge_target``, which must be an LLM target."""
        loaded = self.targets_file(folder)
        target = next((t for t in loaded.model.targets if t.name == name), None) if loaded else None
        if loaded is None or target is None:
            raise ConfigError(f"judge_target '{name}' is not defined in a targets file")
        provider = target.provider.lower()
        if provider not in LLM_PROVIDERS:
            raise ConfigError(
                f"{loaded.where(target)}: judge_target '{name}' must be an LLM target "
                f"({', '.join(sorted(LLM_PROVIDERS))}), not '{target.provider}'"
            )
        return model_spec(provider, interpolate(target, loaded), f"judge_target '{name}'")
