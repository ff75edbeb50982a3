"""Composite aggregator: a release gate. The answer's score counts only if the agent looked the
policy up; otherwise the composite fails whatever the answer says.

Reads {"results": {member: {score, verdict, hits, misses, ...}}} on stdin (AgentV's format),
prints {score, verdict?, hits, misses, reasoning}.
"""

import json
import sys

results = json.load(sys.stdin)["results"]
looked_up, answer = results["looked-up"], results["answer"]
if looked_up["score"] < 1:
    verdict = {"score": 0, "verdict": "fail", "misses": ["the policy was not looked up"]}
    verdict["misses"] += looked_up["misses"]
else:
    verdict = {"score": answer["score"], "hits": ["the policy was looked up", *answer["hits"]]}
    verdict["misses"] = answer["misses"]
verdict["reasoning"] = f"gate {'open' if looked_up['score'] >= 1 else 'closed'}"
print(json.dumps(verdict))
