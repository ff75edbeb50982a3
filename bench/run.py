"""Run pytest-agentv's benchmarks and print measured numbers against same-run baselines.

    python bench/run.py                       # all ten, full sizes
    python bench/run.py --quick               # smaller sizes and fewer repeats: a smoke run
    python bench/run.py throughput overhead   # only these
    python bench/run.py peers                 # against its peers: only when named
    python bench/run.py pacing                # at a provider's rate limit, with the peers
    python bench/run.py shards                # 1, 2 and 4 shards at one RPM through Redis
    python bench/run.py versus --against REV  # dispatch against another revision's

The table goes to stdout, progress to stderr, and the same data to bench/results/latest.json.
Exit status 1 means a benchmark could not measure (its run went wrong); a missed target is
reported in the table, not in the exit status, because timings depend on the machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import benchmarks
import dispatch as dispatch_module
from benchmarks import Result, Row, Sizes
from dispatch import dispatch, shared_limit, versus
from harness import REPO, BenchError, log
from pacing import pacing
from peers import peers
from shards import shards

BENCHMARKS: dict[str, Callable[[Sizes], Result]] = {
    "throughput": benchmarks.throughput,
    "overhead": benchmarks.overhead,
    "startup": benchmarks.startup,
    "memory": benchmarks.memory,
    "replay": benchmarks.replay,
    "judged": benchmarks.judged,
    "report": benchmarks.report,
    "large_lines": benchmarks.large_lines,
    "dispatch": dispatch,
    "shared_limit": shared_limit,
}
#: Run only when named: the first run installs the peers (network), and they take minutes
#: (pacing: 300 cases at a 600-RPM limit, about 15 s each, for us and the peers).
#: versus: this checkout's dispatch against another revision's (``--against``).
ON_REQUEST: dict[str, Callable[[Sizes], Result]] = {
    "peers": peers,
    "versus": versus,
    "pacing": pacing,
    "shards": shards,
}
KNOWN = {**BENCHMARKS, **ON_REQUEST}


def run_one(name: str, sizes: Sizes) -> Result:
    """Run a benchmark; a failure becomes an ERROR result instead of ending the whole run."""
    log(f"[{name}]")
    started = time.monotonic()
    try:
        result = KNOWN[name](sizes)
    except BenchError as exc:
        result = Result(name, error=str(exc))
    except Exception as exc:
        result = Result(name, error=f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}")
    result.details["benchmark_seconds"] = time.monotonic() - started
    log(f"[{name}] done in {result.details['benchmark_seconds']:.1f}s")
    return result


RESULTS = Path(__file__).resolve().parent / "results" / "latest.json"
HEADERS = ("benchmark", "metric", "measured", "baseline", "ratio", "target", "result")


def fmt(value: object, unit: str = "") -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        digits = 3 if unit == "s" and abs(value) < 10 else 1 if unit in ("ms", "MiB") else 2
        text = f"{value:,.{digits}f}"
    else:
        text = f"{value:,}" if isinstance(value, int) else str(value)
    return f"{text} {unit}".strip()


def cells(name: str, row: Row) -> tuple[str, ...]:
    baseline = fmt(row.baseline, row.unit if isinstance(row.baseline, float) else "")
    if baseline and row.baseline_label:
        baseline = f"{baseline} ({row.baseline_label})"
    ratio = f"{row.ratio:.2f}×" if row.ratio is not None else ""
    return (name, row.metric, fmt(row.measured, row.unit), baseline, ratio, row.target, row.status)


def table(results: list[Result]) -> str:
    lines: list[tuple[str, ...]] = []
    for result in results:
        if result.error is not None:
            first = (result.error.splitlines() or ["failed"])[0][:70]
            lines.append((result.name, first, "", "", "", "", "ERROR"))
            continue
        for index, row in enumerate(result.rows):
            lines.append(cells(result.name if index == 0 else "", row))
    widths = [max(len(line[i]) for line in [HEADERS, *lines]) for i in range(len(HEADERS))]
    rule = "  ".join("-" * width for width in widths)
    out = ["  ".join(h.ljust(w) for h, w in zip(HEADERS, widths, strict=True)), rule]
    out += [
        "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
        for line in lines
    ]
    return "\n".join(out)


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args], cwd=REPO, capture_output=True, text=True, timeout=10, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout


def git_commit() -> str | None:
    return (_git("rev-parse", "--short", "HEAD") or "").strip() or None


def dirty_files() -> list[str] | None:
    """Uncommitted changes outside bench/: the numbers describe that tree, not the commit."""
    status = _git("status", "--porcelain")
    if status is None:
        return None
    paths = [line[3:] for line in status.splitlines()]
    return [path for path in paths if not path.startswith("bench/")]


def load() -> list[float] | None:
    """The machine's load average: context for noisy timings on a shared machine."""
    try:
        return [round(value, 2) for value in os.getloadavg()]
    except OSError:
        return None


def check_installed() -> str:
    """Benchmarks run ``sys.executable -m pytest``: that interpreter must have the plugin."""
    done = subprocess.run(
        [sys.executable, "-c", "import pytest_agentv, pytest; print(pytest.__version__)"],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        sys.exit(
            f"{sys.executable} cannot import pytest_agentv; run this script with the Python "
            'that has the project installed (pip install -e ".[test]").'
        )
    return done.stdout.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "benchmarks",
        nargs="*",
        metavar="BENCHMARK",
        help=f"which to run (default: all but {', '.join(ON_REQUEST)}): {', '.join(KNOWN)}",
    )
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer repeats")
    parser.add_argument(
        "--json", type=Path, default=RESULTS, help=f"results file (default: {RESULTS})"
    )
    parser.add_argument(
        "--against",
        default="main",
        metavar="REV",
        help="the git revision the versus benchmark measures this checkout against",
    )
    args = parser.parse_args(argv)
    dispatch_module.AGAINST["revision"] = args.against
    names: list[str] = args.benchmarks or list(BENCHMARKS)
    unknown = sorted(set(names) - set(KNOWN))
    if unknown:
        parser.error(f"unknown benchmark {', '.join(unknown)}; choose from {', '.join(KNOWN)}")
    sizes = Sizes.quick() if args.quick else Sizes()
    pytest_version = check_installed()
    meta: dict[str, Any] = {
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "quick": args.quick,
        "sizes": asdict(sizes),
        "python": platform.python_version(),
        "executable": sys.executable,
        "pytest": pytest_version,
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "commit": git_commit(),
        "uncommitted_changes": dirty_files(),
        "caller_PYTHONDONTWRITEBYTECODE": os.environ.get("PYTHONDONTWRITEBYTECODE"),
        "load_before": load(),
    }
    log(f"pytest-agentv benchmarks ({'quick' if args.quick else 'full'}): {', '.join(names)}")
    started = time.monotonic()
    results = [run_one(name, sizes) for name in names]
    meta["load_after"] = load()
    meta["seconds"] = round(time.monotonic() - started, 1)

    print()
    print(table(results))
    print()
    print(
        f"{'quick' if args.quick else 'full'} run, {meta['seconds']}s; load average before "
        f"{meta['load_before']}, after {meta['load_after']}; {meta['cpus']} CPUs."
    )
    dirty = meta["uncommitted_changes"]
    print(
        f"commit {meta['commit']}"
        + (f" with {len(dirty)} uncommitted file(s) outside bench/" if dirty else "")
        + f"; Python {meta['python']}, pytest {pytest_version}."
    )
    if args.quick:
        print("Quick sizes are a smoke test: the targets are set for the full sizes.")
    for result in results:
        if result.error is not None:
            print(f"\n{result.name} could not measure:\n{result.error}")

    args.json.parent.mkdir(parents=True, exist_ok=True)
    document = {"meta": meta, "benchmarks": [result.to_dict() for result in results]}
    args.json.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {args.json}")
    return 1 if any(result.error is not None for result in results) else 0


if __name__ == "__main__":
    sys.exit(main())
