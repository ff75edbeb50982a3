"""pytest-agentv against its peers on the same LLM-judged work: 48 tests judging one canned
answer against one criterion, a loopback judge answering each request after 250 ms; whole
commands. The peers call their judge one at a time; ours runs with ``--agentv-concurrency 16``.

Each peer runs from a venv with its pinned version, made once (not timed) in
``$AGENTV_BENCH_PEERS_DIR/<package>-<version>`` (default ``~/.cache/pytest-agentv-bench/peers``).
A peer that cannot be installed or does not pass all 48 tests gets an ERROR row; the others run.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import TRIVIAL_MODULE, Result, Row, Sizes, verdict
from fake_openai import Action, Delay, FakeOpenAI, Request, ToolCallReply, freeform
from harness import (
    CANNED,
    BenchError,
    Project,
    child_env,
    fake_server,
    log,
    median,
    project,
    run_pytest,
)

LATENCY = 0.25
CASES = 48
CONCURRENCY = 16
#: The fastest peer must take at least this many times our whole command.
TARGET = 10.0
CRITERION = "States that items can be returned within 30 days"
REASONING = "The answer states the 30-day return window."
PEERS_DIR_VARIABLE = "AGENTV_BENCH_PEERS_DIR"
PYTEST = ("-m", "pytest", "-q", "-p", "no:cacheprovider")
QUIET: dict[str, Any] = {"stdin": subprocess.DEVNULL, "capture_output": True, "text": True}
_PASSED = re.compile(r"(\d+) passed")
_FAILED = re.compile(r"(\d+) (?:failed|errors?)\b")


def peers_dir() -> Path:
    default = Path.home() / ".cache" / "pytest-agentv-bench" / "peers"
    return Path(os.environ.get(PEERS_DIR_VARIABLE) or default).expanduser()


# -- the peers' projects (one criterion per test, the canned answer of the harness) -------------
def agent_eval_files(root: Path, cases: int = CASES) -> None:
    """pytest-agent-eval: one YAML transcript per test, judged by a rubric. ``openai-chat:``
    is pydantic-ai's Chat Completions model (``openai:`` is the Responses API); the base URL
    comes from ``OPENAI_BASE_URL``."""
    write(
        root / "pyproject.toml",
        '[tool.agent_eval]\nmodel = "openai-chat:gpt-4o"\nthreshold = 0.8\nruns = 1\n'
        'yaml_dirs = ["tests/evals"]\n',
    )
    write(
        root / "tests" / "conftest.py",
        f"import pytest\n\n\n@pytest.fixture\ndef llm_eval_agent():\n"
        f"    async def agent(history):\n        return {CANNED!r}, []\n\n    return agent\n",
    )
    for i in range(cases):
        write(
            root / "tests" / "evals" / f"refund_{i:02d}.yaml",
            f'id: refund_{i:02d}\nturns:\n  - user: "How long do I have to return order number '
            f'{i}?"\n    expect:\n      judge:\n        rubric: "{CRITERION}"\n',
        )


def llm_assert_files(root: Path, cases: int = CASES) -> None:
    """pytest-llm-assert: its README's fixture and model (litellm, ``OPENAI_BASE_URL``)."""
    write(
        root / "conftest.py",
        "import pytest\nfrom pytest_llm_assert import LLMAssert\n\n\n@pytest.fixture\n"
        'def llm():\n    return LLMAssert(model="openai/gpt-5-mini")\n',
    )
    write(
        root / "test_refunds.py",
        f"import pytest\n\n\n@pytest.mark.parametrize('i', range({cases}))\n"
        f"def test_refund_policy(llm, i):\n    assert llm({CANNED!r}, {CRITERION!r})\n",
    )


def deepeval_files(root: Path, cases: int = CASES) -> None:
    """deepeval: one GEval metric with the criterion per test, as its README shows."""
    write(
        root / "test_refunds.py",
        "import pytest\nfrom deepeval import assert_test\nfrom deepeval.metrics import GEval\n"
        "from deepeval.test_case import LLMTestCase, SingleTurnParams\n\n\n"
        f"@pytest.mark.parametrize('i', range({cases}))\ndef test_refund_policy(i):\n"
        f"    metric = GEval(name='Correctness', criteria={CRITERION!r}, threshold=0.5,\n"
        "        evaluation_params=[SingleTurnParams.INPUT, SingleTurnParams.ACTUAL_OUTPUT])\n"
        "    case = LLMTestCase(input=f'How long do I have to return order number {i}?',\n"
        f"        actual_output={CANNED!r})\n    assert_test(case, [metric])\n",
    )


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


# -- the judges' replies ------------------------------------------------------------------------
def output_tool(output: dict[str, Any]) -> Callable[[Request], Action]:
    """pydantic-ai asks for structured output through an output tool (``final_result``): call
    the first tool offered with ``output``, or answer ``output`` as JSON text if none is."""

    def respond(request: Request) -> Action:
        tools = request.body.get("tools") or []
        if tools:
            return ToolCallReply(tools[0]["function"]["name"], output, delay=LATENCY)
        return Delay(LATENCY, json.dumps(output))

    return respond


def geval(request: Request) -> Action:
    """GEval makes two calls per test: evaluation steps from the criterion, then a 0-10 score."""
    schema = json.dumps(request.body.get("response_format") or {})
    prompt = "\n".join(str(message.get("content")) for message in request.body.get("messages", []))
    if 'the "steps" key' in prompt or '"Steps"' in schema:
        return Delay(LATENCY, json.dumps({"steps": [f"Check that the actual output {CRITERION}"]}))
    return Delay(LATENCY, json.dumps({"score": 10, "reason": REASONING}))


@dataclass(frozen=True)
class Peer:
    package: str
    version: str
    #: Writes the peer's project of ``cases`` tests into a folder.
    files: Callable[[Path, int], None]
    respond: Callable[[Request], Action]
    #: the command, its first word a script in the venv's ``bin``
    command: tuple[str, ...]
    requests_per_test: int = 1
    env: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.package} {self.version}"


PEERS = (
    Peer(
        "pytest-agent-eval",
        "0.3.0",
        agent_eval_files,
        output_tool({"passed": True, "reasoning": REASONING}),
        ("python", *PYTEST, "--agent-eval-live"),
    ),
    Peer(
        "pytest-llm-assert",
        "0.2.3",  # 0.2.4 cannot pass: see bench/README.md
        llm_assert_files,
        output_tool({"result": "PASS", "reasoning": REASONING}),
        ("python", *PYTEST),
        # litellm would fetch its price table from GitHub at import (3 attempts, 5 s apart,
        # without DNS); its documented switch keeps the bundled copy.
        env={"LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    ),
    Peer(
        "deepeval",
        "4.3.1",
        deepeval_files,
        geval,
        ("deepeval", "test", "run", "test_refunds.py"),
        requests_per_test=2,
        env={"DEEPEVAL_TELEMETRY_OPT_OUT": "YES"}
        | dict.fromkeys(("DEEPEVAL_UPDATE_WARNING_OPT_IN", "DEEPEVAL_GRPC_LOGGING"), "NO")
        | {"ERROR_REPORTING": "NO"},
    ),
)


# -- venvs ------------------------------------------------------------------------------------
def installed_version(venv: Path, package: str) -> str | None:
    python = venv / "bin" / "python"
    code = f"import importlib.metadata as m; print(m.version({package!r}))"
    done = subprocess.run([str(python), "-c", code], **QUIET) if python.exists() else None
    return done.stdout.strip() if done and done.returncode == 0 else None


def ensure_venv(peer: Peer) -> Path:
    """The peer's venv, made and pip-installed on first use; BenchError if that fails."""
    venv = peers_dir() / f"{peer.package}-{peer.version}"
    if installed_version(venv, peer.package) == peer.version:
        return venv
    log(f"  installing {peer.package}=={peer.version} into {venv} (not timed)")
    steps = (
        [] if (venv / "bin" / "python").exists() else [[sys.executable, "-m", "venv", str(venv)]]
    )
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check"]
    steps.append([*pip, "-q", f"{peer.package}=={peer.version}"])
    venv.parent.mkdir(parents=True, exist_ok=True)
    for step in steps:
        try:
            done = subprocess.run(step, capture_output=True, text=True, timeout=1800)
        except (OSError, subprocess.SubprocessError) as exc:
            raise BenchError(f"{' '.join(step[2:4])} failed: {exc}") from exc
        if done.returncode != 0:
            lines = (done.stderr or done.stdout).strip().splitlines() or ["no output"]
            raise BenchError(f"{' '.join(step[2:4])} exited {done.returncode}: {lines[-1]}")
    found = installed_version(venv, peer.package)
    if found != peer.version:
        raise BenchError(f"{peer.package} {found} installed, expected {peer.version}")
    return venv


# -- runs -------------------------------------------------------------------------------------
@dataclass
class Tool:
    label: str
    server: FakeOpenAI | None
    expected_requests: int
    run: Callable[[], float]
    walls: list[float] = field(default_factory=list)
    requests: list[int] = field(default_factory=list)
    peaks: list[int] = field(default_factory=list)
    error: str | None = None


def timed(tool: Tool) -> float:
    """One run; BenchError unless it passed every test with the expected number of requests."""
    server = tool.server
    before = len(server.requests) if server else 0
    if server:
        server.peak_in_flight = 0
    wall = tool.run()
    if server:
        sent = len(server.requests) - before
        tool.requests.append(sent)
        tool.peaks.append(server.peak_in_flight)
        if sent != tool.expected_requests:
            raise BenchError(f"expected {tool.expected_requests} judge requests, got {sent}")
    return wall


def pytest_run(proj: Project, args: Sequence[str], passed: int) -> Callable[[], float]:
    return lambda: run_pytest(proj, args).expect(passed=passed).wall


def peer_command(
    peer: Peer, venv: Path, root: Path, api_base: str, args: Sequence[str] = ()
) -> tuple[float, str, int]:
    """One run of the peer's command against the judge at ``api_base``: its wall time, its
    output (stdout and stderr) and its exit status."""
    env = child_env()
    env.update(OPENAI_API_KEY="sk-fake", OPENAI_BASE_URL=api_base, OPENAI_API_BASE=api_base)
    env.update(peer.env)
    command = [str(venv / "bin" / peer.command[0]), *peer.command[1:], *args]
    started = time.monotonic()
    try:
        done = subprocess.run(command, cwd=root, env=env, timeout=1200, **QUIET)
    except subprocess.TimeoutExpired:
        raise BenchError(f"{peer.package} took more than 1200 s") from None
    return time.monotonic() - started, done.stdout + "\n" + done.stderr, done.returncode


def outcomes(output: str) -> tuple[int, int]:
    """The tests a peer's output says passed, and failed or errored."""
    passed = max((int(n) for n in _PASSED.findall(output)), default=0)
    return passed, sum(int(n) for n in _FAILED.findall(output))


def peer_run(peer: Peer, venv: Path, root: Path, api_base: str) -> Callable[[], float]:
    def run() -> float:
        wall, output, status = peer_command(peer, venv, root, api_base)
        passed, failed = outcomes(output)
        if status != 0 or passed != CASES or failed:
            tail = " | ".join(output.strip().splitlines()[-3:])[-300:]
            raise BenchError(f"exited {status}, {passed} passed, {failed} failed: {tail}")
        return wall

    return run


@contextmanager
def peer_project(peer: Peer, cases: int = CASES) -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix=f"agentv-bench-peer-{peer.package}-"))
    try:
        peer.files(root, cases)
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def peers(sizes: Sizes) -> Result:
    """pytest-agentv (``--agentv-concurrency 16``) and each peer on 48 judged tests with a
    250 ms judge, alternating rounds after one warm-up each; the fastest peer's median must be
    at least 10× ours."""
    result = Result("peers")
    repeats = sizes.judged_repeats  # 3 full, 1 quick
    tools: list[Tool] = []
    with ExitStack() as stack:
        server = stack.enter_context(fake_server(lambda r: Delay(LATENCY, freeform(1.0)), 10**6))
        ours = stack.enter_context(project("peers-ours"))
        ours.ini(api_base=server.api_base, cache_mode="off")
        ours.probe()
        ours.mock_target()
        ours.eval_files(CASES)
        args = [f"--agentv-concurrency={CONCURRENCY}"]
        version = importlib.metadata.version("pytest-agentv")
        tools.append(Tool(f"pytest-agentv {version}", server, CASES, pytest_run(ours, args, CASES)))
        for peer in PEERS:
            try:
                venv = ensure_venv(peer)
            except BenchError as exc:
                log(f"  {peer.name}: {exc}")
                tools.append(Tool(peer.name, None, 0, lambda: 0.0, error=str(exc)))
                continue
            judge = stack.enter_context(fake_server(peer.respond, 10**6))
            judge.echo_nonce = False
            root = stack.enter_context(peer_project(peer))
            run = peer_run(peer, venv, root, judge.api_base)
            tools.append(Tool(peer.name, judge, CASES * peer.requests_per_test, run))
        trivial = stack.enter_context(project("peers-trivial"))
        trivial.ini(cache_mode=None)
        trivial.probe()
        trivial.write("test_trivial.py", TRIVIAL_MODULE)
        tools.append(Tool("trivial", None, 0, pytest_run(trivial, [], 1)))
        for index in range(repeats + 1):
            for tool in tools:
                if tool.error is not None:
                    continue
                try:
                    wall = timed(tool)
                except BenchError as exc:
                    if tool.label.startswith(("pytest-agentv", "trivial")):
                        raise
                    tool.error = f"run {index}: {exc}"
                    log(f"  {tool.label}: {tool.error}")
                    continue
                if index:
                    tool.walls.append(wall)
                log(
                    f"  {'warm-up' if not index else f'round {index}/{repeats}'} {tool.label}: "
                    f"{wall:.2f}s, {tool.requests[-1] if tool.requests else 0} requests, "
                    f"peak {tool.peaks[-1] if tool.peaks else 0} in flight"
                )
    result.rows = rows(tools)
    keep = ("walls", "requests", "peaks", "error")
    result.details = {"cases": CASES, "latency_seconds": LATENCY, "peers_dir": str(peers_dir())}
    result.details["tools"] = {t.label: {k: getattr(t, k) for k in keep} for t in tools}
    return result


def rows(tools: list[Tool]) -> list[Row]:
    ours, *others, trivial = tools
    ours_median = median(ours.walls)
    found = [
        Row(
            metric=f"{ours.label}, {CASES} judged tests at {LATENCY * 1000:.0f} ms, "
            f"concurrency {CONCURRENCY} (peak {max(ours.peaks)} in flight)",
            measured=ours_median,
            unit="s",
            baseline=median(trivial.walls),
            baseline_label="trivial one-test run",
        )
    ]
    measured: dict[str, float] = {}
    for tool in others:
        if tool.error is not None:
            found.append(Row(f"{tool.label}: {tool.error}"[:160], None, status="ERROR"))
            continue
        measured[tool.label] = median(tool.walls)
        per_test = max(tool.requests) // CASES
        found.append(
            Row(
                metric=f"{tool.label} ({per_test} judge request{'s' * (per_test > 1)} per test, "
                f"peak {max(tool.peaks)} in flight)",
                measured=measured[tool.label],
                unit="s",
                baseline=ours_median,
                baseline_label="pytest-agentv",
                ratio=measured[tool.label] / ours_median,
            )
        )
    if not measured:
        target = f"≥ {TARGET:g}×"
        return [
            *found,
            Row("fastest peer / ours: no peer measured", None, target=target, status="ERROR"),
        ]
    fastest = min(measured, key=measured.__getitem__)
    ratio = measured[fastest] / ours_median
    found.append(
        Row(
            metric=f"fastest peer / ours ({fastest})",
            measured=measured[fastest],
            unit="s",
            baseline=ours_median,
            baseline_label="pytest-agentv",
            ratio=ratio,
            target=f"≥ {TARGET:g}×",
            status=verdict(ratio >= TARGET),
        )
    )
    log(f"  fastest peer {fastest}: {ratio:.2f}× ours")
    return found
