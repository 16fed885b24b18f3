"""Held-out validation over measurement campaigns (planner.validation.holdout) and duplicates."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hardware.errors import PlannerInputError
from planner.validation.e2e import drop_duplicates, validate_e2e
from planner.validation.holdout import campaign_folds

DATA = (
    Path(__file__).resolve().parents[3]
    / ".."
    / "shared"
    / "validation"
    / "e2e"
    / "silicon_measured.csv"
)


def test_duplicates_keep_the_lowest_id() -> None:
    df = pd.DataFrame(
        {
            "id": ["b", "a", "c"],
            "silicon_data_source": ["x", "y", "z"],
            "isl": [1, 1, 2],
            "silicon_ttft_ms": [5.0, 5.0, 5.0],
        }
    )
    kept, dropped = drop_duplicates(df)
    assert dropped == 1
    assert list(kept["id"]) == ["a", "c"]


def test_campaigns_are_dealt_round_robin_and_never_split() -> None:
    src = [f"dump/{c}; config_id={i}; silicon_concurrency=4" for i, c in enumerate("cabcdeab")]
    folds = campaign_folds(pd.DataFrame({"silicon_data_source": src}), 2)
    by_campaign = {s.split(";")[0]: f for s, f in zip(src, folds, strict=True)}
    assert by_campaign == {"dump/a": 0, "dump/b": 1, "dump/c": 0, "dump/d": 1, "dump/e": 0}
    for s, f in zip(src, folds, strict=True):
        assert by_campaign[s.split(";")[0]] == f


def test_fold_count_is_checked() -> None:
    with pytest.raises(PlannerInputError, match="--folds"):
        campaign_folds(pd.DataFrame({"silicon_data_source": ["a"]}), 1)


@pytest.mark.validation
@pytest.mark.heldout
def test_held_out_accuracy() -> None:
    """Campaign-held-out figures of ``planner validate e2e --holdout campaign`` (5 folds): the
    published accuracy. Every complete row is modelled; each fold's constants differ from no fit."""
    if not DATA.is_file():
        pytest.skip(f"{DATA} absent (shared validation folder not mounted)")
    r = validate_e2e(DATA, progress=False, holdout="campaign", folds=5)
    assert r["duplicates_dropped"] == 225
    assert r["modelled"] + sum(r["skipped"].values()) == r["rows"] - r["duplicates_dropped"]
    assert set(r["skipped"]) <= {"incomplete_config", "tp_not_dividing_heads"}
    groups = {(g["by"], g["key"]): g for g in r["groups"]}  # type: ignore[attr-defined]
    agg, dis = groups[("mode", "agg")], groups[("mode", "disagg")]
    assert agg["ttft"]["median_ape_pct"] <= HELD_OUT["agg_ttft"]
    assert agg["tpot"]["median_ape_pct"] <= HELD_OUT["agg_tpot"]
    assert dis["ttft"]["median_ape_pct"] <= HELD_OUT["disagg_ttft"]
    assert dis["tpot"]["median_ape_pct"] <= HELD_OUT["disagg_tpot"]
    assert all(np.isfinite(g["ttft"]["p90_ape_pct"]) for g in (agg, dis))
    h = r["holdout"]
    assert h["folds"] == 5 and sum(h["fold_rows"]) == r["modelled"]  # type: ignore[index]


HELD_OUT: dict[str, float] = {
    "agg_ttft": 31.5,
    "agg_tpot": 16.2,
    "disagg_ttft": 35.5,
    "disagg_tpot": 15.5,
}
"""Median APE (%) guarded on held-out campaigns, just above the measured figures (30.9, 15.7, 34.8,
14.9 % on 1,678 rows; issue 16's targets 22, 13, 25, 15 % are not all reached). The fitted kernel
tier of issue 16b (multi-line collectives, bounded efficiencies, split-KV decode) moved them from
29.8 / 14.1 / 43.8 / 17.0 %: disaggregated TTFT and TPOT much better, aggregated TPOT worse. The
earlier step from 30.8 / 14.3 % came from no longer modelling 68 rows whose TP cannot split the
attention heads (``tp_not_dividing_heads``; planner/validation/notes/outliers.md)."""
