"""Timing of ``planner capacity`` with prefix caching on Mooncake's conversation trace
(``make bench``; skipped, with a line on stderr, when ../shared/traces/mooncake is absent).

The command runs as a user runs it: reading the 12,031 JSON lines, the worker-shape search, the
sizing without a cache, then per tier set (HBM; HBM + the default host tier) the replay of the
block hashes over the replicas and the sizing again, and the routing comparison. The replay
alone (stack distances of 288,500 block touches on one replica) is timed beside it."""

from __future__ import annotations

import contextlib
import io
import sys
import time
from pathlib import Path

import numpy as np

from planner.cli.main import main
from planner.perf.prefix_cache import stack_distances
from planner.workload.traces import read_trace

TRACE = (
    Path(__file__).resolve().parents[2]
    / "shared"
    / "traces"
    / "mooncake"
    / ("conversation_trace.jsonl")
)


def bench() -> dict[str, float]:
    if not TRACE.is_file():
        print(f"tests.bench_prefix: {TRACE} is absent; skipped", file=sys.stderr)
        return {}
    argv = [
        "capacity",
        "--trace",
        str(TRACE),
        "--model",
        "llama-3.1-70b",
        "--gpu",
        "h200",
        "--ttft-ms",
        "2000",
        "--tpot-ms",
        "50",
        "--format",
        "json",
    ]
    t0, c0 = time.perf_counter(), time.process_time()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        rc = main(argv)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert rc == 0
    trace = read_trace(TRACE)
    assert trace.blocks is not None
    t1 = time.perf_counter()
    stack_distances(trace.blocks, trace.isl, np.zeros(len(trace), dtype=np.int64))
    return {
        "capacity_mooncake_prefix_s": seconds,
        "capacity_mooncake_prefix_cpu_s": cpu,
        "prefix_replay_mooncake_s": time.perf_counter() - t1,
    }


if __name__ == "__main__":
    print(bench())
