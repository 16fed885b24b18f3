"""The request lengths a measured row is replayed at (``planner.replay_e2e.launch.length_spec``,
``lab.layouts.length_low_fractions``): the row's ISL / OSL, or the uniform draw of a random
dataset with ``--random-range-ratio`` (InferenceMAX rows: 0.8, read from their harness)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hardware.errors import PlannerInputError
from lab.layouts import INFERENCEMAX_LOW_FRACTION, length_low_fractions
from planner.replay_e2e.candidates import prepare
from planner.replay_e2e.launch import length_spec
from planner.replay_e2e.layout import LOW_FRACTION_COLUMN, read_measurements
from planner.replay_e2e.predict import predict
from tests.lab import lab_prepare


@pytest.mark.parametrize(("nominal", "lo"), [(1024, 819), (8192, 6553), (1000, 800), (10, 8)])
def test_a_range_ratio_draw_has_the_mean_and_spread_of_its_whole_numbers(
    nominal: int, lo: int
) -> None:
    """``np.random.randint(int(0.8 L), L + 1)``: every whole number in [lo, L] equally likely."""
    values = np.arange(lo, nominal + 1, dtype=float)
    spec = length_spec(float(nominal), 0.8)
    assert spec.dist == "uniform"
    assert spec.mean == pytest.approx(values.mean(), rel=1e-12)
    assert spec.cv * spec.mean == pytest.approx(values.std(), rel=1e-12)
    assert spec.draw().mean() == pytest.approx(values.mean(), rel=2e-3)


@pytest.mark.parametrize("frac", [float("nan"), 1.0])
def test_fixed_lengths_stay_the_rows_own(frac: float) -> None:
    spec = length_spec(1024.0, frac)
    assert spec.dist == "fixed" and spec.mean == 1024.0


def test_a_ratio_of_zero_draws_from_one_token_up() -> None:
    spec = length_spec(100.0, 0.0)
    assert spec.mean == pytest.approx(50.5)


SOURCES = {
    "db-dump/2026-04-27; config_id=181; workflow_run_id=221; nvcr.io/nvidia/x": 0.8,
    "source_file=2026-03-25.csv; model=Kimi-K2.5; silicon_concurrency=4; wip=False": 0.8,
    "source_file=kimi-k2.5-gap-analysis.csv; silicon_concurrency=8": 0.8,
    "source_file=qwen3.5-397b-gap-analysis.csv; silicon_concurrency=8": 0.8,
    "source_file=/Users/u/aic-auto-gap-analysis/data/h100_sxm/vllm/0.12.0/Qwen.csv": None,
    "my-own-run": None,
    "db-dump/results.json:1; silicon_concurrency=8; num_prompts=80": None,  # a user's file
}


def test_inferencemax_rows_are_read_at_its_range_ratio() -> None:
    rows = pd.DataFrame({"silicon_data_source": list(SOURCES)})
    got = length_low_fractions(rows)
    for (src, want), frac in zip(SOURCES.items(), got, strict=True):
        assert np.isnan(frac) if want is None else frac == want, src
    assert INFERENCEMAX_LOW_FRACTION == 0.8


def test_a_given_column_wins_over_the_harness() -> None:
    rows = pd.DataFrame(
        {
            "silicon_data_source": ["db-dump/2026-04-27; config_id=1", "mine", "mine"],
            LOW_FRACTION_COLUMN: [1.0, 0.5, np.nan],
        }
    )
    got = length_low_fractions(rows).to_numpy()
    assert got[0] == 1.0 and got[1] == 0.5 and np.isnan(got[2])


def _row(source: str) -> dict[str, object]:
    return {
        "id": f"r_{source}",
        "silicon_data_source": source,
        "backend": "vllm",
        "backend_version": "0.12.0",
        "model_path": "meta-llama/Llama-3.1-8B-Instruct",
        "system": "h100_sxm",
        "mode": "agg",
        "isl": 8192,
        "osl": 1024,
        "gemm_quant_mode": "bf16",
        "batch_size": 16,
        "tp_size": 1,
        "pp_size": 1,
        "silicon_ttft_ms": 500.0,
        "silicon_tpot_ms": 20.0,
    }


def test_a_shorter_mean_prompt_prices_a_shorter_prefill() -> None:
    """The same deployment read as an InferenceMAX run (lengths 0.8-1.0 x nominal) prices TTFT
    and TPOT below the fixed-length run, and as the fixed run at the draw's mean lengths."""
    raw = pd.DataFrame([_row("mine"), _row("db-dump/2026-04-27; config_id=1")])
    rows = lab_prepare(raw).rows
    pred = predict(rows, progress=False)
    fixed_ttft, drawn_ttft = pred["pred_ttft_ms"].to_numpy()
    fixed_tpot, drawn_tpot = pred["pred_tpot_ms"].to_numpy()
    assert drawn_ttft < 0.95 * fixed_ttft and drawn_tpot < fixed_tpot
    at_mean = _row("mine") | {"isl": 7372.5, "osl": 921.5}
    mean_pred = predict(prepare(pd.DataFrame([at_mean])).rows, progress=False)
    assert drawn_ttft == pytest.approx(float(mean_pred["pred_ttft_ms"].iloc[0]), rel=0.03)


def test_the_column_is_checked_on_read(tmp_path: object) -> None:
    from pathlib import Path

    assert isinstance(tmp_path, Path)
    path = tmp_path / "rows.csv"
    row = _row("mine") | {LOW_FRACTION_COLUMN: 1.5}
    pd.DataFrame([row]).to_csv(path, index=False)
    with pytest.raises(PlannerInputError, match=LOW_FRACTION_COLUMN):
        read_measurements(path)
