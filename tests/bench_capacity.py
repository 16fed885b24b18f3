"""Timing of ``planner capacity`` on a 1,000,000-request, 24-hour trace (``make bench``).

The trace is generated (seed 0: daily cycle 4x, six 10-minute bursts of 3x), written as CSV, and the
command runs end to end as a user runs it: reading and checking the file, 96 windows of 15 minutes,
the worker-shape search and the per-window sizing."""

from __future__ import annotations

import contextlib
import io
import tempfile
import time
from pathlib import Path

from planner.cli.main import main
from planner.workload.trace_gen import TraceSpec, generate
from planner.workload.traces import write_trace


def bench() -> dict[str, float]:
    trace, _ = generate(TraceSpec(hours=24, peak_rate=18.5, daily_ratio=4.0, seed=0))
    with tempfile.TemporaryDirectory() as tmp:
        path = write_trace(trace, Path(tmp) / "day.csv")
        argv = [
            "capacity",
            "--trace",
            str(path),
            "--model",
            "llama-3.1-70b",
            "--gpu",
            "h200",
            "--ttft-ms",
            "1000",
            "--tpot-ms",
            "40",
            "--window",
            "15m",
            "--scale-up-s",
            "5m",
            "--format",
            "json",
        ]
        t0, c0 = time.perf_counter(), time.process_time()
        with contextlib.redirect_stdout(io.StringIO()):
            rc = main(argv)
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert rc == 0
    # CPU seconds beside wall seconds: on a shared machine the wall figure includes waiting
    # for a core
    return {
        "capacity_trace_requests": float(len(trace)),
        "capacity_1m_requests_24h_s": seconds,
        "capacity_1m_requests_24h_cpu_s": cpu,
    }


if __name__ == "__main__":
    print(bench())
