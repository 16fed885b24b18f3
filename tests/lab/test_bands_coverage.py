"""Out-of-fold coverage of the prediction bands (issue 17 acceptance): the band rebuild of
``python -m lab.bands`` on the campaign-held-out predictions of the measured data;
quantiles and levels fitted on K-1 campaign folds, scored on the remaining fold, pooled."""

from __future__ import annotations

import pytest

from lab import bands
from tests.lab import SILICON_MEASURED

DATA = SILICON_MEASURED
COVERAGE_PCT = (75.0, 85.0)
MIN_CELL_ROWS = 30
KNOWN_MISSES: dict[tuple[str, str], tuple[float, float]] = {
    ("trtllm x disagg", "ttft"): (72.0, 85.0),
    ("sglang x disagg", "ttft"): (75.0, 90.0),
}
"""Cells allowed outside 75-85% (issue 17), each for a stated reason; their bounds only stop a
regression.

SGLang disaggregated TTFT (49 rows, 7 campaigns), 87.8% out of fold since the eleventh pass
(2026-12-02; 79.6% before): the band is wider than it needs to be there, on the safe side. The
December 2025 SGLang GB200 rows, now replayed at the DEP layout they ran, moved closer (held-out
TTFT median APE of the fp4 rows 42 -> 23%, of the fp8 rows 36 -> 29%; config 227's three rows
from 63-220x high to 0.46-0.79x; the cell 39.7 -> 24.8%), while each fold's band still takes the
spread of the other campaigns' residuals; 43 of 49 rows covered where 85% is 41.7, and the
campaign-bootstrap interval (70.8-92.5%) holds 80%. lab/notes/disagg.md, "Eleventh
pass".

TensorRT-LLM disaggregated TTFT (92 rows, 7 campaigns), 75.0% out of fold in the twelfth pass, at
the edge of 75-85% and kept here against a regression (campaign-bootstrap interval 63.2-87.5%; the
slot-blind routers of its srt-slurm deployments priced, lab/notes/disagg.md, "Twelfth
pass"), 68.5% in the eleventh and 69.6% since the tenth (2026-12-02; 78.3% before,
campaign-bootstrap interval 56.6-83.9% then, 67.8-87.4% before). In the tenth pass its own residuals
did not move (per-campaign medians within 0.05); its coverage rests on one fold: with the H200
campaign (25 rows) held out, the cell's training residuals have nothing between +0.50 and +0.97 (ln
measured / predicted) at 10-12% of their weight, so the upper edge is about +1.0 at a chosen tail of
0.11 and +0.5 at 0.12; the tail is chosen on a 0.01 grid from leave-one-campaign-out misses that
every other cell's residuals move, and 10 of that campaign's rows sit between the two edges
(coverage of the fold 88% or 52%). The same residuals of main's predictions scored with this pass's
regime alternatives give 69.6% too. lab/notes/outliers.md, "Tenth pass".

Before: none since 2026-12-02: with each row weighted 1/sqrt(its campaign's rows) in its group's
quantiles (``bands.Method.weighting``; rows weighting before) TensorRT-LLM disaggregated TPOT, 88.0%
of 92 rows from seven campaigns whose medians differ more than their rows do, is 76.1% out of fold,
and every engine x mode cell of >= 30 rows is inside 75-85% on both metrics (1,588 rows, fifth-pass
held-out predictions; lab/notes/outliers.md, "Band weighting"). With seven campaigns
such a cell moves by several points with any change of the held-out predictions (its
campaign-bootstrap interval, ``bands.coverage_interval``, is 50-93%)"""


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
