"""TTFT percentiles: admission wait (slots full) is near-deterministic,
prefill queueing has the tail."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hardware.catalog import get_gpu
from planner.engines import get_engine
from planner.engines.calibration import EnginePolicy
from planner.model.bundled import load_model
from planner.perf.batch import CandidateArrays, RecordedLaunch, ResultArrays, evaluate_batch
from planner.workload.spec import LengthSpec, Workload, fixed

H100 = get_gpu("h100")
M8 = load_model("llama-3.1-8b")
PROPERTY_SETTINGS = settings(max_examples=15, deadline=None)
CONCURRENCY = np.array([1, 2, 4, 8, 16, 32, 64, 128, 256, 512], dtype=float)
P50_MEAN_RTOL = 0.05
"""Clients far beyond the slots: the admission wait dominates and is the same for every request."""


def _sweep(isl: int, osl: int, seqs: int, w: Workload | None = None) -> ResultArrays:
    c = CandidateArrays.from_lists(
        concurrency=CONCURRENCY, max_num_seqs=np.full(CONCURRENCY.size, seqs)
    )
    return evaluate_batch(M8, H100, c, w or fixed(isl, osl, concurrency=1))


def _ordered(r: ResultArrays) -> None:
    assert np.all(r.ttft_p50_s <= r.ttft_p90_s * (1 + 1e-9))
    assert np.all(r.ttft_p90_s <= r.ttft_p99_s * (1 + 1e-9))


def test_admission_regime_percentiles_near_mean() -> None:
    """64 clients over 8 slots: Little's law mean, p50 within a few percent of it, mean in [p50,
    p99]."""
    r = _sweep(2000, 500, 8)
    over = CONCURRENCY >= 64
    _ordered(r)
    assert np.all(r.ttft_p50_s[over] <= r.ttft_mean_s[over] * (1 + 1e-9))
    assert np.all(r.ttft_mean_s[over] <= r.ttft_p99_s[over] * (1 + 1e-9))
    np.testing.assert_allclose(r.ttft_p50_s[over], r.ttft_mean_s[over], rtol=P50_MEAN_RTOL)
    # Little's law: N = X·(TTFT + (OSL-1)·TPOT)
    np.testing.assert_allclose(
        r.requests_per_s * (r.ttft_mean_s + 499 * r.tpot_mean_s), CONCURRENCY, rtol=0.05
    )


def test_osl_spread_widens_admission_percentiles() -> None:
    w = Workload(
        isl=LengthSpec(mean=1000), osl=LengthSpec(mean=500, dist="lognormal", cv=1.0), concurrency=1
    )
    spread, flat = _sweep(1000, 500, 8, w), _sweep(1000, 500, 8)
    _ordered(spread)
    over = CONCURRENCY >= 64
    assert np.all(
        spread.ttft_p99_s[over] - spread.ttft_p50_s[over]
        > flat.ttft_p99_s[over] - flat.ttft_p50_s[over]
    )


@PROPERTY_SETTINGS
@given(
    isl=st.sampled_from([128, 1024, 4096]),
    osl=st.sampled_from([64, 512, 2048]),
    seqs=st.sampled_from([4, 16, 256]),
)
def test_ttft_percentiles_never_fall_as_concurrency_grows(isl: int, osl: int, seqs: int) -> None:
    r = _sweep(isl, osl, seqs)
    _ordered(r)
    for p in (r.ttft_p50_s, r.ttft_p90_s, r.ttft_p99_s):
        assert np.all(np.diff(p) >= -1e-6 * p[1:])
        # never below the request's own prefill (no queueing at one client)
        assert np.all(p >= r.ttft_p50_s[0] * (1 - 1e-9))


def test_disaggregated_percentiles_take_the_per_candidate_request_time() -> None:
    """A refit's per-candidate ``disagg_request_overhead_s`` (``constants``, as the held-out folds
    price rows) moves the TTFT percentiles as the same value in the calibration does, not only the
    mean: the percentiles spread the prefill part of TTFT with the prompt length and hold the
    per-request time fixed."""
    from planner.calibration.profile import with_constants
    from planner.engines.calibration import engine

    c = CandidateArrays.from_lists(
        mode=[1, 1], concurrency=[8.0, 64.0], workers=[1, 1], prefill_workers=[1, 1]
    )
    # prompts of varied length: the prefill part spreads with the quantile, the fixed part does not
    w = Workload(
        isl=LengthSpec(mean=2000, dist="lognormal", cv=1.0), osl=LengthSpec(mean=200), concurrency=1
    )
    value = 0.75
    launch = RecordedLaunch(constants={"disagg_request_overhead_s": np.full(2, value)})
    by_row = evaluate_batch(M8, H100, c, w, backend="vllm", recorded=launch)
    cal = with_constants(engine("vllm"), {"disagg_request_overhead_s": value}, "test")
    by_cal = evaluate_batch(M8, H100, c, w, backend=EnginePolicy(get_engine("vllm"), cal, "test"))
    for name in ("ttft_mean_s", "ttft_p50_s", "ttft_p90_s", "ttft_p99_s"):
        np.testing.assert_allclose(getattr(by_row, name), getattr(by_cal, name), rtol=1e-12)
    assert np.all(by_row.ttft_p50_s > engine("vllm").disagg_request_overhead_s.value)
