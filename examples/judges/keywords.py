"""Code judge: the answer must mention every keyword in the evaluator's ``keywords`` config.

Reads AgentV's code-judge payload as JSON on stdin, prints {score, hits, misses, reasoning}.
"""

import json
import sys

payload = json.load(sys.stdin)
keywords = (payload.get("config") or {}).get("keywords", [])
answer = payload["candidate_answer"].lower()
hits = [k for k in keywords if k.lower() in answer]
misses = [k for k in keywords if k.lower() not in answer]
print(
    json.dumps(
        {
            "score": len(hits) / len(keywords) if keywords else 1.0,
            "hits": [f"mentions '{k}'" for k in hits],
            "misses": [f"does not mention '{k}'" for k in misses],
            "reasoning": f"{len(hits)} of {len(keywords)} required keywords present",
        }
    )
)
