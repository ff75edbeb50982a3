"""Shared machinery: generated projects, pytest subprocesses, probes and the fake judge server.

Every measurement runs pytest in a fresh interpreter inside a throw-away project, so that one
benchmark's imports, caches and memory never leak into another's numbers.
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

REPO = Path(__file__).resolve().parent.parent
TESTS = REPO / "tests"
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from fake_openai import Delay, FakeOpenAI, Request, freeform  # noqa: E402

if TYPE_CHECKING:
    from fake_openai import Action

__all__ = [
    "REPO",
    "BenchError",
    "ConnectionCount",
    "Delay",
    "FakeOpenAI",
    "Project",
    "PytestRun",
    "Request",
    "failure_lines",
    "fake_server",
    "freeform",
    "log",
    "median",
    "package_from",
    "plain_module",
    "project",
    "run_pytest",
]

CANNED = "You can return any item within 30 days of delivery for a full refund."
TARGETS_YAML = f"""\
targets:
  - name: default
    provider: mock
    response: "{CANNED}"
"""
CASES_PER_FILE = 100

#: Printed by every generated project at session end and parsed by ``run_pytest``. It measures
#: from the end of collection so that interpreter start-up and imports are excluded.
PROBE_CONFTEST = '''\
"""Benchmark probe: run-phase seconds, peak RSS and which heavy modules got imported."""

import resource
import sys
import time

_collected: list[tuple[float, float]] = []


def pytest_configure(config):
    {eager}


def pytest_collection_finish(session):
    _collected.append((time.monotonic(), time.process_time()))


def pytest_sessionfinish(session, exitstatus):
    wall, cpu = _collected[0] if _collected else (float("nan"), float("nan"))
    run = time.monotonic() - wall
    run_cpu = time.process_time() - cpu
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    litellm = "litellm" in sys.modules
    pydantic = "pydantic" in sys.modules
    print(
        f"\\nBENCH run_seconds={{run:.6f}} run_cpu_seconds={{run_cpu:.6f}} maxrss={{rss}} "
        f"litellm={{litellm}} pydantic={{pydantic}}"
    )
'''
#: One-off imports done in ``pytest_configure`` so that the run phase holds only the steady-state
#: cost that the ideal ``n × delay / concurrency`` can be compared with. litellm: its import and
#: the OpenAI SDK resources it imports lazily at the first call (0.3-0.8 s on the reference
#: machine). lean: litellm's price table, read without importing litellm (skipped on a plugin
#: that has no lean transport).
EAGER_IMPORTS = {
    "litellm": """\
try:
    from pytest_agentv.llm.transports import litellm_module
except ImportError:  # a plugin from before the llm package
    from pytest_agentv.judge import litellm_module

litellm_module()
try:
    import openai.resources  # noqa: F401
except ImportError:
    pass
""",
    "lean": """\
try:
    from pytest_agentv.llm.prices import price_for
except ImportError:  # a plugin from before the llm package
    try:
        from pytest_agentv.prices import price_for
    except ImportError:  # a plugin without the lean transport
        price_for = None
if price_for is not None:
    price_for("openai/fake-judge")
""",
}

TRIVIAL_EVALUATOR = '''\

from pytest_agentv import EvaluationScore


class Trivial:
    """An in-process evaluator that costs nothing, so only the plugin's own work is timed."""

    kind = "trivial"

    def evaluate(self, context):
        return EvaluationScore.graded(1.0 if context.candidate else 0.0)


def pytest_agentv_make_evaluator(config, kind):
    return Trivial() if kind == "trivial" else None
'''

_BENCH_LINE = re.compile(r"^BENCH (.*)$", re.MULTILINE)
_OUTCOME = re.compile(
    r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected|tests? collected)"
)
#: Variables that would change what the generated projects do, removed from the child's env.
_SCRUBBED_PREFIXES = ("AGENTV_", "PYTEST_", "OPENAI_", "LITELLM_")


class BenchError(RuntimeError):
    """A benchmark could not produce a trustworthy number (wrong outcomes, crash, timeout)."""


def log(message: str) -> None:
    """Progress goes to stderr so that stdout holds only the results table."""
    print(message, file=sys.stderr, flush=True)


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


@dataclass
class Project:
    """A generated pytest project in a temporary folder (its own rootdir and ini file)."""

    path: Path

    def write(self, name: str, text: str) -> Path:
        target = self.path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        return target

    def ini(self, *, api_base: str | None = None, cache_mode: str | None = "off") -> None:
        """pytest.ini with the fake judge and the record/replay mode, when given.

        A project also run with ``-p no:agentv`` must pass neither: pytest warns about ini keys
        no plugin declared.
        """
        lines = ["[pytest]", "asyncio_default_fixture_loop_scope = function"]
        if api_base is not None:
            lines += [
                "agentv_judge_model = openai/fake-judge",
                f"agentv_judge_api_base = {api_base}",
            ]
        if cache_mode is not None:
            lines.append(f"agentv_cache_mode = {cache_mode}")
        self.write("pytest.ini", "\n".join(lines) + "\n")

    def probe(self, *, eager: Sequence[str] = (), trivial_evaluator: bool = False) -> None:
        """The probe conftest; ``eager`` names one-off imports (``EAGER_IMPORTS``) done in
        ``pytest_configure``, before anything is timed."""
        body = "".join(EAGER_IMPORTS[name] for name in eager) or "pass\n"
        text = PROBE_CONFTEST.format(eager=textwrap.indent(body, "    ").strip())
        if trivial_evaluator:
            text += TRIVIAL_EVALUATOR
        self.write("conftest.py", text)

    def mock_target(self) -> None:
        self.write(".agentv/targets.yaml", TARGETS_YAML)

    def eval_files(self, count: int, *, trivial: bool = False) -> None:
        """``count`` distinct cases, 100 per file; LLM-judged unless ``trivial``."""
        for first in range(0, count, CASES_PER_FILE):
            size = min(CASES_PER_FILE, count - first)
            name = f"evals/suite_{first // CASES_PER_FILE:03d}.eval.yaml"
            self.write(name, eval_yaml(first, size, trivial=trivial))

    def plain_modules(self, count: int) -> None:
        """The baseline: the same number of parametrized tests, 100 per module."""
        for first in range(0, count, CASES_PER_FILE):
            size = min(CASES_PER_FILE, count - first)
            name = f"tests/test_plain_{first // CASES_PER_FILE:03d}.py"
            self.write(name, plain_module(first, size))


def eval_yaml(first: int, count: int, *, trivial: bool) -> str:
    lines = [f"description: benchmark cases {first} to {first + count - 1}", "evalcases:"]
    for i in range(first, first + count):
        lines += [
            f"  - id: case-{i:05d}",
            "    expected_outcome: States that items can be returned within 30 days",
            f"    input: How long do I have to return order number {i}?",
        ]
        if trivial:
            lines.append("    evaluators: [{name: t, type: trivial}]")
    return "\n".join(lines) + "\n"


def plain_module(first: int, count: int) -> str:
    return textwrap.dedent(
        f'''\
        """Baseline: a parametrized test doing what a mock target and a trivial judge do."""

        import pytest

        CANNED = "{CANNED}"


        def answer(i):
            return CANNED


        def score(text):
            return 1.0 if text else 0.0


        @pytest.mark.parametrize("i", range({first}, {first + count}))
        def test_case(i):
            assert score(answer(i)) >= 0.8
        '''
    )


@contextmanager
def project(name: str) -> Iterator[Project]:
    """A fresh project folder outside the repository, removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix=f"agentv-bench-{name}-"))
    try:
        yield Project(path)
    finally:
        shutil.rmtree(path, ignore_errors=True)


@contextmanager
def fake_server(
    responder: Callable[[Request], Action], max_requests: int = 20_000
) -> Iterator[FakeOpenAI]:
    """The tests' loopback server (its listen backlog fits 32 simultaneous connects), stopped
    when the block ends."""
    server = FakeOpenAI(responder, max_requests=max_requests).start()
    try:
        yield server
    finally:
        server.stop()


class ConnectionCount:
    """TCP connections the loopback server accepted. A client that pools its connections
    opens about as many as it has requests in flight; one per request means it does not."""

    def __init__(self, server: FakeOpenAI) -> None:
        self.value = 0
        inner = getattr(server, "_server", None)  # the helper's socketserver, if still named so
        original = getattr(inner, "get_request", None)
        self.available = original is not None
        if original is not None:

            def get_request() -> Any:
                accepted = original()
                self.value += 1  # only the server's accept thread calls this
                return accepted

            inner.get_request = get_request  # type: ignore[union-attr]


@dataclass
class PytestRun:
    returncode: int
    wall: float
    #: user + system CPU seconds of the whole subprocess (runs are sequential, so the change
    #: in this process's RUSAGE_CHILDREN is this run's); steadier than wall on a busy machine
    cpu: float
    stdout: str
    stderr: str
    probe: dict[str, str] = field(default_factory=dict)
    outcomes: dict[str, int] = field(default_factory=dict)

    @property
    def run_seconds(self) -> float:
        return float(self.probe["run_seconds"])

    @property
    def run_cpu_seconds(self) -> float:
        """CPU time of all the process's threads during the run phase."""
        return float(self.probe["run_cpu_seconds"])

    @property
    def maxrss_mib(self) -> float:
        """``ru_maxrss`` is KiB on Linux and bytes on macOS."""
        raw = int(self.probe["maxrss"])
        return raw / (1024 * 1024) if sys.platform == "darwin" else raw / 1024

    def imported(self, module: str) -> bool:
        return self.probe[module] == "True"

    def tail(self, lines: int = 25) -> str:
        text = (self.stdout + "\n" + self.stderr).strip().splitlines()
        return "\n".join(text[-lines:])

    def expect(self, **outcomes: int) -> PytestRun:
        """Fail the benchmark unless pytest reported exactly these outcome counts."""
        if self.outcomes != outcomes or "run_seconds" not in self.probe:
            reasons = "\n".join(failure_lines(self)) or self.tail()
            raise BenchError(
                f"pytest exited {self.returncode} with outcomes {self.outcomes}, expected "
                f"{outcomes}:\n{reasons}"
            )
        return self


def failure_lines(run: PytestRun, limit: int = 12) -> list[str]:
    """Why cases did not pass: the report's miss lines and the short summary's FAILED/ERROR."""
    found = [
        line.strip()
        for line in run.stdout.splitlines()
        if line.lstrip().startswith(("✗", "FAILED ", "ERROR ", "E "))
    ]
    return found[:limit]


#: A folder holding another revision's ``pytest_agentv``, put ahead of the installed one by
#: ``package_from`` (``python bench/run.py versus --against REV``).
_package_path: list[Path] = []


@contextmanager
def package_from(revision: str) -> Iterator[None]:
    """Runs started inside use ``pytest_agentv`` as ``revision`` has it (``git archive`` of the
    package into a temporary folder, first on ``PYTHONPATH``); the rest of the venv is shared."""
    folder = Path(tempfile.mkdtemp(prefix="agentv-versus-"))
    try:
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", revision, "pytest_agentv"],
            capture_output=True,
            check=False,
        )
        if archive.returncode != 0:
            raise BenchError(f"git archive {revision}: {archive.stderr.decode().strip()}")
        subprocess.run(["tar", "-x", "-C", str(folder)], input=archive.stdout, check=True)
        _package_path.append(folder)
        yield
    finally:
        if folder in _package_path:
            _package_path.remove(folder)
        shutil.rmtree(folder, ignore_errors=True)


def child_env() -> dict[str, str]:
    """The caller's environment minus anything that configures pytest, the plugin or a model.

    Bytecode caching is switched back on: with ``PYTHONDONTWRITEBYTECODE`` every run would
    recompile (and assertion-rewrite) the plugin and the generated modules, which measures the
    compiler rather than the steady state users see; the warm-up runs fill the caches.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(_SCRUBBED_PREFIXES)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONUNBUFFERED"] = "1"
    if _package_path:
        env["PYTHONPATH"] = os.pathsep.join([str(_package_path[-1]), env.get("PYTHONPATH", "")])
    return env


def start_pytest(proj: Project, args: Sequence[str]) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]
    return subprocess.Popen(
        command,
        cwd=proj.path,
        env=child_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run_pytest(
    proj: Project,
    args: Sequence[str] = (),
    *,
    timeout: float = 900.0,
    progress: Callable[[], None] | None = None,
    progress_every: float = 5.0,
) -> PytestRun:
    """Run pytest in a fresh interpreter; ``wall`` covers the whole subprocess."""
    started = time.monotonic()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    process = start_pytest(proj, args)
    deadline = started + timeout
    while True:
        try:
            stdout, stderr = process.communicate(
                timeout=progress_every if progress else max(0.0, deadline - time.monotonic())
            )
            break
        except subprocess.TimeoutExpired:
            if time.monotonic() >= deadline:
                process.kill()
                process.communicate()
                raise BenchError(f"pytest {' '.join(args)} took more than {timeout:.0f}s") from None
            if progress is not None:
                progress()
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - children.ru_utime) + (after.ru_stime - children.ru_stime)
    probe: dict[str, str] = {}
    for line in _BENCH_LINE.findall(stdout):
        probe.update(pair.split("=", 1) for pair in line.split())
    outcomes: dict[str, int] = {}
    summary = stdout.strip().splitlines()[-1] if stdout.strip() else ""
    for number, kind in _OUTCOME.findall(summary):
        kind = "errors" if kind == "error" else kind
        kind = "collected" if "collected" in kind else kind
        outcomes[kind] = int(number)
    return PytestRun(process.returncode, wall, cpu, stdout, stderr, probe, outcomes)
