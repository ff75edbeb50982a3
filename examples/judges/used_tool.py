"""Code judge: the agent must have called the ``tool`` named in config (from output_messages)."""

import json
import sys

payload = json.load(sys.stdin)
wanted = (payload.get("config") or {}).get("tool")
calls = [
    call.get("tool")
    for message in payload.get("output_messages") or []
    for call in message.get("tool_calls") or []
]
ok = wanted in calls
print(
    json.dumps(
        {
            "score": 1.0 if ok else 0.0,
            "hits": [f"called {wanted}"] if ok else [],
            "misses": [] if ok else [f"never called {wanted} (calls: {calls or 'none'})"],
        }
    )
)
