"""A test's transcript in a v4 run folder (``outputs/transcript.jsonl``,
``agentv.transcript.v1``), projected from its trace envelope (``agentv_v4_trace.py``) as AgentV
v4.42.4's ``traceEnvelopeToTranscriptJsonLines`` projects it: one line per message, which
``agentv inspect``, ``agentv results`` and the dashboard read (by the row's
``transcript_path``) to show what was said and which tools were called.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from .trace import EPOCH, MESSAGE_EVENT, NANOS, SCHEMA, defined, number, present

TRANSCRIPT_SCHEMA = "agentv.transcript.v1"
#: A transcript line's message keys, in v4's order (its ``tool_calls`` come after them).
_MESSAGE_KEYS = ["role", "name", "content", "start_time", "end_time", "duration_ms"]
_MESSAGE_KEYS += ["metadata", "token_usage"]


def _iso(nanos: str) -> str:
    moment = EPOCH + timedelta(milliseconds=int(nanos) // NANOS)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _span_ms(span: Mapping[str, Any]) -> float:
    spent = int(span["end_time_unix_nano"]) - int(span["start_time_unix_nano"])
    return spent // NANOS if spent % NANOS == 0 else spent / NANOS


def _usage(attributes: Mapping[str, Any]) -> dict[str, Any] | None:
    """The run's token counts, when its span has both the input's and the output's."""
    names = ("input_tokens", "output_tokens", "cache_read.input_tokens", "reasoning.output_tokens")
    found = {
        key: attributes.get(f"gen_ai.usage.{name}")
        for key, name in zip(("input", "output", "cached", "reasoning"), names, strict=True)
    }
    if not (number(found["input"]) and number(found["output"])):
        return None
    return {key: value for key, value in found.items() if number(value)}


def _ref(envelope: Mapping[str, Any], span: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Where a line comes from in the envelope: its span, else the run's."""
    trace = envelope["trace"]
    found = {
        "schema_version": SCHEMA,
        "artifact_id": envelope["artifact_id"],
        "trace_id": trace["trace_id"],
        "span_id": trace["root_span_id"] if span is None else span["span_id"],
    }
    return found | defined({"parent_span_id": None if span is None else span["parent_span_id"]})


def _tool_row(envelope: Mapping[str, Any], span: Mapping[str, Any]) -> dict[str, Any]:
    """A tool span as a tool call (v4's tool trajectory view)."""
    attributes = span["attributes"]
    found = {"tool": attributes["gen_ai.tool.name"]}
    for key, name in (("input", "arguments"), ("output", "result")):
        if f"gen_ai.tool.call.{name}" in attributes:
            found[key] = attributes[f"gen_ai.tool.call.{name}"]
    return found | {
        "id": attributes["gen_ai.tool.call.id"],
        "status": "error" if span["status"]["code"] == "ERROR" else "ok",
        "start_time": _iso(span["start_time_unix_nano"]),
        "end_time": _iso(span["end_time_unix_nano"]),
        "duration_ms": _span_ms(span),
        "trace": _ref(envelope, span),
    }


def _tool_call(
    call: Mapping[str, Any], rows: list[dict[str, Any]], used: set[int]
) -> dict[str, Any]:
    """A message's tool call, completed from the first tool span not taken yet that has its id
    (else its name): what the message says first, then what the span says."""
    index = next(
        (
            i
            for i, row in enumerate(rows)
            if i not in used
            and (row["id"] == call["id"] if call.get("id") else row["tool"] == call["tool"])
        ),
        None,
    )
    row: Mapping[str, Any] = {}
    if index is not None:
        used.add(index)
        row = rows[index]
    found = {"tool": row.get("tool", call["tool"])}
    for key in ("input", "output"):
        if key in call or key in row:
            found[key] = call[key] if key in call else row[key]
    given = call.get("status")
    return found | defined(
        {
            "id": call.get("id") or row.get("id"),
            "status": row.get("status")
            or ("error" if given in ("timeout", "cancelled") else given),
            "start_time": call.get("start_time") or row.get("start_time"),
            "end_time": call.get("end_time") or row.get("end_time"),
            "duration_ms": call.get("duration_ms", row.get("duration_ms")),
            "trace": row.get("trace"),
        }
    )


def transcript(envelope: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The lines of ``outputs/transcript.jsonl``: each message of the run's span with its tool
    calls, the run's tokens, time and cost, what was captured, where the message is in the
    envelope (its chat span, else the run's) and where it comes from."""
    trace, evaluation, source = envelope["trace"], envelope["eval"], envelope["source"]
    root, *spans = trace["spans"]
    events = sorted(
        (event["attributes"][f"{MESSAGE_EVENT}.index"], event["attributes"][MESSAGE_EVENT])
        for event in root["events"]
        if event["name"] == MESSAGE_EVENT
    )
    kind = {span["span_id"]: span["attributes"]["gen_ai.operation.name"] for span in spans}
    chats = {
        span["attributes"]["agentv.message.index"]: _ref(envelope, span)
        for span in spans
        if kind[span["span_id"]] == "chat"
    }
    tools = sorted(
        (span for span in spans if kind[span["span_id"]] == "execute_tool"),
        key=lambda s: (int(s["start_time_unix_nano"]), int(s["end_time_unix_nano"]), s["span_id"]),
    )
    rows = [_tool_row(envelope, span) for span in tools]
    attributes = root["attributes"]
    spent, cost = (
        attributes.get("agentv.trace.duration_ms"),
        attributes.get("agentv.trace.cost_usd"),
    )
    run = defined(
        {
            "transcript_token_usage": _usage(attributes),
            "transcript_duration_ms": spent if number(spent) else _span_ms(root),
            "transcript_cost_usd": cost if number(cost) else None,
            "capture": present(
                envelope["capture"], ("content", "redaction_level", "redacted_fields")
            ),
        }
    )
    origin = {
        "kind": source["kind"],
        "provider": source["provider"],
        # Our sources have no metadata, which would name a session: the run names it.
        "session_id": evaluation["run_id"],
        "path": source["path"],
        "format": source["format"],
        "timestamp": _iso(root["start_time_unix_nano"]),
        "version": source["version"],
    }
    used: set[int] = set()
    lines = []
    for index, (_, message) in enumerate(events):
        line = {
            "schema_version": TRANSCRIPT_SCHEMA,
            "test_id": evaluation["test_id"],
            "target": evaluation["target"],
            "message_index": index,
            **present(message, _MESSAGE_KEYS),
        }
        calls = message.get("tool_calls")
        if calls:
            line["tool_calls"] = [_tool_call(call, rows, used) for call in calls]
        line.update(run, trace=chats.get(index, _ref(envelope)), source=origin)
        lines.append(line)
    return lines
