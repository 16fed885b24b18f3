"""GPU-held-out figures of both shared files (``planner validate e2e --holdout gpu``): each GPU's
rows priced with engine constants refitted on the other GPUs' rows, the published headline
(docs/accuracy.md; lab/notes/heldout_gpu.md), and the band table of those residuals
(``python -m lab.bands``) scored leave one GPU out."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab import bands
from lab.bands_gpu import build_gpu
from planner.replay_e2e.e2e import validate_e2e
from tests.lab import SILICON_MEASURED, SILICON_MEASURED_B200, prepared_file

GPU_ROWS = {"h100_sxm": 810, "h200_sxm": 639, "gb200": 139, "b200_sxm": 1185}
"""Modelled rows per GPU (2026-12-05): no GPU's count may fall (issue 46)."""
HELD_OUT_GPU: dict[str, float] = {
    "agg_ttft": 34.5,
    "agg_tpot": 14.3,
    "disagg_ttft": 37.4,
    "disagg_tpot": 11.8,
}
"""Median APE (%) over all GPUs held out one at a time, guarded just above the figures of
2026-12-05 (34.0 / 13.8 / 36.9 / 11.3 % on 2,773 rows, today's model; issue 46's targets are
22 / 12 / 28 / 12 %)."""
OFF_BY_3X_SHARE_PCT = 11.6
"""Held-out rows off by more than 3x on TTFT or TPOT (%), guarded just above 11.43 %."""
COVERAGE_PCT = (75.0, 85.0)
MIN_CELL_ROWS = 30
KNOWN_MISSES: dict[tuple[str, str], tuple[float, float]] = {
    ("vllm x agg", "ttft"): (73.0, 85.0),
    ("trtllm x agg", "tpot"): (75.0, 86.5),
    ("vllm x agg", "tpot"): (75.0, 87.0),
}
"""Engine x mode cells outside 75-85 % out of fold (2026-12-05, each GPU scored against the band
table fitted on the other GPUs' held-out residuals): vLLM aggregated TTFT 74.1 %, TensorRT-LLM
aggregated TPOT 85.4 %, vLLM aggregated TPOT 85.9 %; the bounds only stop a regression. The
residuals differ by GPU more than within one (B200 TTFT is priced short, H200 long), so a table
fitted on three GPUs misses the fourth's median (lab/notes/heldout_gpu.md)."""
CALIBRATION_TOLERANCE_PCT = 5.0
KNOWN_CALIBRATION: dict[tuple[str, str], tuple[float, float]] = {("ttft", "q0.8"): (73.0, 85.0)}
"""Overall share at or below the predicted c-quantile outside c +/- 5 points: TTFT at 0.8, 74.0 %
(2026-12-05)."""


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, object], Path, list[Path]]:
    """The ``validate e2e --holdout gpu`` report of both prepared files and its predictions."""
    for f in (SILICON_MEASURED, SILICON_MEASURED_B200):
        if not f.is_file():
            pytest.skip(f"{f} absent (shared validation folder not mounted)")
    tmp = tmp_path_factory.mktemp("gpu")
    files = [
        prepared_file(SILICON_MEASURED, tmp / "shared.csv"),
        prepared_file(SILICON_MEASURED_B200, tmp / "b200.csv"),
    ]
    pred = tmp / "pred.csv"
    return validate_e2e(files, pred, progress=False, holdout="gpu"), pred, files


@pytest.mark.validation
@pytest.mark.heldout
def test_gpu_held_out_accuracy(report: tuple[dict[str, object], Path, list[Path]]) -> None:
    r = report[0]
    h = r["holdout"]
    assert h["fold_gpus"] == sorted(GPU_ROWS)  # type: ignore[index]
    groups = {(g["by"], g["key"]): g for g in r["groups"]}  # type: ignore[attr-defined]
    for gpu, n in GPU_ROWS.items():
        assert groups[("system", gpu)]["n"] >= n, gpu
    for mode in ("agg", "disagg"):
        for m in ("ttft", "tpot"):
            got = groups[("mode", mode)][m]["median_ape_pct"]
            assert got <= HELD_OUT_GPU[f"{mode}_{m}"], (mode, m, got)
    assert r["off_by_3x"]["share_pct"] <= OFF_BY_3X_SHARE_PCT  # type: ignore[index]


@pytest.mark.validation
@pytest.mark.heldout
def test_gpu_held_out_bands_cover_and_are_calibrated(
    report: tuple[dict[str, object], Path, list[Path]],
) -> None:
    """The band table of the GPU-held-out residuals, each GPU scored against the table fitted on
    the other GPUs': 75-85 % coverage overall and in every engine x mode cell of >= 30 rows (but
    ``KNOWN_MISSES``), and overall the share at or below each predicted c-quantile within c +/- 5
    points (but ``KNOWN_CALIBRATION``). The validator's own fold bands agree with the builder's."""
    r, pred, files = report
    table = build_gpu(files, 0.8, pred, progress=False)
    lo, hi = COVERAGE_PCT
    cells = [
        g
        for g in table.get("out_of_fold", [])
        if g["by"] == "overall" or (g["by"] == "engine x mode" and g["n"] >= MIN_CELL_ROWS)
    ]
    assert len(cells) >= 6
    misses = [
        f"{g['key']} {m} {g[m]['coverage_pct']}%"
        for g in cells
        for m in bands.METRICS
        if not (
            KNOWN_MISSES.get((g["key"], m), (lo, hi))[0]
            <= g[m]["coverage_pct"]
            <= KNOWN_MISSES.get((g["key"], m), (lo, hi))[1]
        )
    ]
    assert not misses, misses
    overall = table["quantile_calibration"][0]
    for m in bands.METRICS:
        for c, share in overall[m].items():  # type: ignore[literal-required]
            p = float(c.removeprefix("q")) * 100
            band = (p - CALIBRATION_TOLERANCE_PCT, p + CALIBRATION_TOLERANCE_PCT)
            low, high = KNOWN_CALIBRATION.get((m, c), band)
            assert low <= share <= high, (m, c, share)
    by = {(g["by"], g["key"]): g for g in r["groups"]}  # type: ignore[attr-defined]
    ttft = by[("overall", "all")]["ttft"]["band_coverage_pct"]
    assert ttft == pytest.approx(table["out_of_fold"][0]["ttft"]["coverage_pct"], abs=0.1)
