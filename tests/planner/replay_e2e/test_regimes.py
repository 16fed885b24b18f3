"""Rows of an open serving regime and the band's score against both regimes' predictions
(``planner.replay_e2e.regimes``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from planner.replay_e2e import regimes


def test_open_regime_needs_a_named_alternative_a_prefill_first_engine_and_no_record() -> None:
    rows = pd.DataFrame(
        {
            "alt_bench_requests": [80.0, 80.0, 80.0, 80.0, np.nan, 80.0],
            "backend": ["sglang", "sglang", "vllm", "sglang", "sglang", "sglang"],
            "mode": ["agg", "agg", "agg", "disagg", "agg", "agg"],
            "mixed_chunk": [np.nan, 1.0, np.nan, np.nan, np.nan, np.nan],
            "bench_requests": [np.nan, np.nan, np.nan, np.nan, np.nan, 640.0],
        }
    )
    assert regimes.open_regime(rows).tolist() == [True, False, False, False, False, False]
    unnamed = rows.drop(columns=["alt_bench_requests"])  # a user's file need not name a run
    assert not regimes.open_regime(unnamed).any()
    assert regimes.with_alternatives(unnamed)["alt_ttft_ms"].isna().all()


def test_envelope_residual_is_the_log_ratio_to_the_nearer_prediction() -> None:
    meas = np.array([50.0, 150.0, 400.0, 100.0])
    lower = np.array([100.0, 100.0, 100.0, 100.0])
    upper = np.array([200.0, 200.0, 200.0, 100.0])
    r = regimes.envelope_residual(meas, lower, upper)
    assert r == pytest.approx([np.log(0.5), 0.0, np.log(2.0), 0.0])
    one = regimes.envelope_residual(np.array([30.0]), np.array([10.0]), np.array([10.0]))
    assert one == pytest.approx([np.log(3.0)])


def test_band_edges_hold_exactly_the_values_whose_score_is_inside_the_quantiles() -> None:
    rng = np.random.default_rng(7)
    n = 4000
    lower = rng.uniform(1.0, 100.0, n)
    upper = lower * np.where(rng.random(n) < 0.5, 1.0, rng.uniform(1.0, 5.0, n))
    q = np.sort(rng.normal(0.0, 0.6, (n, 2)), axis=1)
    lo, hi = regimes.band_edges(lower, upper, q[:, 0], q[:, 1])
    assert np.all(lo <= hi)
    meas = lower * np.exp(rng.normal(0.3, 1.2, n))
    s = regimes.envelope_residual(meas, lower, upper)
    inside_band = (meas >= lo) & (meas <= hi)
    inside_score = (s >= q[:, 0]) & (s <= q[:, 1])
    near_edge = np.minimum(np.abs(np.log(meas / lo)), np.abs(np.log(meas / hi))) < 1e-9
    assert np.array_equal(inside_band[~near_edge], inside_score[~near_edge])
    assert inside_band.mean() > 0.05  # the check sees both outcomes
