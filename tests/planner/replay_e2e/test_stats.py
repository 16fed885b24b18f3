"""Rows off by more than 3x, counted by ``planner validate e2e`` (issue 16's outlier figure)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from planner.replay_e2e.stats import off_by_factor


def test_counts_each_metric_and_either_way() -> None:
    pred = pd.DataFrame(
        {
            "pred_ttft_ms": [100.0, 400.0, 20.0, 100.0],
            "silicon_ttft_ms": [100.0, 100.0, 100.0, 100.0],
            "pred_tpot_ms": [10.0, 10.0, 10.0, 31.0],
            "silicon_tpot_ms": [10.0, 10.0, 10.0, 10.0],
        }
    )
    got = off_by_factor(pred)
    # 4x high and 5x low count; 3.1x high on TPOT counts; exactly 1x does not
    assert got == {"factor": 3.0, "ttft": 2, "tpot": 1, "either": 3, "share_pct": 75.0}


def test_a_row_exactly_three_times_off_is_not_counted() -> None:
    pred = pd.DataFrame(
        {
            "pred_ttft_ms": [300.0],
            "silicon_ttft_ms": [100.0],
            "pred_tpot_ms": [np.float64(10.0) / 3.0],
            "silicon_tpot_ms": [10.0],
        }
    )
    assert off_by_factor(pred)["either"] == 0


def test_rows_named_unmodellable_are_counted_apart() -> None:
    pred = pd.DataFrame(
        {
            "pred_ttft_ms": [400.0, 400.0, 100.0],
            "silicon_ttft_ms": [100.0, 100.0, 100.0],
            "pred_tpot_ms": [10.0, 10.0, 10.0],
            "silicon_tpot_ms": [10.0, 10.0, 10.0],
            "unmodellable": ["benchmark_client", np.nan, ""],
        }
    )
    got = off_by_factor(pred)
    assert (got["named"], got["not_named"], got["named_share_pct"]) == (1, 1, 33.33)


def test_clients_are_the_batch_size_else_the_recorded_concurrency() -> None:
    from planner.replay_e2e.stats import client_bucket, clients

    pred = pd.DataFrame(
        {
            "batch_size": [8.0, np.nan, np.nan, 200.0],
            "concurrency": [64.0, 9.0, np.nan, np.nan],
            "c_concurrency": [64.0, 9.0, 128.0, 200.0],
        }
    )
    assert clients(pred).tolist() == [8.0, 9.0, 128.0, 200.0]
    assert client_bucket(pred).tolist() == ["<=8", "9-32", "33-128", ">128"]
    assert client_bucket(pd.DataFrame({"isl": [1]})).tolist() == ["?"]
