"""Out-of-fold coverage of the prediction bands (issue 17 acceptance): the band rebuild of
``python -m planner.validation.bands`` on the campaign-held-out predictions of the measured data;
quantiles and levels fitted on K-1 campaign folds, scored on the remaining fold, pooled."""

from __future__ import annotations

import pytest

from planner.validation import bands
from tests.planner.validation import SILICON_MEASURED

DATA = SILICON_MEASURED
COVERAGE_PCT = (75.0, 85.0)
MIN_CELL_ROWS = 30
KNOWN_MISSES: dict[tuple[str, str], tuple[float, float]] = {
    ("trtllm x disagg", "tpot"): (75.0, 92.0),
}
"""Cells allowed outside 75-85% (issue 17), each for a stated reason; their bounds only stop a
regression. Figures of 2026-12-01, fifth pass (1,588 rows: the InferenceMAX rows replayed at the
lengths their client drew and at the launch flags and MoE layouts their scripts set, the 30
measurements restated to 0.01 ms counted once; stratified band folds ``bands.band_folds``; rows
of an open serving regime scored against both regimes, ``planner.validation.regimes``; tails
chosen one campaign out, ``bands.choose_tails``): every engine x mode cell of >= 30 rows is inside
75-85% on both metrics except TensorRT-LLM disaggregated TPOT, 88.0% of 92 rows (three rows over;
87.0% in the third pass) from five campaigns of 8-27 rows (and one-row jobs): the campaigns' TPOT
errors differ by campaign more than within one (campaign medians of ln(measured/predicted) -0.22
to +0.23), so with one fold's campaigns out of the fit the cell's groups change and its band errs
wide (one row is 1.1 points). How far the cell's coverage moves with which of its 7 campaigns
were measured (``bands.coverage_interval``, 5th-95th percentile over campaign resamples, in
bands.yaml): 71-100%, so the miss is inside its spread. While kernel_scale was still fitted in the
held-out folds, one fold's near-tie flip (1.0 -> 0.9) took this cell to 92.4% and vLLM aggregated
TPOT to 74.9%. In the third pass the misses were SGLang disaggregated TTFT 73.5% and TPOT 85.7%
(now 75.5% and 83.7%) besides this one."""


@pytest.fixture(scope="module")
def table() -> bands.TableDict:
    if not DATA.is_file():
        pytest.skip(f"{DATA} absent (shared validation folder not mounted)")
    return bands.build(DATA, bands.FOLDS, 0.8, progress=False)  # held-out predictions: minutes


@pytest.mark.validation
@pytest.mark.heldout
def test_out_of_fold_coverage_of_80pct_bands(table: bands.TableDict) -> None:
    """Overall and in every engine x mode cell with >= 30 rows, the 80% bands cover 75-85% of the
    measured TTFT and TPOT of campaigns held out of the fit."""
    lo, hi = COVERAGE_PCT
    checked = [
        g
        for g in table.get("out_of_fold", [])
        if g["by"] == "overall" or (g["by"] == "engine x mode" and g["n"] >= MIN_CELL_ROWS)
    ]
    assert len(checked) >= 4
    misses = [
        f"{g['key']} {m} {g[m]['coverage_pct']}%"
        for g in checked
        for m in bands.METRICS
        if not KNOWN_MISSES.get((g["key"], m), (lo, hi))[0]
        <= g[m]["coverage_pct"]
        <= KNOWN_MISSES.get((g["key"], m), (lo, hi))[1]
    ]
    assert not misses, misses
    assert str(table.get("provenance", {}).get("predictions")).startswith("campaign held out")
