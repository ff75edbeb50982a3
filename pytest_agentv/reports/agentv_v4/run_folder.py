"""An AgentV v4 run folder's side files, beside ``--agentv-results .../index.jsonl`` written with
``--agentv-results-format agentv-v4``: each test's ``grading.json``, ``timing.json``, ``input.md``
and ``outputs/answer.md`` (and ``response.md``), its trace envelope ``outputs/trace.json`` and
its transcript ``outputs/transcript.jsonl`` (``agentv_v4_trace.py``, ``agentv_v4_transcript.py``),
named in its index row, and the run's ``timing.json`` and ``benchmark.json`` — what v4's
``run-artifacts.ts`` writes, so that ``agentv results validate``, its dashboard, its ``results``
and ``inspect`` commands and its replay targets read our runs as their own.

Written only for a results file named ``index.jsonl`` (v4's layout): any other name may sit in a
folder of the user's, which side files must not fill.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ...results.numbers import json_text
from .trace import has_transcript, trace_envelope
from .transcript import transcript

#: v4's pass mark for a grader's score in ``benchmark.json``'s pass rates (``DEFAULT_THRESHOLD``).
PASS_MARK = 0.8
INDEX_NAME = "index.jsonl"
_UNSAFE = re.compile(r'[/\\:*?"<>|\x00-\x1f\x7f]')
#: The longest folder name written, in UTF-8 bytes (file systems take 255).
_MAX_SEGMENT = 120


def _segment(value: str | None, fallback: str) -> str:
    """A suite, test or target name as one folder name of the run folder: never a separator,
    never ``.`` or ``..`` (which would name the folder above), never too long."""
    text = _UNSAFE.sub("_", (value or "").strip())
    if not text.strip("."):
        text = text.replace(".", "_")
    text = text.encode("utf-8")[:_MAX_SEGMENT].decode("utf-8", "ignore")
    return text or fallback


def _stats(values: Sequence[float]) -> dict[str, float]:
    """Mean and population deviation rounded to three places, as v4 gives them."""
    if not values:
        return {"mean": 0, "stddev": 0}
    mean = sum(values) / len(values)
    deviation = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    return {"mean": round(mean, 3), "stddev": round(deviation, 3)}


def _tool_calls(line: Mapping[str, Any]) -> dict[str, int]:
    trace = line.get("trace")
    calls = trace.get("tool_calls") if isinstance(trace, Mapping) else None
    return dict(calls) if isinstance(calls, Mapping) else {}


def _tokens(line: Mapping[str, Any]) -> tuple[int, int, int] | None:
    usage = line.get("token_usage")
    if not isinstance(usage, Mapping):
        return None
    return (
        int(usage.get("input") or 0),
        int(usage.get("output") or 0),
        int(usage.get("reasoning") or 0),
    )


def _failed(line: Mapping[str, Any]) -> bool:
    return line.get("execution_status") == "execution_error"


def grading(line: Mapping[str, Any]) -> dict[str, Any]:
    """A test's ``grading.json``: its checks, their tally, its tool calls and its graders."""
    assertions = [
        {
            "text": check.get("text", ""),
            "passed": bool(check.get("passed")),
            "evidence": check.get("evidence", ""),
        }
        for check in line.get("assertions", [])
    ]
    passed = sum(1 for check in assertions if check["passed"])
    calls = _tool_calls(line)
    found: dict[str, Any] = {
        "assertions": assertions,
        "summary": {
            "passed": passed,
            "failed": len(assertions) - passed,
            "total": len(assertions),
            "pass_rate": round(passed / len(assertions), 3) if assertions else 0,
        },
        "execution_metrics": {
            "tool_calls": calls,
            "total_tool_calls": sum(calls.values()),
            "errors_encountered": 1 if line.get("error") else 0,
        },
    }
    scores = line.get("scores") or []
    if scores:
        found["graders"] = [
            {
                "name": score["name"],
                "type": score["type"],
                "score": score["score"],
                "reasoning": "",
                "weight": score.get("weight"),
                "verdict": score.get("verdict"),
                "assertions": score.get("assertions", []),
                **({"details": score["details"]} if "details" in score else {}),
            }
            for score in scores
        ]
    if line.get("conversation_id"):
        messages = (line.get("trace") or {}).get("messages", [])
        turns = sum(1 for message in messages if message.get("role") == "assistant")
        found["conversation"] = {"turns": turns, "conversation_id": line["conversation_id"]}
    return found


def timing(lines: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """A ``timing.json``: the tokens and time of one test, or of the whole run."""
    spent = [0, 0, 0]
    duration = 0.0
    for line in lines:
        tokens = _tokens(line)
        if tokens is not None:
            spent = [a + b for a, b in zip(spent, tokens, strict=True)]
        if line.get("duration_ms") is not None:
            duration += float(line["duration_ms"])
    return {
        "total_tokens": spent[0] + spent[1],
        "duration_ms": duration,
        "total_duration_seconds": round(duration / 1000, 3),
        "token_usage": {"input": spent[0], "output": spent[1], "reasoning": spent[2]},
    }


def _pass_rate(line: Mapping[str, Any]) -> float:
    scores = line.get("scores") or []
    if scores:
        return sum(1 for s in scores if s["score"] >= PASS_MARK) / len(scores)
    return 1.0 if (line.get("score") or 0) >= PASS_MARK else 0.0


def benchmark(lines: Sequence[Mapping[str, Any]], eval_file: str) -> dict[str, Any]:
    """The run's ``benchmark.json``: per target, the pass rate of the tests that ran (execution
    errors apart), time, tokens, tool calls and cost; per grader, its mean score."""
    targets = sorted({str(line.get("target") or "unknown") for line in lines})
    summary: dict[str, Any] = {}
    for target in targets:
        mine = [line for line in lines if (line.get("target") or "unknown") == target]
        entry: dict[str, Any] = {
            "pass_rate": _stats([_pass_rate(line) for line in mine if not _failed(line)]),
            "time_seconds": _stats(
                [line["duration_ms"] / 1000 for line in mine if line.get("duration_ms") is not None]
            ),
            "tokens": _stats([t[0] + t[1] for line in mine if (t := _tokens(line)) is not None]),
        }
        calls = [sum(_tool_calls(line).values()) for line in mine]
        if any(calls):
            entry["tool_calls"] = _stats(calls)
        costs = [line["cost_usd"] for line in mine if line.get("cost_usd") is not None]
        if costs:
            entry["cost_usd"] = _stats(costs)
        summary[target] = entry
    graders: dict[str, list[float]] = {}
    for line in lines:
        if not _failed(line):
            for score in line.get("scores") or []:
                graders.setdefault(f"{score['name']}:{score['type']}", []).append(score["score"])
    notes = []
    errors = sum(1 for line in lines if _failed(line))
    if errors:
        notes.append(
            f"{errors} test(s) had execution errors and are excluded from quality pass_rate"
        )
    if not lines:
        notes.append("No results to summarize")
    found: dict[str, Any] = {
        "metadata": {
            "eval_file": eval_file,
            "timestamp": lines[0]["timestamp"] if lines else "",
            "targets": targets,
            "tests_run": sorted({str(line.get("test_id")) for line in lines}),
        },
        "run_summary": summary,
    }
    if graders:
        found["per_grader_summary"] = {key: _stats(values) for key, values in graders.items()}
    found["notes"] = notes
    return found


def _input_text(line: Mapping[str, Any]) -> str | None:
    given = line.get("input")
    if isinstance(given, str):
        return given or None
    if isinstance(given, list) and given:
        return "\n\n".join(f"@[{m.get('role')}]:\n{m.get('content') or ''}" for m in given)
    return None


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _json(value: Any) -> str:
    return json_text(value, indent=2) + "\n"


class RunFolder:
    """The side files of one v4 run folder, written as its rows are."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.lines: list[dict[str, Any]] = []
        self.files: set[str] = set()
        #: Each artifact folder, and the test (suite, id, target) it is for.
        self._taken: dict[str, tuple[Any, ...]] = {}

    def _subdir(self, line: Mapping[str, Any]) -> str:
        """v4's ``<suite>/<test_id>``; a matrix's other targets get ``<test_id>--<target>``
        (v4 would write them over one another), and a name another test has (``a/b`` and
        ``a_b``) a number after it: every test's folder is its own."""
        test = _segment(line.get("test_id"), "unknown")
        target = str(line.get("target") or "unknown")
        suite = line.get("suite")
        base = f"{_segment(suite, 'default')}/{test}" if suite else test
        whose = (suite, line.get("test_id"), target)
        named = f"{base}--{_segment(target, 'unknown')}"
        names = itertools.chain([base, named], (f"{named}-{n}" for n in itertools.count(2)))
        return next(name for name in names if self._taken.setdefault(name, whose) == whose)

    def add(self, line: dict[str, Any], eval_file: str | None) -> dict[str, Any]:
        """Write a test's side files; its index row gains their paths, in v4's order
        (``OSError`` if they cannot be written)."""
        subdir = self._subdir(line)
        folder = self.folder / subdir
        paths: dict[str, Any] = {
            "artifact_dir": subdir,
            "grading_path": f"{subdir}/grading.json",
            "timing_path": f"{subdir}/timing.json",
        }
        _write(folder / "grading.json", _json(grading(line)))
        _write(folder / "timing.json", _json(timing([line])))
        question = _input_text(line)
        if question is not None:
            _write(folder / "input.md", question)
        answer = line.get("output")
        if isinstance(answer, str) and answer:
            for name in ("answer", "response"):
                _write(folder / "outputs" / f"{name}.md", answer)
            paths["output_path"] = paths["answer_path"] = f"{subdir}/outputs/answer.md"
        # v4 names a run after its folder, and an eval file by its path in the repository
        # (ours: from the rootdir).
        run_id = self.folder.absolute().name or str(line["timestamp"])
        now = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
        envelope = trace_envelope(line, run_id, eval_file, now.replace("+00:00", "Z"))
        _write(folder / "outputs" / "trace.json", _json(envelope))
        if has_transcript(line):
            entries = transcript(envelope)
            lines = "".join(json_text(entry, separators=(",", ":")) + "\n" for entry in entries)
            _write(folder / "outputs" / "transcript.jsonl", lines)
            paths["transcript_path"] = f"{subdir}/outputs/transcript.jsonl"
        if question is not None:
            paths["input_path"] = f"{subdir}/input.md"
        if "answer_path" in paths:
            paths["response_path"] = f"{subdir}/outputs/response.md"
        # v4's index row names the test's place in the run as its envelope does.
        for key in ("projection_identity", "export_metadata"):
            paths[key] = envelope[key]
        self.lines.append(line)
        if eval_file:
            self.files.add(eval_file)
        return paths

    def close(self) -> None:
        """The run's ``timing.json`` and ``benchmark.json`` (``OSError`` if they cannot be
        written)."""
        eval_file = next(iter(self.files)) if len(self.files) == 1 else ""
        _write(self.folder / "timing.json", _json(timing(self.lines)))
        _write(self.folder / "benchmark.json", _json(benchmark(self.lines, eval_file)))
