"""Code grader (AgentV v4): the agent's changes to the workspace (``file_changes``, a unified
diff) fix the greeting in greet.py and touch no other file."""

import json
import sys

payload = json.load(sys.stdin)
diff = payload.get("file_changes") or ""
changed = [line[6:] for line in diff.splitlines() if line.startswith("+++ b/")]
checks = {
    "greet.py no longer says Helo": '-    return f"Helo, {name}!"' in diff,
    "greet.py says Hello": '+    return f"Hello, {name}!"' in diff,
    "no other file changed": changed == ["greet.py"],
}
print(json.dumps({"assertions": [{"text": t, "passed": ok} for t, ok in checks.items()]}))
