"""``--agentv-results-format agentv-v4``: a case's row as AgentV v4.42.4 writes it to a run's
``index.jsonl`` (its ``EvaluationResult`` in snake_case, ``packages/core/src/evaluation/
types.ts``), so that AgentV's own tools (``agentv compare``, ``agentv results``) read our runs;
and the answer such a row keeps, for ``--agentv-answers``.

v4 has no "not graded" verdict: such a case is ``execution_status: execution_error`` with
``score: 0`` (v4's readers refuse a row without a numeric score), its reason under ``error`` and
``execution_error``; every reader of ours takes such a row as not graded, never as a zero.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ...resultrows import JUDGE_NOT_CONFIGURED
from ...spellings import v4_kind

if TYPE_CHECKING:
    from ...results import EvaluatorRow, ResultRow


def _grader(entry: EvaluatorRow) -> dict[str, Any]:
    """An evaluator's result as a v4 ``GraderResult``: v4's verdicts are pass, fail and skip (an
    evaluator that could not grade); a composite's members are its ``scores``."""
    verdict = "skip" if entry.get("error") else "pass" if entry["verdict"] == "pass" else "fail"
    grader: dict[str, Any] = {
        "name": entry["name"],
        "type": v4_kind(entry["type"]),
        "score": entry["score"],
        "weight": entry["weight"],
        "verdict": verdict,
        # Every evaluator's result has them (made from its hits and misses when it gave none).
        "assertions": list(entry.get("assertions", [])),
    }
    if entry["evaluator_provider_request"] is not None:
        grader["input"] = entry["evaluator_provider_request"]
    details = {**entry.get("details", {})}
    for key in ("reasoning", "error"):
        if entry.get(key):
            details[key] = entry.get(key)
    if details:
        grader["details"] = details
    if entry.get("evaluator_results"):
        grader["scores"] = [_grader(member) for member in entry["evaluator_results"]]
    return grader


def _answered(row: ResultRow) -> bool:
    return row["trace_summary"] is not None or bool(row["candidate_answer"])


def _input(row: ResultRow) -> list[dict[str, Any]]:
    """v4's ``input``: the case's messages with their roles (``buildResultInput``), the question
    as one user message when that is all it asked."""
    given = row.get("input_messages")
    if given:
        return [dict(message) for message in given]
    return [{"role": "user", "content": row["question"]}] if row.get("question") else []


def _trace(row: ResultRow, failure: str | None) -> dict[str, Any]:
    """v4's ``trace``: the summary counts, the messages (the question, the tool calls and the
    answer; a conversation's turns, each what the user said and the reply) and their events,
    as ``buildTraceFromMessages`` derives them."""
    summary = row["trace_summary"] or {}
    answered = _answered(row)
    messages: list[dict[str, Any]] = []
    turns = row.get("turns")
    if turns:
        for turn in turns:
            messages.append({"role": "user", "content": turn["input"]})
            if turn["answer"] is not None:
                messages.append({"role": "assistant", "content": turn["answer"]})
        answered = False  # the last turn's reply is the answer, already in the messages
    else:
        messages += _input(row)
    calls = [
        {
            "tool": call["tool"],
            "input": call.get("input"),
            **({"duration_ms": call["duration_ms"]} if call.get("duration_ms") is not None else {}),
            **({"status": "error"} if call.get("error") else {}),
        }
        for call in row.get("tool_calls", [])
    ]
    if calls and not turns:
        messages.append({"role": "assistant", "tool_calls": calls})
    if answered:
        messages.append({"role": "assistant", "content": row["candidate_answer"]})
    events = trace_events(messages, failure)
    by_name: dict[str, int] = {}
    for call in calls:
        by_name[call["tool"]] = by_name.get(call["tool"], 0) + 1
    trace: dict[str, Any] = {
        "event_count": len(calls),
        "tool_calls": by_name,
        "error_count": sum(1 for call in calls if "status" in call) + (failure is not None),
        "llm_call_count": sum(1 for message in messages if message["role"] == "assistant"),
        "messages": messages,
        "events": events,
    }
    for key in ("tool_durations", "token_usage", "cost_usd", "duration_ms"):
        if summary.get(key) is not None:
            trace[key] = summary[key]
    return trace


def trace_events(
    messages: Sequence[Mapping[str, Any]], failure: str | None = None
) -> list[dict[str, Any]]:
    """v4's ``trace.events`` of a transcript (``buildTraceFromMessages``): each message, each of
    its tool calls and their results, the final response, and the error that ended it."""
    events: list[dict[str, Any]] = []

    def event(event_id: str, kind: str, **fields: Any) -> None:
        events.append({"event_id": event_id, "ordinal": len(events), "type": kind, **fields})

    def shown(message: Mapping[str, Any]) -> dict[str, Any]:
        return {k: message[k] for k in ("role", "name", "content") if message.get(k) is not None}

    last = None
    for index, message in enumerate(messages):
        event(
            f"message-{index}", "message", message=shown(message), metadata={"message_index": index}
        )
        if message.get("role") == "assistant":
            last = index
        calls = message.get("tool_calls")
        for number, call in enumerate(calls if isinstance(calls, list) else []):
            if not isinstance(call, Mapping):
                continue
            tool_id = f"message-{index}-tool-{number}"
            failed = call.get("error") or call.get("status") == "error"
            tool = {"name": call.get("tool"), "status": "error" if failed else "ok"}
            if call.get("id") is not None:
                tool["call_id"] = call["id"]
            place = {"message_index": index, "tool_index": number}
            timing = (
                {"duration_ms": call["duration_ms"]} if call.get("duration_ms") is not None else {}
            )
            called = {**tool, "input": call.get("input")}
            if "output" in call:
                called["output"] = call["output"]
            event(
                tool_id,
                "tool_call",
                parent_event_id=f"message-{index}",
                tool=called,
                metadata=place,
                **timing,
            )
            if "output" in call:
                result = {**tool, "output": call["output"]}
                event(
                    f"{tool_id}-result",
                    "tool_result",
                    parent_event_id=tool_id,
                    tool=result,
                    metadata=place,
                )
    if last is not None:
        final = shown(messages[last])
        event(
            "final-response",
            "final_response",
            parent_event_id=f"message-{last}",
            message=final,
            metadata={"message_index": last},
        )
    if failure is not None:
        event("error", "error", error={"message": failure})
    return events


def _trials(row: ResultRow) -> dict[str, Any]:
    """A case's trials and their aggregate, in v4's shapes where v4 has the strategy."""
    trials, aggregation = row["trials"], row["aggregation"]
    if trials is None or aggregation is None:
        return {}
    found: dict[str, Any] = {
        "trials": [
            {
                "attempt": trial["attempt"],
                "score": trial["score"],
                "verdict": "pass" if trial["verdict"] == "pass" else "fail",
                "cost_usd": trial["cost_usd"],
            }
            for trial in trials
        ]
    }
    strategy = aggregation["strategy"]
    v4_keys = {
        "pass_at_k": {"passed_attempts": "passed", "total_attempts": "trials"},
        "mean": {"mean": "mean", "min": "min", "max": "max"},
        "confidence_interval": {
            "mean": "mean",
            "ci95_lower": "score_ci_low",
            "ci95_upper": "score_ci_high",
            "stddev": "stddev",
        },
    }.get(strategy)
    shown: Mapping[str, Any] = aggregation
    found["aggregation"] = (
        {"strategy": strategy, **{key: shown.get(ours) for key, ours in v4_keys.items()}}
        if v4_keys
        else dict(aggregation)
    )
    return found


def v4_row(row: ResultRow) -> dict[str, Any]:
    """A case's row as an AgentV v4.42.4 result row (``index.jsonl``)."""
    graded = row["status"] == "graded"
    scores = [_grader(entry) for entry in row["evaluator_results"]]
    assertions = [check for grader in scores for check in grader["assertions"]]
    failure = None if graded else row["error"] or "not graded"
    line: dict[str, Any] = {"timestamp": row["timestamp"], "test_id": row["eval_id"]}
    if row["dataset"]:
        line["suite"] = row["dataset"]
    if row["conversation_id"] is not None:
        line["conversation_id"] = row["conversation_id"]
    line["score"] = row["score"] if graded and row["score"] is not None else 0
    line["target"] = row["target"] or "unknown"
    if failure is not None:
        assertions.append({"text": f"Error: {failure}", "passed": False})
    line["assertions"] = assertions
    line["scores"] = scores
    summary = row["trace_summary"] or {}
    for key in ("token_usage", "cost_usd"):
        if summary.get(key) is not None:
            line[key] = summary[key]
    if row.get("duration_ms") is not None:
        line["duration_ms"] = row.get("duration_ms")
    if row.get("question"):
        line["input"] = _input(row)
    line["output"] = row["candidate_answer"]
    line["trace"] = _trace(row, failure)
    line.update(_trials(row))
    if row.get("metadata"):  # the case's, as v4's orchestrator surfaces it on the result
        line["metadata"] = row.get("metadata")
    if failure is None:
        line["execution_status"] = "ok" if row["verdict"] == "pass" else "quality_failure"
        return line
    # v4's stage: the evaluator when the target answered (or a judge was missing), else the agent.
    if row["status"] == "skipped":
        stage, code = "evaluator", JUDGE_NOT_CONFIGURED
    elif _answered(row):
        stage, code = "evaluator", "evaluator_error"
    else:
        stage, code = "agent", "provider_error"
    line["error"] = failure
    line["execution_status"] = "execution_error"
    line["failure_stage"] = stage
    line["failure_reason_code"] = code
    line["execution_error"] = {"message": failure, "stage": stage}
    return line


def agent_messages(row: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The messages of a v4 row's answer: its ``trace.messages`` but the question's (user and
    system ones); a v4 release before ``output`` became the final text kept them there."""
    output = row.get("output")
    if isinstance(output, list):
        return [m for m in output if isinstance(m, dict)]
    trace = row.get("trace")
    messages = trace.get("messages") if isinstance(trace, Mapping) else None
    if not isinstance(messages, list):
        return []
    return [m for m in messages if isinstance(m, dict) and m.get("role") not in ("user", "system")]
