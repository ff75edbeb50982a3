"""The toy agent as a command-line program, the way the ``cli`` target runs it.

Usage: python agent/cli.py QUESTION OUTPUT_FILE
Writes {"output_messages": [...], "token_usage": {...}, "duration_ms": ...} to OUTPUT_FILE.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.support_bot import answer


def main() -> int:
    question, output_file = sys.argv[1], sys.argv[2]
    started = time.monotonic()
    result = answer(question)
    payload = {
        "output_messages": result["output_messages"],
        "token_usage": {"input": len(question.split()), "output": len(str(result["text"]).split())},
        "duration_ms": round((time.monotonic() - started) * 1000, 3),
    }
    Path(output_file).write_text(json.dumps(payload), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
