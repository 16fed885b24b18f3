"""What calibrating to one's own benchmarks is worth: per-campaign self-calibration, held out.

For every measurement campaign (``layouts.campaign`` of ``silicon_data_source``, per engine) with
at least ``MIN_ROWS`` modelled rows, the rows are sorted by concurrency and split alternately:
even positions fit the constants (``planner.calibration.profile.fit_constants``, the same fit as
``planner calibrate e2e``, with as many constants as the rows allow), odd positions are predicted
with them and, for comparison, with the packaged constants. The held-out rows of all campaigns are
pooled and reported per engine and mode (median APE, percent).

    python -m lab.self_calibration --data CSV   # ../shared/validation/e2e/...

This is what a user gets who runs a handful of benchmarks of their own set-up and calibrates.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TypedDict

import pandas as pd

from lab.layouts import campaign
from lab.prepare_e2e import prepare_frame
from planner.calibration.profile import fit_constants, prepared, select_constants, with_constants
from planner.engines.calibration import load_engines
from planner.replay_e2e.predict import predict
from planner.replay_e2e.stats import error_stats

MIN_ROWS = 8
TARGETS = {"agg_ttft": 15.0, "agg_tpot": 10.0}
"""Pooled held-out median APE targets (percent) of the aggregated rows."""


def split_alternate(rows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(fit, held out): rows sorted by concurrency (then ISL, OSL, id), alternate positions."""
    order = rows.sort_values(["c_concurrency", "isl", "osl", "id"], kind="stable").reset_index(
        drop=True
    )
    return order.iloc[::2].reset_index(drop=True), order.iloc[1::2].reset_index(drop=True)


def campaign_rows(
    df: pd.DataFrame, min_rows: int = MIN_ROWS
) -> list[tuple[str, str, pd.DataFrame]]:
    """(campaign, engine, prepared rows) of every campaign with at least ``min_rows`` rows,
    largest first."""
    rows, _ = prepared(prepare_frame(df))
    rows = rows.assign(campaign=rows["silicon_data_source"].map(campaign))
    groups = [
        (str(c), str(b), sub.reset_index(drop=True))
        for (c, b), sub in rows.groupby(["campaign", "backend"])
        if len(sub) >= min_rows
    ]
    return sorted(groups, key=lambda g: (-len(g[2]), g[0], g[1]))


def held_out(rows: pd.DataFrame, backend: str) -> tuple[pd.DataFrame, list[str]]:
    """The held-out half predicted with the packaged and with the self-fitted constants."""
    fit_half, test = split_alternate(rows)
    base = load_engines()[backend]
    names = select_constants(fit_half, backend, base)
    values = fit_constants(fit_half, backend, names, base) if names else {}
    cal = with_constants(base, values, "self-calibration")
    shipped = predict(test, progress=False, overrides={backend: base})
    own = predict(test, progress=False, overrides={backend: cal})
    out = test[["backend", "mode", "silicon_ttft_ms", "silicon_tpot_ms"]].assign(
        shipped_ttft_ms=shipped["pred_ttft_ms"],
        shipped_tpot_ms=shipped["pred_tpot_ms"],
        own_ttft_ms=own["pred_ttft_ms"],
        own_tpot_ms=own["pred_tpot_ms"],
    )
    return out, names


def _ape(sub: pd.DataFrame, which: str, metric: str) -> float:
    return round(
        error_stats(
            sub[f"{which}_{metric}_ms"].to_numpy(float), sub[f"silicon_{metric}_ms"].to_numpy(float)
        )["median_ape_pct"],
        2,
    )


class Apes(TypedDict):
    """Held-out median APE (percent) with the packaged (shipped) and the self-fitted (own)
    constants."""

    ttft_median_ape_pct_shipped: float
    ttft_median_ape_pct_own: float
    tpot_median_ape_pct_shipped: float
    tpot_median_ape_pct_own: float


def _apes(sub: pd.DataFrame) -> Apes:
    return {
        "ttft_median_ape_pct_shipped": _ape(sub, "shipped", "ttft"),
        "ttft_median_ape_pct_own": _ape(sub, "own", "ttft"),
        "tpot_median_ape_pct_shipped": _ape(sub, "shipped", "tpot"),
        "tpot_median_ape_pct_own": _ape(sub, "own", "tpot"),
    }


class PooledRow(Apes):
    """One line of the pooled table: an engine (or ``all``) and mode."""

    engine: str
    mode: str
    held_out_rows: int


class CampaignRow(Apes):
    """One campaign: its engine, rows and the constants fitted on its fitting half."""

    campaign: str
    engine: str
    rows: int
    fitted: list[str]


class Report(TypedDict):
    """``self_calibration_report``: the pooled table, the per-campaign detail and the targets."""

    campaigns: int
    min_rows: int
    targets_pct: dict[str, float]
    meets_targets: bool
    pooled: list[PooledRow]
    by_campaign: list[CampaignRow]


def pooled(preds: pd.DataFrame) -> list[PooledRow]:
    """Median APE per (engine, mode) and over all engines per mode: packaged vs self-calibrated."""
    out: list[PooledRow] = []
    keys = [(b, m) for (b, m) in sorted(set(zip(preds["backend"], preds["mode"], strict=True)))]
    keys += [("all", m) for m in sorted(set(preds["mode"]))]
    for backend, mode in keys:
        sub = preds[(preds["mode"] == mode) & ((preds["backend"] == backend) | (backend == "all"))]
        row: PooledRow = {
            "engine": str(backend),
            "mode": str(mode),
            "held_out_rows": int(len(sub)),
            **_apes(sub),
        }
        out.append(row)
    return out


def self_calibration_report(
    df: pd.DataFrame,
    min_rows: int = MIN_ROWS,
    max_campaigns: int | None = None,
    progress: bool = True,
) -> Report:
    """The pooled held-out table and the per-campaign detail."""
    groups = campaign_rows(df, min_rows)[:max_campaigns]
    preds: list[pd.DataFrame] = []
    detail: list[CampaignRow] = []
    for i, (camp, backend, rows) in enumerate(groups):
        if progress:
            sys.stderr.write(
                f"\rself-calibration: campaign {i + 1}/{len(groups)} ({backend}, {len(rows)} rows)"
            )
        pred, names = held_out(rows, backend)
        preds.append(pred)
        one: CampaignRow = {
            "campaign": camp,
            "engine": backend,
            "rows": int(len(rows)),
            "fitted": names,
            **_apes(pred),
        }
        detail.append(one)
    if progress:
        sys.stderr.write("\n")
    table = pooled(pd.concat(preds, ignore_index=True)) if preds else []
    agg = next((r for r in table if r["engine"] == "all" and r["mode"] == "agg"), None)
    meets = (
        agg is not None
        and agg["ttft_median_ape_pct_own"] <= TARGETS["agg_ttft"]
        and agg["tpot_median_ape_pct_own"] <= TARGETS["agg_tpot"]
    )
    return {
        "campaigns": len(groups),
        "min_rows": min_rows,
        "targets_pct": TARGETS,
        "meets_targets": bool(meets),
        "pooled": table,
        "by_campaign": detail,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m lab.self_calibration",
        description=(__doc__ or "").splitlines()[0],
    )
    ap.add_argument(
        "--data", type=Path, required=True, help="CSV in the layout of silicon_measured.csv"
    )
    ap.add_argument("--min-rows", type=int, default=MIN_ROWS, help="smallest campaign used")
    ap.add_argument("--max-campaigns", type=int, default=None, help="only the largest N campaigns")
    ap.add_argument("--format", choices=("table", "json"), default="table")
    args = ap.parse_args(argv)
    if not args.data.is_file():
        sys.stderr.write(f"error: --data: {args.data} does not exist\n")
        return 2
    rep = self_calibration_report(pd.read_csv(args.data), args.min_rows, args.max_campaigns)
    if args.format == "json":
        print(json.dumps(rep, indent=2))
        return 0
    from planner.cli.output import render_table

    print(render_table(rep["pooled"]))
    print(
        f"{rep['campaigns']} campaigns of >= {rep['min_rows']} rows; targets (pooled aggregated, "
        f"self-calibrated) TTFT <= {TARGETS['agg_ttft']:g}%, TPOT <= {TARGETS['agg_tpot']:g}%: "
        f"{'met' if rep['meets_targets'] else 'not met'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
