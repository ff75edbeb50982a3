"""How well the run keeps a slow judge busy: the judge-busy span against N × latency / concurrency,
at three sizes, the memory of the largest against the smallest, what a one-case project pays
over plain pytest, and one concurrency limit held across pytest-xdist workers.

The busy span runs from the first judge request's arrival at the loopback server to the last
request's arrival plus the judge's latency, so it leaves out start-up and collection: it is the
dispatch alone. The whole command is compared with its own floor, a trivial pytest run in the
same venv plus N × latency / concurrency, measured in the same run.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

from benchmarks import TRIVIAL_MODULE, Result, Row, Sizes, alternate, verdict
from harness import (
    CANNED,
    BenchError,
    Delay,
    FakeOpenAI,
    Project,
    PytestRun,
    child_env,
    fake_server,
    freeform,
    log,
    median,
    package_from,
    project,
    run_pytest,
)

#: The busy span may exceed its floor by this much at the issue's reference size.
SPAN_TARGET = 1.10
#: Peak RSS of the largest run against the smallest.
MEMORY_TARGET = 1.5
#: What a one-case project may add to a one-test plain pytest run, whole process.
STARTUP_TARGET = 0.15
ONE_CASE = f"""\
tests:
  - id: one
    input: Say the canned answer
    assertions:
      - type: contains
        value: "{CANNED[:20]}"
"""


@dataclass(frozen=True)
class Scenario:
    cases: int
    latency: float
    concurrency: int
    #: The whole command's target: within ``floor + extra`` seconds, else within ``times`` × floor.
    extra: float | None = None
    times: float | None = None
    span_target: float | None = None

    @property
    def floor(self) -> float:
        return self.cases * self.latency / self.concurrency

    @property
    def label(self) -> str:
        return f"{self.cases} × {self.latency * 1000:.0f} ms × {self.concurrency}"


def scenarios(sizes: Sizes) -> tuple[Scenario, ...]:
    small, medium, large = sizes.dispatch_cases
    return (
        Scenario(small, 0.25, 16, extra=0.5, span_target=SPAN_TARGET),
        Scenario(medium, 0.2, 32, times=1.3),
        Scenario(large, 0.1, 64, times=1.3),
    )


def busy_span(server: FakeOpenAI, first: int, latency: float) -> float:
    arrivals = [request.at for request in server.requests[first:]]
    return max(arrivals) + latency - min(arrivals)


def judged_runs(
    server: FakeOpenAI,
    proj: Project,
    args: Sequence[str],
    cases: int,
    latency: float,
    repeats: int,
    *,
    warm: bool = True,
) -> list[tuple[PytestRun, float, int]]:
    """``repeats`` measured runs after one warm-up (none with ``warm`` off: one run): each run,
    its busy span and its peak of requests in flight; a run that did not pass every case with
    one request each is an error."""
    measured = []
    for index in range(repeats + 1):
        server.peak_in_flight = 0
        before = len(server.requests)
        run = run_pytest(proj, args).expect(passed=cases)
        if len(server.requests) - before != cases:
            raise BenchError(
                f"expected {cases} judge requests, the server saw {len(server.requests) - before}"
            )
        if index or not warm:
            measured.append((run, busy_span(server, before, latency), server.peak_in_flight))
    return measured


def dispatch(sizes: Sizes) -> Result:
    """A one-case project against plain pytest (medians of alternating runs); 48 cases at 250 ms
    with 16 in flight (the busy span within 10% of its floor, the command within floor + 0.5 s),
    200 at 200 ms with 32 and 2,000 at 100 ms with 64 (within 1.3× the floor; peak RSS within
    1.5× of the smallest run's)."""
    result = Result("dispatch")
    latency = {"seconds": 0.0}
    trivial_walls: list[float] = []
    with (
        fake_server(lambda request: Delay(latency["seconds"], freeform(1.0)), 10**6) as server,
        project("dispatch-trivial") as trivial,
    ):
        trivial.ini(cache_mode=None)
        trivial.probe()
        trivial.write("test_trivial.py", TRIVIAL_MODULE)
        result.rows.append(one_case(trivial, sizes.startup_pairs))
        rss: dict[int, float] = {}
        for scenario in scenarios(sizes):
            latency["seconds"] = scenario.latency
            trivial_walls.append(run_pytest(trivial).expect(passed=1).wall)
            with project("dispatch") as proj:
                proj.ini(api_base=server.api_base, cache_mode="off")
                proj.probe()
                proj.mock_target()
                proj.eval_files(scenario.cases)
                runs = judged_runs(
                    server,
                    proj,
                    [f"--agentv-concurrency={scenario.concurrency}"],
                    scenario.cases,
                    scenario.latency,
                    sizes.dispatch_repeats,
                )
            rss[scenario.cases] = max(run.maxrss_mib for run, _, _ in runs)
            result.rows += scenario_rows(scenario, runs, median(trivial_walls))
            result.details[f"cases_{scenario.cases}"] = {
                "floor_seconds": scenario.floor,
                "spans": [span for _, span, _ in runs],
                "walls": [run.wall for run, _, _ in runs],
                "peaks_in_flight": [peak for _, _, peak in runs],
                "maxrss_mib": [run.maxrss_mib for run, _, _ in runs],
            }
        result.details["trivial_walls"] = trivial_walls
        smallest, largest = min(rss), max(rss)
        ratio = rss[largest] / rss[smallest]
        result.rows.append(
            Row(
                metric=f"peak RSS, {largest} cases",
                measured=round(rss[largest], 1),
                unit="MiB",
                baseline=round(rss[smallest], 1),
                baseline_label=f"{smallest} cases",
                ratio=ratio,
                target=f"≤ {MEMORY_TARGET}×",
                status=verdict(ratio <= MEMORY_TARGET),
            )
        )
    return result


def scenario_rows(
    scenario: Scenario, runs: list[tuple[PytestRun, float, int]], trivial: float
) -> list[Row]:
    span = median([span for _, span, _ in runs])
    wall = median([run.wall for run, _, _ in runs])
    peak = max(peak for _, _, peak in runs)
    ratio = span / scenario.floor
    floor = trivial + scenario.floor
    if scenario.extra is not None:
        target, met = f"≤ floor + {scenario.extra} s", wall <= floor + scenario.extra
    else:
        assert scenario.times is not None
        target, met = f"≤ {scenario.times}×", wall <= floor * scenario.times
    log(
        f"  {scenario.label}: busy {span:.2f}s (floor {scenario.floor:.2f}s, {ratio:.2f}×), "
        f"whole run {wall:.2f}s, peak {peak} in flight"
    )
    return [
        Row(
            metric=f"{scenario.label}: judge-busy span (peak {peak} in flight)",
            measured=span,
            unit="s",
            baseline=scenario.floor,
            baseline_label="N×L/C",
            ratio=ratio,
            target=f"≤ {scenario.span_target}×" if scenario.span_target else "",
            status=verdict(ratio <= scenario.span_target) if scenario.span_target else "info",
        ),
        Row(
            metric="  whole pytest command",
            measured=wall,
            unit="s",
            baseline=floor,
            baseline_label="trivial run + N×L/C",
            ratio=wall / floor,
            target=target,
            status=verdict(met),
        ),
    ]


def one_case(trivial: Project, pairs: int) -> Row:
    """One v4 ``contains`` case on a mock target against ``trivial``, alternating runs."""
    with project("dispatch-one") as proj:
        proj.ini(cache_mode=None)
        proj.probe()
        proj.mock_target()
        proj.write("one.eval.yaml", ONE_CASE)
        ours, plain = alternate(
            pairs,
            lambda: run_pytest(proj).expect(passed=1),
            lambda: run_pytest(trivial).expect(passed=1),
        )
    extra = median([a.wall - b.wall for a, b in zip(ours, plain, strict=True)])
    log(f"  one case: +{extra:.3f}s over a trivial run (median of {pairs} pair differences)")
    return Row(
        metric="one mock case with a contains check: whole process",
        measured=median([run.wall for run in ours]),
        unit="s",
        baseline=median([run.wall for run in plain]),
        baseline_label="one-test plain pytest",
        ratio=None,
        target=f"≤ +{STARTUP_TARGET} s (+{extra:.2f} s)",
        status=verdict(extra <= STARTUP_TARGET),
    )


def shared_limit(sizes: Sizes) -> Result:
    """``-n 4 --agentv-concurrency 8``: the four workers together never have more than eight
    judge calls in flight, and keep the judge as busy as one process with the same limit."""
    cases, concurrency, workers = sizes.shared_limit_cases, 8, 4
    scenario = Scenario(cases, 0.25, concurrency)
    result = Result("shared_limit")
    with (
        fake_server(lambda request: Delay(scenario.latency, freeform(1.0)), 10**6) as server,
        project("shared-limit") as proj,
    ):
        proj.ini(api_base=server.api_base, cache_mode="off")
        proj.probe()
        proj.mock_target()
        proj.eval_files(cases)
        limit = f"--agentv-concurrency={concurrency}"
        variants: dict[str, list[str]] = {
            "one process": [limit],
            f"-n {workers}": [limit, "-n", str(workers), "-p", "xdist"],
        }
        measured: dict[str, list[tuple[PytestRun, float, int]]] = {}
        for name, args in variants.items():
            measured[name] = judged_runs(
                server, proj, args, cases, scenario.latency, sizes.dispatch_repeats
            )
        for name, runs in measured.items():
            span = median([span for _, span, _ in runs])
            peak = max(peak for _, _, peak in runs)
            log(f"  {name}: busy {span:.2f}s (floor {scenario.floor:.2f}s), peak {peak}")
            capped = name != "one process"
            result.rows.append(
                Row(
                    metric=f"{scenario.label}, {name}: judge-busy span (peak {peak} in flight)",
                    measured=span,
                    unit="s",
                    baseline=scenario.floor,
                    baseline_label="N×L/C",
                    ratio=span / scenario.floor,
                    target=f"peak ≤ {concurrency}" if capped else "",
                    status=verdict(peak <= concurrency) if capped else "info",
                )
            )
            result.details[name] = {
                "spans": [span for _, span, _ in runs],
                "peaks_in_flight": [peak for _, _, peak in runs],
            }
    return result


#: The revision ``versus`` measures this checkout against (``--against``).
AGAINST = {"revision": "main"}


def versus(sizes: Sizes) -> Result:
    """This checkout's dispatch against another revision's, in one run: the 48 × 250 ms × 16
    and the largest scenario, each revision's runs alternating after one warm-up each, so both
    see the same machine. Made to judge a change of the lean transport's HTTP client."""
    revision = AGAINST["revision"]
    result = Result("versus")
    latency = {"seconds": 0.0}
    small, _, large = sizes.dispatch_cases
    chosen = (Scenario(small, 0.25, 16), Scenario(large, 0.1, 64))
    with fake_server(lambda request: Delay(latency["seconds"], freeform(1.0)), 10**6) as server:
        for scenario in chosen:
            latency["seconds"] = scenario.latency
            with project("versus") as proj:
                proj.ini(api_base=server.api_base, cache_mode="off")
                proj.probe()
                proj.mock_target()
                proj.eval_files(scenario.cases)
                args = [f"--agentv-concurrency={scenario.concurrency}"]
                spans: dict[str, list[float]] = {"this checkout": [], revision: []}
                walls: dict[str, list[float]] = {"this checkout": [], revision: []}
                for index in range(sizes.dispatch_repeats + 1):
                    for name in spans:
                        with package_from(revision) if name == revision else nullcontext():
                            if index == 0:
                                _check_package(revision if name == revision else None, proj.path)
                            [(run, span, _)] = judged_runs(
                                server, proj, args, scenario.cases, scenario.latency, 0, warm=False
                            )
                        if index:
                            spans[name].append(span)
                            walls[name].append(run.wall)
            for name in spans:
                span, wall = median(spans[name]), median(walls[name])
                log(f"  {scenario.label}, {name}: busy {span:.2f}s, whole run {wall:.2f}s")
                result.rows.append(
                    Row(
                        metric=f"{scenario.label}, {name}: judge-busy span / whole command",
                        measured=span,
                        unit="s",
                        baseline=scenario.floor,
                        baseline_label=f"N×L/C; command {wall:.2f} s",
                        ratio=span / scenario.floor,
                        target="",
                        status="info",
                    )
                )
            ours, theirs = median(spans["this checkout"]), median(spans[revision])
            result.rows.append(
                Row(
                    metric=f"{scenario.label}: this checkout's span against {revision}'s",
                    measured=ours,
                    unit="s",
                    baseline=theirs,
                    baseline_label=revision,
                    ratio=ours / theirs,
                    target="≤ 1.15×",
                    status=verdict(ours / theirs <= 1.15),
                )
            )
            result.details[scenario.label] = {"spans": spans, "walls": walls}
    return result


def _check_package(revision: str | None, cwd: Path) -> None:
    """The runs really import the revision they are measured as, from where they run (``-c``
    puts the working directory first on the path: from the repository's root, its package)."""
    where = subprocess.run(
        [sys.executable, "-c", "import pytest_agentv; print(pytest_agentv.__file__)"],
        cwd=cwd,
        env=child_env(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if (revision is not None) != ("agentv-versus-" in where):
        raise BenchError(f"the runs measured as {revision or 'this checkout'} import {where}")
