"""Acceptance of ``planner capacity`` on a synthetic day (fixed seed): the plan's windows meet
the SLO when their traffic is replayed through the step-level simulator, the static deployment
sized for the mean does not in the burst windows, and autoscaling costs fewer GPU-hours than the
static peak.

The day: 24 hours, a 4x daily cycle (peak 4 req/s), six bursts of 3x for 10 minutes, Llama-3.1-70B
on H100 replicas of at most 4 GPUs, ISL 2000 / OSL 400 (lognormal CV 0.5), p90 TTFT <= 800 ms and
TPOT <= 30 ms, 15-minute windows. To keep the test at seconds, the replay covers every burst window
and every eighth window of the rest (about a third of the day's requests)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from planner.model.bundled import load_model
from planner.perf.replay import by_window, replay, route, window_index
from planner.workload.trace_gen import TraceSpec, generate
from planner.workload.windows import split
from solvers.capacity import CapacityRequest, capacity, erlang_c, slot_wait

SLO_TTFT_MS, SLO_TPOT_MS = 800.0, 30.0


@pytest.fixture(scope="module")
def day() -> dict:
    trace, gen = generate(
        TraceSpec(
            hours=24,
            peak_rate=4.0,
            daily_ratio=4.0,
            bursts_per_day=6,
            burst_minutes=10,
            burst_factor=3.0,
            isl_mean=2000,
            osl_mean=400,
            seed=7,
        )
    )
    req = CapacityRequest(
        model="llama-3.1-70b",
        gpus=("h100",),
        ttft_ms=SLO_TTFT_MS,
        tpot_ms=SLO_TPOT_MS,
        percentile="p90",
        window_s=900,
        worker_max_gpus=4,
        scale_up_s=300,
    )
    res = capacity(trace, req)
    starts = np.array([w.start_s for w in res.windows])
    burst = [
        k
        for k, w in enumerate(res.windows)
        if any(min(b, w.start_s + w.duration_s) - max(a, w.start_s) >= 300 for a, b in gen.bursts)
    ]
    return {
        "trace": trace,
        "res": res,
        "starts": starts,
        "burst": burst,
        "wo": window_index(trace.arrival_s, starts),
    }


def _replay(day: dict, replicas: np.ndarray, windows: list[int]) -> list[dict]:
    res, tr, wo = day["res"], day["trace"], day["wo"]
    sel = np.isin(wo, windows)
    out = replay(
        load_model(res.model),
        res.deployment.gpu,
        res.deployment.agg,
        tr.arrival_s[sel],
        tr.isl[sel],
        tr.osl[sel],
        route(wo, replicas)[sel],
        backend=res.backend,
    )
    rows = by_window(out, wo[sel], len(res.windows))
    return [rows[k] for k in windows]


def _meets(row: dict) -> bool:
    return row["ttft_ms"]["p90"] <= SLO_TTFT_MS and row["tpot_ms"]["p90"] <= SLO_TPOT_MS


def test_capacity_windows_meet_slo_in_replay(day: dict) -> None:
    res = day["res"]
    assert len(res.windows) == 96 and len(day["burst"]) >= 6
    reps = np.array([w.replicas for w in res.windows])
    assert reps.max() >= 3 * reps.min()  # the daily cycle and bursts move the fleet
    picked = sorted(set(day["burst"]) | set(range(0, 96, 8)))
    rows = _replay(day, reps, picked)
    met = sum(_meets(r) for r in rows)
    assert met >= 0.95 * len(rows), [
        (k, r["ttft_ms"]["p90"], r["tpot_ms"]["p90"]) for k, r in zip(picked, rows, strict=True)
    ]


def test_static_mean_violates_in_burst_windows(day: dict) -> None:
    res = day["res"]
    n = res.static_mean.replicas
    rows = _replay(day, np.full(len(res.windows), n), day["burst"])
    assert not any(_meets(r) for r in rows)
    assert set(day["burst"]) <= set(res.static_mean.violating_windows)
    assert res.static_mean.windows_violating < len(
        res.windows
    )  # sized for the mean, it is fine off-peak


def test_autoscaled_cheaper_than_static_peak(day: dict) -> None:
    res = day["res"]
    assert res.autoscaled.gpu_hours < 0.6 * res.static_peak.gpu_hours
    assert res.static_peak.windows_violating == 0 and res.autoscaled.windows_violating == 0
    reps = [w.replicas for w in res.windows]
    gpw = res.deployment.total_gpus
    base = sum(r * gpw * w.duration_s for r, w in zip(reps, res.windows, strict=True)) / 3600
    ups = sum(max(b - a, 0) for a, b in zip(reps, reps[1:], strict=False)) * gpw * 300 / 3600
    assert res.autoscaled.gpu_hours == pytest.approx(base + ups)
    assert res.autoscaled.cost == pytest.approx(res.autoscaled.gpu_hours * res.price_per_gpu_hour)


def test_erlang_c_and_slot_wait() -> None:
    # M/M/2 with a = 1 Erlang: C = 1/3 (textbook value: a^c/c! · c/(c-a) / (sum + ...))
    assert float(erlang_c(np.array([1.0]), 2)[0]) == pytest.approx(1 / 3)
    assert float(erlang_c(np.array([3.0]), 2)[0]) == 1.0
    w = slot_wait(np.array([0.5, 0.9, 0.99]), np.full(3, 1.0), np.array([1.0]), 1.0, 1.0)
    # M/M/1 (c = 1): mean wait rho/(1-rho)·h
    np.testing.assert_allclose(w["mean"], [1.0, 9.0, 99.0])
    assert np.all(np.diff(w["p90"]) > 0)


def test_windows_are_sized_at_the_confidence(day: dict) -> None:
    """Each window's replicas meet the SLO with probability >= confidence (issue 47): the same
    worker needs at least as many replicas at a higher confidence, window by window, and the
    default is the plan's default."""
    from solvers.capacity import _Predictor

    res = day["res"]
    assert (
        res.confidence
        == 0.8
        == CapacityRequest(model="m", gpus=("h100",), ttft_ms=1, tpot_ms=1).confidence
    )
    for w in res.windows:  # each window states the probability it meets each SLO
        if w.requests and w.meets_slo:
            assert min(w.probability_met.values()) >= 0.8 - 1e-3
    m = load_model("llama-3.1-70b")
    base = dict(model="llama-3.1-70b", gpus=("h100",), ttft_ms=SLO_TTFT_MS, tpot_ms=SLO_TPOT_MS)
    needed = []
    for c in (0.0, 0.5, 0.8, 0.95):
        predict = _Predictor(m, CapacityRequest(**base, confidence=c), res.deployment, 64)
        oks = [
            predict(*w.lengths(), w.design_rate, w.local_cv)["ok"]
            for w in split(day["trace"], 900.0, 0.9)[:8]
            if w.requests
        ]
        needed.append([int(np.argmax(ok)) + 1 if ok.any() else 65 for ok in oks])
    for lower, higher in itertools.pairwise(needed):
        assert all(a <= b for a, b in zip(lower, higher, strict=True))
    assert sum(needed[-1]) > sum(needed[0])
    with pytest.raises(ValueError, match="--confidence"):
        CapacityRequest(**base, confidence=0.3)
