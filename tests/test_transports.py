"""The two transports: one routing rule, the same wire format, credentials and store keys, and
prices and capabilities read from litellm's table without importing litellm."""

from __future__ import annotations

import asyncio
import json
import sys
import time
import urllib.request
import xml.etree.ElementTree as ET
from collections.abc import Coroutine
from dataclasses import replace
from types import SimpleNamespace
from typing import Any, TypeVar

import pytest

from pytest_agentv.errors import NotGradedError
from pytest_agentv.llm import transports
from pytest_agentv.llm.client import LlmClient
from pytest_agentv.llm.prices import Price, price_for, supports
from pytest_agentv.llm.reply import Reply
from pytest_agentv.llm.retry import RetryPolicy
from pytest_agentv.llm.transports import ModelSpec, uses_lean_transport
from pytest_agentv.scheduler import shared_loop
from tests.fake_openai import FakeOpenAI, Status, ToolCallReply, WithUsage
from tests.fake_openai import freeform as freeform_reply
from tests.helpers import judge_ini, write

# How models are called: every test here runs through each judge transport.
pytestmark = pytest.mark.transports

T = TypeVar("T")

FREEFORM = """
evalcases:
  - id: refund
    expected_outcome: States the 30-day refund window
    input: How long do I have to return an item?
"""
SCHEMA = {"type": "json_schema", "json_schema": {"name": "grade", "schema": {"type": "object"}}}


def on_loop(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run_coroutine_threadsafe(coro, shared_loop()).result(30)


def call(spec: ModelSpec, transport: str, **options: Any) -> Reply:
    client = LlmClient(spec, RetryPolicy(retries=0), transport=transport)
    messages = [{"role": "user", "content": "Grade this."}]
    return on_loop(client.complete(messages, accept=str, **options))[1]


@pytest.mark.parametrize(
    ("model", "choice", "lean"),
    [
        ("openai/gpt-4o-mini", "auto", True),
        ("openai/my-local-model", "auto", True),
        ("azure/my-deployment", "auto", True),
        ("openai/gpt-4o-mini", "litellm", False),
        ("azure/my-deployment", "litellm", False),
        ("anthropic/claude-3-5-haiku-latest", "auto", False),
        ("openrouter/openai/gpt-4o", "auto", False),
        ("ollama/llama3", "auto", False),
        ("gpt-4o-mini", "auto", False),
        ("openai", "auto", False),
    ],
)
def test_one_routing_rule(model: str, choice: str, lean: bool) -> None:
    assert uses_lean_transport(model, choice) is lean


@pytest.mark.parametrize(
    ("spec", "path", "sent", "headers"),
    [
        (
            ModelSpec("openai/gpt-4o-mini", api_key="sk-test-0123456789"),
            "/v1/chat/completions",
            {
                "model": "gpt-4o-mini",
                "temperature": 0.0,
                "max_tokens": 50,
                "response_format": SCHEMA,
            },
            {"authorization": "Bearer sk-test-0123456789"},
        ),
        # Reasoning models take max_completion_tokens (the reply's bound and an allowance for
        # their reasoning) and no temperature but 1, as litellm sends them with drop_params.
        (
            ModelSpec("openai/o3-mini", api_key="sk-test-0123456789"),
            "/v1/chat/completions",
            {
                "model": "o3-mini",
                "max_completion_tokens": 50 + transports.REASONING_TOKENS,
                "response_format": SCHEMA,
            },
            {"authorization": "Bearer sk-test-0123456789"},
        ),
        (
            ModelSpec("azure/gpt-4o", api_key="az-test-0123456789", api_version="2024-10-21"),
            "/v1/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21",
            {"model": "gpt-4o", "temperature": 0.0, "max_tokens": 50, "response_format": SCHEMA},
            {"api-key": "az-test-0123456789"},
        ),
        # Not in the price table: no price, the default API version; a schema all the same.
        (
            ModelSpec("azure/grader", api_key="az-test-0123456789"),
            "/v1/openai/deployments/grader/chat/completions?api-version=2024-10-21",
            {"model": "grader", "temperature": 0.0, "max_tokens": 50, "response_format": SCHEMA},
            {"api-key": "az-test-0123456789"},
        ),
    ],
    ids=["openai", "reasoning", "azure", "azure-default-version"],
)
def test_both_transports_send_the_same_request(
    fake_llm: FakeOpenAI,
    judge_transport: str,
    spec: ModelSpec,
    path: str,
    sent: dict[str, Any],
    headers: dict[str, str],
) -> None:
    spec = ModelSpec(spec.model, fake_llm.api_base, spec.api_key, spec.api_version)
    reply = call(spec, judge_transport, temperature=0.0, max_tokens=50, structured=SCHEMA)
    [request] = fake_llm.requests
    assert request.path == path
    assert {k: v for k, v in request.body.items() if k != "messages"} == sent
    assert request.body["messages"] == [{"role": "user", "content": "Grade this."}]
    assert {k: request.headers.get(k) for k in headers} == headers
    assert (reply.prompt_tokens, reply.completion_tokens) == (100, 20)
    # Only Azure's endpoint is the provider's own here: an OpenAI model at another API base is
    # not charged OpenAI's price.
    price = price_for(spec.model) if spec.model.startswith("azure/") else None
    assert reply.cost_usd == (pytest.approx(price.cost(100, 20)) if price else None)


def test_a_body_that_gives_a_key_twice_is_not_a_chat_completion(fake_server: FakeOpenAI) -> None:
    choice = '[{"message": {"role": "assistant", "content": "%s"}}]'
    fake_server.push(
        Status(200, body=f'{{"choices": {choice % "low"}, "choices": {choice % "high"}}}')
    )
    spec = ModelSpec("openai/fake-judge", api_base=fake_server.api_base)
    with pytest.raises(NotGradedError, match="HTTP 200 with a body that is not a chat completion"):
        call(spec, "auto")


def test_the_fake_server_can_answer_with_a_function_call(fake_server: FakeOpenAI) -> None:
    fake_server.push(ToolCallReply("final_result", {"passed": True, "reasoning": "ok"}))
    request = urllib.request.Request(
        f"{fake_server.api_base}/chat/completions",
        data=json.dumps({"model": "fake-judge", "messages": []}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        body = json.load(response)
    assert body["choices"][0]["finish_reason"] == "tool_calls"
    assert body["choices"][0]["message"] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_fake_1",
                "type": "function",
                "function": {
                    "name": "final_result",
                    "arguments": '{"passed": true, "reasoning": "ok"}',
                },
            }
        ],
    }


def test_an_unpriced_model_has_an_unknown_cost_and_still_a_schema(
    fake_llm: FakeOpenAI, judge_transport: str
) -> None:
    spec = ModelSpec("openai/my-local-model", api_base=fake_llm.api_base)
    reply = call(spec, judge_transport, structured=SCHEMA)
    assert reply.cost_usd is None
    assert fake_llm.requests[0].body["response_format"] == SCHEMA


@pytest.mark.parametrize(
    "usage",
    [
        {"prompt_tokens": -10_000_000, "completion_tokens": 20},
        {"prompt_tokens": 100, "completion_tokens": -20},
        {"prompt_tokens": 10**400, "completion_tokens": 20},
        {"prompt_tokens": 0, "completion_tokens": 20},
        None,
    ],
    ids=["negative-prompt", "negative-completion", "400-digits", "zero", "none"],
)
def test_usage_that_is_not_token_counts_makes_the_cost_unknown(
    fake_llm: FakeOpenAI, judge_transport: str, usage: Any
) -> None:
    """A server reporting prompt_tokens -10000000 made its calls cost less than nothing; one
    reporting no usage (which litellm reads as 0 tokens: no request has an empty prompt) made
    them free."""
    fake_llm.push(WithUsage("ok", usage))
    spec = ModelSpec("openai/grader", fake_llm.api_base, price=Price.per_million(1, 2))
    reply = call(spec, judge_transport)
    assert reply.text == "ok"
    assert reply.cost_usd is None
    assert None in (reply.prompt_tokens, reply.completion_tokens)


def test_a_reply_reads_only_counts_of_tokens_and_costs() -> None:
    """What each transport and the replay store read goes through ``Reply`` (litellm refuses
    text and fractions itself)."""
    for prompt, completion in [("100", 20), (100.5, 20), (True, 20), (100, -1), (100, None)]:
        reply = Reply("ok", cached=False, prompt_tokens=prompt, completion_tokens=completion)
        assert reply.cost_usd is None
        assert None in (reply.prompt_tokens, reply.completion_tokens)
    counted = Reply("ok", cached=True, prompt_tokens=100, completion_tokens=20, cost_usd=0.5)
    assert counted.cost_usd == 0.5
    assert replace(counted, cost_usd=-5).cost_usd is None


def test_credentials_and_endpoints_from_the_environment(
    fake_llm: FakeOpenAI, judge_transport: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", fake_llm.api_base)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-0123456789")
    monkeypatch.setenv("AZURE_API_BASE", fake_llm.api_base.removesuffix("/v1"))
    monkeypatch.setenv("AZURE_API_VERSION", "2024-06-01")
    monkeypatch.setenv("AZURE_OPENAI_AD_TOKEN", "ad-token-0123456789")
    call(ModelSpec("openai/gpt-4o-mini"), judge_transport)
    call(ModelSpec("azure/grader"), judge_transport)
    monkeypatch.delenv("AZURE_OPENAI_AD_TOKEN")
    monkeypatch.setenv("AZURE_API_KEY", "az-env-0123456789")
    call(ModelSpec("azure/checker"), judge_transport)
    openai, token, key = fake_llm.requests
    assert openai.path == "/v1/chat/completions"
    assert openai.headers["authorization"] == "Bearer sk-env-0123456789"
    assert token.path == "/openai/deployments/grader/chat/completions?api-version=2024-06-01"
    assert token.headers["authorization"] == "Bearer ad-token-0123456789"
    assert key.path == "/openai/deployments/checker/chat/completions?api-version=2024-06-01"
    assert key.headers["api-key"] == "az-env-0123456789"


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ("openai/gpt-4o-mini", "no API key for openai/gpt-4o-mini: set OPENAI_API_KEY"),
        ("azure/grader", "no endpoint for azure/grader: set AZURE_API_BASE"),
    ],
)
def test_missing_credentials_are_not_graded_without_a_request(model: str, message: str) -> None:
    client = LlmClient(ModelSpec(model), RetryPolicy(retries=3))
    with pytest.raises(NotGradedError, match=message):
        on_loop(client.complete([{"role": "user", "content": "x"}], accept=str))


def test_a_proxy_the_lean_transport_cannot_use_is_not_graded_without_a_request(
    monkeypatch: pytest.MonkeyPatch, fake_server: FakeOpenAI
) -> None:
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.setenv("ALL_PROXY", "socks5://127.0.0.1:1080")
    client = LlmClient(ModelSpec("openai/m", api_base=fake_server.api_base), RetryPolicy(retries=3))
    with pytest.raises(NotGradedError, match=r"^openai/m: the environment's proxy for 127\.0"):
        on_loop(client.complete([{"role": "user", "content": "x"}], accept=str))
    assert fake_server.requests == []


def test_azure_needs_a_key_or_a_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_API_BASE", "https://example.invalid")
    client = LlmClient(ModelSpec("azure/grader"))
    with pytest.raises(NotGradedError, match=r"set AZURE_API_KEY .*transport=litellm"):
        on_loop(client.complete([{"role": "user", "content": "x"}], accept=str))


@pytest.mark.litellm
def test_prices_and_capabilities_agree_with_litellm() -> None:
    from pytest_agentv.llm.transports import litellm_module

    litellm = litellm_module()
    for model in ("openai/gpt-4o-mini", "gpt-4o", "azure/gpt-4o", "openai/o3-mini"):
        info = litellm.get_model_info(model)
        assert price_for(model) == Price(
            info["input_cost_per_token"], info["output_cost_per_token"]
        ), model
        assert supports(model, "supports_response_schema") == bool(
            litellm.supports_response_schema(model=model)
        ), model
    for unknown in ("openai/fake-judge", "azure/my-deployment", "anthropic/gpt-4o-mini"):
        assert price_for(unknown) is None
        assert not supports(unknown, "supports_response_schema")


def test_the_price_table_is_read_without_importing_litellm(pytester: pytest.Pytester) -> None:
    script = (
        "import sys\n"
        "from pytest_agentv.llm.prices import price_for\n"
        "print(price_for('openai/gpt-4o-mini') is not None, price_for('openai/x') is None,"
        " 'litellm' in sys.modules)\n"
    )
    result = pytester.run(sys.executable, "-c", script)
    assert result.stdout.lines[-1] == "True True False"


def test_unknown_cost_is_reported_as_unknown(judged: pytest.Pytester, fake_llm: FakeOpenAI) -> None:
    fake_llm.responder = lambda request: freeform_reply(0.9)
    write(judged, "f.eval.yaml", FREEFORM)
    result = judged.runpytest("--junitxml=junit.xml")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "agentv: 1 model calls made, 0 replies reused from the store, 120 tokens, "
            "cost unknown (1 of 1 calls without a known price or token counts)"
        ]
    )
    [report] = [r for r in result.reprec.getreports("pytest_runtest_logreport") if r.when == "call"]  # type: ignore[attr-defined]
    usage = report.agentv["summary"][0]["usage"]
    assert (usage["cost_usd"], usage["unpriced_calls"], usage["calls"]) == (None, 1, 1)
    props = {
        p.get("name"): p.get("value") for p in ET.parse(judged.path / "junit.xml").iter("property")
    }
    assert props["agentv.cost_usd"] == "unknown"


def test_a_store_recorded_with_one_transport_replays_with_the_other(
    project: pytest.Pytester, fake_llm: FakeOpenAI, judge_transport: str
) -> None:
    """...and replaying, with either transport, imports neither litellm nor the HTTP client
    (the one check that a replayed run imports no HTTP stack)."""
    project.makeini(
        judge_ini(fake_llm).replace("agentv_cache_mode = off", "agentv_cache_mode = readwrite")
    )
    project.makeconftest(
        """
        import sys

        def pytest_sessionfinish():
            print("imported:", sorted(m for m in ("litellm", "aiohttp") if m in sys.modules))
        """
    )
    fake_llm.responder = lambda request: freeform_reply(0.9)
    write(project, "f.eval.yaml", FREEFORM)
    project.runpytest().assert_outcomes(passed=1)
    fake_llm.stop()
    other = "litellm" if judge_transport == "auto" else "auto"
    result = project.runpytest_subprocess(
        "-s",
        "-p",
        "no:cacheprovider",
        "--agentv-cache-mode=replay",
        f"--agentv-judge-transport={other}",
    )
    result.assert_outcomes(passed=1)
    assert "imported: []" in result.stdout.str()
    result.stdout.fnmatch_lines(["agentv: 0 model calls made, 1 replies reused*"])
    assert json.loads(next((project.path / ".agentv" / "cache").rglob("*.json")).read_text())


def test_the_transport_option_takes_auto_or_litellm(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--agentv-judge-transport=openai")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--agentv-judge-transport=openai is invalid; choose one of: auto, litellm*"]
    )


class SlowToImport:
    """Stands in for litellm: its first import takes longer than an attempt may; its calls
    answer at once."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.imports = 0

    def module(self) -> Any:
        if not self.imports:
            time.sleep(self.seconds)
        self.imports += 1
        return self

    async def acompletion(self, **kwargs: Any) -> Any:
        message = SimpleNamespace(content="graded")
        usage = SimpleNamespace(prompt_tokens=3, completion_tokens=1)
        return SimpleNamespace(choices=[SimpleNamespace(message=message)], usage=usage)

    def completion_cost(self, **kwargs: Any) -> float:
        return 0.0


def test_importing_litellm_does_not_count_against_an_attempt(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first call imported litellm inside its attempt: a 1 s attempt timeout, and an
    import slower than that, made the first call of a run time out (and, on a busy machine,
    every retry while the import went on)."""
    slow = SlowToImport(2.0)
    monkeypatch.setattr(transports, "_litellm", None)
    monkeypatch.setattr(transports, "litellm_module", slow.module)
    client = LlmClient(
        ModelSpec("anthropic/some-model"),
        RetryPolicy(retries=0, attempt_timeout=1.0),
        transport="litellm",
    )
    messages = [{"role": "user", "content": "Grade this."}]
    assert on_loop(client.complete(messages, accept=str))[0] == "graded"
    assert slow.imports >= 1
