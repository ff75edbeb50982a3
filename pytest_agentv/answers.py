"""What a target returns: ``TargetResponse`` (the answer text, its messages, tool calls, usage,
cost and duration) and the shapes it is read from (text, a list of messages, or ``{text}`` /
``{output_messages, token_usage, cost_usd, duration_ms}``, as AgentV reads them), AgentV's
trace summary made from it, and the one reading of the numbers an answer reports about itself
(``metric``): one that is not a metric leaves the answer not graded, whichever source gave it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import DuplicateKeyError, NotGradedError
from .jsonlines import json_decoder
from .redaction import valid_data
from .schema.base import reported_metric, shown_number
from .schema.messages import render_content


@dataclass(frozen=True)
class ToolCall:
    """One tool call an answer reports: AgentV's ``{tool, input, output, duration_ms}`` (a failed
    one has ``error``, or v4's ``status: error``), or an OpenAI-style ``{function: {name,
    arguments}}`` as Python agents often return them."""

    name: str
    args: Any = None
    duration_ms: float | None = None
    error: bool = False
    #: What the tool returned, when the answer reports it.
    output: Any = None


def metric(value: Any, name: str, what: str) -> float | None:
    """A number an answer reports about itself (``cost_usd``, ``duration_ms``, a count of tokens
    or calls), as limits are checked against it (``reported_metric``: a whole number too large
    for a float is ``inf``, over any limit): None when it reports none. One that is negative,
    not a number, NaN or infinite is not a metric, and a limit checked against it would pass or
    fail on a made-up number: the answer is not graded (``NotGradedError`` naming ``what``
    reported it)."""
    if value is None:
        return None
    number = reported_metric(value)
    if number is None:
        raise NotGradedError(
            f"{what} reported {name} {shown_number(value)}, which is not a metric "
            "(a finite number >= 0)"
        )
    return number


def _as_reported(value: Any, name: str, what: str) -> Any:
    """``value`` as the answer reported it, once it is known to be a metric: the answer keeps
    the number it gave (a 401-digit one too), which its reports show."""
    metric(value, name, what)
    return value


#: The numbers of AgentV's trace summary, and its tables of them (token counts, calls by tool
#: name, each tool's call durations).
_TRACE_NUMBERS = ("event_count", "error_count", "llm_call_count", "cost_usd", "duration_ms")
_TRACE_TABLES = ("token_usage", "tool_calls_by_name", "tool_durations")


def metric_table(value: Any, name: str, what: str) -> dict[str, Any] | None:
    """An object of metrics (``token_usage``; a list of them per tool for ``tool_durations``),
    checked with ``metric``; None when there is none."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise NotGradedError(
            f"{what} reported {name} {shown_number(value)}, which is not an object of metrics"
        )
    for key, item in value.items():
        for number in item if isinstance(item, list) else [item]:
            metric(number, f"{name}.{key}", what)
    return dict(value)


def checked_trace(trace: Mapping[str, Any] | None, what: str) -> dict[str, Any] | None:
    """A trace summary (recorded, or given to ``assert_judged``) whose numbers are metrics."""
    if trace is None:
        return None
    for key in _TRACE_NUMBERS:
        metric(trace.get(key), key, what)
    for key in _TRACE_TABLES:
        metric_table(trace.get(key), key, what)
    return dict(trace)


def tool_calls(messages: Iterable[Mapping[str, Any]], what: str = "the answer") -> list[ToolCall]:
    """The tool calls of ``output_messages``, in order (a ``duration_ms`` that is not a metric:
    ``NotGradedError``, naming ``what`` reported it)."""
    found: list[ToolCall] = []
    for message in messages:
        calls = message.get("tool_calls") if isinstance(message, Mapping) else None
        for call in calls if isinstance(calls, list) else ():
            if not isinstance(call, Mapping):
                continue
            function = call.get("function")
            function = function if isinstance(function, Mapping) else {}
            name = str(call.get("tool", call.get("name", function.get("name", "unknown"))))
            if "input" in call:
                args = call["input"]
            elif "args" in call or "arguments" in call:
                args = call.get("args", call.get("arguments"))
            else:
                args = function.get("arguments")
            if isinstance(args, str):
                try:
                    args = json_decoder(nan=True).decode(args)
                except (ValueError, RecursionError):  # a key given twice too: not an object
                    pass
            duration = _as_reported(
                call.get("duration_ms"), f"duration_ms of tool call '{name}'", what
            )
            found.append(
                ToolCall(
                    name=name,
                    args=args,
                    duration_ms=duration,
                    error=bool(call.get("error")) or call.get("status") == "error",
                    output=call.get("output"),
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
    #: The workspace the answer was made in, and the changes made there (a unified diff).
    workspace_path: str | None = None
    file_changes: str | None = None
    #: The model calls that made the answer, when its target counts them (a coding agent's
    #: turns); else execution-metrics counts the assistant messages.
    llm_call_count: int | None = None

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
            and self.llm_call_count is None
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
        if self.llm_call_count is not None:
            summary["llm_call_count"] = self.llm_call_count
        if durations:
            summary["tool_durations"] = durations
        return summary


def _candidate(messages: list[dict[str, Any]]) -> str:
    """The answer in messages, as AgentV takes it: the content of the last assistant message
    that has one (a message with only tool calls is skipped); no such message: no answer."""
    for message in reversed(messages):
        if message.get("role") == "assistant" and message.get("content") is not None:
            return render_content(message["content"])
    return ""


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def checked_answer(response: TargetResponse, what: str) -> TargetResponse:
    """The answer, if every number it reports about itself is a metric (``metric``): its cost,
    duration and token usage, its tool calls' durations, a recorded trace summary."""
    tool_calls(response.output_messages, what)
    checked_trace(response.trace_summary(), what)
    return response


def response_from(value: Any, what: str) -> TargetResponse:
    """Accept text, a list of messages, or ``{text}`` / ``{output_messages, token_usage, ...}``;
    every source of answers reads them here, so each answer's metrics are checked here."""
    if isinstance(value, TargetResponse):
        return checked_answer(value, what)
    value = valid_data(value)  # what the agent wrote must survive UTF-8: payloads, reports
    if isinstance(value, str):
        return TargetResponse(
            text=value, output_messages=({"role": "assistant", "content": value},)
        )
    if isinstance(value, list) and all(isinstance(m, dict) for m in value):
        response = TargetResponse(text=_candidate(value), output_messages=tuple(value))
        return checked_answer(response, what)
    if isinstance(value, dict):
        # AgentV v4 names the messages ``output``; ``output_messages`` is v2.5.8's name.
        messages = value.get("output_messages", value.get("output"))
        if messages is not None and not (
            isinstance(messages, list) and all(isinstance(m, dict) for m in messages)
        ):
            raise NotGradedError(
                f"{what} returned 'output' ('output_messages') that is not a list of messages"
            )
        # As AgentV: messages, when there are any, are the answer and ``text`` is ignored.
        if messages:
            text = _candidate(messages)
        elif "text" in value:
            text = _text(value["text"])
            messages = [{"role": "assistant", "content": text}]
        else:
            raise NotGradedError(f"{what} returned an object without 'text' or 'output_messages'")
        response = TargetResponse(
            text=text,
            output_messages=tuple(messages),
            token_usage=metric_table(value.get("token_usage"), "token_usage", what),
            cost_usd=_as_reported(value.get("cost_usd"), "cost_usd", what),
            duration_ms=_as_reported(value.get("duration_ms"), "duration_ms", what),
        )
        return checked_answer(response, what)
    raise NotGradedError(
        f"{what} returned {type(value).__name__}; return text, a list of messages, "
        "or a mapping with 'text' or 'output_messages'"
    )


def parse_output_text(text: str, what: str) -> TargetResponse:
    """CLI output: JSON ``{text}`` / ``{output_messages, ...}``, or plain text."""
    stripped = text.strip()
    if stripped.startswith("{"):
        # What cannot be parsed (nested too deep included) is plain text, as in AgentV; JSON
        # that gives a key twice is neither an answer (which one?) nor text.
        try:
            data = json_decoder(nan=True).decode(stripped)
        except DuplicateKeyError as exc:
            raise NotGradedError(f"{what} printed a JSON object with a {exc}") from None
        except (ValueError, RecursionError):
            data = None
        messages = (
            data.get("output_messages", data.get("output")) if isinstance(data, dict) else None
        )
        if isinstance(data, dict) and ("text" in data or messages):
            return response_from(data, what)
    return response_from(text.rstrip("\n"), what)
