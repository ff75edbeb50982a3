"""A test's trace envelope in a v4 run folder (``outputs/trace.json``, ``agentv.trace.v1``),
made from its index row as AgentV v4.42.4's ``trace-envelope.ts`` makes it from an
``EvaluationResult``: what v4's ``replay`` targets (``execution_traces``) and ``agentv grade
--trace`` read, and what the test's transcript is projected from (``agentv_v4_transcript.py``).

A span graph: the run of the test, a chat span per answer (a conversation's turns) and a tool
span per tool call, the row's ``trace.messages`` being transcript events of the run's span. Its
ids are v4's hashes of the same values, so that v4 and we give a result the same ones. Our
rows' messages hold the answer when there is one (``agentv_v4.v4_row``: v4's fallback on the
answer alone never applies), and no start nor end times: every span starts at the row's
timestamp, the run lasting its ``duration_ms`` and a tool call its own.

One thing we say otherwise, because it is true: ``capture``. v4 says full content and no
redaction; every row of ours has its secrets masked before it is written (``redaction.py``), so
the content is full with ``redaction_level: partial`` (masked in place, no field withheld), and
the ``policy`` says what the trace holds (v4's default policy, metadata only, would not).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any, TypeGuard

from .identity import hash_hex, projection_identity

SCHEMA = "agentv.trace.v1"
#: The transcript event that carries a message on the run's span.
MESSAGE_EVENT = "agentv.transcript.message"
NANOS = 1_000_000
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)

#: What our traces hold: messages and tool arguments in full, secrets masked wherever they
#: appear; no tool results, screenshots nor thinking (rows do not keep them).
CAPTURE: dict[str, Any] = {
    "content": "full",
    "redaction_level": "partial",
    "redacted_fields": [],
    "policy": {
        "tool_arguments": "full",
        "tool_results": "none",
        "message_text": "full",
        "screenshots": "none",
        "thinking": "none",
        "secrets": "redacted",
    },
}
#: A message's keys as a transcript event and a tool call's, in v4's order.
_MESSAGE_KEYS = ["role", "name", "content", "tool_calls", "start_time", "end_time"]
_MESSAGE_KEYS += ["duration_ms", "metadata", "token_usage"]
_CALL_KEYS = ("tool", "input", "output", "id", "status", "start_time", "end_time", "duration_ms")


def defined(values: Mapping[str, Any]) -> dict[str, Any]:
    """Without the values that are not there (JavaScript's undefined, which JSON drops)."""
    return {key: value for key, value in values.items() if value is not None}


def present(value: Mapping[str, Any], keys: Sequence[str]) -> dict[str, Any]:
    return {key: value[key] for key in keys if key in value}


def number(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _epoch_ms(text: Any) -> int:
    """``Date.parse`` of the row's timestamp; 0 when it has none, as v4 falls back."""
    try:
        moment = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return 0
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return (moment - EPOCH) // timedelta(milliseconds=1)


def _nanos(ms: float) -> str:
    """``msToUnixNano``: whole milliseconds (rounded as JavaScript rounds), in nanoseconds."""
    return str(math.floor(ms + 0.5) * NANOS)


def _usage(usage: Any) -> dict[str, Any]:
    """Token counts as span attributes, under both conventions' names."""
    got = usage if isinstance(usage, Mapping) else {}
    return defined(
        {
            "gen_ai.usage.input_tokens": got.get("input"),
            "gen_ai.usage.output_tokens": got.get("output"),
            "gen_ai.usage.cache_read.input_tokens": got.get("cached"),
            "gen_ai.usage.reasoning.output_tokens": got.get("reasoning"),
            "llm.token_count.prompt": got.get("input"),
            "llm.token_count.completion": got.get("output"),
        }
    )


def _messages(line: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list((line.get("trace") or {}).get("messages") or ())


def has_transcript(line: Mapping[str, Any]) -> bool:
    """Whether v4 writes a transcript for the row: it has an answer or messages."""
    return bool(line.get("output")) or bool(_messages(line))


def _event(index: int, message: Mapping[str, Any]) -> dict[str, Any]:
    """A message of the row as a transcript event of the run's span."""
    wire = present(message, _MESSAGE_KEYS)
    if isinstance(wire.get("tool_calls"), list):
        wire["tool_calls"] = [present(call, _CALL_KEYS) for call in wire["tool_calls"]]
    return {
        "name": MESSAGE_EVENT,
        "attributes": {f"{MESSAGE_EVENT}.index": index, MESSAGE_EVENT: wire},
    }


def _span(
    ids: tuple[str, str, str | None],
    name: str,
    times: tuple[float, float],
    status: dict[str, Any],
    attributes: dict[str, Any],
    events: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A span: the ids of its trace, of itself and of its parent, then what it is."""
    return {
        "trace_id": ids[0],
        "span_id": ids[1],
        "parent_span_id": ids[2],
        "name": name,
        "kind": "INTERNAL",
        "start_time_unix_nano": _nanos(times[0]),
        "end_time_unix_nano": _nanos(times[1]),
        "status": status,
        "attributes": attributes,
        "events": events or [],
    }


def _answers(
    line: Mapping[str, Any], trace_id: str, root_id: str, times: tuple[float, float]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The chat span of each answer and the tool span of each of its tool calls; the warnings
    for the tool calls without an id (v4 makes one up from their place)."""
    test_id, target = line["test_id"], line["target"]
    spans: list[dict[str, Any]] = []
    warnings: list[dict[str, Any]] = []
    answers = [(i, m) for i, m in enumerate(_messages(line)) if m.get("role") == "assistant"]
    for turn, (index, message) in enumerate(answers):
        chat_id = hash_hex((trace_id, "chat", index, turn), 16)
        # v4 names the model that a message's metadata gives; ours give none: the target.
        attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": target,
            "gen_ai.request.model": target,
            "gen_ai.response.model": target,
            "openinference.span.kind": "LLM",
            "agentv.message.index": index,
            "agentv.turn_index": turn,
            # The run's tokens go to its last answer.
            **_usage(line.get("token_usage") if turn == len(answers) - 1 else None),
        }
        if "content" in message:
            attributes["gen_ai.output.messages"] = message["content"]
        ids = (trace_id, chat_id, root_id)
        spans.append(_span(ids, f"chat {target}", times, {"code": "OK"}, attributes))
        for place, call in enumerate(message.get("tool_calls") or ()):
            tool, call_id = str(call.get("tool")), call.get("id")
            span_id = hash_hex((trace_id, "tool", index, place, tool), 16)
            if call_id is None:
                call_id = f"agentv-tool-{hash_hex((test_id, target, index, place), 12)}"
                warnings.append(
                    {
                        "code": "missing_tool_call_id",
                        "severity": "warning",
                        "span_id": span_id,
                        "source_ref": {"event_id": f"message-{index}-tool-{place}"},
                        "message": "Deterministic tool call id generated from source order.",
                    }
                )
            attributes = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": tool,
                "gen_ai.tool.call.id": call_id,
                "openinference.span.kind": "TOOL",
                "tool.name": tool,
                "tool.id": call_id,
                "agentv.message.index": index,
                "agentv.tool.index": place,
            }
            if call.get("id") is None:
                attributes["agentv.generated_tool_call_id"] = True
            for key, name in (("input", "arguments"), ("output", "result")):
                if key in call:
                    attributes[f"gen_ai.tool.call.{name}"] = call[key]
            spent, status = call.get("duration_ms"), call.get("status")
            ended = max(times[0], times[0] + spent) if number(spent) else times[1]
            failed = status in ("error", "timeout", "cancelled")
            spans.append(
                _span(
                    (trace_id, span_id, chat_id),
                    f"execute_tool {tool}",
                    (times[0], ended),
                    {"code": "ERROR", "message": status} if failed else {"code": "OK"},
                    attributes,
                )
            )
    return spans, warnings


def _score(score: Mapping[str, Any], timestamp: Any, root_id: str) -> dict[str, Any]:
    """A grader's score, aimed at the run's span (our graders have no times of their own)."""
    return {
        "name": score["name"],
        "type": score["type"],
        "score": score["score"],
        **defined({"weight": score.get("weight"), "verdict": score.get("verdict")}),
        "source": {"code-grader": "code", "llm-grader": "llm"}.get(score["type"], "agentv"),
        "evaluated_at": timestamp,
        "target_span_id": root_id,
        "evidence": {
            "span_ids": [root_id],
            "assertions": [present(a, ("text", "passed", "evidence")) for a in score["assertions"]],
            **present(score, ("details",)),
        },
    }


def trace_envelope(
    line: Mapping[str, Any], run_id: str, eval_path: str | None, created_at: str
) -> dict[str, Any]:
    """A row's ``outputs/trace.json``: ``buildTraceEnvelopeFromEvaluationResult`` and
    ``toTraceEnvelopeWire`` with the options v4's run writer gives them."""
    timestamp, test_id, target, suite = (
        line["timestamp"],
        line["test_id"],
        line["target"],
        line.get("suite"),
    )
    output, error, duration = line.get("output"), line.get("error"), line.get("duration_ms")
    trace_id = hash_hex(("execution-trace", timestamp, suite, test_id, target, run_id), 32)
    root_id = hash_hex((trace_id, "root"), 16)
    start = _epoch_ms(timestamp)
    times = (start, max(start, start + duration) if number(duration) else start)
    events = [_event(index, message) for index, message in enumerate(_messages(line))]
    if error:
        raised = {"exception.message": error}
        events.append(
            {"name": "exception", "time_unix_nano": _nanos(times[1]), "attributes": raised}
        )
    failed = line.get("execution_status") == "execution_error" or error
    attributes = defined(
        {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.provider.name": "agentv",
            "gen_ai.agent.name": target,
            "openinference.span.kind": "AGENT",
            "agentv.test_id": test_id,
            "agentv.target": target,
            "agentv.suite": suite,
            "agentv.eval_path": eval_path,
            "agentv.run_id": run_id,
            "agentv.attempt": 0,
            "agentv.execution_status": line.get("execution_status"),
            "agentv.failure_stage": line.get("failure_stage"),
            "agentv.failure_reason_code": line.get("failure_reason_code"),
            "agentv.trace.duration_ms": duration,
            "agentv.trace.cost_usd": line.get("cost_usd"),
            **_usage(line.get("token_usage")),
        }
    )
    status = defined({"code": "ERROR", "message": error or None}) if failed else {"code": "OK"}
    root = _span(
        (trace_id, root_id, None), f"invoke_agent {target}", times, status, attributes, events
    )
    spans, warnings = _answers(line, trace_id, root_id, times)
    artifact_id = "execution-trace-" + hash_hex((trace_id, timestamp, line["score"]), 20)
    evaluation = defined({"eval_path": eval_path, "suite": suite, "test_id": test_id})
    evaluation.update(target=target, source_target=target, attempt=0, variant=None, run_id=run_id)
    identity = projection_identity(
        {
            **evaluation,
            "suite": suite,
            "eval_path": eval_path,
            "envelope_id": artifact_id,
            "trace_id": trace_id,
            "root_span_id": root_id,
            "projection_format": "execution_trace",
            "projection_version": SCHEMA,
        }
    )
    # v4's run writer exports with the ``update`` duplicate policy.
    export = {"duplicate_policy": "update"}
    if "issues" in identity:
        export["identity_warnings"] = identity["issues"]
    artifacts = {"trace_path": "outputs/trace.json"}
    if output:
        artifacts.update(answer_path="outputs/answer.md", response_path="outputs/response.md")
    if has_transcript(line):
        artifacts["transcript_path"] = "outputs/transcript.jsonl"
    envelope: dict[str, Any] = {
        "schema_version": SCHEMA,
        "artifact_id": artifact_id,
        "created_at": created_at,
        "eval": evaluation,
        "projection_identity": identity,
        "export_metadata": export,
        "trace": {
            "format": "otlp_openinference_spans",
            "trace_id": trace_id,
            "root_span_id": root_id,
            "resource": {"attributes": {"service.name": "agentv"}},
            "scope": {"name": "agentv"},
            "spans": [root, *spans],
        },
        "source": {
            "kind": "agentv_run",
            "path": "index.jsonl",
            "provider": target,
            "format": "agentv_result",
            "version": "1",
        },
        "capture": CAPTURE,
    }
    if warnings:
        envelope["conversion_warnings"] = warnings
    envelope["artifacts"] = artifacts
    if line.get("scores"):
        envelope["scores"] = [_score(score, timestamp, root_id) for score in line["scores"]]
    return envelope
