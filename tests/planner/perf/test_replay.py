"""Trace replay: the event-skipping replica equals ``simulate`` step by step on the same
arrivals."""

from __future__ import annotations

import numpy as np
import pytest

from planner.model.bundled import load_model
from planner.perf.deployment import Parallelism, WorkerConfig
from planner.perf.replay import ReplayResult, by_window, replay, route, window_index
from planner.perf.simulator import _arrivals, _StepClock, simulate
from planner.workload.spec import LengthSpec, Workload

N = 1200


@pytest.fixture(scope="module")
def case() -> tuple:
    m = load_model("llama-3.1-8b")
    w = Workload(
        isl=LengthSpec(mean=1000, dist="lognormal", cv=0.5),
        osl=LengthSpec(mean=200, dist="lognormal", cv=0.8),
        rate_per_s=15.0,
    )
    worker = WorkerConfig(parallel=Parallelism(tp=1), max_num_seqs=32, max_num_batched_tokens=2048)
    rng = np.random.default_rng(3)
    isl, osl = w.isl.draw(N, 3).astype(int), w.osl.draw(N, 4).astype(int)
    return m, w, worker, _arrivals(w, N, rng), isl, osl


def test_replay_equals_simulate(case: tuple) -> None:
    m, w, worker, arr, isl, osl = case
    sim = simulate(m, "h100", w, worker, requests=N, seed=3, warmup_frac=0.0)
    clock = _StepClock(m, "h100", worker, "vllm", w.isl.mean + w.osl.mean / 2)
    rep = replay(m, "h100", worker, arr, isl, osl, np.zeros(N, dtype=int), clock=clock)
    np.testing.assert_allclose(np.sort(rep.ttft_s), np.sort(sim.ttft_s), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(
        np.sort(rep.tpot_s[np.isfinite(rep.tpot_s)]), np.sort(sim.tpot_s), rtol=1e-9
    )


def test_row_clock_close_to_exact(case: tuple) -> None:
    m, w, worker, arr, isl, osl = case
    exact = replay(
        m,
        "h100",
        worker,
        arr,
        isl,
        osl,
        np.zeros(N, dtype=int),
        clock=_StepClock(m, "h100", worker, "vllm", float(np.mean(isl) + np.mean(osl) / 2)),
    )
    rows = replay(m, "h100", worker, arr, isl, osl, np.zeros(N, dtype=int))
    for q in (50, 90, 99):
        assert np.percentile(rows.ttft_s, q) == pytest.approx(
            np.percentile(exact.ttft_s, q), rel=0.02
        )
        assert np.nanpercentile(rows.tpot_s, q) == pytest.approx(
            np.nanpercentile(exact.tpot_s, q), rel=0.02
        )


def test_more_replicas_lower_latency(case: tuple) -> None:
    m, _, worker, arr, isl, osl = case
    fast = arr / 3.0  # three times the rate: one replica queues, three do not
    one = replay(m, "h100", worker, fast, isl, osl, np.zeros(N, dtype=int))
    wo = np.zeros(N, dtype=int)
    three = replay(m, "h100", worker, fast, isl, osl, route(wo, np.array([3])))
    assert np.percentile(three.ttft_s, 90) < 0.5 * np.percentile(one.ttft_s, 90)
    assert set(np.unique(route(wo, np.array([3])))) == {0, 1, 2}


def test_windows_and_routing() -> None:
    starts = np.array([0.0, 10.0, 20.0])
    t = np.array([0.5, 9.9, 10.0, 15.0, 25.0, 99.0])
    wo = window_index(t, starts)
    assert wo.tolist() == [0, 0, 1, 1, 2, 2]
    assert route(wo, np.array([1, 2, 3])).tolist() == [0, 0, 0, 1, 1, 2]
    res = ReplayResult(t / 100, t / 1000, np.zeros(t.size, dtype=int))
    rows = by_window(res, wo, 3)
    assert [r["requests"] for r in rows] == [2, 2, 2]
