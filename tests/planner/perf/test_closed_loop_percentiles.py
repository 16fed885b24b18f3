"""Issue 47 item 8: closed-loop TTFT percentiles come from the distribution of waits (where in the
batch cycle a prompt arrives, the prompts that share its prefill step), not one value for mean,
p50, p90 and p99; they agree with ``planner simulate`` at p90 over a grid of fixed-length
closed loops; an open loop's p90 is not below its mean where the wait is rare."""

from __future__ import annotations

import numpy as np
import pytest

from hardware.catalog import get_gpu
from planner.model.bundled import load_model
from planner.perf.deployment import Parallelism, WorkerConfig
from planner.perf.estimate import estimate
from planner.perf.simulator import simulate
from planner.workload.spec import fixed

H200 = get_gpu("h200")
P90_RTOL = 0.15
"""Issue 47: the estimate's p90 TTFT within 15% of the simulated one."""
SEEDS = 4
"""Fixed lengths keep a simulated closed loop deterministic once started, so which clients share a
prefill step depends on the random start (one seed puts 12.5% of requests in a shared step, another
none, at 70B TP4 4000/500 and 32 clients); the simulated percentiles pool this many starts."""
GRID = [
    ("llama-3.1-8b", 1, 1024, 128, 32),
    ("llama-3.1-8b", 1, 1024, 128, 96),
    ("llama-3.1-8b", 1, 4000, 500, 32),
    ("llama-3.1-8b", 1, 4000, 500, 96),
    ("llama-3.1-70b", 4, 1024, 128, 32),
    ("llama-3.1-70b", 4, 1024, 128, 96),
    ("llama-3.1-70b", 4, 4000, 500, 32),
    ("llama-3.1-70b", 4, 4000, 500, 96),
    ("llama-3.1-8b", 1, 8000, 200, 32),
]
"""(model, TP, ISL, OSL, clients) on one H200 worker: prefill utilisation 0.35-0.72."""


@pytest.mark.parametrize(("model", "tp", "isl", "osl", "clients"), GRID)
def test_closed_loop_p90_agrees_with_simulate(
    model: str, tp: int, isl: int, osl: int, clients: int
) -> None:
    m, wc = load_model(model), WorkerConfig(parallel=Parallelism(tp=tp))
    w = fixed(isl, osl, concurrency=clients)
    e = estimate(m, H200, w, agg=wc)
    sim = np.concatenate(
        [simulate(m, "h200", w, wc, requests=600, seed=s).ttft_s for s in range(SEEDS)]
    )
    assert e.ttft_ms.p90 == pytest.approx(float(np.percentile(sim, 90)) * 1e3, rel=P90_RTOL)
    assert e.ttft_ms.p50 <= e.ttft_ms.p90 <= e.ttft_ms.p99


def test_closed_loop_percentiles_spread() -> None:
    """Fixed lengths under load: the percentiles are not one value (they were mean = p50 = p90 =
    p99), the mean is unchanged by the spread, and p99 counts prompts sharing a step."""
    m, wc = load_model("llama-3.1-70b"), WorkerConfig(parallel=Parallelism(tp=4))
    e = estimate(m, H200, fixed(1024, 128, concurrency=32), agg=wc)
    t = e.ttft_ms
    assert t.p50 < t.p90 < t.p99
    assert t.p50 < t.mean < t.p99


def test_open_loop_p90_not_below_mean_when_waits_are_rare() -> None:
    """DeepSeek-R1 on B200 at a prefill utilisation of a few percent (the case of issue 47, where
    p90 was 80.26 ms against a mean of 81.13 ms): the queueing wait is zero for most requests,
    so p90 below the mean came from pricing the rest of TTFT as one value; where in the step a
    prompt arrives and the prompts sharing its step spread it, and p90 >= mean again."""
    m = load_model("deepseek-r1")
    wc = WorkerConfig(parallel=Parallelism(tp=8))
    w = fixed(1000, 8000, concurrency=1).model_copy(update={"concurrency": None, "rate_per_s": 1.0})
    e = estimate(m, get_gpu("b200"), w, agg=wc)
    assert e.prefill_utilization < 0.1
    assert e.ttft_ms.p50 <= e.ttft_ms.mean <= e.ttft_ms.p90 <= e.ttft_ms.p99
