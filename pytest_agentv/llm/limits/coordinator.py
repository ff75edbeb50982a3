"""The run's coordinator (``--agentv-coordinator redis://HOST:PORT/DB``): a Redis server that
every process of every shard of one run talks to, through the well-kept client
(``redis.asyncio``). Imported only when a coordinator is named.

Its keys are ``agentv:<run id>:...``, so two runs sharing one Redis stay apart, and each
expires a day after it last changed. Every change is one optimistic transaction (``WATCH``,
read, ``MULTI``/``EXEC``, again on a conflict) whose clock is the server's ``TIME``: machines'
clocks may disagree, Redis's is the one all of them read. A server that cannot be reached is
asked again, for at most ``patience`` seconds per change, then ``CoordinatorLost`` names it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar
from urllib.parse import urlsplit, urlunsplit

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError, WatchError
from redis.exceptions import TimeoutError as RedisTimeoutError

from ...errors import NotGradedError
from ...redaction import register_secret

if TYPE_CHECKING:
    from redis.asyncio.client import Pipeline

T = TypeVar("T")

#: How long the run's keys outlive its last change.
KEPT = 24 * 3600
#: Seconds between two tries of a server that cannot be reached: the first, and the most.
_RETRY_FIRST, _RETRY_MOST = 0.1, 1.0


def shown_url(url: str) -> str:
    """``url`` as it may be printed: its password, if any, as ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    if parts.port is not None:
        host += f":{parts.port}"
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def _unreachable(exc: BaseException) -> bool:
    return isinstance(exc, (RedisConnectionError, RedisTimeoutError, OSError))


class CoordinatorLost(NotGradedError):
    """The coordinator could not be reached for longer than a call may wait."""


class Coordinator:
    """One process's connection to the run's coordinator, on the event loop that uses it."""

    def __init__(self, url: str, run_id: str, patience: float) -> None:
        self.url = url
        self.run_id = run_id
        self.patience = patience
        self.kept = KEPT
        self._clients: dict[asyncio.AbstractEventLoop, aioredis.Redis] = {}

    def key(self, name: str) -> str:
        return f"agentv:{self.run_id}:{name}"

    @property
    def client(self) -> aioredis.Redis:
        """The client of the running loop (a client is bound to the loop it was made on)."""
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            client = self._clients[loop] = aioredis.Redis.from_url(
                self.url,
                socket_connect_timeout=2.0,
                socket_timeout=5.0,
                retry=Retry(NoBackoff(), 0),  # retried here, within the caller's patience
            )
        return client

    async def transact(
        self, keys: tuple[str, ...], change: Callable[[Pipeline, float], Awaitable[T]]
    ) -> T:
        """``change(pipe, now)`` under ``WATCH`` of ``keys``: it reads through ``pipe``, then
        calls ``pipe.multi()`` and queues its writes (or writes nothing); its value once they
        are applied. ``now`` is the server's time, in seconds."""
        lost_since: float | None = None
        pause = _RETRY_FIRST
        while True:
            try:
                async with self.client.pipeline(transaction=True) as pipe:
                    await pipe.watch(*keys)
                    seconds, micros = await pipe.time()
                    value = await change(pipe, seconds + micros / 1e6)
                    await pipe.execute()
                    return value
            except WatchError:
                continue
            except (RedisError, OSError) as exc:
                if not _unreachable(exc):
                    raise
                now = time.monotonic()
                lost_since = now if lost_since is None else lost_since
                if now - lost_since + pause > self.patience:
                    raise CoordinatorLost(
                        f"the coordinator {shown_url(self.url)} (--agentv-coordinator) could "
                        f"not be reached for {now - lost_since:.1f}s: {exc}"
                    ) from None
                await asyncio.sleep(pause)
                pause = min(pause * 2, _RETRY_MOST)

    def close_on(self, loop: asyncio.AbstractEventLoop) -> None:
        """Close the client of ``loop`` (running in another thread)."""
        asyncio.run_coroutine_threadsafe(self.close(), loop).result(timeout=30)

    async def close(self) -> None:
        loop = asyncio.get_running_loop()
        client = self._clients.pop(loop, None)
        if client is not None:
            await client.aclose()


def check_reachable(url: str) -> str | None:
    """Why the coordinator at ``url`` cannot be used (None: it answers), asked before the run
    starts, with the synchronous client."""
    import redis

    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=3.0, socket_timeout=3.0)
    except ValueError as exc:
        return str(exc)
    try:
        client.ping()
    except RedisError as exc:
        return str(exc) or type(exc).__name__
    finally:
        client.close()
    return None


def connect(url: str, run_id: str, patience: float, *, check: bool) -> Coordinator:
    """The run's coordinator (its password a secret from now); ``check``: a
    ``pytest.UsageError`` naming it first, before any model call, if it cannot be reached."""
    import pytest

    password = urlsplit(url).password
    if password:
        register_secret(password)

    problem = check_reachable(url) if check else None
    if problem is not None:
        raise pytest.UsageError(
            f"--agentv-coordinator={shown_url(url)} cannot be used: {problem}; start Redis "
            "there, or give the URL of one every shard reaches (redis://HOST:PORT/DB)"
        )
    return Coordinator(url, run_id, patience)
