"""``--holdout gpu`` on a small synthetic e2e file (``planner.replay_e2e.holdout``,
``validate e2e`` and ``validate decisions``): each GPU priced without its own measurements."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from planner.cli.main import main
from planner.replay_e2e.e2e import validate_e2e


def _rows(path: Path, h200_ttft_factor: float = 1.0) -> Path:
    """vLLM Llama-3.1-8B on H100 and H200 at 1-64 clients and TP 1-2, a campaign per GPU."""
    rows = [
        {
            "id": f"{gpu}_c{c}_tp{tp}",
            "backend": "vllm",
            "model_path": "meta-llama/Llama-3.1-8B",
            "system": gpu,
            "precision": "bf16",
            "mode": "agg",
            "isl": 1024,
            "osl": 128,
            "tp_size": tp,
            "batch_size": c,
            "silicon_ttft_ms": (60.0 + 3.0 * c / tp) * (h200_ttft_factor if "h200" in gpu else 1),
            "silicon_tpot_ms": (8.0 + 0.1 * c) / tp**0.5,
            "campaign": f"sweep_{gpu}",
        }
        for gpu in ("h100_sxm", "h200_sxm")
        for c in (1, 4, 16, 64)
        for tp in (1, 2)
    ]
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_a_gpus_rows_are_priced_without_its_own_measurements(tmp_path: Path) -> None:
    """H200's measured TTFT tripled: the H200 rows' predictions do not move (their constants are
    fitted on H100 rows only); the H100 rows' constants see the change."""
    base, changed = tmp_path / "base.csv", tmp_path / "changed.csv"
    r = validate_e2e(_rows(tmp_path / "a.csv"), base, progress=False, holdout="gpu")
    validate_e2e(_rows(tmp_path / "b.csv", 3.0), changed, progress=False, holdout="gpu")
    assert r["holdout"]["fold_gpus"] == ["h100_sxm", "h200_sxm"]  # type: ignore[index]
    assert r["modelled"] == 16 and "quantile_calibration" in r
    a, b = pd.read_csv(base), pd.read_csv(changed)
    h200 = a["system"] == "h200_sxm"
    for m in ("ttft", "tpot"):
        assert (a.loc[h200, f"pred_{m}_ms"] == b.loc[h200, f"pred_{m}_ms"]).all()
        assert (a[f"pred_{m}_ms_lo"] < a[f"pred_{m}_ms_hi"]).all()
    assert (a.loc[~h200, "pred_ttft_ms"] < b.loc[~h200, "pred_ttft_ms"]).all()


def test_decisions_held_out_by_gpu_report_each_gpu(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = str(_rows(tmp_path / "rows.csv"))
    argv = ["validate", "decisions", "--data", data, "--holdout", "gpu", "--format", "json"]
    assert main(argv) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["holdout"] == "gpu" and set(d["by_gpu"]) == {"h100_sxm", "h200_sxm"}
    assert sum(g["groups"] for g in d["by_gpu"].values()) == d["groups"] == 2


def test_one_gpu_cannot_be_held_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = pd.read_csv(_rows(tmp_path / "rows.csv"))
    one = tmp_path / "one.csv"
    rows[rows["system"] == "h100_sxm"].to_csv(one, index=False)
    assert main(["validate", "e2e", "--data", str(one), "--holdout", "gpu"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --holdout") and "two GPUs" in err and "Traceback" not in err
