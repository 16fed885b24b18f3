"""Calibrated prediction bands (issue 17, part 2): the committed table, its lookup and the
estimate's band fields."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hardware.catalog import get_gpu
from planner.cli.cmd_estimate import fmt_band, fmt_sig
from planner.model.bundled import load_model
from planner.perf.deployment import Parallelism, WorkerConfig
from planner.perf.estimate import estimate
from planner.replay_e2e.conformal import conformal_band
from planner.uncertainty.bands import LEVELS, LOAD_BUCKETS, load_bands, load_bucket
from planner.workload.spec import fixed

H200 = get_gpu("h200")
COVERAGE_RANGE = (75.0, 85.0)


def test_conformal_band_covers_its_level() -> None:
    """Exchangeable residuals: the split-conformal band from 2000 draws covers ~80% of new draws."""
    rng = np.random.default_rng(0)
    b = conformal_band(rng.normal(0.1, 0.3, 2000), 0.8)
    new = rng.normal(0.1, 0.3, 20000)
    cov = np.mean((new >= b.lo) & (new <= b.hi))
    assert 0.77 <= cov <= 0.83
    assert b.lo < 0.1 < b.hi


def test_load_buckets() -> None:
    assert list(load_bucket(np.array([0.1, 0.6, 0.95, np.nan]))) == [
        "light",
        "busy",
        "at_capacity",
        "at_capacity",
    ]
    assert [n for n, _ in LOAD_BUCKETS] == ["light", "busy", "at_capacity"]


def test_committed_table_has_provenance_and_pooled_group() -> None:
    t = load_bands()
    assert t.level == 0.8
    for field in ("data", "data_sha256", "data_rows", "rows_used", "gpus", "date", "command"):
        assert field in t.provenance
    assert "lab.bands" in str(t.provenance["command"])
    assert () in t.groups  # the pooled group: every lookup ends somewhere
    for bands in t.groups.values():
        for b in bands.values():
            assert np.isfinite(b.lo) and np.isfinite(b.hi) and b.lo < b.hi


def test_unseen_gpu_takes_the_gpu_held_out_groups_an_unseen_model_the_widest() -> None:
    """The committed groups were fitted on residuals of GPUs held out of the constants' fit, so a
    GPU without rows (B300, MI355X) takes them as a measured GPU does; a model without rows takes
    the widest band of its tier."""
    t = load_bands()
    assert t.gpu_held_out
    key = {"engine": "vllm", "mode": "agg", "load": "light", "tier": "fitted"}
    seen = t.lookup(key, gpu=sorted(t.gpus)[0], model=sorted(t.models)[0])
    assert t.lookup(key, gpu="NoSuchGPU", model=sorted(t.models)[0]) == seen
    unseen = t.lookup(key, gpu=sorted(t.gpus)[0], model="NoSuchModel")
    for m in ("ttft", "tpot"):
        assert unseen[m].hi - unseen[m].lo >= seen[m].hi - seen[m].lo
        assert len(seen[m].grid) == 20 and seen[m].quantile(0.9) == pytest.approx(seen[m].hi)


def test_lookup_levels_go_from_specific_to_pooled() -> None:
    assert LEVELS[0] == ("engine", "mode", "load", "tier") and LEVELS[-1] == ()


def test_estimate_reports_bands() -> None:
    e = estimate(
        load_model("llama-3.1-70b"),
        H200,
        fixed(4000, 500, concurrency=32),
        agg=WorkerConfig(parallel=Parallelism(tp=4)),
    )
    for p in (e.ttft_ms, e.tpot_ms):
        assert p.band is not None and p.band.level == 0.8
        for stat in ("mean", "p50", "p90", "p99"):
            edge, v = getattr(p.band, stat), getattr(p, stat)
            assert 0 < edge.lo < edge.hi
            assert edge.hi / v == pytest.approx(p.band.mean.hi / p.mean)  # one multiplicative band
    tb = e.output_tok_s_per_gpu_band
    assert tb is not None and tb.lo < tb.hi
    account = e.provenance["bands"]
    assert "engine=vllm mode=agg" in account and "group vllm/agg" in account
    assert "rows" in account and "campaigns" in account and "out of fold" in account
    js = json.loads(e.model_dump_json())
    assert set(js["ttft_ms"]["band"]) == {"level", "mean", "p50", "p90", "p99"}
    assert set(js["output_tok_s_per_gpu_band"]) == {"level", "lo", "hi"}


def test_text_format() -> None:
    assert fmt_band(923.4, 700.2, 1249.6, "ms") == "923 ms (700-1,250)"
    assert fmt_sig(32.77) == "32.8" and fmt_sig(0.5123) == "0.512" and fmt_sig(12345.0) == "12,300"


def test_recorded_out_of_fold_coverage() -> None:
    """The committed table records its pooled out-of-fold coverage (each GPU's held-out
    residuals against the table fitted on the other GPUs'): 75-85% of TTFT and TPOT overall and in
    every engine x mode cell with >= 30 rows but the known misses (recomputed from the data by
    tests/lab/test_holdout_gpu.py)."""
    import yaml

    from planner.uncertainty.bands import BANDS_FILE
    from tests.lab.test_holdout_gpu import KNOWN_MISSES

    raw = load_bands().provenance
    assert int(raw["gpus"]) >= 2 and "GPU held out" in str(raw["predictions"])
    table = yaml.safe_load(BANDS_FILE.read_text())
    for g in table["out_of_fold"]:
        if g["by"] == "overall" or (g["by"] == "engine x mode" and g["n"] >= 30):
            for m in ("ttft", "tpot"):
                pct = g[m]["coverage_pct"]
                lo, hi = KNOWN_MISSES.get((g["key"], m), COVERAGE_RANGE)
                assert lo <= pct <= hi, (g["key"], m, pct)


def test_the_account_names_the_group_its_data_and_the_cells_measured_coverage() -> None:
    """A user reads where a band came from and whether its stated level held there."""
    t = load_bands()
    key = {"engine": "sglang", "mode": "disagg", "load": "at_capacity", "tier": "fitted"}
    text = t.account(key, gpu="H200-SXM", model="DeepSeek-V3")
    ref = next(k for k in t.support if dict(k) == {"engine": "sglang", "mode": "disagg"})
    rows, campaigns = t.support[ref]
    ttft, tpot, n = t.cell_coverage["sglang x disagg"]
    assert f"group sglang/disagg ({rows:,} rows, {campaigns} campaigns)" in text
    assert f"{ttft:.1f}% of measured TTFT and {tpot:.1f}% of TPOT ({n:,} rows" in text
    # and how far those figures move with which campaigns were measured (few campaigns: far)
    c, (t_lo, t_hi), (p_lo, p_hi) = t.cell_spread["sglang x disagg"]
    assert t_lo <= ttft <= t_hi and p_lo <= tpot <= p_hi and c >= 2
    assert f"over {t_lo:.0f}-{t_hi:.0f}% (TTFT) and {p_lo:.0f}-{p_hi:.0f}% (TPOT)" in text
    assert f"which of its {c} campaigns were measured" in text
    unseen = t.account(key, gpu="MI300X", model="NoSuchModel")
    assert unseen.startswith("widest band of tier") and "no data" in unseen


def test_log_band_quantile_reads_grid_or_normal_through_edges() -> None:
    from planner.uncertainty.bands import LogBand

    band = LogBand(-0.2, 0.4)
    assert band.quantile(0.9) == pytest.approx(0.4)
    assert band.quantile(0.1) == pytest.approx(-0.2)
    assert band.quantile(0.5) == pytest.approx(0.1)
    assert band.quantile(0.95) > band.quantile(0.9)
    grid = LogBand(-0.2, 0.4, ((0.05, -0.3), (0.5, 0.0), (0.95, 0.6)))
    assert grid.quantile(0.5) == pytest.approx(0.0)
    assert grid.quantile(0.725) == pytest.approx(0.3)
    assert grid.quantile(0.99) == pytest.approx(0.6)
    with pytest.raises(ValueError):
        band.quantile(1.0)
