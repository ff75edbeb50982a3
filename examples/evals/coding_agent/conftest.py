"""A scripted model for the coding-agent example: a small server on 127.0.0.1 that speaks the
Anthropic Messages API (streamed, as Claude Code asks for it) and plays the model's part of
fixing the typo: read greet.py, edit it, say what changed. Claude Code itself runs for real:
it reads and edits the file in the case's workspace. Its URL reaches the targets file through
AGENTV_EXAMPLE_MODEL_URL; without Claude Code installed, the cases here are skipped.
"""

import json
import os
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

#: The model's turns: each request gets the one after as many as it has already answered.
TURNS = [
    {"type": "tool_use", "name": "Read", "input": {"file_path": "greet.py"}},
    {
        "type": "tool_use",
        "name": "Edit",
        "input": {"file_path": "greet.py", "old_string": "Helo", "new_string": "Hello"},
    },
    {"type": "text", "text": 'Fixed the typo in greet.py: it now says "Hello".'},
]


def events(turn: int, model: str) -> bytes:
    """The streamed reply (server-sent events) of turn ``turn``."""
    block = dict(TURNS[min(turn, len(TURNS) - 1)], id=f"toolu_{turn}")
    empty = {**block, "input": {}} if block["type"] == "tool_use" else {**block, "text": ""}
    if block["type"] == "tool_use":
        delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
    else:
        delta = {"type": "text_delta", "text": block["text"]}
    usage = {"input_tokens": 120, "output_tokens": 30}
    message = {"id": f"msg_{turn}", "type": "message", "role": "assistant", "model": model}
    stop = "tool_use" if block["type"] == "tool_use" else "end_turn"
    said = [
        ("message_start", {"message": {**message, "content": [], "usage": usage}}),
        ("content_block_start", {"index": 0, "content_block": empty}),
        ("content_block_delta", {"index": 0, "delta": delta}),
        ("content_block_stop", {"index": 0}),
        ("message_delta", {"delta": {"stop_reason": stop}, "usage": {"output_tokens": 30}}),
        ("message_stop", {}),
    ]
    return b"".join(
        f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n".encode()
        for name, data in said
    )


class ScriptedModel(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        turn = sum(1 for message in body.get("messages", []) if message["role"] == "assistant")
        reply = events(turn, body.get("model", "scripted"))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)


def pytest_configure(config):
    server = ThreadingHTTPServer(("127.0.0.1", 0), ScriptedModel)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    os.environ["AGENTV_EXAMPLE_MODEL_URL"] = f"http://127.0.0.1:{server.server_address[1]}"
    config.stash[MODEL] = server


def pytest_unconfigure(config):
    server = config.stash[MODEL]
    server.shutdown()
    server.server_close()


def pytest_collection_modifyitems(items):
    if shutil.which("claude") is None:
        skip = pytest.mark.skip(
            reason="Claude Code is not installed: npm install -g @anthropic-ai/claude-code"
        )
        for item in items:
            if "coding_agent" in item.nodeid:
                item.add_marker(skip)


MODEL = pytest.StashKey[ThreadingHTTPServer]()
