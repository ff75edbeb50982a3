"""Shards through one coordinator: 200 judged cases at ``--agentv-rpm 600`` (a minute scaled
down to ``WINDOW`` seconds) run as 1, 2 and 4 shards at once, every shard a pytest process
asking the same Redis (``--agentv-coordinator``), against one loopback judge that answers in
50 ms. The run-wide limit makes the time limit-bound whatever the shards: the judge-busy span
(first request to last reply) and the whole (all shards started to all ended) as ratios to the
floor N / RPM. Target: the span within 1.10× of the floor, for every shard count.
"""

from __future__ import annotations

import subprocess
import time

from benchmarks import Result, Row, Sizes, verdict
from fake_openai import Delay, FakeOpenAI, freeform
from harness import BenchError, log, project, start_pytest
from redis_server import BINARY, RedisServer

RPM = 600
#: The bench's minute: 200 cases at 600 a minute are 20 s of it.
WINDOW = 60.0
CASES = 200
TARGET = 1.10
LATENCY = 0.05


def shards(sizes: Sizes) -> Result:
    """1, 2 and 4 shards at one run-wide RPM (see the module's docstring)."""
    if BINARY is None:
        raise BenchError("redis-server is not installed (Debian's package redis-server)")
    cases = CASES // 4 if sizes.judged_repeats < 3 else CASES
    floor = cases / RPM * WINDOW
    result = Result("shards")
    server = FakeOpenAI(lambda request: Delay(LATENCY, freeform(0.9)), max_requests=10**6)
    with project("shards") as proj:
        redis = RedisServer(proj.path).start()
        server.start()
        try:
            proj.probe()
            proj.mock_target()
            proj.eval_files(cases)
            proj.ini(api_base=server.api_base, cache_mode="off")
            for count in (1, 2, 4):
                server.requests.clear()
                common = [
                    f"--agentv-coordinator={redis.url()}",
                    f"--agentv-run-id=bench-{count}-{time.time_ns()}",
                    f"--agentv-rpm={RPM}",
                    f"--agentv-rate-window={WINDOW:g}",
                    "--agentv-concurrency=8",
                ]
                started = time.monotonic()
                processes = [
                    start_pytest(proj, [*common, f"--agentv-shard={k}/{count}"])
                    for k in range(1, count + 1)
                ]
                outputs = [process.communicate(timeout=900) for process in processes]
                wall = time.monotonic() - started
                if any(process.returncode != 0 for process in processes):
                    tail = next(out for out, _ in outputs if "passed" not in out.splitlines()[-1])
                    raise BenchError(f"{count} shards: {tail[-800:]}")
                arrivals = [request.at for request in server.requests]
                span = max(arrivals) - min(arrivals) + LATENCY
                log(
                    f"  {count} shard(s): span {span:.2f} s ({span / floor:.2f}× the floor "
                    f"{floor:.1f} s), whole {wall:.2f} s, {len(arrivals)} requests"
                )
                result.rows += [
                    Row(
                        f"{count} shard(s): judge-busy span / floor",
                        round(span / floor, 3),
                        "×",
                        target=f"≤ {TARGET:g}×",
                        status=verdict(span <= TARGET * floor and len(arrivals) == cases),
                    ),
                    Row(f"{count} shard(s): whole run / floor", round(wall / floor, 3), "×"),
                ]
                result.details[f"{count}"] = {"span": span, "wall": wall, "requests": len(arrivals)}
        except subprocess.SubprocessError as exc:
            raise BenchError(str(exc)) from exc
        finally:
            server.stop()
            redis.stop()
    result.details["floor"] = floor
    return result
