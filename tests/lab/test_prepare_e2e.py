"""``python -m lab.prepare_e2e``: raw rows into the documented e2e layout."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lab.prepare_e2e import main, prepare_frame
from planner.replay_e2e.layout import read_measurements

ROW: dict[str, object] = {
    "id": "r1",
    "silicon_data_source": "db-dump/2026-04-27; config_id=9; silicon_concurrency=24; img:1",
    "backend": "vllm",
    "model_path": "meta-llama/Llama-3.1-8B-Instruct",
    "system": "h100_sxm",
    "mode": "agg",
    "isl": 1024,
    "osl": 1024,
    "batch_size": 8,
    "tp_size": 1,
    "silicon_ttft_ms": 100.0,
    "silicon_tpot_ms": 10.0,
}


def test_text_settings_become_columns_and_recorded_ones_stay() -> None:
    out = prepare_frame(pd.DataFrame([ROW, ROW | {"id": "r2", "memory_fraction": 0.7}]))
    assert out["concurrency"].tolist() == [24.0, 24.0]
    assert out["campaign"].tolist() == ["db-dump/2026-04-27; img:1"] * 2
    assert out["length_low_fraction"].tolist() == [0.8, 0.8]  # the InferenceMAX harness
    flags = out["memory_fraction"].astype(float).to_numpy()
    assert np.isnan(flags[0]) and flags[1] == 0.7


def test_the_command_writes_the_layout_and_refuses_to_overwrite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw, rows = tmp_path / "raw.csv", tmp_path / "rows.csv"
    pd.DataFrame([ROW]).to_csv(raw, index=False)
    assert main(["--data", str(raw), "--out", str(rows)]) == 0
    assert read_measurements(rows)["concurrency"].tolist() == [24.0]
    capsys.readouterr()
    assert main(["--data", str(raw), "--out", str(rows)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --out") and len(err.strip().splitlines()) == 1
    assert main(["--data", str(tmp_path / "absent.csv"), "--out", str(rows), "--force"]) == 2


def test_rows_none_of_which_can_be_modelled_are_still_written() -> None:
    out = prepare_frame(pd.DataFrame([ROW | {"model_path": "no/such-model"}]))
    assert len(out) == 1 and np.isnan(float(out["max_num_batched_tokens"].iloc[0]))
