"""A loopback OpenAI-compatible server for tests: real HTTP, scripted replies and faults.

This module is a pytest plugin (``pytest_plugins`` in ``tests/conftest.py``): it provides the
``fake_server``, ``fake_llm`` and ``judge_transport`` fixtures; test modules import the server
and its actions from ``tests.fake_openai``.

``FakeOpenAI`` answers ``POST /v1/chat/completions``. Each request takes the next scripted
action if there is one, else asks ``responder(request) -> action``. An action is a string (the
reply content), a function call (``ToolCallReply``) or one of the fault helpers below. Every
request is recorded (body, headers and arrival time) so tests can assert on prompts, response
formats and attempt counts; the server counts requests in flight (``peak_in_flight``) so tests
can assert on overlap. The server is bounded: at most ``max_requests`` requests, and a hanging
or gated request is released when the server stops.

With a ``RateLimit`` (``server.rate_limit``) it enforces requests and tokens per window as the
vendors do, answering each request with the rate-limit headers of OpenAI's or Anthropic's
family (or none), and a request over the limit with 429 and ``retry-after``; ``refused``
counts those.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from pytest_agentv.llm.transports import TRANSPORT_CHOICES as TRANSPORTS
from tests.helpers import freeze_what_is_loaded


@dataclass(frozen=True)
class Status:
    """Reply with an HTTP error status (and optional headers and body)."""

    code: int
    headers: dict[str, str] = field(default_factory=dict)
    body: str = '{"error": {"message": "fake failure", "type": "server_error"}}'


@dataclass(frozen=True)
class Hang:
    """Accept the request and never answer (until the server stops)."""


@dataclass(frozen=True)
class Delay:
    seconds: float
    content: str


@dataclass(frozen=True)
class Reset:
    """Close the connection after sending part of the headers."""


@dataclass(frozen=True)
class Drop:
    """Close the connection without answering at all."""


@dataclass(frozen=True)
class NonJson:
    """A 200 whose body is not JSON (a proxy's HTML error page, say)."""


@dataclass(frozen=True)
class Truncated:
    """Send a 200 whose JSON body stops half way."""

    content: str = '{"score": 1}'


@dataclass(frozen=True)
class Gate:
    """Hold the request until ``parties`` requests have been in flight at once, then ``then``.

    Makes overlap a fact the server observes instead of a race against the clock: a client that
    never has ``parties`` requests open together waits ``timeout`` seconds per request, and the
    test's ``peak_in_flight`` assertion then fails.
    """

    parties: int
    then: Action
    timeout: float = 20.0


@dataclass(frozen=True)
class WithUsage:
    """Reply ``content`` reporting ``usage`` as given (a server that miscounts: negative token
    counts, text, none at all with ``None``)."""

    content: str
    usage: Any


@dataclass(frozen=True)
class ToolCallReply:
    """Answer, after ``delay`` seconds, with an assistant message that calls the function
    ``name`` with ``arguments`` (``finish_reason: "tool_calls"``, no text content): what a model
    sends when a client asks for structured output through an output tool."""

    name: str
    arguments: dict[str, Any]
    delay: float = 0.0


@dataclass(frozen=True)
class CutOff:
    """Reply ``content`` as a model stopped at its length limit (``finish_reason: "length"``)."""

    content: str


@dataclass(frozen=True)
class Linger:
    """Accept the request and answer nothing until the client closes its connection (at most
    ``most`` seconds); the server counts the clients it saw go (``gone``)."""

    most: float = 30.0


Action = (
    str
    | CutOff
    | Linger
    | Status
    | Hang
    | Delay
    | Reset
    | Drop
    | NonJson
    | Truncated
    | Gate
    | WithUsage
    | ToolCallReply
)


@dataclass
class RateLimit:
    """Requests (``rpm``) and tokens (``tpm``) per ``window`` seconds, enforced as OpenAI and
    Anthropic describe theirs: refilled continuously, and spent at most a sixtieth of the
    window's limit at a time ("60 RPM may be enforced as 1 request per second"), full when the
    first request arrives. Each request is charged ``tokens`` (what the fake reports as its
    usage). ``family`` names the headers told: ``openai`` (``x-ratelimit-*``, resets as Go
    durations, and ``retry-after-ms`` on a 429), ``anthropic`` (``anthropic-ratelimit-*``,
    resets as RFC 3339 times), or None (nothing but a 429's ``retry-after``)."""

    rpm: int
    tpm: int | None = None
    window: float = 60.0
    family: str | None = "openai"
    tokens: int = 120


class _Bucket:
    def __init__(self, limit: int, window: float) -> None:
        self.limit = limit
        self.rate = limit / window
        self.capacity = max(1.0, limit / 60)
        self.level = self.capacity
        self.stamp: float | None = None

    def refill(self, now: float) -> None:
        if self.stamp is not None:
            self.level = min(self.capacity, self.level + self.rate * (now - self.stamp))
        self.stamp = now

    def short(self, cost: float) -> float:
        """Seconds until ``cost`` is there (0: it is)."""
        return max(0.0, (min(cost, self.capacity) - self.level) / self.rate)

    def reset(self) -> float:
        return (self.capacity - self.level) / self.rate


def go_duration(seconds: float) -> str:
    """Seconds as OpenAI writes a reset: ``6m0s``, ``1.5s``, ``20ms``."""
    if seconds < 1:
        return f"{math.ceil(seconds * 1000)}ms"
    minutes, rest = divmod(seconds, 60)
    text = f"{round(rest, 3):g}s"
    return f"{int(minutes)}m{text}" if minutes else text


class _Limiter:
    def __init__(self, limit: RateLimit) -> None:
        self.limit = limit
        self.buckets = {"requests": (_Bucket(limit.rpm, limit.window), 1.0)}
        if limit.tpm is not None:
            self.buckets["tokens"] = (_Bucket(limit.tpm, limit.window), float(limit.tokens))

    def charge(self, now: float) -> tuple[bool, dict[str, str]]:
        """Whether a request arriving now may go, and the headers its reply carries."""
        for bucket, _ in self.buckets.values():
            bucket.refill(now)
        wait = max(bucket.short(cost) for bucket, cost in self.buckets.values())
        if not wait:
            for bucket, cost in self.buckets.values():
                bucket.level -= cost
        headers = self.headers()
        if wait:
            headers["retry-after"] = str(math.ceil(wait))
            if self.limit.family == "openai":
                headers["retry-after-ms"] = str(math.ceil(wait * 1000))
        return not wait, headers

    def headers(self) -> dict[str, str]:
        family = self.limit.family
        headers: dict[str, str] = {}
        for name, (bucket, _) in self.buckets.items():
            remaining = str(max(0, math.floor(bucket.level)))
            if family == "openai":
                headers[f"x-ratelimit-limit-{name}"] = str(bucket.limit)
                headers[f"x-ratelimit-remaining-{name}"] = remaining
                headers[f"x-ratelimit-reset-{name}"] = go_duration(bucket.reset())
            elif family == "anthropic":
                at = datetime.fromtimestamp(time.time() + bucket.reset(), timezone.utc)
                headers[f"anthropic-ratelimit-{name}-limit"] = str(bucket.limit)
                headers[f"anthropic-ratelimit-{name}-remaining"] = remaining
                headers[f"anthropic-ratelimit-{name}-reset"] = at.isoformat(
                    timespec="milliseconds"
                ).replace("+00:00", "Z")
        return headers


@dataclass
class Request:
    body: dict[str, Any]
    headers: dict[str, str]
    at: float
    path: str = ""

    @property
    def system(self) -> str:
        return next((m["content"] for m in self.body["messages"] if m["role"] == "system"), "")

    @property
    def user(self) -> str:
        return next((m["content"] for m in self.body["messages"] if m["role"] == "user"), "")


RATE_LIMITED = json.dumps(
    {
        "error": {
            "message": "Rate limit reached for requests",
            "type": "requests",
            "code": "rate_limit_exceeded",
        }
    }
)

_NONCE = re.compile(r'"nonce": "([0-9a-f]{16})"')


def nonce_of(request: Request) -> str:
    """The nonce a judge request asks its reply to echo."""
    found = _NONCE.search(request.system)
    assert found is not None, "not a judge request"
    return found.group(1)


def echo_nonce(content: str, request: Request) -> str:
    """What a judge that follows the contract sends: a lone JSON object gets the request's nonce
    (unless it has a "nonce" already); anything else is sent as it is."""
    if _NONCE.search(request.system) is None:
        return content
    try:
        value = json.loads(content)
    except ValueError:
        return content
    if not isinstance(value, dict) or "nonce" in value:
        return content
    return json.dumps({**value, "nonce": nonce_of(request)})


class _Server(ThreadingHTTPServer):
    # socketserver's default backlog of 5 drops connections when 32 clients connect at once.
    request_queue_size = 1024

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (an attempt timeout, a killed judge) closes its end while a
        # delayed reply is still to be written: expected here, not worth a traceback on stderr.
        pass


def completion(content: str, model: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
    }


def tool_call_completion(name: str, arguments: dict[str, Any], model: str) -> dict[str, Any]:
    body = completion("", model)
    function = {"name": name, "arguments": json.dumps(arguments)}
    call = {"id": "call_fake_1", "type": "function", "function": function}
    body["choices"][0]["message"] = {"role": "assistant", "content": None, "tool_calls": [call]}
    body["choices"][0]["finish_reason"] = "tool_calls"
    return body


class FakeOpenAI:
    def __init__(
        self, responder: Callable[[Request], Action] | None = None, max_requests: int = 20_000
    ) -> None:
        self.responder = responder or (lambda request: '{"score": 1, "hits": [], "misses": []}')
        self.script: deque[Action] = deque()
        self.requests: list[Request] = []
        self.max_requests = max_requests
        #: Behave like a judge that follows the contract and echoes the request's nonce.
        self.echo_nonce = True
        self.in_flight = 0
        self.peak_in_flight = 0
        #: Enforced when set (see ``RateLimit``); ``refused`` counts the requests it refused.
        self.rate_limit: RateLimit | None = None
        self.refused = 0
        self._limiter: _Limiter | None = None
        #: Requests whose client closed the connection while the server was still on them.
        self.gone = 0
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._stopping = threading.Event()
        self._server = _Server(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        with self._arrived:
            self._arrived.notify_all()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _charge(self, now: float) -> tuple[bool, dict[str, str]]:
        """Under the lock: whether the rate limit lets a request arriving now through."""
        if self.rate_limit is None:
            return True, {}
        if self._limiter is None or self._limiter.limit is not self.rate_limit:
            self._limiter = _Limiter(self.rate_limit)
        allowed, headers = self._limiter.charge(now)
        self.refused += not allowed
        return allowed, headers

    def push(self, *actions: Action) -> None:
        self.script.extend(actions)

    def _next(self, request: Request) -> Action:
        with self._lock:
            if self.script:
                return self.script.popleft()
        return self.responder(request)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True
            _limit_headers: dict[str, str] = {}  # noqa: RUF012 (replaced, never changed)

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._send(200, json.dumps({"data": [{"id": "fake"}]}))

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                request = Request(
                    json.loads(raw or b"{}"),
                    {k.lower(): v for k, v in self.headers.items()},
                    time.monotonic(),
                    self.path,
                )
                with fake._lock:
                    fake.requests.append(request)
                    count = len(fake.requests)
                    fake.in_flight += 1
                    fake.peak_in_flight = max(fake.peak_in_flight, fake.in_flight)
                    fake._arrived.notify_all()
                    allowed, self._limit_headers = fake._charge(request.at)
                self._counted = True
                try:
                    if count > fake.max_requests:
                        self._send(500, '{"error": {"message": "fake server request limit"}}')
                        return
                    if not allowed:
                        self._send(429, RATE_LIMITED, self._limit_headers)
                        return
                    self._act(fake._next(request), request)
                finally:
                    self._answered()

            def _answered(self) -> None:
                """The request stops counting as in flight before its reply is written: once
                the client has the reply it may send the next one, which must not find this
                one still counted (a slow thread would make the peak one too high)."""
                if self._counted:
                    self._counted = False
                    with fake._lock:
                        fake.in_flight -= 1

            def _act(self, action: Action, request: Request) -> None:
                model = str(request.body.get("model", "fake"))
                if isinstance(action, Gate):
                    with fake._arrived:
                        fake._arrived.wait_for(
                            lambda: (
                                fake.peak_in_flight >= action.parties or fake._stopping.is_set()
                            ),
                            timeout=action.timeout,
                        )
                    self._act(action.then, request)
                elif isinstance(action, str):
                    reply = echo_nonce(action, request) if fake.echo_nonce else action
                    self._send(200, json.dumps(completion(reply, model)))
                elif isinstance(action, WithUsage):
                    reply = (
                        echo_nonce(action.content, request) if fake.echo_nonce else action.content
                    )
                    body = completion(reply, model)
                    if action.usage is None:
                        del body["usage"]
                    else:
                        body["usage"] = action.usage
                    self._send(200, json.dumps(body))
                elif isinstance(action, Status):
                    self._send(action.code, action.body, action.headers)
                elif isinstance(action, Delay):
                    fake._stopping.wait(action.seconds)
                    reply = (
                        echo_nonce(action.content, request) if fake.echo_nonce else action.content
                    )
                    self._send(200, json.dumps(completion(reply, model)))
                elif isinstance(action, ToolCallReply):
                    fake._stopping.wait(action.delay)
                    body = tool_call_completion(action.name, action.arguments, model)
                    self._send(200, json.dumps(body))
                elif isinstance(action, CutOff):
                    reply = (
                        echo_nonce(action.content, request) if fake.echo_nonce else action.content
                    )
                    body = completion(reply, model)
                    body["choices"][0]["finish_reason"] = "length"
                    self._send(200, json.dumps(body))
                elif isinstance(action, Linger):
                    self._linger(action.most)
                elif isinstance(action, Hang):
                    fake._stopping.wait(60)
                    self.close_connection = True
                elif isinstance(action, Reset):
                    self._answered()
                    self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: appl")
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                elif isinstance(action, Drop):
                    self._answered()
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                elif isinstance(action, NonJson):
                    self._send(200, "<html><body>502 Bad Gateway</body></html>")
                elif isinstance(action, Truncated):
                    body = json.dumps(completion(action.content, model))
                    self._answered()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body[: len(body) // 2].encode())
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True

            def _linger(self, most: float) -> None:
                """Wait for the client to close its end (a read that returns nothing)."""
                self.connection.settimeout(0.05)
                end = time.monotonic() + most
                while time.monotonic() < end and not fake._stopping.is_set():
                    try:
                        if self.connection.recv(1) == b"":
                            with fake._lock:
                                fake.gone += 1
                            break
                    except TimeoutError:
                        continue
                    except OSError:
                        break
                self.close_connection = True

            def _send(self, code: int, body: str, headers: dict[str, str] | None = None) -> None:
                self._answered()
                data = body.encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in {**self._limit_headers, **(headers or {})}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

        return Handler


def freeform(
    score: float,
    hits: list[str] | None = None,
    misses: list[str] | None = None,
    reasoning: str = "graded by the fake judge",
) -> str:
    return json.dumps(
        {"score": score, "hits": hits or [], "misses": misses or [], "reasoning": reasoning}
    )


def checklist(**satisfied: bool) -> str:
    return json.dumps(
        {
            "checks": [
                {"id": key.replace("_", "-"), "satisfied": value, "reasoning": f"{key} checked"}
                for key, value in satisfied.items()
            ],
            "overall_reasoning": "checked every item",
        }
    )


def ranges(**scores: int) -> str:
    return json.dumps(
        {
            "checks": [
                {"id": key.replace("_", "-"), "score": value, "reasoning": f"{key} scored"}
                for key, value in scores.items()
            ],
            "overall_reasoning": "scored every criterion",
        }
    )


# -- fixtures ------------------------------------------------------------------------------


def _warm_up(transport: str) -> None:
    """Make one call, and one that fails, through ``transport`` on the plugin's loop.

    In-process pytester runs drop modules first imported inside them; without this every run
    would import the transport's HTTP stack again (litellm's: about half a second each).
    """
    from pytest_agentv.llm.client import LlmClient
    from pytest_agentv.llm.retry import RetryPolicy
    from pytest_agentv.llm.transports import ModelSpec
    from pytest_agentv.scheduler import shared_loop

    server = FakeOpenAI().start()
    server.push(Status(500), Reset())  # error paths import modules of their own
    try:
        client = LlmClient(
            ModelSpec("openai/gpt-4o-mini", api_base=server.api_base),
            RetryPolicy(backoff=0.001),
            transport=transport,
        )
        call = client.complete([{"role": "user", "content": "warm up"}], accept=str)
        asyncio.run_coroutine_threadsafe(call, shared_loop()).result(60)
    finally:
        server.stop()
    freeze_what_is_loaded()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """The modules that test how models are called (marked ``transports``) run each model test
    once per transport: ``auto`` (the lean one, for the fake server's ``openai/`` models) and
    ``litellm`` (forced). Every other test that needs a model uses the default, ``auto``."""
    if "_transport" in metafunc.fixturenames:
        every = metafunc.definition.get_closest_marker("transports") is not None
        transports = TRANSPORTS if every else ["auto"]
        metafunc.parametrize("_transport", transports, indirect=True, scope="session")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests through litellm (or marked ``litellm``) come first, so that under pytest-xdist
    one worker runs them all (its first batch holds them) and litellm's import, seconds long, is
    paid once rather than in every worker. (``--dist loadgroup`` would say this with a mark, but
    pytest-xdist 3.8 renames items through an attribute that pytest 9.2 no longer reads.)"""

    def through_litellm(item: pytest.Item) -> bool:
        if item.get_closest_marker("litellm") is not None:
            return True
        callspec = getattr(item, "callspec", None)
        return callspec is not None and callspec.params.get("_transport") == "litellm"

    items.sort(key=lambda item: not through_litellm(item))


@pytest.fixture(scope="session")
def _transport(request: pytest.FixtureRequest) -> str:
    """A transport, warmed up once per process. Session-scoped, so it is set up before any
    pytester snapshot: litellm's import installs a metadata finder that must not be undone.
    Only tests that call a model need it (``fake_llm`` does): importing litellm takes seconds.
    """
    transport: str = request.param
    _warm_up(transport)
    return transport


@pytest.fixture
def judge_transport(_transport: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The transport of a test that talks to the fake server as a model. Runs see it as
    ``AGENTV_JUDGE_TRANSPORT``; tests that build an ``LlmClient`` pass it on."""
    monkeypatch.setenv("AGENTV_JUDGE_TRANSPORT", _transport)
    return _transport


@pytest.fixture
def fake_server() -> Iterator[FakeOpenAI]:
    """A loopback server, stopped (and its hanging requests released) after; no litellm."""
    server = FakeOpenAI().start()
    yield server
    server.stop()


@pytest.fixture
def fake_llm(judge_transport: str, fake_server: FakeOpenAI) -> FakeOpenAI:
    """The loopback server as the model of calls through each transport (warmed up before)."""
    return fake_server
