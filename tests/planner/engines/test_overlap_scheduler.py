"""An engine that overlaps scheduling with the running step (``Engine.overlap_scheduler``: SGLang
and TensorRT-LLM by default, vLLM not) gets its first token ``OVERLAP_FIRST_TOKEN_STEPS`` decode
steps later in an aggregated deployment; TPOT and the disaggregated model are unchanged."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from hardware.catalog import get_gpu
from planner.engines import get_engine
from planner.engines.base import Engine
from planner.engines.calibration import EnginePolicy, engine
from planner.model.bundled import load_model
from planner.perf.batch import CandidateArrays, ResultArrays, evaluate_batch
from planner.perf.serving import OVERLAP_FIRST_TOKEN_STEPS
from planner.workload.spec import fixed

H200 = get_gpu("h200")
M = load_model("llama-3.1-8b")


def _run(name: str, overlap: bool | None = None, mode: int = 0) -> ResultArrays:
    eng = _no_overlap(name) if overlap is False else get_engine(name)
    c = CandidateArrays.from_lists(
        concurrency=[1.0, 8.0, 64.0], mode=[mode] * 3, prefill_tp=[1.0] * 3
    )
    policy = EnginePolicy(eng, engine(name), "test")
    return evaluate_batch(M, H200, c, fixed(1024, 256, concurrency=1), backend=policy)


@pytest.mark.parametrize("name", ["sglang", "trtllm"])
def test_overlap_adds_steps_to_first_token(name: str) -> None:
    assert get_engine(name).overlap_scheduler is not None
    on, off = _run(name), _run(name, overlap=False)
    extra = on.ttft_mean_s - off.ttft_mean_s
    # in decode steps: a decode step is at most the mean step (TPOT), which prefills lengthen
    # under load; at one client nearly every step is a decode step
    steps = extra / off.tpot_mean_s
    assert steps[0] == pytest.approx(OVERLAP_FIRST_TOKEN_STEPS, rel=0.03)
    assert np.all(steps > 0.5 * OVERLAP_FIRST_TOKEN_STEPS)
    assert np.all(steps <= OVERLAP_FIRST_TOKEN_STEPS * 1.02)
    np.testing.assert_allclose(on.tpot_mean_s, off.tpot_mean_s, rtol=0.02)
    assert np.all(on.ttft_p50_s <= on.ttft_p90_s) and np.all(on.ttft_p90_s <= on.ttft_p99_s)


def test_vllm_does_not_overlap_by_default() -> None:
    assert get_engine("vllm").overlap_scheduler is None


def test_disaggregated_unchanged() -> None:
    on, off = _run("trtllm", mode=1), _run("trtllm", overlap=False, mode=1)
    np.testing.assert_allclose(on.ttft_mean_s, off.ttft_mean_s, rtol=1e-12)


def test_simulate_prices_the_overlap_as_estimate_does() -> None:
    """``planner simulate`` forms step n+1 before a request arriving in step n can join it and
    streams a step's tokens one step later; its mean TTFT and TPOT agree with the estimate."""
    from planner.perf.deployment import Parallelism, WorkerConfig
    from planner.perf.estimate import estimate
    from planner.perf.simulator import simulate

    wc = WorkerConfig(parallel=Parallelism(tp=1))
    w = fixed(1024, 256, concurrency=16)
    e = estimate(M, H200, w, agg=wc, backend="trtllm")
    s = simulate(M, "h200", w, wc, backend="trtllm", requests=400)
    off = simulate(
        M, "h200", w, wc, backend=EnginePolicy(_no_overlap("trtllm"), engine("trtllm"), "t")
    )
    assert float(np.mean(s.ttft_s)) * 1e3 == pytest.approx(e.ttft_ms.mean, rel=0.15)
    assert float(np.mean(s.tpot_s)) * 1e3 == pytest.approx(e.tpot_ms.mean, rel=0.05)
    assert np.mean(s.ttft_s) > np.mean(off.ttft_s) + 1.5 * np.mean(off.tpot_s)


def _no_overlap(name: str) -> Engine:
    return replace(get_engine(name), overlap_scheduler=None)
