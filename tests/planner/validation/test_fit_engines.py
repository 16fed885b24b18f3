"""``python -m planner.validation.fit_engines``: input errors and a fit on a few measured rows."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from planner.validation.fit_engines import GRID, main

DATA = Path(__file__).resolve().parents[3] / ".." / "shared" / "validation" / "e2e" / "silicon_measured.csv"


def test_missing_data_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main([str(tmp_path / "absent.csv"), "vllm"])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith("error: data:") and len(err.strip().splitlines()) == 1


@pytest.mark.validation
def test_fit_on_a_few_rows_picks_grid_values(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two (model, system) groups of vLLM rows: one trains, the other is held out; every fitted
    constant is one of its grid values and both fits report errors."""
    if not DATA.is_file():
        pytest.skip(f"{DATA} absent (shared validation folder not mounted)")
    df = pd.read_csv(DATA)
    vllm = df[(df.backend == "vllm") & (df["mode"] == "agg")]
    groups = vllm.groupby(["model_path", "system"]).head(4)
    keep = groups[groups.set_index(["model_path", "system"]).index.isin(groups.groupby(["model_path", "system"]).size().index[:2])]
    path = tmp_path / "few.csv"
    keep.to_csv(path, index=False)
    assert main([str(path), "vllm"]) == 0
    out = json.loads(capsys.readouterr().out)
    for fit in ("split_fit", "full_fit"):
        assert set(out[fit]) == set(GRID)
        assert all(out[fit][k] in GRID[k] for k in GRID)
    assert out["train"]["rows"] > 0 and out["held_out"]["rows"] > 0
