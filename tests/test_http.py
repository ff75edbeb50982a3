"""The lean transport's HTTP through aiohttp: every way a server may frame its reply, connections
kept alive and dropped, deadlines, size limits, TLS, and the environment's proxy honored."""

from __future__ import annotations

import asyncio
import gzip
import re
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import pytest

from pytest_agentv.llm import http

T = TypeVar("T")

OK_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
BODY = b'{"choices": []}'


def sized(body: bytes = BODY, head: bytes = OK_HEAD) -> bytes:
    return head + b"content-length: %d\r\n\r\n" % len(body) + body


@dataclass
class Script:
    """A loopback server that answers each request with the next reply, written in the given
    pieces (``None`` closes the connection after the reply), and notes what it received."""

    replies: list[list[bytes | None]]
    requests: list[bytes] = field(default_factory=list)
    connections: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while self.replies:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                self.requests.append(head + await reader.readexactly(length))
                for piece in self.replies.pop(0):
                    if piece is None:
                        writer.close()
                        return
                    writer.write(piece)
                    await writer.drain()
                    await asyncio.sleep(0)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()


def serve(
    script: Script, client: Callable[[http.Route], Awaitable[T]], path: str = "/v1/chat"
) -> T:
    async def main() -> T:
        server = await asyncio.start_server(script.handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        route = http.Route.to(f"http://127.0.0.1:{port}{path}", {"authorization": "Bearer k"})
        async with server:
            return await client(route)

    return asyncio.run(main())


def post_all(
    count: int, timeout: float = 5.0
) -> Callable[[http.Route], Awaitable[list[http.Response]]]:
    async def client(route: http.Route) -> list[http.Response]:
        return [await http.post(route, b'{"n": %d}' % n, timeout) for n in range(count)]

    return client


def test_a_request_carries_its_head_length_and_body() -> None:
    script = Script([[sized()]])
    [response] = serve(script, post_all(1), path="/v1/chat?api-version=1")
    assert (response.status, response.body) == (200, BODY)
    assert response.headers["content-type"] == "application/json"
    request = script.requests[0]
    assert request.startswith(b"POST /v1/chat?api-version=1 HTTP/1.1\r\n")
    assert b"\r\nauthorization: Bearer k\r\n" in request
    assert b"\r\ncontent-length: 8\r\n" in request.lower()
    assert request.endswith(b'\r\n\r\n{"n": 0}')


def test_a_connection_is_kept_alive_between_requests() -> None:
    script = Script([[sized()], [sized()], [sized()]])
    responses = serve(script, post_all(3))
    assert [r.status for r in responses] == [200, 200, 200]
    assert script.connections == 1


def test_a_reply_that_says_close_is_not_reused() -> None:
    head = OK_HEAD + b"connection: close\r\n"
    script = Script([[sized(head=head), None], [sized()]])
    serve(script, post_all(2))
    assert script.connections == 2


def test_a_connection_the_server_closed_while_idle_is_not_used_again() -> None:
    script = Script([[sized(), None], [sized()]])

    async def client(route: http.Route) -> list[http.Response]:
        first = await http.post(route, b"{}", 5)
        await asyncio.sleep(0.05)  # the close arrives while the connection is idle
        return [first, await http.post(route, b"{}", 5)]

    assert [r.status for r in serve(script, client)] == [200, 200]
    assert script.connections == 2


def test_a_reply_arriving_byte_by_byte_is_read_whole() -> None:
    reply = sized(b'{"text": "' + b"x" * 300 + b'"}')
    script = Script([[reply[i : i + 1] for i in range(len(reply))], [sized()]])
    first, second = serve(script, post_all(2))
    assert first.body == reply.split(b"\r\n\r\n", 1)[1] and second.body == BODY
    assert script.connections == 1


def test_chunked_replies_with_extensions_and_trailers() -> None:
    head = OK_HEAD + b"transfer-encoding: chunked\r\n\r\n"
    chunks = b"5;name=x\r\n" + BODY[:5] + b"\r\n" + b"%x\r\n" % len(BODY[5:]) + BODY[5:] + b"\r\n"
    script = Script(
        [
            [head, chunks, b"0\r\n\r\n"],
            [head + chunks[:7], chunks[7:] + b"0\r\nx-trailer: 1\r\n\r\n"],
            [sized()],
        ]
    )
    responses = serve(script, post_all(3))
    assert [r.body for r in responses] == [BODY, BODY, BODY]
    assert script.connections == 1


def test_a_reply_framed_by_the_close_and_a_gzip_body() -> None:
    unframed = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n" + BODY
    zipped = gzip.compress(BODY)
    script = Script([[unframed, None], [sized(zipped, OK_HEAD + b"content-encoding: gzip\r\n")]])
    responses = serve(script, post_all(2))
    assert [r.body for r in responses] == [BODY, BODY]


def test_interim_replies_are_skipped() -> None:
    script = Script([[b"HTTP/1.1 100 Continue\r\n\r\n", sized(head=OK_HEAD)]])
    [response] = serve(script, post_all(1))
    assert (response.status, response.body) == (200, BODY)


def test_an_error_status_comes_back_with_its_headers() -> None:
    head = b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 2\r\n"
    [response] = serve(Script([[sized(b"{}", head)]]), post_all(1))
    assert (response.status, response.headers.get("retry-after")) == (429, "2")


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        ([b"HTTP/1.1 200 OK\r\ncontent-length: 50\r\n\r\n{", None], "in the middle of its reply"),
        ([None], "closed the connection without replying"),
        ([b"SSH-2.0-OpenSSH\r\n\r\n"], "not readable HTTP: Bad status line.*SSH-2.0-OpenSSH"),
        (
            [b"HTTP/1.1 200 OK\r\ncontent-length: many\r\n\r\n"],
            "not readable HTTP: Invalid character in Content-Length.*many",
        ),
        (
            [b"HTTP/1.1 200 OK\r\ncontent-encoding: br\r\n\r\n{}", None],
            r"not readable HTTP: Can not decode content-encoding: brotli \(br\)",
        ),
    ],
)
def test_a_broken_reply_is_a_connection_error_saying_what_broke(
    reply: list[bytes | None], message: str
) -> None:
    with pytest.raises(ConnectionError, match=message):
        serve(Script([reply]), post_all(1))


def test_no_reply_within_the_deadline_is_a_timeout_and_drops_the_connection() -> None:
    script = Script([[b"HTTP/1.1 200 OK\r\n"], [sized()]])

    async def client(route: http.Route) -> http.Response:
        with pytest.raises(TimeoutError, match=r"no reply within 0\.2 s"):
            await http.post(route, b"{}", 0.2)
        return await http.post(route, b"{}", 5)

    assert serve(script, client).status == 200
    assert script.connections == 2


def test_a_cancelled_request_drops_its_connection() -> None:
    script = Script([[b"HTTP/1.1 200 OK\r\n"], [sized()]])

    async def client(route: http.Route) -> http.Response:
        task = asyncio.ensure_future(http.post(route, b"{}", 5))
        while not script.requests:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return await http.post(route, b"{}", 5)

    assert serve(script, client).status == 200
    assert script.connections == 2


def test_refused_connections_name_the_address() -> None:
    async def client() -> None:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        await http.post(http.Route.to(f"http://127.0.0.1:{port}/v1", {}), b"{}", 5)

    with pytest.raises(ConnectionError, match=r"cannot connect to 127\.0\.0\.1:\d+"):
        asyncio.run(client())


@pytest.mark.parametrize("proxy", ["http://me:pw@127.0.0.1:{port}", "me:pw@127.0.0.1:{port}"])
def test_a_proxy_in_the_environment_is_honored(monkeypatch: pytest.MonkeyPatch, proxy: str) -> None:
    """The request goes to the proxy, in absolute form, with its own headers and the proxy's
    credentials from its URL; a proxy named without a scheme is an http:// one, as curl reads
    it."""
    script = Script([[sized()]])

    async def main() -> http.Response:
        server = await asyncio.start_server(script.handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        monkeypatch.setenv("HTTP_PROXY", proxy.format(port=port))
        route = http.Route.to("http://judge.invalid/v1/chat", {"authorization": "Bearer k"})
        async with server:
            return await http.post(route, b"{}", 5)

    assert asyncio.run(main()).body == BODY
    assert script.requests[0].startswith(b"POST http://judge.invalid/v1/chat HTTP/1.1\r\n")
    assert b"\r\nauthorization: Bearer k\r\n" in script.requests[0]
    assert b"\r\nProxy-Authorization: Basic bWU6cHc=\r\n" in script.requests[0]


def test_no_proxy_sends_its_hosts_direct(monkeypatch: pytest.MonkeyPatch) -> None:
    """A proxy that refuses every connection is never asked for a host NO_PROXY names."""
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1")
    script = Script([[sized()]])
    [response] = serve(script, post_all(1))
    assert response.body == BODY
    assert script.requests[0].startswith(b"POST /v1/chat HTTP/1.1\r\n")


def test_only_https_loads_the_ca_bundle(monkeypatch: pytest.MonkeyPatch) -> None:
    """aiohttp's import and the CA bundle are prepared before an attempt's clock starts; only
    an https route needs the bundle."""
    monkeypatch.setattr(http, "_tls", None)
    plain = http.Route.to("http://127.0.0.1:9/v1", {})
    secure = http.Route.to("https://api.openai.com/v1", {})
    http.prepare(plain)
    assert http._tls is None
    assert http.ready(plain) and not http.ready(secure)
    http.prepare(secure)
    context = http.tls_context()
    assert http.ready(secure)
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert context.cert_store_stats()["x509_ca"] > 0


TLS = Path(__file__).parent / "tls"


def serve_tls(script: Script, client: Callable[[http.Route], Awaitable[T]]) -> T:
    """``serve`` over TLS, with a certificate for 127.0.0.1 signed by the test CA
    (``tests/tls``: made once with openssl, valid for a century; the CA's key was not kept)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(TLS / "server.pem", TLS / "server.key")

    async def main() -> T:
        server = await asyncio.start_server(script.handle, "127.0.0.1", 0, ssl=context)
        port = server.sockets[0].getsockname()[1]
        route = http.Route.to(f"https://127.0.0.1:{port}/v1/chat", {})
        async with server:
            return await client(route)

    return asyncio.run(main())


def test_https_verifies_the_server_against_ssl_cert_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http, "_tls", None)
    monkeypatch.setenv("SSL_CERT_FILE", str(TLS / "ca.pem"))
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    script = Script([[sized()], [sized()]])
    assert [r.body for r in serve_tls(script, post_all(2))] == [BODY, BODY]
    assert script.connections == 1


def test_https_refuses_a_server_no_trusted_ca_signed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http, "_tls", None)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    script = Script([[sized()]])
    with pytest.raises(ConnectionError, match="CERTIFICATE_VERIFY_FAILED"):
        serve_tls(script, post_all(1))
    assert script.requests == []


@dataclass
class Tunnel:
    """A loopback proxy that opens a CONNECT tunnel to the address asked for, or answers
    ``refusal`` instead, and notes each CONNECT."""

    refusal: bytes | None = None
    connects: list[bytes] = field(default_factory=list)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        self.connects.append(head.split(b"\r\n")[0])
        if self.refusal is not None:
            writer.write(self.refusal)
            writer.close()
            return
        host, port = head.split(b" ")[1].decode().rsplit(":", 1)
        up_reader, up_writer = await asyncio.open_connection(host, int(port))
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:  # cancelled too, when the test's loop ends
        writer.close()


def through_tunnel(
    tunnel: Tunnel, script: Script, monkeypatch: pytest.MonkeyPatch, requests: int
) -> list[http.Response]:
    """``requests`` POSTs to a TLS server (``serve_tls``) with HTTPS_PROXY naming ``tunnel``."""

    async def client(route: http.Route) -> list[http.Response]:
        proxy = await asyncio.start_server(tunnel.handle, "127.0.0.1", 0)
        port = proxy.sockets[0].getsockname()[1]
        monkeypatch.setenv("HTTPS_PROXY", f"http://me:pw@127.0.0.1:{port}")
        tunnelled = http.Route.to(route.url, {})
        async with proxy:
            return await post_all(requests)(tunnelled)

    monkeypatch.setattr(http, "_tls", None)
    monkeypatch.setenv("SSL_CERT_FILE", str(TLS / "ca.pem"))
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    return serve_tls(script, client)


def test_https_goes_through_the_proxys_tunnel(monkeypatch: pytest.MonkeyPatch) -> None:
    """Verified against SSL_CERT_FILE end to end, one tunnel kept alive for both requests."""
    tunnel, script = Tunnel(), Script([[sized()], [sized()]])
    responses = through_tunnel(tunnel, script, monkeypatch, 2)
    assert [r.body for r in responses] == [BODY, BODY]
    assert [line.split(b" ")[0] for line in tunnel.connects] == [b"CONNECT"]
    assert script.connections == 1


def test_a_proxy_that_will_not_tunnel_is_named_without_its_credentials(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tunnel = Tunnel(b"HTTP/1.1 407 Proxy Authentication Required\r\ncontent-length: 0\r\n\r\n")
    with pytest.raises(ConnectionError) as refused:
        through_tunnel(tunnel, Script([[sized()]]), monkeypatch, 1)
    assert re.fullmatch(
        r"the proxy http://127\.0\.0\.1:\d+ would not reach 127\.0\.0\.1:\d+: "
        r"HTTP 407 Proxy Authentication Required",
        str(refused.value),
    )


def test_a_proxy_that_cannot_be_reached_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://me:pw@127.0.0.1:9")
    route = http.Route.to("http://judge.invalid/v1", {})
    with pytest.raises(ConnectionError) as refused:
        asyncio.run(http.post(route, b"{}", 5))
    assert str(refused.value).startswith(
        "cannot connect to the proxy http://127.0.0.1:9 for judge.invalid:80: "
    )


def test_a_proxy_aiohttp_cannot_use_is_refused_saying_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """A SOCKS proxy would otherwise be sent HTTP; the route is refused before any request."""
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.setenv("ALL_PROXY", "socks5://me:pw@127.0.0.1:1080")
    with pytest.raises(ValueError) as refused:
        http.Route.to("https://judge.invalid/v1", {})
    assert str(refused.value) == (
        "the environment's proxy for judge.invalid is socks5://127.0.0.1:1080, and the lean "
        "transport goes through http:// and https:// proxies only: name one in HTTPS_PROXY (or "
        "HTTP_PROXY, ALL_PROXY), or list judge.invalid in NO_PROXY"
    )


def test_a_reply_larger_than_the_limit_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """As sent (announced, or streamed until the close) or once decompressed: a body no chat
    completion has is refused rather than held in memory (a gzip bomb included)."""
    monkeypatch.setattr(http, "MAX_BODY", 1000)
    announced = [b"HTTP/1.1 200 OK\r\ncontent-length: 5000\r\n\r\n{"]
    streamed = [b"HTTP/1.1 200 OK\r\n\r\n", b"x" * 3000]
    bomb = gzip.compress(b" " * 100_000)
    zipped = [sized(bomb, OK_HEAD + b"content-encoding: gzip\r\n")]
    for reply, problem in [
        (announced, "its body is larger than"),
        (streamed, "its body is larger than"),
        (zipped, "its body decompresses to more than"),
    ]:
        with pytest.raises(ConnectionError, match=f"the server's reply is refused: {problem}"):
            serve(Script([reply]), post_all(1))
