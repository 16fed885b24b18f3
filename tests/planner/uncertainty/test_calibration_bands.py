"""A profile's own bands: out-of-sample residual quantiles replace the packaged band table."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from planner.cli.main import main
from planner.uncertainty.bands import load_bands
from planner.uncertainty.profile_bands import MIN_ROWS, ModeBands, conformal, halves, mode_bands
from tests.planner.calibration.fixtures import write_profile

ESTIMATE = [
    "estimate",
    "--model",
    "llama-3.1-8b-instruct",
    "--gpu",
    "h100_sxm",
    "--backend",
    "vllm",
    "--isl",
    "1000",
    "--osl",
    "200",
    "--concurrency",
    "8",
    "--format",
    "json",
]
NARROW = ModeBands(
    rows=20, level=0.8, ttft={"lo": -0.02, "hi": 0.03}, tpot={"lo": -0.01, "hi": 0.01}
)


def test_conformal_needs_enough_rows() -> None:
    r = np.linspace(-0.2, 0.4, MIN_ROWS)
    assert conformal(r[:-1], 0.8) is None
    band = conformal(r, 0.8)
    assert band is not None and band.lo == pytest.approx(-0.2) and band.hi == pytest.approx(0.4)
    many = conformal(np.linspace(-1.0, 1.0, 201), 0.8)
    assert many is not None and many.lo == pytest.approx(-0.8, abs=0.02)
    assert many.hi == pytest.approx(0.8, abs=0.02)


def test_halves_alternate_within_each_mode() -> None:
    rows = pd.DataFrame(
        {"mode": ["agg"] * 4 + ["disagg"] * 4, "c_concurrency": [8, 1, 4, 2, 1, 2, 4, 8]}
    )
    a, b = halves(rows)
    assert list(a["c_concurrency"]) == [1, 4, 1, 4] and list(b["c_concurrency"]) == [2, 8, 2, 8]


def test_mode_bands_from_held_out_rows() -> None:
    n = 12
    meas = np.full(n, 100.0)
    pred = meas * np.exp(np.linspace(-0.05, 0.05, n))
    rows = pd.DataFrame(
        {
            "mode": ["agg"] * n + ["disagg"] * 3,
            "silicon_ttft_ms": np.r_[meas, [1.0] * 3],
            "silicon_tpot_ms": np.r_[meas, [1.0] * 3],
            "pred_ttft_ms": np.r_[pred, [1.0] * 3],
            "pred_tpot_ms": np.r_[pred, [1.0] * 3],
        }
    )
    out = mode_bands(rows)
    assert out["agg"].rows == n and out["agg"].ttft is not None
    assert -0.06 < out["agg"].ttft.lo < 0 < out["agg"].ttft.hi < 0.06
    assert out["disagg"].rows == 3 and out["disagg"].ttft is None  # too few: the table's band


def _estimate(capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, object]:
    capsys.readouterr()
    assert main([*ESTIMATE, *extra]) == 0
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


def _width(est: dict[str, object], metric: str) -> float:
    band = est[f"{metric}_ms"]["band"]["mean"]  # type: ignore[index]
    return float(band["hi"] / band["lo"])


def test_profile_with_small_residuals_narrows_the_bands(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    packaged = _estimate(capsys)
    prof = write_profile(tmp_path / "p.yaml", "vllm", {}, {"agg": NARROW})
    own = _estimate(capsys, "--calibration", str(prof))
    for metric in ("ttft", "tpot"):
        assert _width(own, metric) < _width(packaged, metric)
    assert _width(own, "ttft") == pytest.approx(np.exp(0.05), rel=1e-3)
    source = own["provenance"]["bands"]  # type: ignore[index]
    assert str(prof) in source and "own out-of-sample residuals of 20 vllm agg rows" in source
    assert own["ttft_ms"]["band"]["level"] == load_bands().level  # type: ignore[index]


def test_profile_with_few_rows_keeps_the_table_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    packaged = _estimate(capsys)
    few = ModeBands(rows=5, level=0.8)
    prof = write_profile(tmp_path / "p.yaml", "vllm", {}, {"agg": few})
    own = _estimate(capsys, "--calibration", str(prof))
    assert _width(own, "ttft") == pytest.approx(_width(packaged, "ttft"), rel=1e-2)
    source = own["provenance"]["bands"]  # type: ignore[index]
    assert f"5 vllm agg rows out of sample, fewer than {MIN_ROWS}" in source
    assert "bands.yaml" in source


def test_plan_uses_the_profile_bands_and_names_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prof = write_profile(tmp_path / "p.yaml", "vllm", {}, {"agg": NARROW})
    argv = [
        "plan",
        "--model",
        "llama-3.1-8b-instruct",
        "--gpu",
        "h100_sxm",
        "--max-gpus",
        "2",
        "--isl",
        "1000",
        "--osl",
        "200",
        "--concurrency",
        "8",
        "--mode",
        "agg",
        "--ttft-ms",
        "2000",
        "--tpot-ms",
        "100",
        "--format",
        "json",
    ]
    plans = []
    for extra in ([], ["--calibration", str(prof)]):
        capsys.readouterr()
        assert main([*argv, *extra]) == 0
        plans.append(json.loads(capsys.readouterr().out)["best"]["predicted"])
    band = [p["ttft_ms_band"]["mean"] for p in plans]
    assert band[1]["hi"] / band[1]["lo"] < band[0]["hi"] / band[0]["lo"]
    assert "bands.yaml" in plans[0]["provenance"]["bands"]
    assert str(prof) in plans[1]["provenance"]["bands"]
    assert str(prof) in plans[1]["provenance"]["engine_calibration"]


def test_bands_are_a_value_passed_with_the_request(tmp_path: Path) -> None:
    """A profile's bands reach ``estimate`` only through its ``bands`` argument: the next
    estimate without them states the packaged table (no state left behind)."""
    from hardware.catalog import get_gpu
    from planner.calibration.profile import bands_for
    from planner.model.bundled import load_model
    from planner.perf.estimate import estimate
    from planner.workload.spec import LengthSpec, Workload

    prof = write_profile(tmp_path / "p.yaml", "vllm", {}, {"agg": NARROW})
    m, g = load_model("llama-3.1-8b-instruct"), get_gpu("h100_sxm")
    wl = Workload(isl=LengthSpec(mean=1000), osl=LengthSpec(mean=200), concurrency=8)
    own = estimate(m, g, wl, bands=bands_for(prof))
    after = estimate(m, g, wl)
    assert str(prof) in own.provenance["bands"]
    assert str(prof) not in after.provenance["bands"]
    assert after.ttft_ms == estimate(m, g, wl, bands=bands_for(None)).ttft_ms
