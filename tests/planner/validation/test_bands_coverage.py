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
    ("sglang x disagg", "ttft"): (70.0, 85.0),
    ("sglang x disagg", "tpot"): (75.0, 90.0),
    ("trtllm x disagg", "tpot"): (75.0, 90.0),
}
"""Cells allowed outside 75-85% (issue 17), each for a stated reason; their bounds only stop a
regression. Figures of 2026-12-01 (stratified band folds ``bands.band_folds``; rows of an open
serving regime scored against both regimes, ``planner.validation.regimes``; tails chosen one
campaign out, ``bands.choose_tails``; measured rows replayed at their engines' defaults):
SGLang disaggregated, 73.5% / 85.7% of 49 rows (one row short and one row over: one row is 2
points; the binomial spread of an 80% coverage on 49 rows is 5.7 points) from three campaigns of
10-18 rows and four of one row, three of which measure TPOT 3-20x the prediction (contradictory
one-row jobs, notes/disagg.md cause 6). Its coverage moves with predictions of other cells (the
parents its groups shrink toward): 75.5% TTFT before the TensorRT-LLM rows were replayed at their
engine's default KV pool, 71.4% after it, 73.5% with SGLang's GB200 chunk default.
TensorRT-LLM disaggregated TPOT: 87.0% of 92 rows (two rows over) from five campaigns of 8-27 rows
(and one-row jobs): the campaigns' TPOT errors differ by campaign more than within one (campaign
medians of ln(measured/predicted) -0.22 to +0.23), so with one fold's campaigns out of the fit the
cell's groups change and its band errs wide (one row is 1.1 points; it was 91.3% before the
default KV pool).
vLLM aggregated TTFT (83.1%) is inside the window since the tails are chosen one campaign out (it
was 86.3% with one band fold out); SGLang aggregated (80.5% / 84.2%) and TensorRT-LLM aggregated
TPOT (84.9%) since the open-regime rows are scored against both regimes (they were 73.5% / 51.2%
and 85.3%).
How far a cell's coverage moves with which campaigns were measured (``bands.coverage_interval``,
5th-95th percentile over campaign resamples, in bands.yaml): SGLang disaggregated TTFT 42-98%,
TPOT 67-96% (7 campaigns), TensorRT-LLM disaggregated TPOT 69-98% (7 campaigns), against 70-88%
for TensorRT-LLM aggregated TTFT (31 campaigns): the three misses are inside their cells' spread,
and no band method can be told apart from another on them with this many campaigns."""


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
