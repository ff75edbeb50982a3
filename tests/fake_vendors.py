"""A loopback fake of the model APIs coding agents call, scripting the model's turns.

``FakeVendor`` answers Anthropic's Messages API (``POST /v1/messages``, SSE when asked to
stream: Claude Code, Pi and the Copilot CLI use it), OpenAI's Responses API (``POST
/v1/responses``, SSE: Codex) and the Gemini API (``POST /v1beta/models/M:streamGenerateContent``
and ``:generateContent``: the Gemini CLI). A request that offers tools is a turn of the agent's
loop and takes the next scripted ``Turn`` (text the model says, tools it calls with their
arguments), or ``Hang`` (never answered until the server stops); requests without tools (a
title, a routing decision) get a short answer and are not turns. Every request is recorded, so
tests count turns and read what the agent sent back (its tool results).

Modelled on ``tests.fake_openai``: a threading HTTP server on 127.0.0.1, bounded, stopped by
its fixture (``vendors``); test modules import ``FakeVendor``, ``Say``, ``Use``, ``Hang``.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass(frozen=True)
class Say:
    """Text the model says."""

    text: str


@dataclass(frozen=True)
class Use:
    """A tool the model calls, with its arguments."""

    name: str
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Hang:
    """A turn the model never answers (until the server stops)."""


Part = Say | Use
Turn = tuple[Part, ...] | Hang


@dataclass
class Request:
    path: str
    body: dict[str, Any]
    at: float
    #: Whether it was a turn of the agent's loop (it offered tools).
    turn: bool

    def said(self) -> str:
        """Everything in the request as text (to look for a tool result in it)."""
        return json.dumps(self.body)


def _sse(name: str | None, data: dict[str, Any]) -> bytes:
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


class FakeVendor:
    def __init__(self, *turns: Turn, max_requests: int = 200) -> None:
        self.script: deque[Turn] = deque(turns)
        self.requests: list[Request] = []
        self.max_requests = max_requests
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        """The server's root (Anthropic's and Gemini's base URL)."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def turns(self) -> list[Request]:
        return [r for r in self.requests if r.turn]

    def start(self) -> FakeVendor:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def push(self, *turns: Turn) -> None:
        self.script.extend(turns)

    def _next(self, tools: bool) -> Turn:
        with self._lock:
            if tools and self.script:
                return self.script.popleft()
        return (Say("Done."),)

    def _id(self, prefix: str) -> str:
        return f"{prefix}_{next(self._ids)}"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # model lists, websocket upgrades: none here
                self._json(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                tools = bool(body.get("tools"))
                with fake._lock:
                    fake.requests.append(Request(self.path, body, time.monotonic(), tools))
                    over = len(fake.requests) > fake.max_requests
                if over:
                    self._json(500, {"error": {"message": "fake vendor request limit"}})
                elif "count_tokens" in self.path or ":countTokens" in self.path:
                    self._json(200, {"input_tokens": 10, "totalTokens": 10})
                else:
                    turn = fake._next(tools)
                    if isinstance(turn, Hang):
                        fake._stopping.wait(120)
                        self.close_connection = True
                    elif self.path.startswith("/v1/messages"):
                        self._anthropic(turn, body)
                    elif self.path.startswith("/v1/responses"):
                        self._responses(turn, body)
                    else:
                        self._gemini(turn)

            def _json(self, code: int, value: dict[str, Any]) -> None:
                data = json.dumps(value).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, chunks: list[bytes]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                for chunk in chunks:
                    self.wfile.write(chunk)
                    self.wfile.flush()
                self.close_connection = True

            def _anthropic(self, turn: tuple[Part, ...], body: dict[str, Any]) -> None:
                blocks = [
                    {"type": "text", "text": part.text}
                    if isinstance(part, Say)
                    else {
                        "type": "tool_use",
                        "id": fake._id("toolu"),
                        "name": part.name,
                        "input": part.args,
                    }
                    for part in turn
                ]
                stop = "tool_use" if any(isinstance(p, Use) for p in turn) else "end_turn"
                usage = {"input_tokens": 100, "output_tokens": 20}
                message = {
                    "id": fake._id("msg"),
                    "type": "message",
                    "role": "assistant",
                    "model": body.get("model", "fake"),
                    "content": blocks,
                    "stop_reason": stop,
                    "stop_sequence": None,
                    "usage": usage,
                }
                if not body.get("stream"):
                    self._json(200, message)
                    return
                start = {**message, "content": [], "stop_reason": None}
                chunks = [_sse("message_start", {"type": "message_start", "message": start})]
                for index, block in enumerate(blocks):
                    empty = (
                        {**block, "text": ""} if block["type"] == "text" else {**block, "input": {}}
                    )
                    delta = (
                        {"type": "text_delta", "text": block["text"]}
                        if block["type"] == "text"
                        else {
                            "type": "input_json_delta",
                            "partial_json": json.dumps(block["input"]),
                        }
                    )
                    chunks += [
                        _sse(
                            "content_block_start",
                            {"type": "content_block_start", "index": index, "content_block": empty},
                        ),
                        _sse(
                            "content_block_delta",
                            {"type": "content_block_delta", "index": index, "delta": delta},
                        ),
                        _sse("content_block_stop", {"type": "content_block_stop", "index": index}),
                    ]
                chunks += [
                    _sse(
                        "message_delta",
                        {
                            "type": "message_delta",
                            "delta": {"stop_reason": stop, "stop_sequence": None},
                            "usage": {"output_tokens": 20},
                        },
                    ),
                    _sse("message_stop", {"type": "message_stop"}),
                ]
                self._stream(chunks)

            def _responses(self, turn: tuple[Part, ...], body: dict[str, Any]) -> None:
                items: list[dict[str, Any]] = []
                for part in turn:
                    if isinstance(part, Say):
                        content = [{"type": "output_text", "text": part.text, "annotations": []}]
                        items.append(
                            {
                                "type": "message",
                                "id": fake._id("msg"),
                                "role": "assistant",
                                "status": "completed",
                                "content": content,
                            }
                        )
                    else:
                        items.append(
                            {
                                "type": "function_call",
                                "id": fake._id("fc"),
                                "call_id": fake._id("call"),
                                "name": part.name,
                                "arguments": json.dumps(part.args),
                                "status": "completed",
                            }
                        )
                response = {
                    "id": fake._id("resp"),
                    "object": "response",
                    "created_at": 0,
                    "model": body.get("model", "fake"),
                    "status": "in_progress",
                    "output": [],
                }
                chunks = [
                    _sse("response.created", {"type": "response.created", "response": response})
                ]
                for index, item in enumerate(items):
                    chunks += [
                        _sse(
                            "response.output_item.added",
                            {
                                "type": "response.output_item.added",
                                "output_index": index,
                                "item": item,
                            },
                        ),
                        _sse(
                            "response.output_item.done",
                            {
                                "type": "response.output_item.done",
                                "output_index": index,
                                "item": item,
                            },
                        ),
                    ]
                usage = {
                    "input_tokens": 100,
                    "input_tokens_details": {"cached_tokens": 0},
                    "output_tokens": 20,
                    "output_tokens_details": {"reasoning_tokens": 0},
                    "total_tokens": 120,
                }
                done = {**response, "status": "completed", "output": items, "usage": usage}
                chunks.append(
                    _sse("response.completed", {"type": "response.completed", "response": done})
                )
                self._stream(chunks)

            def _gemini(self, turn: tuple[Part, ...]) -> None:
                parts = [
                    {"text": part.text}
                    if isinstance(part, Say)
                    else {"functionCall": {"name": part.name, "args": part.args}}
                    for part in turn
                ]
                chunk = {
                    "candidates": [
                        {
                            "content": {"role": "model", "parts": parts},
                            "finishReason": "STOP",
                            "index": 0,
                        }
                    ],
                    "usageMetadata": {
                        "promptTokenCount": 100,
                        "candidatesTokenCount": 20,
                        "totalTokenCount": 120,
                    },
                    "modelVersion": "gemini-fake",
                }
                if "streamGenerateContent" in self.path:
                    self._stream([f"data: {json.dumps(chunk)}\r\n\r\n".encode()])
                else:
                    self._json(200, chunk)

        return Handler


@pytest.fixture
def vendors() -> Iterator[Callable[..., FakeVendor]]:
    """Start fake model APIs (``vendors(*turns)``, one per agent), stopped (and their hanging
    turns released) after the test."""
    started: list[FakeVendor] = []

    def start(*turns: Turn) -> FakeVendor:
        server = FakeVendor(*turns).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
