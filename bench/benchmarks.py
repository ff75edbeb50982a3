"""Eight of the ten benchmarks (``dispatch.py`` has the other two). Each measures the plugin
against a baseline taken in the same run.

A benchmark returns rows for the table (measured, baseline, ratio, target, verdict) and the raw
samples behind them for the JSON file. It raises ``BenchError`` when a run did not do what it
should (wrong outcome counts, a crash, a timeout), because a timing of a broken run is not a
measurement.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from harness import (
    BenchError,
    ConnectionCount,
    Delay,
    Project,
    PytestRun,
    child_env,
    failure_lines,
    fake_server,
    freeform,
    log,
    median,
    project,
    run_pytest,
)

Status = Literal["PASS", "MISS", "info", "ERROR"]
Value = float | int | str | None
JUDGE_DELAY = 0.2
SHORT_JUDGE_TIMEOUT = 30
CONCURRENCIES = (1, 8, 32)


@dataclass(frozen=True)
class Sizes:
    """How big each benchmark is; ``--quick`` shrinks them for a smoke run."""

    throughput_cases: int = 200
    overhead_cases: int = 2000
    overhead_repeats: int = 5
    startup_modules: int = 20
    startup_repeats: int = 10
    memory_cases: int = 10_000
    replay_cases: int = 50
    judged_small: int = 48
    judged_large: int = 200
    judged_cpu_cases: int = 300
    judged_repeats: int = 3
    report_cases: int = 1000
    report_repeats: int = 3
    #: MB of one JSONL eval case line, of a baseline line under the limit and of one over it.
    eval_line_mb: float = 9.4
    allowed_line_mb: float = 15
    refused_line_mb: float = 100
    #: Cases of the three dispatch sizes (250, 200 and 100 ms judges), and of the xdist one.
    dispatch_cases: tuple[int, int, int] = (48, 200, 2000)
    dispatch_repeats: int = 3
    startup_pairs: int = 5
    shared_limit_cases: int = 96

    @classmethod
    def quick(cls) -> Sizes:
        return cls(
            throughput_cases=40,
            overhead_cases=400,
            overhead_repeats=3,
            startup_repeats=5,
            memory_cases=2000,
            replay_cases=20,
            judged_cpu_cases=100,
            judged_repeats=1,
            report_cases=200,
            report_repeats=1,
            refused_line_mb=20,
            dispatch_cases=(48, 100, 400),
            dispatch_repeats=1,
            startup_pairs=3,
            shared_limit_cases=48,
        )


@dataclass
class Row:
    metric: str
    measured: Value
    unit: str = ""
    baseline: Value = None
    baseline_label: str = ""
    ratio: float | None = None
    target: str = ""
    status: Status = "info"


@dataclass
class Result:
    name: str
    rows: list[Row] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "rows": [asdict(row) for row in self.rows],
            "details": self.details,
            "error": self.error,
        }


def verdict(ok: bool) -> Status:
    return "PASS" if ok else "MISS"


def alternate(
    runs: int, first: Callable[[], PytestRun], second: Callable[[], PytestRun]
) -> tuple[list[PytestRun], list[PytestRun]]:
    """One unmeasured warm-up of each (bytecode caches), then ``runs`` alternating pairs, so
    that a burst of load from elsewhere on the machine hits both sides alike."""
    first()
    second()
    a: list[PytestRun] = []
    b: list[PytestRun] = []
    for index in range(runs):
        a.append(first())
        b.append(second())
        log(f"  pair {index + 1}/{runs}: {a[-1].wall:.3f}s vs {b[-1].wall:.3f}s")
    return a, b


def spread(runs: list[PytestRun]) -> dict[str, Any]:
    walls = [run.wall for run in runs]
    return {"walls": walls, "median": median(walls), "min": min(walls), "max": max(walls)}


# -- 1. throughput ----------------------------------------------------------------------------
RAW_LITELLM = '''\
"""Floor for the throughput benchmark: the plugin's judge requests sent straight through
litellm, with the same settings, at the same concurrency, after one warm-up call."""

import asyncio
import json
import sys
import time

try:
    from pytest_agentv.llm.transports import litellm_module
except ImportError:  # a plugin from before the llm package
    from pytest_agentv.judge import litellm_module

API_BASE, CONCURRENCY = sys.argv[1], int(sys.argv[2])
with open(sys.argv[3], encoding="utf-8") as stream:
    BODIES = json.load(stream)
PASSED_ON = ("temperature", "max_tokens", "response_format")
litellm = litellm_module()


async def call(body, limit):
    async with limit:
        await litellm.acompletion(
            model="openai/fake-judge",
            api_base=API_BASE,
            api_key="sk-no-key-needed",
            messages=body["messages"],
            **{key: body[key] for key in PASSED_ON if key in body},
            num_retries=0,
            max_retries=0,
            drop_params=True,
            timeout=120,
        )


async def main():
    limit = asyncio.Semaphore(CONCURRENCY)
    await call(BODIES[0], limit)
    started, cpu = time.monotonic(), time.process_time()
    await asyncio.gather(*(call(body, limit) for body in BODIES))
    wall, cpu = time.monotonic() - started, time.process_time() - cpu
    print(f"BENCH raw_seconds={wall:.6f} raw_cpu_seconds={cpu:.6f}")


asyncio.run(main())
'''


def raw_litellm(proj: Project, api_base: str, concurrency: int) -> tuple[float, float]:
    """Wall and CPU seconds of the raw-litellm floor (``raw_bodies.json`` holds the requests)."""
    done = subprocess.run(
        [sys.executable, "raw_litellm.py", api_base, str(concurrency), "raw_bodies.json"],
        cwd=proj.path,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=900,
    )
    found = dict(
        pair.split("=", 1)
        for line in done.stdout.splitlines()
        if line.startswith("BENCH ")
        for pair in line.split()[1:]
    )
    if done.returncode != 0 or "raw_seconds" not in found:
        raise BenchError(
            f"raw litellm baseline failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
        )
    return float(found["raw_seconds"]), float(found["raw_cpu_seconds"])


def throughput(sizes: Sizes) -> Result:
    """LLM-judged cases against a judge that takes 200 ms: does concurrency N divide the time
    by N? Times the run phase only (the probe does litellm's one-off imports beforehand). The
    same requests sent through bare litellm give the floor this machine and server allow."""
    n = sizes.throughput_cases
    result = Result("throughput")
    with (
        fake_server(lambda request: Delay(JUDGE_DELAY, freeform(1.0)), n * 10) as server,
        project("throughput") as proj,
    ):
        proj.ini(api_base=server.api_base, cache_mode="off")
        proj.probe(eager=("litellm", "lean"))
        proj.mock_target()
        proj.eval_files(n)
        proj.write("raw_litellm.py", RAW_LITELLM)
        connections = ConnectionCount(server)

        def judged_run(concurrency: int, *extra: str) -> tuple[PytestRun, dict[str, Any]]:
            server.peak_in_flight = 0
            before, opened = len(server.requests), connections.value
            run = run_pytest(proj, [f"--agentv-concurrency={concurrency}", *extra])
            run.expect(passed=n)
            requests = len(server.requests) - before
            if requests != n:
                raise BenchError(f"expected {n} judge requests, the server saw {requests}")
            ideal = n * JUDGE_DELAY / concurrency
            details: dict[str, Any] = {
                "options": [f"--agentv-concurrency={concurrency}", *extra],
                "run_seconds": run.run_seconds,
                "run_cpu_seconds": run.run_cpu_seconds,
                "subprocess_wall": run.wall,
                "ideal_seconds": ideal,
                "ratio": run.run_seconds / ideal,
                "peak_in_flight": server.peak_in_flight,
                "requests": requests,
                "connections": connections.value - opened if connections.available else None,
            }
            log(
                f"  {' '.join(details['options'])}: {run.run_seconds:.2f}s run "
                f"phase, {run.run_cpu_seconds:.2f}s CPU (ideal {ideal:.2f}s, peak "
                f"{details['peak_in_flight']} in flight, {details['connections']} connections)"
            )
            return run, details

        def shape(details: dict[str, Any]) -> str:
            opened = details["connections"]
            return f"peak {details['peak_in_flight']} in flight" + (
                f", {opened} connections" if opened is not None else ""
            )

        for concurrency in CONCURRENCIES:
            run, details = judged_run(concurrency)
            ideal, ratio = details["ideal_seconds"], details["ratio"]
            result.details[f"concurrency_{concurrency}"] = details
            targeted = concurrency == max(CONCURRENCIES)
            result.rows.append(
                Row(
                    metric=f"{n} cases, concurrency {concurrency}: run phase ({shape(details)})",
                    measured=run.run_seconds,
                    unit="s",
                    baseline=ideal,
                    baseline_label="ideal n×0.2/c",
                    ratio=ratio,
                    target="ratio ≤ 1.5" if targeted else "",
                    status=verdict(ratio <= 1.5) if targeted else "info",
                )
            )
            if concurrency == 1:
                continue
            if not (proj.path / "raw_bodies.json").exists():
                bodies = [request.body for request in server.requests[-n:]]
                proj.write("raw_bodies.json", json.dumps(bodies))
            opened = connections.value
            raw_wall, raw_cpu = raw_litellm(proj, server.api_base, concurrency)
            raw_connections = connections.value - opened if connections.available else None
            log(
                f"  concurrency {concurrency}, bare litellm: {raw_wall:.2f}s, {raw_cpu:.2f}s CPU, "
                f"{raw_connections} connections"
            )
            details.update(
                raw_litellm_seconds=raw_wall,
                raw_litellm_cpu_seconds=raw_cpu,
                raw_litellm_connections=raw_connections,
            )
            result.rows += [
                Row(
                    metric=f"  same requests through bare litellm, concurrency {concurrency}"
                    + (f" ({raw_connections} connections)" if raw_connections is not None else ""),
                    measured=raw_wall,
                    unit="s",
                    baseline=ideal,
                    baseline_label="ideal n×0.2/c",
                    ratio=raw_wall / ideal,
                ),
                Row(
                    metric=f"  CPU per case, concurrency {concurrency} (whole pytest process)",
                    measured=run.run_cpu_seconds / n * 1000,
                    unit="ms",
                    baseline=raw_cpu / n * 1000,
                    baseline_label="bare litellm",
                    ratio=run.run_cpu_seconds / raw_cpu,
                ),
            ]
        # A judge timeout below the per-attempt timeout makes each attempt's timeout the
        # remaining deadline, a different number per call; litellm keys its client cache on it.
        top = max(CONCURRENCIES)
        run, details = judged_run(top, f"--agentv-judge-timeout={SHORT_JUDGE_TIMEOUT}")
        result.details[f"concurrency_{top}_judge_timeout_{SHORT_JUDGE_TIMEOUT}"] = details
        result.rows.append(
            Row(
                metric=f"  same, --agentv-judge-timeout {SHORT_JUDGE_TIMEOUT} ({shape(details)})",
                measured=run.run_seconds,
                unit="s",
                baseline=details["ideal_seconds"],
                baseline_label="ideal n×0.2/c",
                ratio=details["ratio"],
            )
        )
    return result


# -- 2. overhead ------------------------------------------------------------------------------
def overhead(sizes: Sizes) -> Result:
    """What collecting and running a case costs beyond a plain parametrized test doing the same
    work: mock target, trivial in-process evaluator, whole-subprocess wall time."""
    n = sizes.overhead_cases
    result = Result("overhead")
    with project("overhead-plugin") as plugin, project("overhead-plain") as plain:
        plugin.ini(cache_mode="off")
        plugin.probe(trivial_evaluator=True)
        plugin.mock_target()
        plugin.eval_files(n, trivial=True)
        plain.ini(cache_mode="off")
        plain.probe()
        plain.plain_modules(n)
        with_plugin, without = alternate(
            sizes.overhead_repeats,
            lambda: run_pytest(plugin).expect(passed=n),
            lambda: run_pytest(plain).expect(passed=n),
        )
    a, b = median([r.wall for r in with_plugin]), median([r.wall for r in without])
    per_case_ms = (a - b) / n * 1000
    ratio = a / b
    result.details = {
        "cases": n,
        "plugin": spread(with_plugin),
        "plain": spread(without),
        "plugin_cpu_median": median([r.cpu for r in with_plugin]),
        "plain_cpu_median": median([r.cpu for r in without]),
        "plugin_run_phase_median": median([r.run_seconds for r in with_plugin]),
        "plain_run_phase_median": median([r.run_seconds for r in without]),
        "added_ms_per_case": per_case_ms,
    }
    result.rows += [
        Row(
            metric=f"{n} cases, wall (median of {sizes.overhead_repeats})",
            measured=a,
            unit="s",
            baseline=b,
            baseline_label="plain parametrize",
            ratio=ratio,
            target="ratio < 2",
            status=verdict(ratio < 2),
        ),
        Row(
            metric="added time per case",
            measured=per_case_ms,
            unit="ms",
            target="< 1 ms",
            status=verdict(per_case_ms < 1),
        ),
        Row(
            metric="run phase only (after collection), median",
            measured=result.details["plugin_run_phase_median"],
            unit="s",
            baseline=result.details["plain_run_phase_median"],
            baseline_label="plain parametrize",
            ratio=result.details["plugin_run_phase_median"]
            / result.details["plain_run_phase_median"],
        ),
    ]
    return result


# -- 3. startup -------------------------------------------------------------------------------
SMALL_MODULE = '''\
"""A small ordinary test module: the plugin must cost next to nothing here."""


def test_add():
    assert 1 + 1 == 2


def test_text():
    assert "agent".upper() == "AGENT"


def test_list():
    assert sorted([3, 1, 2]) == [1, 2, 3]
'''


def startup(sizes: Sizes) -> Result:
    """A project with no eval files: what does having the plugin installed add to
    ``pytest --collect-only``, and does it import litellm or pydantic?"""
    modules = sizes.startup_modules
    expected = modules * 3
    result = Result("startup")
    with project("startup") as proj:
        proj.ini(cache_mode=None)
        proj.probe()
        for index in range(modules):
            proj.write(f"tests/test_small_{index:02d}.py", SMALL_MODULE)
        with_plugin, without = alternate(
            sizes.startup_repeats,
            lambda: run_pytest(proj, ["--collect-only"]).expect(collected=expected),
            lambda: run_pytest(proj, ["--collect-only", "-p", "no:agentv"]).expect(
                collected=expected
            ),
        )
    a, b = median([r.wall for r in with_plugin]), median([r.wall for r in without])
    added_ms = (a - b) * 1000
    pairs = list(zip(with_plugin, without, strict=True))
    paired_ms = median([(x.wall - y.wall) * 1000 for x, y in pairs])
    cpu_ms = median([(x.cpu - y.cpu) * 1000 for x, y in pairs])
    litellm = with_plugin[-1].imported("litellm")
    pydantic = with_plugin[-1].imported("pydantic")
    pydantic_without = without[-1].imported("pydantic")
    result.details = {
        "modules": modules,
        "tests": expected,
        "plugin": spread(with_plugin),
        "no_plugin": spread(without),
        "added_ms": added_ms,
        "added_ms_paired_median": paired_ms,
        "added_cpu_ms_paired_median": cpu_ms,
        "plugin_cpu": [run.cpu for run in with_plugin],
        "no_plugin_cpu": [run.cpu for run in without],
        "imports_with_plugin": {"litellm": litellm, "pydantic": pydantic},
        "imports_without_plugin": {
            "litellm": without[-1].imported("litellm"),
            "pydantic": pydantic_without,
        },
    }
    result.rows += [
        Row(
            metric=f"--collect-only, {expected} tests (median of {sizes.startup_repeats})",
            measured=a * 1000,
            unit="ms",
            baseline=b * 1000,
            baseline_label="-p no:agentv",
            ratio=a / b,
        ),
        Row(
            metric="added start-up time",
            measured=added_ms,
            unit="ms",
            target="< 30 ms",
            status=verdict(added_ms < 30),
        ),
        Row(
            metric="added start-up time, median of pair differences", measured=paired_ms, unit="ms"
        ),
        Row(
            metric="added CPU time (user+sys), median of pair differences",
            measured=cpu_ms,
            unit="ms",
        ),
        Row(
            metric="litellm imported",
            measured="yes" if litellm else "no",
            target="no",
            status=verdict(not litellm),
        ),
        Row(
            metric="pydantic imported",
            measured="yes" if pydantic else "no",
            baseline="yes" if pydantic_without else "no",
            baseline_label="-p no:agentv",
        ),
    ]
    return result


# -- 4. memory --------------------------------------------------------------------------------
def count_store(store: Path) -> int:
    return sum(1 for path in store.rglob("*.json") if not path.name.startswith(".tmp-"))


def memory(sizes: Sizes) -> Result:
    """Peak RSS of a large LLM-judged suite answered from the record/replay store, against as
    many plain tests. The store is recorded first, then the server is stopped, so a replay run
    that tried to call the model would fail its cases."""
    n = sizes.memory_cases
    result = Result("memory")
    with project("memory-plugin") as plugin, project("memory-plain") as plain:
        store = plugin.path.parent / f"{plugin.path.name}-store"
        try:
            with fake_server(lambda request: freeform(1.0), max_requests=n + 100) as server:
                plugin.ini(api_base=server.api_base, cache_mode="off")
                plugin.probe()
                plugin.mock_target()
                plugin.eval_files(n)
                record = [
                    "--agentv-cache-mode=readwrite",
                    f"--agentv-cache-dir={store}",
                    "--agentv-concurrency=32",
                ]
                log(f"  recording {n} judge replies (readwrite, concurrency 32)...")
                recorded = run_pytest(
                    plugin,
                    record,
                    timeout=3600,
                    progress=lambda: log(f"  recorded {len(server.requests)}/{n}"),
                    progress_every=10,
                )
                first_pass_failures = failure_lines(recorded)
                if recorded.outcomes != {"passed": n}:
                    # A case the plugin failed has no stored reply; readwrite records only those.
                    log(f"  recording pass 1 ended {recorded.outcomes}: {first_pass_failures}")
                    run_pytest(plugin, record, timeout=3600).expect(passed=n)
                requests = len(server.requests)
            stored = count_store(store)
            log(f"  recorded in {recorded.wall:.1f}s: {requests} requests, {stored} stored")
            if stored != n:
                raise BenchError(f"recording made {requests} requests and {stored} files, not {n}")
            log("  replaying with the server stopped...")
            replay = run_pytest(
                plugin, ["--agentv-cache-mode=replay", f"--agentv-cache-dir={store}"], timeout=3600
            ).expect(passed=n)
            log(f"  replay: {replay.wall:.1f}s, peak RSS {replay.maxrss_mib:.0f} MiB")
            plain.ini(cache_mode="off")
            plain.probe()
            plain.plain_modules(n)
            run_pytest(plain, ["--collect-only"]).expect(collected=n)  # bytecode caches
            baseline = run_pytest(plain, timeout=3600).expect(passed=n)
            log(f"  plain: {baseline.wall:.1f}s, peak RSS {baseline.maxrss_mib:.0f} MiB")
        finally:
            shutil.rmtree(store, ignore_errors=True)
    ratio = replay.maxrss_mib / baseline.maxrss_mib
    result.details = {
        "cases": n,
        "record_wall": recorded.wall,
        "record_first_pass_outcomes": recorded.outcomes,
        "record_first_pass_failures": first_pass_failures,
        "record_requests": requests,
        "record_run_phase": recorded.run_seconds,
        "record_peak_rss_mib": recorded.maxrss_mib,
        "replay_wall": replay.wall,
        "replay_run_phase": replay.run_seconds,
        "replay_peak_rss_mib": replay.maxrss_mib,
        "replay_imported_litellm": replay.imported("litellm"),
        "plain_wall": baseline.wall,
        "plain_run_phase": baseline.run_seconds,
        "plain_peak_rss_mib": baseline.maxrss_mib,
    }
    result.rows += [
        Row(
            metric=f"{n} cases replayed: peak RSS",
            measured=replay.maxrss_mib,
            unit="MiB",
            baseline=baseline.maxrss_mib,
            baseline_label="plain parametrize",
            ratio=ratio,
            target="ratio < 2",
            status=verdict(ratio < 2),
        ),
        Row(
            metric="replay run: wall",
            measured=replay.wall,
            unit="s",
            baseline=baseline.wall,
            baseline_label="plain parametrize",
            ratio=replay.wall / baseline.wall,
        ),
        Row(
            metric="replay run: litellm imported",
            measured="yes" if replay.imported("litellm") else "no",
        ),
        Row(
            metric="recording run (readwrite, concurrency 32): wall",
            measured=recorded.wall,
            unit="s",
        ),
        Row(
            metric="recording run: cases the plugin failed (should pass)",
            measured=n - recorded.outcomes.get("passed", 0),
            target="0",
            status=verdict(recorded.outcomes == {"passed": n}),
        ),
    ]
    return result


# -- 5. replay --------------------------------------------------------------------------------
def replay(sizes: Sizes) -> Result:
    """Run an LLM-judged suite twice in readwrite mode: the second run must be served entirely
    from the store."""
    n = sizes.replay_cases
    result = Result("replay")
    with fake_server(lambda request: freeform(1.0)) as server, project("replay") as proj:
        proj.ini(api_base=server.api_base, cache_mode="readwrite")
        proj.probe()
        proj.mock_target()
        proj.eval_files(n)
        first = run_pytest(proj, ["--agentv-cache-mode=readwrite"]).expect(passed=n)
        after_first = len(server.requests)
        second = run_pytest(proj, ["--agentv-cache-mode=readwrite"]).expect(passed=n)
        after_second = len(server.requests) - after_first
    result.details = {
        "cases": n,
        "run1_requests": after_first,
        "run2_requests": after_second,
        "run1_wall": first.wall,
        "run2_wall": second.wall,
        "run2_imported_litellm": second.imported("litellm"),
    }
    result.rows += [
        Row(
            metric=f"{n} cases, run 1: HTTP requests",
            measured=after_first,
            baseline=n,
            baseline_label="cases",
        ),
        Row(
            metric="run 2: HTTP requests",
            measured=after_second,
            target="0",
            status=verdict(after_second == 0),
        ),
        Row(
            metric="run 2: wall",
            measured=second.wall,
            unit="s",
            baseline=first.wall,
            baseline_label="run 1",
            ratio=second.wall / first.wall,
        ),
    ]
    return result


# -- 6. judged ---------------------------------------------------------------------------------
SMALL_DELAY = 0.25
LARGE_DELAY = 0.2
TRIVIAL_MODULE = """\
def test_trivial():
    pass
"""


def transports() -> list[str]:
    """The judge transports the installed plugin offers (a plugin from before the lean
    transport has no option: it only has litellm, and is run without the option)."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "try:\n"
            "    from pytest_agentv.options import OPTIONS\n"
            "except ImportError:  # a plugin from before the option table had its module\n"
            "    from pytest_agentv.settings import OPTIONS\n"
            "found = [o.choices for o in OPTIONS if o.name == 'judge_transport']\n"
            "print(' '.join(found[0] if found else ()))",
        ],
        cwd=tempfile.gettempdir(),  # not the repository: the installed plugin is asked
        env=child_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.split() or ["litellm only"]


def transport_args(transport: str) -> list[str]:
    return [] if transport == "litellm only" else [f"--agentv-judge-transport={transport}"]


def ranged(values: list[float], unit: str = "s") -> str:
    """How many samples a median has and how far apart they were: the noise of this run."""
    if len(values) < 2:
        return "1 run"
    digits = 1 if unit == "ms" else 2
    return f"median of {len(values)}, {min(values):.{digits}f}-{max(values):.{digits}f} {unit}"


def judged(sizes: Sizes) -> Result:
    """Whole ``pytest`` commands, start-up included, against the floor of the work: a trivial
    pytest run in the same venv plus n × latency / concurrency. One case judged at once (all
    of its cost beyond the trivial run is ours), 48 cases at 250 ms (concurrency 1 and 16), 200
    cases at 200 ms (concurrency 32), for each transport; then the CPU a judged case costs at
    zero judge latency, beyond a plain test's."""
    small, large, cpu_cases = sizes.judged_small, sizes.judged_large, sizes.judged_cpu_cases
    repeats = sizes.judged_repeats
    kinds = transports()
    result = Result("judged")
    delay = {"seconds": 0.0}

    def respond(request: Any) -> Any:
        wait = delay["seconds"]
        return Delay(wait, freeform(1.0)) if wait else freeform(1.0)

    scenarios = (
        ("one", 1, 0.0, 1),
        ("small_c1", small, SMALL_DELAY, 1),
        ("small_c16", small, SMALL_DELAY, 16),
        ("large_c32", large, LARGE_DELAY, 32),
    )
    walls: dict[str, list[float]] = {"trivial": []}
    imported: dict[str, bool] = {}
    cpu: dict[str, list[float]] = {"plain": []}
    with (
        fake_server(respond, max_requests=10**6) as server,
        project("judged-trivial") as trivial,
        project("judged-plain") as plain,
        project("judged-one") as one_case,
        project("judged-small") as small_suite,
        project("judged-large") as large_suite,
        project("judged-cpu") as cpu_suite,
    ):
        trivial.ini(cache_mode=None)
        trivial.probe()
        trivial.write("test_trivial.py", TRIVIAL_MODULE)
        suites = {"one": one_case, "small": small_suite, "large": large_suite, "cpu": cpu_suite}
        counts = {"one": 1, "small": small, "large": large, "cpu": cpu_cases}
        for name, proj in suites.items():
            proj.ini(api_base=server.api_base, cache_mode="off")
            proj.probe()
            proj.mock_target()
            proj.eval_files(counts[name])
        plain.ini(cache_mode="off")
        plain.probe()
        plain.plain_modules(cpu_cases)

        def timed(proj: Project, args: list[str], cases: int) -> PytestRun:
            before = len(server.requests)
            run = run_pytest(proj, args).expect(passed=cases)
            if proj is not trivial and len(server.requests) - before != cases:
                raise BenchError(f"expected {cases} judge requests, got {len(server.requests)}")
            return run

        log("  warm-up runs (bytecode caches, page cache)")
        run_pytest(trivial).expect(passed=1)
        run_pytest(plain).expect(passed=cpu_cases)
        for kind in kinds:
            delay["seconds"] = 0.0
            timed(one_case, transport_args(kind), 1)
        for index in range(repeats):
            walls["trivial"].append(timed(trivial, [], 1).wall)
            for kind in kinds:
                for name, cases, latency, concurrency in scenarios:
                    delay["seconds"] = latency
                    suite = (
                        one_case
                        if name == "one"
                        else small_suite
                        if cases == small
                        else large_suite
                    )
                    run = timed(
                        suite, [f"--agentv-concurrency={concurrency}", *transport_args(kind)], cases
                    )
                    walls.setdefault(f"{kind}/{name}", []).append(run.wall)
                    imported[kind] = run.imported("litellm")
                    log(f"  {index + 1}/{repeats} {kind} {name}: {run.wall:.2f}s")
            walls["trivial"].append(timed(trivial, [], 1).wall)
            delay["seconds"] = 0.0
            cpu["plain"].append(run_pytest(plain).expect(passed=cpu_cases).run_cpu_seconds)
            for kind in kinds:
                # The transport's one-off imports happen before the run phase that is timed.
                cpu_suite.probe(eager=("lean",) if kind == "auto" else ("litellm",))
                run = timed(cpu_suite, ["--agentv-concurrency=1", *transport_args(kind)], cpu_cases)
                cpu.setdefault(kind, []).append(run.run_cpu_seconds)
                per_case_ms = run.run_cpu_seconds / cpu_cases * 1000
                log(f"  {index + 1}/{repeats} {kind} cpu: {per_case_ms:.2f} ms/case")
    start = median(walls["trivial"])
    plain_ms = median(cpu["plain"]) / cpu_cases * 1000
    result.details = {
        "transports": kinds,
        "walls": walls,
        "run_phase_cpu_seconds": cpu,
        "cpu_cases": cpu_cases,
        "litellm_imported": imported,
    }
    result.rows.append(
        Row(
            metric=f"trivial pytest run, 1 test ({ranged(walls['trivial'])})",
            measured=start,
            unit="s",
        )
    )
    for kind in kinds:
        label = kind if kind != "auto" else "auto (lean)"
        for name, cases, latency, concurrency in scenarios:
            samples = walls[f"{kind}/{name}"]
            measured = median(samples)
            floor = start + cases * latency / concurrency
            plural = "s" if cases > 1 else ""
            judge = f"{latency * 1000:.0f} ms" if latency else "an instant judge"
            what = f"{cases} case{plural} at {judge}, c={concurrency}"
            row = Row(
                metric=f"{label}: {what} ({ranged(samples)})",
                measured=measured,
                unit="s",
                baseline=floor,
                baseline_label="floor: trivial + n×L/c",
                ratio=measured / floor,
            )
            if name == "one":
                row.target, row.status = "≤ trivial + 0.5 s", verdict(measured <= floor + 0.5)
            elif name == "small_c16":
                row.target, row.status = "≤ floor + 1.0 s", verdict(measured <= floor + 1.0)
            elif name == "large_c32":
                row.target, row.status = "ratio ≤ 1.3", verdict(measured / floor <= 1.3)
            result.rows.append(row)
        per_case = [value / cpu_cases * 1000 for value in cpu[kind]]
        added = median(per_case) - plain_ms
        result.rows += [
            Row(
                metric=f"{label}: CPU per judged case, zero latency, c=1, run phase "
                f"({ranged(per_case, 'ms')})",
                measured=median(per_case),
                unit="ms",
                baseline=plain_ms,
                baseline_label="plain test",
                ratio=median(per_case) / plain_ms,
            ),
            Row(
                metric=f"{label}: plugin CPU per judged case (minus a plain test's)",
                measured=added,
                unit="ms",
                target="≤ 5 ms" if kind == "auto" else "",
                status=verdict(added <= 5) if kind == "auto" else "info",
            ),
            Row(
                metric=f"{label}: litellm imported",
                measured="yes" if imported.get(kind) else "no",
            ),
        ]
    return result


# -- 7. report --------------------------------------------------------------------------------
def report(sizes: Sizes) -> Result:
    """A run's HTML report (``--agentv-html``, with a baseline): its size, and how fast headless
    Chromium opens it and filters it to the failures."""
    from browser import chromium, open_and_filter, outcomes, write_project

    n = sizes.report_cases
    result = Result("report")
    with project("report") as proj:
        write_project(proj, n)
        args = ["--agentv-html=report.html", "--agentv-baseline=baseline.jsonl"]
        run = run_pytest(proj, args).expect(**outcomes(n))
        page = proj.path / "report.html"
        size = page.stat().st_size
        with chromium() as browser:
            open_and_filter(browser, page)  # warm-up
            samples = [open_and_filter(browser, page) for _ in range(sizes.report_repeats)]
    opened = median([s["open_ms"] for s in samples])
    filtered = median([s["filter_fail_ms"] for s in samples])
    expected_failures = outcomes(n)["failed"]
    if any(s["filter_fail_shown"] != expected_failures for s in samples):
        raise BenchError(f"filtering to failures did not show the {expected_failures} failures")
    result.details = {"cases": n, "bytes": size, "run_wall": run.wall, "samples": samples}
    result.rows += [
        Row(
            metric=f"{n} cases: report size",
            measured=size / (1024 * 1024),
            unit="MiB",
            target="< 5 MB",
            status=verdict(size < 5_000_000),
        ),
        Row(
            metric=f"open it in headless Chromium (median of {sizes.report_repeats})",
            measured=opened,
            unit="ms",
        ),
        Row(metric="filter to failures", measured=filtered, unit="ms"),
        Row(
            metric="open + filter",
            measured=(opened + filtered) / 1000,
            unit="s",
            target="< 2 s",
            status=verdict(opened + filtered < 2000),
        ),
        Row(
            metric="search the text / sort by delta",
            measured=f"{median([s['search_ms'] for s in samples]):.0f} / "
            f"{median([s['sort_delta_ms'] for s in samples]):.0f} ms",
        ),
    ]


# -- 8. large lines ----------------------------------------------------------------------------
def collect_rss(proj: Project, args: list[str]) -> tuple[int, float]:
    """``pytest --collect-only`` in a fresh interpreter: its exit status and peak RSS (MiB),
    from the child's own resource usage (a run refused at start-up prints no probe line)."""
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--co", *args]
    with open(os.devnull, "w") as sink:
        process = subprocess.Popen(
            command, cwd=proj.path, env=child_env(), stdout=sink, stderr=sink
        )
        _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    raw = usage.ru_maxrss
    return process.returncode, raw / (1024 * 1024) if sys.platform == "darwin" else raw / 1024


def write_line(path: Path, head: str, filler: int, tail: str) -> int:
    """One line ``head + "x" * filler + tail``, written a piece at a time: a benchmark that held
    the line would lend its own size to the child it forks next. Returns its length."""
    with path.open("w", encoding="utf-8") as stream:
        stream.write(head)
        for written in range(0, filler, 1 << 20):
            stream.write("x" * min(1 << 20, filler - written))
        stream.write(tail + "\n")
    return len(head) + filler + len(tail)


def large_lines(sizes: Sizes) -> Result:
    """Peak RSS of collecting an eval file whose one JSONL line is nearly the 10 MiB file
    limit, and of reading a ``--agentv-baseline`` file with one long line (under the line limit,
    and over it: refused), against collecting the same project without them. Each extra should
    be a small multiple of the line (a backtracking regex once kept ~125 bytes per character)."""
    result = Result("large_lines")
    mib = 1024 * 1024
    with project("large-lines") as proj:
        proj.ini(cache_mode="off")
        proj.write("a.eval.yaml", "evalcases: [{id: a, input: q, expected_outcome: x}]\n")
        status, plain = collect_rss(proj, [])
        if status != 0:
            raise BenchError(f"collecting the small project exited {status}")
        big = proj.path / "big.eval.jsonl"
        size = write_line(big, '{"id": "big", "input": "', int(sizes.eval_line_mb * 1e6), '"}')
        status, rss = collect_rss(proj, [])
        big.unlink()
        if status != 0:
            raise BenchError(f"collecting the {sizes.eval_line_mb} MB line exited {status}")
        runs = {"eval file line": (size, 0, status, rss)}
        for label, megabytes, expected in (
            ("baseline line, allowed", sizes.allowed_line_mb, 0),
            ("baseline line, refused", sizes.refused_line_mb, 4),
        ):
            head = '{"eval_id": "a", "score": 1, "candidate_answer": "'
            size = write_line(proj.path / "base.jsonl", head, int(megabytes * 1e6), '"}')
            status, rss = collect_rss(proj, ["--agentv-baseline=base.jsonl"])
            if status not in (0, 4):
                raise BenchError(f"{label} ({megabytes} MB): exited {status}")
            runs[label] = (size, expected, status, rss)
    result.details = {"plain_peak_rss_mib": plain}
    for label, (size, expected, status, rss) in runs.items():
        extra = (rss - plain) * mib / size
        log(f"  {label}, {size / 1e6:.1f} MB: exit {status}, peak RSS {rss:.0f} MiB")
        result.details[label] = {"bytes": size, "exit": status, "peak_rss_mib": rss}
        result.rows.append(
            Row(
                metric=f"{label}, {size / 1e6:.1f} MB (exit {status}): peak RSS",
                measured=rss,
                unit="MiB",
                baseline=plain,
                baseline_label="the project without it",
                ratio=extra,
                target=f"extra ≤ 8× the line, exit {expected}",
                status=verdict(extra <= 8 and status == expected),
            )
        )
    return result
