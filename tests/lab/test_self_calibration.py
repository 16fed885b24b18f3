"""Calibrating to one's own rows: the held-out split, and `validate e2e --calibration` on a
campaign of the shared measurements."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from lab.layouts import campaign
from lab.prepare_e2e import prepare_frame
from lab.self_calibration import self_calibration_report, split_alternate
from planner.cli.main import main
from tests.lab import SILICON_MEASURED

DATA = SILICON_MEASURED
CAMPAIGN = "db-dump/2026-04-27; vllm/vllm-openai:v0.18.0"
"""A vLLM campaign of 18 aggregated rows (several models and concurrencies)."""


def _campaign_rows() -> pd.DataFrame:
    if not DATA.is_file():
        pytest.skip(f"{DATA} absent (shared validation folder not mounted)")
    df = pd.read_csv(DATA)
    return df[(df["silicon_data_source"].map(campaign) == CAMPAIGN) & (df["backend"] == "vllm")]


def test_split_alternates_by_concurrency() -> None:
    rows = pd.DataFrame(
        {"c_concurrency": [64, 1, 16, 4, 8, 2], "isl": 1000, "osl": 100, "id": list("abcdef")}
    )
    fit, test = split_alternate(rows)
    assert list(fit["c_concurrency"]) == [1, 4, 16] and list(test["c_concurrency"]) == [2, 8, 64]


@pytest.mark.validation
def test_profile_moves_held_out_rows_toward_measurements(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = prepare_frame(_campaign_rows())  # the lab step: clients, launch settings as columns
    rows = rows.assign(_c=rows["batch_size"]).sort_values(["_c", "isl", "osl", "id"], kind="stable")
    rows = rows.drop(columns="_c")
    fit_csv, test_csv = tmp_path / "fit.csv", tmp_path / "held_out.csv"
    rows.iloc[::2].to_csv(fit_csv, index=False)
    rows.iloc[1::2].to_csv(test_csv, index=False)
    prof = tmp_path / "profile.yaml"
    assert main(["calibrate", "e2e", "--data", str(fit_csv), "--out", str(prof)]) == 0
    reports = {}
    for name, extra in (("shipped", []), ("own", ["--calibration", str(prof)])):
        capsys.readouterr()
        pred_csv = tmp_path / f"pred_{name}.csv"
        argv = [
            "validate",
            "e2e",
            "--data",
            str(test_csv),
            "--format",
            "json",
            "--predictions-out",
            str(pred_csv),
            *extra,
        ]
        assert main(argv) == 0
        reports[name] = (json.loads(capsys.readouterr().out), pd.read_csv(pred_csv))
    (shipped, p0), (own, p1) = reports["shipped"], reports["own"]
    assert own["calibration"].startswith(f"calibration profile {prof}")
    assert shipped["calibration"] == "planner/engines/*/constants.yaml"
    assert not p0["pred_ttft_ms"].equals(p1["pred_ttft_ms"])
    err0, err1 = shipped["groups"][0], own["groups"][0]
    assert err1["ttft"]["median_ape_pct"] < err0["ttft"]["median_ape_pct"]
    assert err1["tpot"]["median_ape_pct"] <= err0["tpot"]["median_ape_pct"] + 1.0


@pytest.mark.validation
def test_self_calibration_report_on_one_campaign() -> None:
    rep = self_calibration_report(_campaign_rows(), progress=False)
    assert rep["campaigns"] == 1
    (row,) = [r for r in rep["pooled"] if r["engine"] == "vllm"]
    assert row["held_out_rows"] == 9
    assert row["ttft_median_ape_pct_own"] < row["ttft_median_ape_pct_shipped"]
