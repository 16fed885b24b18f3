"""Build the prediction-band table from campaign-held-out end-to-end residuals (split conformal).

    python -m planner.validation.bands --data ../shared/validation/e2e/silicon_measured.csv \
        --out planner/calibration/bands.yaml --force [--folds 10] [--holdout-folds 5] [--level 0.8]

Every row is first predicted with engine constants not fitted to its own measurement campaign
(``planner validate e2e --holdout campaign``: campaigns dealt to 5 folds, constants refitted on the
other folds, folds in parallel). Each row's log residual ln(measured / predicted) of TTFT and TPOT
is grouped by engine, agg/disagg, load bucket and provenance tier (``planner.bands``); a group's
quantiles are shrunk toward its parent's. Coverage is measured out of fold: the residual rows are
dealt to K campaign folds (campaigns sorted by name, round-robin), band quantiles and nominal
levels fitted on K-1 folds are scored on the remaining fold, pooled over folds. The committed
table is then fitted on all rows and records its provenance and the out-of-fold coverage.
``--predictions F`` reuses a CSV written by ``planner validate e2e --holdout campaign
--predictions-out F`` of the same data instead of predicting here.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import shlex
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from hardware.catalog import get_gpu
from hardware.errors import PlannerInputError
from planner.bands import (
    KEYS,
    LEVELS,
    BandTable,
    LogBand,
    load_bucket,
    provenance_tier,
    table_from_dict,
)
from planner.batch_eval import KV_DTYPES, WEIGHT_QUANTS
from planner.models import load_model
from planner.validation.protocol import campaign

LEVEL = 0.8
FOLDS = 10
MIN_ROWS = 30
"""A group gets its own quantiles with at least this many rows (else the next coarser level)."""
METRICS: tuple[str, ...] = ("ttft", "tpot")
DUPLICATE_IGNORES: tuple[str, ...] = ("id", "silicon_data_source")
"""Columns that do not make a row distinct: the same configuration and measurement again."""


def add_band_keys(pred: pd.DataFrame) -> pd.DataFrame:
    """Predicted rows (``e2e.predict``) with the band keys: engine, mode, load, tier."""
    out = pred.copy()
    out["engine"], out["load"] = (
        out["backend"].astype(str),
        load_bucket(out["pred_prefill_util"].to_numpy(float)),
    )
    tiers: dict[tuple[str, str, int, int], str] = {}
    keys = list(
        zip(
            out["model_path"].astype(str),
            out["system"].astype(str),
            out["c_weight_quant"].astype(int),
            out["c_kv_dtype"].astype(int),
            strict=True,
        )
    )
    for k in set(keys):
        tiers[k] = provenance_tier(
            load_model(k[0]), get_gpu(k[1]), WEIGHT_QUANTS[k[2]], KV_DTYPES[k[3]]
        )
    out["tier"] = [tiers[k] for k in keys]
    return out


def conformal_band(residuals: np.ndarray, level: float) -> LogBand:
    """Split-conformal equal-tailed band of log residuals: the floor((n+1)·a/2)-th and the
    ceil((n+1)·(1-a/2))-th smallest of n residuals, a = 1 - level."""
    r = np.sort(residuals[np.isfinite(residuals)])
    n, a = r.size, 1.0 - level
    lo = int(np.floor((n + 1) * a / 2.0))
    hi = int(np.ceil((n + 1) * (1.0 - a / 2.0)))
    return LogBand(float(r[max(lo, 1) - 1]), float(r[min(hi, n) - 1]))


def _group_dict(key: dict[str, str], sub: pd.DataFrame, levels: dict[str, float]) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "n": len(sub)}
    for m in METRICS:
        b = conformal_band(sub[f"res_{m}"].to_numpy(float), levels[m])
        out[m] = {"lo": round(b.lo, 4), "hi": round(b.hi, 4), "nominal_level": levels[m]}
    return out


def _widest(groups: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        m: {"lo": min(g[m]["lo"] for g in groups), "hi": max(g[m]["hi"] for g in groups)}
        for m in METRICS
    }


def _cell_level(key: dict[str, str], nominal: dict[str, float], level: float, metric: str) -> float:
    """Nominal quantile level of a group for ``metric``: its engine x mode cell's, else the
    largest of the cells it pools (at least ``level``)."""
    if "engine" in key:
        return nominal.get(f"{key['engine']}/{key['mode']}/{metric}", level)
    pooled = [
        v
        for c, v in nominal.items()
        if c.endswith(f"/{metric}") and key.get("mode", c.split("/")[1]) == c.split("/")[1]
    ]
    return max([level, *pooled])


SHRINK_ROWS = 30.0
"""Prior weight (rows) of a group's parent: a group of n rows gets quantiles
(n·own + SHRINK_ROWS·parent) / (n + SHRINK_ROWS), so a small group moves toward its parent."""


def _parent(
    key: dict[str, str], fitted: dict[tuple[tuple[str, str], ...], dict[str, Any]]
) -> dict[str, Any] | None:
    """The nearest coarser fitted group of ``key`` (``LEVELS`` order), or None for the pool."""
    for names in LEVELS:
        if len(names) < len(key) and set(names) <= set(key):
            g = fitted.get(tuple((n, key[n]) for n in names))
            if g is not None:
                return g
    return None


def _shrunk_group(
    key: dict[str, str], sub: pd.DataFrame, levels: dict[str, float], parent: dict[str, Any] | None
) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "n": len(sub)}
    w = len(sub) / (len(sub) + SHRINK_ROWS) if parent is not None else 1.0
    for m in METRICS:
        b = conformal_band(sub[f"res_{m}"].to_numpy(float), levels[m])
        lo, hi = b.lo, b.hi
        if parent is not None:
            lo = w * lo + (1.0 - w) * parent[m]["lo"]
            hi = w * hi + (1.0 - w) * parent[m]["hi"]
        out[m] = {"lo": round(lo, 4), "hi": round(hi, 4), "nominal_level": levels[m]}
    return out


def fit_table(
    rows: pd.DataFrame, level: float, nominal: dict[str, float] | None = None
) -> dict[str, Any]:
    """The band table (YAML layout of ``planner.bands.table_from_dict``) fitted on ``rows``;
    ``nominal``: quantile level per engine x mode cell ("engine/mode/metric"), default ``level``.
    Groups are fitted from the pool down (``LEVELS`` reversed), each shrunk toward its parent."""
    nominal = nominal or {}
    fitted: dict[tuple[tuple[str, str], ...], dict[str, Any]] = {}
    for names in reversed(LEVELS):
        parts = rows.groupby(list(names)) if names else [((), rows)]
        for vals, sub in parts:
            if len(sub) >= MIN_ROWS or not names:
                vals = vals if isinstance(vals, tuple) else (vals,)
                key = {n: str(v) for n, v in zip(names, vals, strict=True)}
                lv = {m: _cell_level(key, nominal, level, m) for m in METRICS}
                fitted[tuple(key.items())] = _shrunk_group(key, sub, lv, _parent(key, fitted))
    groups = sorted(fitted.values(), key=lambda g: -len(g["key"]))
    finest = [g for g in groups if len(g["key"]) == len(KEYS)] or groups
    widest = {"*": _widest(groups)}
    for names in (("engine", "mode", "tier"), ("mode", "tier")):
        for vals in sorted(
            {tuple(g["key"][n] for n in names) for g in finest if "tier" in g["key"]}
        ):
            widest["/".join(vals)] = _widest(
                [g for g in finest if tuple(g["key"][n] for n in names) == vals]
            )
    for tier in sorted({g["key"]["tier"] for g in finest if "tier" in g["key"]}):
        widest[tier] = _widest([g for g in finest if g["key"].get("tier") == tier])
    return {
        "level": level,
        "nominal_levels": nominal,
        "groups": groups,
        "widest_by_tier": widest,
        "gpus": sorted(rows["gpu_name"].astype(str).unique().tolist()),
        "models": sorted(rows["model_name"].astype(str).unique().tolist()),
    }


def row_bands(table: BandTable, rows: pd.DataFrame) -> dict[str, np.ndarray]:
    """Per row, the band's log quantiles of each metric (``<metric>_lo`` / ``<metric>_hi``)."""
    out = {f"{m}_{e}": np.empty(len(rows)) for m in METRICS for e in ("lo", "hi")}
    cols = [*KEYS, "gpu_name", "model_name"]
    for key, idx in rows.groupby(cols).indices.items():
        k = dict(zip(cols, map(str, key), strict=True))
        b = table.lookup({n: k[n] for n in KEYS}, gpu=k["gpu_name"], model=k["model_name"])
        for m in METRICS:
            out[f"{m}_lo"][idx], out[f"{m}_hi"][idx] = b[m].lo, b[m].hi
    return out


def campaign_folds(rows: pd.DataFrame, folds: int) -> np.ndarray:
    """Fold of each row: campaigns sorted by name, dealt round-robin to ``folds`` folds."""
    camp = rows["silicon_data_source"].map(campaign)
    order = {c: i % folds for i, c in enumerate(sorted(camp.unique()))}
    return np.asarray(camp.map(order).to_numpy(int))


def residual_rows(pred: pd.DataFrame) -> pd.DataFrame:
    """Keyed rows with finite log residuals of both metrics, repeated measurements dropped."""
    rows = add_band_keys(pred)
    rows["model_name"] = rows["model_path"].astype(str).map(lambda p: load_model(p).name)
    rows["gpu_name"] = rows["system"].astype(str).map(lambda s: get_gpu(s).name)
    for m in METRICS:
        with np.errstate(divide="ignore", invalid="ignore"):
            rows[f"res_{m}"] = np.log(
                rows[f"silicon_{m}_ms"].to_numpy(float) / rows[f"pred_{m}_ms"].to_numpy(float)
            )
    ok = np.isfinite(rows["res_ttft"]) & np.isfinite(rows["res_tpot"])
    rows = rows[ok]
    subset = [
        c for c in pred.columns if c not in DUPLICATE_IGNORES and not c.startswith(("pred_", "c_"))
    ]
    return rows.drop_duplicates(subset=subset).reset_index(drop=True)


NOMINAL_LEVELS: tuple[float, ...] = tuple(round(0.5 + 0.03 * i, 2) for i in range(17))
"""Quantile levels tried per engine x mode cell: campaigns differ (benchmark protocol, software
version), so a band fitted on other campaigns covers less than its nominal level; the level that
covers ``level`` of the rows of campaigns held out of the fit is chosen on the training folds."""


def _scored(
    rows: pd.DataFrame, fold: np.ndarray, level: float, nominal: dict[str, float]
) -> pd.DataFrame:
    """Rows with the band fitted on the other folds (``fold`` per row) and coverage flags."""
    parts = []
    for k in np.unique(fold):
        test = rows[fold == k]
        table = table_from_dict(fit_table(rows[fold != k], level, nominal))
        b = row_bands(table, test)
        part = test.assign(fold=k, **{f"band_{n}": v for n, v in b.items()})
        for m in METRICS:
            r = part[f"res_{m}"].to_numpy(float)
            part[f"in_{m}"] = (r >= part[f"band_{m}_lo"]) & (r <= part[f"band_{m}_hi"])
            part[f"width_{m}_pct"] = (
                np.exp(part[f"band_{m}_hi"]) - np.exp(part[f"band_{m}_lo"])
            ) * 100.0
        parts.append(part)
    return pd.concat(parts, ignore_index=True)


CELL_ROWS = 60
"""An engine x mode cell with fewer training rows takes the nominal level chosen for its mode."""


def _cells(rows: pd.DataFrame) -> pd.Series:
    """ "engine/mode" of every row."""
    return rows["engine"].astype(str) + "/" + rows["mode"].astype(str)


def choose_levels(rows: pd.DataFrame, fold: np.ndarray, level: float) -> dict[str, float]:
    """Per engine x mode cell and metric ("engine/mode/metric"), the ``NOMINAL_LEVELS`` entry whose
    leave-one-fold-out coverage on ``rows`` comes closest to ``level`` (the smaller on a tie); a
    cell with fewer than ``CELL_ROWS`` rows takes the entry chosen for all rows of its mode."""
    cells = _cells(rows)
    names = sorted(set(cells))
    best: dict[str, tuple[float, float]] = {}
    for nom in NOMINAL_LEVELS:
        scored = _scored(rows, fold, level, {f"{c}/{m}": nom for c in names for m in METRICS})
        of = _cells(scored).to_numpy()
        pools = {c: of == c for c in names} | {
            f"*/{mo}": scored["mode"].to_numpy() == mo for mo in set(scored["mode"])
        }
        for c, sel in pools.items():
            for m in METRICS:
                gap = abs(float(scored[f"in_{m}"].to_numpy()[sel].mean()) - level)
                if f"{c}/{m}" not in best or gap < best[f"{c}/{m}"][0] - 1e-9:
                    best[f"{c}/{m}"] = (gap, nom)
    out = {}
    for c in names:
        small = int((cells == c).sum()) < CELL_ROWS
        for m in METRICS:
            out[f"{c}/{m}"] = best[f"*/{c.split('/')[1]}/{m}" if small else f"{c}/{m}"][1]
    return out


def _fold_part(rows: pd.DataFrame, fold: np.ndarray, k: int, level: float) -> pd.DataFrame:
    """Fold ``k``'s rows scored with levels chosen and quantiles fitted on the other folds."""
    train = fold != k
    nominal = choose_levels(rows[train], fold[train], level)
    scored = _scored(rows, np.where(train, -1, k), level, nominal)
    return scored[scored["fold"] == k]


def out_of_fold(
    rows: pd.DataFrame, folds: int, level: float, progress: bool = False
) -> pd.DataFrame:
    """Rows with their out-of-fold band and coverage flags: for each campaign fold, the nominal
    levels chosen (``choose_levels``) and the quantiles fitted on the other K-1 folds only
    (folds in parallel processes)."""
    from planner.validation.holdout import _workers

    fold = campaign_folds(rows, folds)
    ks = [int(k) for k in np.unique(fold)]
    parts = []
    with ProcessPoolExecutor(max_workers=_workers(len(ks))) as pool:
        futures = [pool.submit(_fold_part, rows, fold, k, level) for k in ks]
        for n, fut in enumerate(futures):
            parts.append(fut.result())
            if progress:
                sys.stderr.write(f"\rbands: out-of-fold coverage, fold {n + 1}/{len(ks)}")
    if progress:
        sys.stderr.write("\n")
    return pd.concat(parts, ignore_index=True)


def coverage_report(oof: pd.DataFrame) -> list[dict[str, Any]]:
    """Pooled out-of-fold coverage (%) and median band width (% of the prediction): overall, per
    engine x mode, per engine and per mode."""

    def one(by: str, key: str, sub: pd.DataFrame) -> dict[str, Any]:
        g: dict[str, Any] = {"by": by, "key": key, "n": len(sub)}
        for m in METRICS:
            g[m] = {
                "coverage_pct": round(float(sub[f"in_{m}"].mean()) * 100, 1),
                "median_width_pct": round(float(sub[f"width_{m}_pct"].median()), 1),
            }
        return g

    out = [one("overall", "all", oof)]
    for by in (["engine", "mode"], ["engine"], ["mode"]):
        out += [
            one(" x ".join(by), " x ".join(map(str, k if isinstance(k, tuple) else (k,))), s)
            for k, s in oof.groupby(by)
        ]
    return out


HOLDOUT_FOLDS = 5
"""Campaign folds of the held-out predictions (``planner validate e2e --holdout campaign``)."""
PREDICTION_COLUMNS = frozenset(
    {
        "pred_ttft_ms",
        "pred_tpot_ms",
        "pred_prefill_util",
        "c_weight_quant",
        "c_kv_dtype",
        "silicon_data_source",
    }
)


def held_out_predictions(
    data: Path, holdout_folds: int = HOLDOUT_FOLDS, progress: bool = True
) -> tuple[pd.DataFrame, int]:
    """(campaign-held-out predictions of every modelled row of ``data``, rows in the file): each
    campaign fold priced with engine constants refitted on the other folds, exactly as
    ``planner validate e2e --holdout campaign`` does (``planner.validation.holdout``)."""
    from planner.validation.e2e import prepare, read_rows
    from planner.validation.holdout import campaign_holdout

    df, duplicates = read_rows(data)
    pred, _ = campaign_holdout(prepare(df).rows, holdout_folds, progress)
    return pred, len(df) + duplicates


def _read_predictions(predictions: Path) -> pd.DataFrame:
    """A ``validate e2e --holdout campaign --predictions-out`` CSV, its columns checked."""
    if not predictions.is_file():
        raise PlannerInputError("--predictions", f"{predictions} does not exist")
    pred = pd.read_csv(predictions)
    if PREDICTION_COLUMNS - set(pred.columns):
        raise PlannerInputError(
            "--predictions",
            f"{predictions} lacks columns {sorted(PREDICTION_COLUMNS - set(pred.columns))}",
        )
    return pred


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def build(
    data: Path,
    folds: int,
    level: float,
    predictions: Path | None = None,
    command: str = "",
    holdout_folds: int = HOLDOUT_FOLDS,
    progress: bool = True,
) -> dict[str, Any]:
    """The band table (fitted on all held-out residuals) with its provenance and out-of-fold
    coverage. The residuals are campaign-held-out: predicted here (``held_out_predictions``) or
    read from ``predictions`` (the same predictions written by ``validate e2e --holdout campaign
    --predictions-out``)."""
    if predictions is None:
        pred, n_data = held_out_predictions(data, holdout_folds, progress)
        source = (
            f"campaign held out: {holdout_folds} folds, engine constants refitted on the other "
            "folds (planner.validation.holdout, as validate e2e --holdout campaign)"
        )
    else:
        pred, n_data = _read_predictions(predictions), int(len(pd.read_csv(data)))
        source = f"{predictions} (validate e2e --holdout campaign --predictions-out)"
    rows = residual_rows(pred)
    oof = out_of_fold(rows, folds, level, progress)
    table = fit_table(rows, level, choose_levels(rows, campaign_folds(rows, folds), level))
    table["provenance"] = {
        "data": str(data),
        "data_sha256": _sha256(data),
        "data_rows": n_data,
        "rows_used": len(rows),
        "predictions": source,
        "folds": folds,
        "fold_rule": "campaign (protocol.campaign of silicon_data_source), "
        "campaigns sorted by name dealt round-robin; rows repeating a configuration and "
        "measurement dropped",
        "min_group_rows": MIN_ROWS,
        "shrink_rows": SHRINK_ROWS,
        "date": dt.date.today().isoformat(),
        "command": command,
        "method": "split conformal on ln(measured/predicted) of campaign-held-out predictions, "
        "equal tails; groups shrunk toward their parent; nominal level per engine x mode chosen "
        "by leave-one-fold-out coverage on the fitting folds",
    }
    table["out_of_fold"] = coverage_report(oof)
    return table


def _print_summary(table: dict[str, Any], out: Path) -> None:
    print(
        f"wrote {out}: {len(table['groups'])} groups, {table['provenance']['rows_used']} rows, "
        f"{table['provenance']['folds']} campaign folds, level {table['level']}"
    )
    print(
        f"{'by':16s} {'key':28s} {'n':>5s} {'TTFT cov%':>9s} {'width%':>7s} "
        f"{'TPOT cov%':>9s} {'width%':>7s}"
    )
    for g in table["out_of_fold"]:
        t, p = g["ttft"], g["tpot"]
        print(
            f"{g['by']:16s} {g['key']:28s} {g['n']:5d} "
            f"{t['coverage_pct']:9.1f} {t['median_width_pct']:7.1f} "
            f"{p['coverage_pct']:9.1f} {p['median_width_pct']:7.1f}"
        )


def main(argv: list[str] | None = None) -> int:
    from planner.safe_files import check_new_file, write_new_file

    ap = argparse.ArgumentParser(
        prog="python -m planner.validation.bands", description=__doc__.splitlines()[0]
    )
    ap.add_argument("--data", type=Path, required=True, help="silicon_measured.csv layout")
    ap.add_argument("--out", type=Path, required=True, help="band table YAML to write")
    ap.add_argument(
        "--folds", type=int, default=FOLDS, help="campaign folds of the bands, 2-20 (default 10)"
    )
    ap.add_argument(
        "--holdout-folds",
        type=int,
        default=HOLDOUT_FOLDS,
        help="campaign folds of the held-out predictions, 2-20 (default 5)",
    )
    ap.add_argument("--level", type=float, default=LEVEL, help="band level, 0.5-0.95 (default 0.8)")
    ap.add_argument(
        "--predictions",
        type=Path,
        default=None,
        help="reuse a validate e2e --holdout campaign --predictions-out CSV of --data "
        "(default: predict held out here)",
    )
    ap.add_argument("--force", action="store_true", help="replace an existing --out")
    args = ap.parse_args(argv)
    try:
        if not 2 <= args.folds <= 20:
            raise PlannerInputError("--folds", f"{args.folds} not in 2-20")
        if not 2 <= args.holdout_folds <= 20:
            raise PlannerInputError("--holdout-folds", f"{args.holdout_folds} not in 2-20")
        if not 0.5 <= args.level <= 0.95:
            raise PlannerInputError("--level", f"{args.level} not in 0.5-0.95")
        if not args.data.is_file():
            raise PlannerInputError("--data", f"{args.data} does not exist")
        check_new_file(args.out, args.force, "--out")  # before the long build
        command = shlex.join(
            [
                "python",
                "-m",
                "planner.validation.bands",
                *(argv if argv is not None else sys.argv[1:]),
            ]
        )
        table = build(
            args.data, args.folds, args.level, args.predictions, command, args.holdout_folds
        )
        text = (
            "# Prediction bands: generated by planner/validation/bands.py; do not edit by hand.\n"
        )
        write_new_file(
            args.out,
            (text + yaml.safe_dump(table, sort_keys=False, width=110)).encode(),
            args.force,
        )
    except PlannerInputError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    _print_summary(table, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


def with_band_columns(pred: pd.DataFrame, table: BandTable | None = None) -> pd.DataFrame:
    """Predicted rows (``e2e.predict``) with pred_ttft_ms_lo/hi and pred_tpot_ms_lo/hi: the band of
    the committed table (``planner.bands.load_bands``) around each prediction."""
    from planner.bands import load_bands

    keyed = add_band_keys(pred)
    keyed["model_name"] = keyed["model_path"].astype(str).map(lambda p: load_model(p).name)
    keyed["gpu_name"] = keyed["system"].astype(str).map(lambda s: get_gpu(s).name)
    b = row_bands(table or load_bands(), keyed.reset_index(drop=True))
    out = pred.copy()
    for m in METRICS:
        p = out[f"pred_{m}_ms"].to_numpy(float)
        out[f"pred_{m}_ms_lo"] = p * np.exp(b[f"{m}_lo"])
        out[f"pred_{m}_ms_hi"] = p * np.exp(b[f"{m}_hi"])
    return out
