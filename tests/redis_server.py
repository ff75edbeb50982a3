"""A real Redis for tests (Debian's ``redis-server``): started on a free loopback port without
persistence, stopped after; it can be stopped and started again on the same port mid-test.

This module is a pytest plugin (``pytest_plugins`` in ``tests/conftest.py``): it provides the
``redis_server`` fixture.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

BINARY = shutil.which("redis-server")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class RedisServer:
    def __init__(self, folder: Path, password: str | None = None) -> None:
        self.folder = folder
        self.password = password
        self.port = _free_port()
        self.process: subprocess.Popen[bytes] | None = None

    def url(self, db: int = 0) -> str:
        secret = f":{self.password}@" if self.password else ""
        return f"redis://{secret}127.0.0.1:{self.port}/{db}"

    def start(self) -> RedisServer:
        assert BINARY is not None
        command = [BINARY, "--port", str(self.port), "--bind", "127.0.0.1"]
        command += ["--save", "", "--appendonly", "no", "--dir", str(self.folder)]
        if self.password:
            command += ["--requirepass", self.password]
        self.process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert self.process.poll() is None, "redis-server ended at its start"
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", self.port)) == 0:
                    return self
            time.sleep(0.02)
        raise AssertionError("redis-server did not listen within 30s")

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=30)
            self.process = None


@pytest.fixture
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A Redis of this test's own."""
    if BINARY is None:
        pytest.skip("redis-server is not installed (Debian's package redis-server)")
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()
