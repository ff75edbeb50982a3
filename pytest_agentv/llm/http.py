"""One JSON POST through aiohttp, the asyncio HTTP client the ecosystem maintains: one
``ClientSession`` per event loop keeps connections alive across calls and parses replies in C.
What is ours is the contract around it: a reply body over ``MAX_BODY`` (as sent or
decompressed) is refused rather than held, and every failure is a ``TimeoutError`` or
``ConnectionError`` saying why (what ``retry.py`` reads). aiohttp is imported at the first
call, never on a replayed run.

The environment's proxy (``HTTP(S)_PROXY``, ``ALL_PROXY``, ``NO_PROXY``) is read once per
endpoint, with the standard library's functions that aiohttp's ``trust_env`` uses. Not
``trust_env`` itself: it reads ``~/.netrc`` and the environment again in two worker-thread hops
per request (several times the CPU of the request itself at 64 in flight), and a netrc entry
for the judge's host would clash with the request's own ``authorization`` header."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import ssl
import sys
import weakref
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    import aiohttp

#: A reply header line longer than this is not a chat server's.
MAX_HEAD = 64 * 1024
#: A reply body longer than this, as sent or decompressed, is refused: no chat completion is.
MAX_BODY = 32 * 1024 * 1024
#: Connections a loop's session keeps to one host when the run does not say (a client used
#: on its own): the run's limits bound the calls in flight, not the pool.
CONNECTIONS = 100


@dataclass(frozen=True)
class Response:
    status: int
    #: Lower-case names; a repeated header keeps its last value.
    headers: Mapping[str, str]
    body: bytes


@dataclass(frozen=True)
class Route:
    """Where one endpoint's requests go, and the headers every request carries."""

    url: str
    headers: tuple[tuple[str, str], ...]
    secure: bool
    where: str
    #: The environment's proxy for this endpoint when the route was made, if any.
    proxy: str | None

    @classmethod
    def to(cls, url: str, headers: Mapping[str, str]) -> Route:
        parts = urlsplit(url)
        secure = parts.scheme == "https"
        host = parts.hostname or ""
        port = parts.port or (443 if secure else 80)
        # Replies are small: compressing them costs the event loop more than it saves.
        sent = {"accept-encoding": "identity", **headers}
        where = f"{host}:{port}"
        return cls(url, tuple(sent.items()), secure, where, _proxy(parts.scheme, host))

    @property
    def via(self) -> str:
        """The proxy, without the credentials its URL may carry."""
        return _address(self.proxy or "")


def _proxy(scheme: str, host: str) -> str | None:
    """The proxy for a host, as ``urllib`` reads the environment (credentials in its URL are
    sent to the proxy alone; one named without a scheme is an http:// proxy, as curl reads
    it). ``ValueError`` for a proxy aiohttp cannot go through."""
    from urllib.request import getproxies, proxy_bypass  # http.client, email: not at import

    proxies = getproxies()
    proxy = proxies.get(scheme) or proxies.get("all")
    if not proxy or proxy_bypass(host):
        return None
    if "://" not in proxy:
        proxy = f"http://{proxy}"
    if urlsplit(proxy).scheme not in ("http", "https"):
        raise ValueError(
            f"the environment's proxy for {host} is {_address(proxy)}, and the lean transport "
            "goes through http:// and https:// proxies only: name one in HTTPS_PROXY (or "
            f"HTTP_PROXY, ALL_PROXY), or list {host} in NO_PROXY"
        )
    return proxy


def _address(proxy: str) -> str:
    """A proxy's URL without the credentials it may carry."""
    parts = urlsplit(proxy)
    return f"{parts.scheme}://{parts.hostname}" + (f":{parts.port}" if parts.port else "")


def ready(route: Route) -> bool:
    """Whether ``post`` can go without ``prepare``'s slow first steps."""
    return "aiohttp" in sys.modules and (not route.secure or _tls is not None)


def prepare(route: Route) -> None:
    """aiohttp's import and the CA bundle: for a thread, before an attempt's clock starts."""
    import aiohttp  # noqa: F401

    if route.secure:
        tls_context()


_tls: ssl.SSLContext | None = None


def tls_context() -> ssl.SSLContext:
    """Verifying context for https, made once (loading the CA bundle costs about 20 ms): the
    ``SSL_CERT_FILE``/``SSL_CERT_DIR`` named in the environment, else certifi's bundle, else
    the system's."""
    global _tls
    if _tls is None:
        cafile, capath = os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")
        if not (cafile or capath) and importlib.util.find_spec("certifi") is not None:
            import certifi

            cafile = certifi.where()
        _tls = ssl.create_default_context(cafile=cafile or None, capath=capath or None)
    return _tls


async def post(
    route: Route, body: bytes, timeout: float, connections: int = CONNECTIONS
) -> Response:
    """The reply to one POST within ``timeout`` seconds in all, connecting included; else
    ``TimeoutError`` or ``ConnectionError`` saying why. ``connections`` sizes the pool of the
    loop's session when this call makes it."""
    import aiohttp
    from yarl import URL

    session = await _session(connections)
    try:
        async with session.post(
            URL(route.url, encoded=True),
            data=body,
            headers=route.headers,
            ssl=tls_context() if route.secure else False,
            timeout=aiohttp.ClientTimeout(total=timeout),
            proxy=route.proxy,
        ) as reply:
            content = await _body(reply)
            headers = {name.lower(): value for name, value in reply.headers.items()}
            return Response(reply.status, headers, content)
    except asyncio.TimeoutError as exc:
        if isinstance(exc, aiohttp.ConnectionTimeoutError):
            raise TimeoutError(f"no connection to {route.where} within {timeout:g} s") from None
        raise TimeoutError(f"no reply within {timeout:g} s") from None
    except aiohttp.ClientProxyConnectionError as exc:
        raise ConnectionError(
            f"cannot connect to the proxy {route.via} for {route.where}: {_reason(exc)}"
        ) from None
    except aiohttp.ClientConnectorError as exc:
        raise ConnectionError(f"cannot connect to {route.where}: {_reason(exc)}") from None
    except aiohttp.ServerDisconnectedError:
        raise ConnectionError("the server closed the connection without replying") from None
    except aiohttp.ClientPayloadError as exc:
        raise ConnectionError(
            f"the server closed the connection in the middle of its reply: {_cause(exc)}"
        ) from None
    except aiohttp.ClientHttpProxyError as exc:
        raise ConnectionError(
            f"the proxy {route.via} would not reach {route.where}: HTTP {exc.status} {exc.message}"
        ) from None
    except aiohttp.ClientResponseError as exc:
        why = " ".join(str(exc.message).split())
        raise ConnectionError(f"the server's reply is not readable HTTP: {why}") from None
    except aiohttp.ClientError as exc:
        raise ConnectionError(f"{type(exc).__name__}: {exc or 'the request failed'}") from None


async def _body(reply: aiohttp.ClientResponse) -> bytes:
    """The reply's body, read as it comes and refused past ``MAX_BODY`` bytes."""
    encoded = reply.headers.get("content-encoding", "identity").lower() not in ("identity", "")
    if (reply.content_length or 0) > MAX_BODY:
        raise _refused(f"its body is larger than {MAX_BODY // 2**20} MiB")
    body = bytearray()
    async for piece in reply.content.iter_any():
        body += piece
        if len(body) > MAX_BODY:
            grown = "decompresses to more than" if encoded else "is larger than"
            raise _refused(f"its body {grown} {MAX_BODY // 2**20} MiB")
    return bytes(body)


def _refused(why: str) -> ConnectionError:
    return ConnectionError(f"the server's reply is refused: {why}")


def _reason(exc: aiohttp.ClientConnectorError) -> str:
    """Why a connection failed, without the rest of aiohttp's message (the address again, its
    TLS settings' repr)."""
    return exc.os_error.strerror or str(exc.os_error) or type(exc.os_error).__name__


def _cause(exc: BaseException) -> str:
    """The innermost reason aiohttp gives for a payload it could not read."""
    while exc.__cause__ is not None:
        exc = exc.__cause__
    return str(exc) or type(exc).__name__


_sessions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aiohttp.ClientSession] = (
    weakref.WeakKeyDictionary()
)
#: Per loop, the parked generator whose finalisation closes its session (held here: the loop
#: keeps only a weak reference to it).
_closers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncGenerator[None, None]] = (
    weakref.WeakKeyDictionary()
)


async def _session(connections: int) -> aiohttp.ClientSession:
    """The running loop's session, made at its first call. A session belongs to its loop; it
    is closed when the loop shuts down its async generators (``asyncio.run``, pytest-asyncio
    and the run's end all do), so none is left for the garbage collector to warn about."""
    loop = asyncio.get_running_loop()
    session = _sessions.get(loop)
    if session is not None and not session.closed:
        return session
    import aiohttp

    session = _sessions[loop] = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0, limit_per_host=max(connections, 1)),
        auto_decompress=True,
        max_line_size=MAX_HEAD,
        max_field_size=MAX_HEAD,
    )
    closer = _closes_with_loop(loop, session)
    await anext(closer)
    _closers[loop] = closer
    return session


async def _closes_with_loop(
    loop: asyncio.AbstractEventLoop, session: aiohttp.ClientSession
) -> AsyncGenerator[None, None]:
    try:
        yield
    finally:
        if _sessions.get(loop) is session:
            del _sessions[loop]
        _closers.pop(loop, None)
        await session.close()


async def close_session() -> None:
    """Close the running loop's session (the run's end, on the plugin's loop)."""
    closer = _closers.get(asyncio.get_running_loop())
    if closer is not None:
        await closer.aclose()
