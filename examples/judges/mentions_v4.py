"""Code grader written for AgentV v4: reads ``output`` and ``config`` on stdin and replies with
v4's ``assertions`` (text, passed, evidence). pytest-agentv sends both generations' keys.
"""

import json
import sys

payload = json.load(sys.stdin)
words = (payload.get("config") or {}).get("words", [])
output = payload["output"]
assertions = [
    {
        "text": f"mentions '{word}'",
        "passed": word.lower() in output.lower(),
        "evidence": output[:60],
    }
    for word in words
]
print(json.dumps({"assertions": assertions}))
