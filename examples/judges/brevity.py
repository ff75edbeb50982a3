"""Code judge: shorter answers score higher; ``max_words`` in config is the limit for 1.0."""

import json
import sys

payload = json.load(sys.stdin)
limit = (payload.get("config") or {}).get("max_words", 40)
words = len(payload["candidate_answer"].split())
score = 1.0 if words <= limit else max(0.0, 1 - (words - limit) / limit)
print(json.dumps({"score": score, "reasoning": f"{words} words (limit {limit})"}))
