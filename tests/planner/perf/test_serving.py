"""Serving model: monotonic laws, disaggregated KV transfer, infeasible configs,
simulator cross-check."""

from __future__ import annotations

import numpy as np
import pytest

from hardware.catalog import get_gpu
from hardware.errors import InfeasibleError
from planner.cli.main import main
from planner.model.bundled import load_model
from planner.perf.batch import CandidateArrays, evaluate_batch
from planner.perf.deployment import Parallelism, WorkerConfig
from planner.perf.estimate import estimate
from planner.perf.simulator import simulate
from planner.workload.spec import LengthSpec, Workload, fixed

H100 = get_gpu("h100")


def test_ttft_and_tpot_grow_with_concurrency() -> None:
    m = load_model("llama-3.1-70b")
    conc = np.array([1, 2, 4, 8, 16, 32, 64, 128, 256, 512], dtype=float)
    c = CandidateArrays.from_lists(tp=np.full(conc.size, 4), weight_quant=1, concurrency=conc)
    r = evaluate_batch(m, H100, c, fixed(2000, 500, concurrency=1))
    assert np.all(np.diff(r.ttft_mean_s) >= -1e-9)
    assert np.all(np.diff(r.tpot_mean_s) >= -1e-9)


def test_ttft_grows_with_rate() -> None:
    m = load_model("llama-3.1-8b")
    ttft = [estimate(m, H100, fixed(1024, 128, rate_per_s=r)).ttft_ms.mean for r in (1, 5, 10, 20)]
    assert ttft == sorted(ttft)


def test_disagg_ttft_includes_kv_transfer() -> None:
    m = load_model("llama-3.1-70b")
    w = WorkerConfig(parallel=Parallelism(tp=4), weight_quant="fp8")
    e = estimate(m, H100, fixed(8000, 200, concurrency=1), prefill=w, decode=w)
    assert e.kv_transfer_ms > 0
    assert e.ttft_ms.mean > e.kv_transfer_ms


def test_model_that_does_not_fit_is_infeasible(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(InfeasibleError):
        estimate(load_model("llama-3.1-70b"), get_gpu("l4"), fixed(100, 100, concurrency=1))
    rc = main(["estimate", "--model", "llama-3.1-70b", "--gpu", "l4", "--concurrency", "1"])
    assert rc == 2
    assert "out of memory" in capsys.readouterr().err


SIM_CASES = [
    ("llama-3.1-8b", 1, "bf16", 512, 128, 4.0),
    ("llama-3.1-8b", 1, "bf16", 2048, 256, 5.0),
    ("llama-3.1-8b", 1, "bf16", 2048, 256, 7.0),
    ("llama-3.1-70b", 4, "fp8", 4000, 300, 2.0),
]


@pytest.mark.parametrize(("model", "tp", "quant", "isl", "osl", "rate"), SIM_CASES)
def test_simulator_matches_analytical_under_poisson_load(
    model: str, tp: int, quant: str, isl: int, osl: int, rate: float
) -> None:
    """Issue 5 acceptance: Poisson load at utilization <= 0.8, mean TPOT within 5%, p99 TTFT within
    15%. The cases reach from prefill in few steps to steps where prompts take most of the engine's
    time."""
    m = load_model(model)
    w = WorkerConfig(parallel=Parallelism(tp=tp), weight_quant=quant)  # type: ignore[arg-type]
    wl = fixed(isl, osl, rate_per_s=rate)
    e = estimate(m, H100, wl, agg=w)
    assert e.prefill_utilization <= 0.8
    s = simulate(m, "h100", wl, w, requests=1500)
    assert np.mean(s.tpot_s) * 1e3 == pytest.approx(e.tpot_ms.mean, rel=0.05)
    assert np.percentile(s.ttft_s, 99) * 1e3 == pytest.approx(e.ttft_ms.p99, rel=0.15)


WAVE_CASES = [
    ("llama-3.1-70b", "h200", 4, "fp8", 1024, 512, 32),
    ("qwen3-32b", "h100", 2, "bf16", 4096, 128, 16),
    ("llama-3.1-8b", "h100", 1, "bf16", 512, 1024, 128),
]


@pytest.mark.parametrize(("model", "gpu", "tp", "quant", "isl", "osl", "n"), WAVE_CASES)
def test_single_lockstep_wave_matches_simulator(
    model: str, gpu: str, tp: int, quant: str, isl: int, osl: int, n: int
) -> None:
    """A benchmark run of one wave (P = N requests, all clients start together): the analytical mean
    TTFT (prompts prefilled a chunk budget at a time, ``queueing.burst_wait``) is within 10% of the
    simulated run. Without the per-step grouping of the wave it was 5-17% low on these cases."""
    m = load_model(model)
    w = WorkerConfig(parallel=Parallelism(tp=tp), weight_quant=quant)  # type: ignore[arg-type]
    wl = Workload(
        isl=LengthSpec(mean=isl), osl=LengthSpec(mean=osl), concurrency=n, bench_requests=n
    )
    e = estimate(m, get_gpu(gpu), wl, agg=w)
    s = simulate(m, gpu, wl, w, requests=n, warmup_frac=0.0)
    assert np.mean(s.ttft_s) * 1e3 == pytest.approx(e.ttft_ms.mean, rel=0.10)


CLOSED_CASES = [
    ("qwen3-32b", "h100", 2, "fp8", 1024, 512, 32),
    ("llama-3.1-8b", "h100", 1, "bf16", 1024, 256, 64),
    ("llama-3.1-70b", "h200", 4, "fp8", 2048, 512, 64),
]


@pytest.mark.parametrize(("model", "gpu", "tp", "quant", "isl", "osl", "n"), CLOSED_CASES)
def test_closed_loop_steady_state_matches_simulator(
    model: str, gpu: str, tp: int, quant: str, isl: int, osl: int, n: int
) -> None:
    """Closed loop past its start-up wave, lengths varying (lognormal, CV 0.3): the analytical mean
    TTFT (the asymptotic bound, ``queueing.closed_loop_response``) is within 20% of the simulated
    one and so is TPOT within 5%. Mean value analysis (the model before) put 1.2-1.6x the simulated
    TTFT on them."""
    m = load_model(model)
    w = WorkerConfig(parallel=Parallelism(tp=tp), weight_quant=quant, kv_dtype=quant)  # type: ignore[arg-type]
    lengths = {
        "isl": LengthSpec(mean=isl, dist="lognormal", cv=0.3),
        "osl": LengthSpec(mean=osl, dist="lognormal", cv=0.3),
    }
    e = estimate(m, get_gpu(gpu), Workload(**lengths, concurrency=n, bench_requests=10**7), agg=w)  # type: ignore[arg-type]
    s = simulate(m, gpu, Workload(**lengths, concurrency=n), w, requests=1500)  # type: ignore[arg-type]
    assert np.mean(s.ttft_s) * 1e3 == pytest.approx(e.ttft_ms.mean, rel=0.20)
    assert np.mean(s.tpot_s) * 1e3 == pytest.approx(e.tpot_ms.mean, rel=0.05)


def test_more_benchmark_waves_lower_the_mean_ttft() -> None:
    """A longer run (more requests P per client) dilutes the lockstep first wave: mean TTFT falls
    with P and approaches the steady state; P is ignored for an open loop."""
    m, w = load_model("llama-3.1-8b"), WorkerConfig(parallel=Parallelism(tp=1))
    ttft = [
        estimate(
            m,
            H100,
            Workload(
                isl=LengthSpec(mean=2048),
                osl=LengthSpec(mean=256),
                concurrency=64,
                bench_requests=p,
            ),
            agg=w,
        ).ttft_ms.mean
        for p in (64, 128, 320, 1280, 64000)
    ]
    assert all(a > b for a, b in zip(ttft, ttft[1:], strict=False))
    steady = estimate(m, H100, fixed(2048, 256, concurrency=64), agg=w).ttft_ms.mean
    wave = fixed(2048, 256, concurrency=64).model_copy(update={"startup_wave": True})
    fitted = estimate(m, H100, wave, agg=w).ttft_ms.mean
    assert ttft[0] > 3 * ttft[-1]
    assert ttft[-1] < fitted  # asked for: the fitted share of an unknown protocol's lockstep wave
    assert ttft[-1] == pytest.approx(steady, rel=0.03)  # the default is the steady state


@pytest.mark.parametrize(
    ("argv", "field"),
    [
        (["--rate", "2", "--bench-requests", "100"], "--bench-requests"),
        (["--concurrency", "10", "--bench-requests", "5"], "--bench-requests"),
    ],
)
def test_bench_requests_bad_input_is_one_line(
    argv: list[str], field: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rc = main(["estimate", "--model", "llama-3.1-8b", "--gpu", "h100", *argv])
    err = capsys.readouterr().err
    assert rc == 2
    assert (
        err.startswith(f"error: {field}:")
        and "Value error" not in err
        and len(err.strip().splitlines()) == 1
    )
