"""Shared fixtures: a pytester project with a mock target and a keyword code judge."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator

import hypothesis.internal.observability  # noqa: F401
import pytest
from fake_openai import FakeOpenAI, Reset, Status
from helpers import judge_ini

import pytest_agentv.collect  # noqa: F401
from pytest_agentv.judge import TRANSPORT_CHOICES as TRANSPORTS

# pytester restores sys.modules after every in-process run, so anything first imported inside a
# run is imported again by the next one. Importing these here keeps each inner run fast.

INI = """
[pytest]
asyncio_default_fixture_loop_scope = function
"""

KEYWORDS_JUDGE = """\
import json, sys

payload = json.load(sys.stdin)
words = (payload.get("config") or {}).get("keywords", [])
answer = payload["candidate_answer"].lower()
hits = [w for w in words if w.lower() in answer]
misses = [w for w in words if w.lower() not in answer]
print(json.dumps({
    "score": len(hits) / len(words) if words else 1.0,
    "hits": ["mentions " + w for w in hits],
    "misses": ["does not mention " + w for w in misses],
    "reasoning": f"{len(hits)} of {len(words)} keywords",
}))
"""

EXPECT_JUDGE = """\
import json, sys

payload = json.load(sys.stdin)
config = payload.get("config") or {}
answer = payload["candidate_answer"]
checks = []
if "expect" in config:
    checks.append((answer == config["expect"], f"answer is {answer!r}"))
for key, value in (config.get("payload") or {}).items():
    checks.append((payload.get(key) == value, f"{key} is {payload.get(key)!r}"))
print(json.dumps({
    "score": 1.0 if all(ok for ok, _ in checks) else 0.0,
    "hits": [text for ok, text in checks if ok],
    "misses": [text for ok, text in checks if not ok],
}))
"""

TARGETS = """\
targets:
  - name: default
    provider: mock
    response: "Refunds are accepted within 30 days of purchase."
  - name: wrong
    provider: mock
    response: "We never give refunds."
"""


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Tests never see a developer's own judge settings or provider keys."""
    for name in list(os.environ):
        if name.startswith("AGENTV_") or name.endswith(("_API_KEY", "_API_BASE")):
            monkeypatch.delenv(name)
    yield


@pytest.fixture(autouse=True)
def _quiet_inner_sessions(request: pytest.FixtureRequest) -> None:
    """Give every pytester session an ini file, so plugins do not warn about unset options."""
    if "pytester" in request.fixturenames:
        request.getfixturevalue("pytester").makeini(INI)


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    """A pytester folder with a mock targets file, an ini file and a keyword code judge."""
    (pytester.path / ".agentv").mkdir()
    (pytester.path / ".agentv" / "targets.yaml").write_text(TARGETS)
    (pytester.path / "keywords.py").write_text(KEYWORDS_JUDGE)
    (pytester.path / "expect.py").write_text(EXPECT_JUDGE)
    return pytester


@pytest.fixture(params=[[], ["-n", "2"]], ids=["serial", "xdist"])
def run_args(request: pytest.FixtureRequest) -> list[str]:
    """Run a pytester session serially and under pytest-xdist."""
    return list(request.param)


def _warm_up(transport: str) -> None:
    """Make one call, and one that fails, through ``transport`` on the plugin's loop.

    In-process pytester runs drop modules first imported inside them; without this every run
    would import the transport's HTTP stack again (litellm's: about half a second each).
    """
    from pytest_agentv.judge import LlmClient, ModelSpec, RetryPolicy
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


@pytest.fixture(scope="session", params=TRANSPORTS)
def _transport(request: pytest.FixtureRequest) -> str:
    """Each transport, warmed up once per process. Session-scoped, so it is set up before any
    pytester snapshot: litellm's import installs a metadata finder that must not be undone."""
    transport: str = request.param
    _warm_up(transport)
    return transport


@pytest.fixture
def judge_transport(_transport: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test that talks to the fake server runs once per transport: ``auto`` (the lean
    one, for the fake server's ``openai/`` models) and ``litellm`` (forced). Runs see it as
    ``AGENTV_JUDGE_TRANSPORT``; tests that build an ``LlmClient`` pass it on."""
    monkeypatch.setenv("AGENTV_JUDGE_TRANSPORT", _transport)
    return _transport


@pytest.fixture
def fake_llm(judge_transport: str) -> Iterator[FakeOpenAI]:
    """A loopback OpenAI-compatible server, stopped (and its hanging requests released) after."""
    server = FakeOpenAI().start()
    yield server
    server.stop()


@pytest.fixture
def judged(project: pytest.Pytester, fake_llm: FakeOpenAI) -> pytest.Pytester:
    """A project whose LLM judge is the fake server."""
    project.makeini(judge_ini(fake_llm))
    return project
