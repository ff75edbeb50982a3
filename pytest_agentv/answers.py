"""What a target returns: ``TargetResponse`` (the answer text, its messages, tool calls, usage,
cost and duration) and the shapes it is read from (text, a list of messages, or ``{text}`` /
``{output_messages, token_usage, cost_usd, duration_ms}``, as AgentV reads them), and AgentV's
trace summary made from it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import NotGradedError
from .redaction import valid_data
from .schema.base import finite_number
from .schema.messages import render_content


@dataclass(frozen=True)
class ToolCall:
    """One tool call an answer reports: AgentV's ``{tool, input, output, duration_ms}``, or an
    OpenAI-style ``{function: {name, arguments}}`` as Python agents often return them."""

    name: str
    args: Any = None
    duration_ms: float | None = None
    error: bool = False
    #: What the tool returned, when the answer reports it.
    output: Any = None


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
        messages = (
            data.get("output_messages", data.get("output")) if isinstance(data, dict) else None
        )
        if isinstance(data, dict) and ("text" in data or messages):
            return response_from(data, what)
    return response_from(text.rstrip("\n"), what)
