"""The band-table builder and the validator's band columns on a slice of the measured data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from hardware.errors import PlannerInputError
from lab import bands
from planner.replay_e2e.e2e import validate_e2e
from planner.uncertainty.bands import table_from_dict
from tests.lab import SILICON_MEASURED, prepared_file

DATA = SILICON_MEASURED
SLICE_ROWS = 400


def _slice(tmp_path: Path) -> Path:
    if not DATA.is_file():
        pytest.skip(f"{DATA} absent (shared validation folder not mounted)")
    df = pd.read_csv(DATA)
    agg = (
        df[df["mode"] == "agg"].iloc[::4].head(SLICE_ROWS)
    )  # every 4th row: several campaigns and engines
    out = tmp_path / "slice.csv"
    agg.to_csv(out, index=False)
    return out


@pytest.mark.validation
def test_validator_reports_band_columns_and_coverage(tmp_path: Path) -> None:
    data = _slice(tmp_path)
    pred_out = tmp_path / "pred.csv"
    r = validate_e2e(prepared_file(data, tmp_path / "rows.csv"), pred_out, progress=False)
    overall = r["groups"][0]
    for m in ("ttft", "tpot"):
        assert 0.0 <= overall[m]["band_coverage_pct"] <= 100.0
    p = pd.read_csv(pred_out)
    for m in ("ttft", "tpot"):
        lo, hi, v = (p[f"pred_{m}_ms{s}"].to_numpy(float) for s in ("_lo", "_hi", ""))
        ok = np.isfinite(v)
        assert np.all(lo[ok] < hi[ok]) and np.all(lo[ok] > 0)


@pytest.mark.validation
def test_builder_writes_a_loadable_table_with_provenance(tmp_path: Path) -> None:
    """From a predictions CSV (the held-out path is exercised by test_bands_coverage)."""
    data = _slice(tmp_path)
    pred = tmp_path / "pred.csv"
    validate_e2e(prepared_file(data, tmp_path / "rows.csv"), pred, progress=False)
    out = tmp_path / "bands.yaml"
    argv = ["--data", str(data), "--out", str(out), "--folds", "3", "--predictions", str(pred)]
    argv += ["--holdout", "campaign"]
    assert bands.main(argv) == 0
    raw = yaml.safe_load(out.read_text())
    t = table_from_dict(raw)
    assert t.level == 0.8 and t.provenance["folds"] == 3 and t.provenance["data_rows"] > 0
    assert "--folds 3" in t.provenance["command"] and str(pred) in t.provenance["predictions"]
    for g in t.groups.values():  # shrunk toward the parent: still ordered, finite
        assert all(np.isfinite(b.lo) and b.lo < b.hi for b in g.values())
    assert raw["out_of_fold"][0]["by"] == "overall"
    assert bands.main(["--data", str(data), "--out", str(out)]) == 2  # exists: needs --force


def test_builder_refuses_bad_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        bands.main(["--data", str(tmp_path / "none.csv"), "--out", str(tmp_path / "b.yaml")]) == 2
    )
    assert "--data" in capsys.readouterr().err
    assert bands.main(["--data", "x", "--out", "y", "--folds", "1"]) == 2
    assert bands.main(["--data", "x", "--out", "y", "--level", "0.99"]) == 2
    assert bands.main(["--data", "x", "--out", "y", "--holdout-folds", "1"]) == 2
    data = tmp_path / "d.csv"
    data.write_text("x\n1\n")
    capsys.readouterr()
    both = ["--predictions", str(data), "--predictions-out", str(tmp_path / "p.csv")]
    assert bands.main(["--data", str(data), "--out", str(tmp_path / "b.yaml"), *both]) == 2
    assert "--predictions-out" in capsys.readouterr().err
    assert not (tmp_path / "b.yaml").exists() and not (tmp_path / "p.csv").exists()


def test_band_folds_deal_each_cells_campaigns_to_different_folds() -> None:
    """Campaigns sorted by (cell of most of their rows, name), dealt round-robin in one run."""
    src = ["b; config_id=1", "a; config_id=2", "c", "a; config_id=3", "d", "e", "f"]
    rows = pd.DataFrame(
        {
            "silicon_data_source": src,
            "engine": ["sglang", "sglang", "vllm", "sglang", "sglang", "sglang", "vllm"],
            "mode": ["agg", "agg", "agg", "agg", "agg", "disagg", "agg"],
        }
    )
    # cells: sglang x agg {a, b, d}, sglang x disagg {e}, vllm x agg {c, f}
    assert list(bands.band_folds(rows, 3)) == [1, 0, 1, 0, 2, 0, 2]
    assert list(bands.band_folds(rows, 2)) == [1, 0, 0, 0, 0, 1, 1]
    # a campaign spread over two cells belongs to the one holding most of its rows
    two = rows.assign(silicon_data_source=["a", "a", "a", "b", "b", "c", "c"])
    two.loc[:, "engine"] = ["vllm", "vllm", "sglang", "sglang", "sglang", "sglang", "sglang"]
    two.loc[:, "mode"] = "agg"
    assert list(bands.band_folds(two, 3)) == [2, 2, 2, 0, 0, 1, 1]
    with pytest.raises(PlannerInputError, match="--folds"):
        bands.band_folds(rows, 1)


def test_residual_rows_keep_one_copy_of_a_measurement_under_two_model_labels() -> None:
    """Two dumps hold one DeepSeek-R1 measurement, one labelled DeepSeek-V3 (same architecture):
    one residual row remains (the lowest id); a different measurement of the same layout stays."""
    if not DATA.is_file():
        pytest.skip(f"{DATA} absent (shared validation folder not mounted)")
    base = {
        "backend": "sglang",
        "backend_version": "0.5.9",
        "system": "h200_sxm",
        "precision": "fp8",
        "mode": "agg",
        "isl": 1024.0,
        "osl": 1024.0,
        "batch_size": 4.0,
        "tp_size": 8.0,
        "silicon_ttft_ms": 259.911429,
        "silicon_tpot_ms": 10.292254,
        "pred_ttft_ms": 271.0,
        "pred_tpot_ms": 10.8,
        "pred_prefill_util": 0.01,
        "c_weight_quant": 2,
        "c_kv_dtype": 1,
    }
    pred = pd.DataFrame(
        [
            base
            | {"id": "b", "silicon_data_source": "dump 1", "model_path": "deepseek-ai/DeepSeek-V3"},
            base
            | {"id": "a", "silicon_data_source": "dump 2", "model_path": "deepseek-ai/DeepSeek-R1"},
            base
            | {
                "id": "c",
                "silicon_data_source": "dump 2",
                "model_path": "deepseek-ai/DeepSeek-R1",
                "silicon_tpot_ms": 11.0,
            },
        ]
    )
    rows = bands.residual_rows(pred)
    assert sorted(rows["id"]) == ["a", "c"]
