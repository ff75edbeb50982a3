"""The toy agent as a command-line program, the way the ``cli`` target runs it.

Usage: python agent/cli.py [--json] QUESTION OUTPUT_FILE
Writes {"output_messages": [...], "token_usage": {...}, "cost_usd": ..., "duration_ms": ...} to
OUTPUT_FILE: AgentV's CLI output, which tool_trajectory, latency, cost and token_usage grade.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.support_bot import answer

#: What this pretend model charges per token, in USD.
PRICE_PER_TOKEN = 0.000002


def main() -> int:
    args = sys.argv[1:]
    structured = args[0] == "--json"
    question, output_file = args[-2], args[-1]
    started = time.monotonic()
    result = answer(question, structured=structured)
    usage = {"input": len(question.split()), "output": len(str(result["text"]).split())}
    payload = {
        "output_messages": result["output_messages"],
        "token_usage": usage,
        "cost_usd": round((usage["input"] + usage["output"]) * PRICE_PER_TOKEN, 8),
        "duration_ms": round((time.monotonic() - started) * 1000, 3),
    }
    Path(output_file).write_text(json.dumps(payload), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
