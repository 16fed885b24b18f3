"""GPU-held-out figures of both shared files (``planner validate e2e --holdout gpu``): each GPU's
rows priced with engine constants refitted on the other GPUs' rows, the published headline
(docs/accuracy.md; lab/notes/heldout_gpu.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

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


@pytest.mark.validation
@pytest.mark.heldout
def test_gpu_held_out_accuracy(tmp_path: Path) -> None:
    for f in (SILICON_MEASURED, SILICON_MEASURED_B200):
        if not f.is_file():
            pytest.skip(f"{f} absent (shared validation folder not mounted)")
    files = [
        prepared_file(SILICON_MEASURED, tmp_path / "shared.csv"),
        prepared_file(SILICON_MEASURED_B200, tmp_path / "b200.csv"),
    ]
    r = validate_e2e(files, progress=False, holdout="gpu")
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
