"""Build the prediction-band table from GPU-held-out end-to-end residuals (quantile grids).

    python -m lab.bands --data ../shared/validation/e2e/silicon_measured.csv \
        --data ../shared/validation/e2e/silicon_measured_b200.csv \
        --out planner/calibration/bands.yaml --force [--level 0.8]

Every row is first predicted with engine constants fitted on the other GPUs' rows only
(``planner validate e2e --holdout gpu``, ``planner.replay_e2e.holdout``). Each row's log residual
ln(measured / predicted) of TTFT and TPOT (from the nearer of the two regimes' predictions where
the data leave the regime open, ``planner.replay_e2e.regimes``) is grouped by engine, agg/disagg,
load bucket and provenance tier, and every group stores the quantiles of its residuals at 0.05,
0.10, ..., 0.95 and 0.99 (``planner.uncertainty.grid_fit``: the same fit that bands each fold of
``validate e2e --holdout gpu``); its 80 % band is the 0.1 and 0.9 quantiles. The residuals are
those of GPUs held out of the constants' fit, so a GPU without end-to-end rows (B300, GB300,
MI355X ...) takes the same groups (``gpu_held_out: true``). Coverage is scored leave one GPU
out (``gpu_out_of_fold``): each GPU's rows against the table fitted on the other GPUs' residuals,
the share inside the 80 % band and at or below each predicted c-quantile.

``--holdout campaign`` builds the earlier table instead, from one file's campaign-held-out
residuals (split conformal with tails chosen per engine x mode by leave-one-campaign-out misses,
below): every row is predicted with engine constants not fitted to its own measurement campaign
(campaigns dealt to 5 folds, constants refitted on the other folds, folds in parallel); a group's
quantiles are shrunk toward its parent's. Campaigns differ (benchmark protocol, software version),
so a band fitted on other campaigns misses more often than its nominal tails say, and not equally
on both sides: the tail probability of each side of each engine x mode cell's band is chosen so
that the leave-one-campaign-out share of measured values beyond it is (1 - level) / 2
(``choose_tails``). Coverage is measured out of fold: the residual rows are dealt to K campaign
folds (``band_folds``); tails chosen and quantiles fitted on K-1 folds are scored on the remaining
fold, pooled over folds, each figure with the spread it has from which campaigns were measured
(``coverage_interval``: a campaign bootstrap). ``--predictions-out F`` also writes the held-out
predictions; ``--predictions F`` reuses such a CSV (or one written by ``planner validate e2e
--holdout gpu|campaign --predictions-out F``) of the same data instead of predicting here.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, NotRequired, TypedDict

import numpy as np
import pandas as pd
import yaml

from hardware.catalog import get_gpu
from hardware.errors import PlannerInputError
from lab.layouts import campaign
from lab.prepare_e2e import prepare_frame
from planner.model.bundled import load_model
from planner.replay_e2e import regimes
from planner.replay_e2e.bands import add_band_keys
from planner.replay_e2e.candidates import prepare
from planner.replay_e2e.conformal import weighted_quantiles
from planner.replay_e2e.holdout import MAX_FOLDS, campaign_holdout
from planner.replay_e2e.layout import DUPLICATE_IGNORES as LAYOUT_IGNORES
from planner.replay_e2e.layout import (
    LOW_FRACTION_COLUMN,
    drop_duplicates,
    duplicate_key,
    read_measurements,
)
from planner.uncertainty.bands import (
    KEYS,
    LEVELS,
    GroupKey,
    resolve,
)
from planner.uncertainty.grid_fit import widest_table

Metric = Literal["ttft", "tpot"]
Side = Literal["lo", "hi"]
SIDES: tuple[Side, ...] = ("lo", "hi")
METRICS: tuple[Metric, ...] = ("ttft", "tpot")
LEVEL = 0.8
FOLDS = 10
MIN_ROWS = 30
"""A group gets its own quantiles with at least this many rows (else the next coarser level)."""
NOMINAL_TAILS: np.ndarray = np.round(np.arange(0.01, 0.301, 0.01), 2)
"""Tail probabilities tried on each side of a band (``choose_tails``); 0.1 on both sides is the
plain 80% split-conformal band."""
DUPLICATE_IGNORES: tuple[str, ...] = (
    "model_path",
    *LAYOUT_IGNORES,
    LOW_FRACTION_COLUMN,
)
"""Columns that do not make a residual row distinct: the same configuration, measurement and
prediction again. The model label is among them: two dumps hold the same 15 DeepSeek-R1 SGLang
(and 15 TensorRT-LLM) measurements, one labelled DeepSeek-V3 (same architecture, so the same
prediction; TTFT and TPOT equal to 15 digits); kept twice, one measurement would sit in a fitting
and a scored fold (``residual_rows``)."""
WEIGHTING_TEXT: dict[str, str] = {
    "rows": "every row counting once",
    "campaigns": "every campaign counting once",
    "sqrt": "every row counting 1/sqrt(its campaign's rows)",
}
WEIGHTINGS: tuple[str, ...] = tuple(WEIGHTING_TEXT)


@dataclass(frozen=True)
class Method:
    """How a group's quantiles are fitted: ``weighting`` of its rows (``campaign_weights``), the
    prior weight (rows) of its parent's quantiles (``_group_fit``) and of its mode's (a mode's:
    all rows') leave-one-campaign-out miss rates when its tails are chosen (``choose_tails``).

    Rows of one campaign share its protocol and software, so they err together: a group's
    quantiles weight each row 1/sqrt(its campaign's rows) by default, between every row counting
    once (a 27-row campaign outweighs four small ones) and every campaign counting once (a 1-row
    job weighs as much as a sweep). Out of fold (10 campaign folds, fifth-pass predictions) rows
    weighting left TensorRT-LLM disaggregated TPOT at 88.0% (five campaigns of 8-27 rows, campaign
    medians -0.22 to +0.23), sqrt weighting at 76.1%, every cell of >= 30 rows inside 75-85%; at 5,
    7, 14 and 20 folds that cell is 87.0/87.0/84.8/85.9% with rows and 77.2/78.3/78.3/75.0% with
    sqrt (cells outside 75-85% over the five fold counts: 9 with rows, 6 with sqrt;
    lab/notes/outliers.md, "Band weighting")."""

    weighting: str = "sqrt"
    shrink_rows: float = 30.0
    tail_shrink: float = 60.0

    def describe(self) -> str:
        return (
            "split conformal on ln(measured/predicted) of campaign-held-out predictions, "
            f"{WEIGHTING_TEXT[self.weighting]} in a group's quantiles; groups shrunk toward their "
            f"parent with {self.shrink_rows:g} rows of prior weight; the tail probability of each "
            "side per engine x mode chosen by leave-one-campaign-out misses on the fitting rows, "
            f"shrunk toward the mode's with {self.tail_shrink:g} rows of prior weight"
        )


class BandDict(TypedDict):
    """One metric's band in the YAML: log quantiles, the tail probabilities they came from, and
    where stored, the grid of [probability, log quantile] pairs."""

    lo: float
    hi: float
    tail_lo: NotRequired[float]
    tail_hi: NotRequired[float]
    grid: NotRequired[list[list[float]]]


class GroupDict(TypedDict):
    key: dict[str, str]
    n: int
    campaigns: int
    ttft: BandDict
    tpot: BandDict


class CoverageDict(TypedDict):
    coverage_pct: float
    median_width_pct: float
    coverage_interval_pct: NotRequired[list[float]]


class CoverageRow(TypedDict):
    by: str
    key: str
    n: int
    campaigns: NotRequired[int]
    ttft: CoverageDict
    tpot: CoverageDict


class CalibrationRow(TypedDict):
    """Share (%) of held-out rows at or below their predicted c-quantile, per metric and c."""

    by: str
    key: str
    n: int
    ttft: dict[str, float]
    tpot: dict[str, float]


class TableDict(TypedDict):
    """The band table's YAML layout (read by ``planner.uncertainty.bands.table_from_dict``)."""

    level: float
    tails: NotRequired[dict[str, float]]
    gpu_held_out: NotRequired[bool]
    groups: list[GroupDict]
    widest_by_tier: dict[str, dict[Metric, BandDict]]
    gpus: list[str]
    models: list[str]
    provenance: NotRequired[dict[str, str | int | float]]
    out_of_fold: NotRequired[list[CoverageRow]]
    quantile_calibration: NotRequired[list[CalibrationRow]]


@dataclass(frozen=True)
class GroupFit:
    """One group's rows, campaigns and log-residual quantiles (lo, hi) of each metric, one entry
    per tail probability (``NOMINAL_TAILS`` while tails are chosen, one once chosen)."""

    n: int
    campaigns: int
    lo: dict[Metric, np.ndarray]
    hi: dict[Metric, np.ndarray]


@dataclass(frozen=True)
class Fit:
    """Fitted groups (``LEVELS`` keys) and the GPUs and models of the rows they were fitted on."""

    groups: dict[GroupKey, GroupFit]
    gpus: frozenset[str]
    models: frozenset[str]


def campaign_weights(rows: pd.DataFrame, weighting: str) -> np.ndarray:
    """Weight of each row in its group's quantiles: ``rows`` 1; ``campaigns`` 1 / (the rows of its
    campaign in the group), so every campaign counts once; ``sqrt`` 1 / sqrt(those rows)."""
    if weighting == "rows":
        return np.ones(len(rows))
    size = rows.groupby("campaign")["campaign"].transform("size").to_numpy(float)
    return 1.0 / (size if weighting == "campaigns" else np.sqrt(size))


def _parent(key: GroupKey, fitted: dict[GroupKey, GroupFit]) -> GroupFit | None:
    """The nearest coarser fitted group of ``key`` (``LEVELS`` order), or None for the pool."""
    names = {n for n, _ in key}
    values = dict(key)
    for level in LEVELS:
        if len(level) < len(key) and set(level) <= names:
            g = fitted.get(tuple((n, values[n]) for n in level))
            if g is not None:
                return g
    return None


def _group_fit(sub: pd.DataFrame, parent: GroupFit | None, method: Method) -> GroupFit:
    """Quantiles of ``sub``'s residuals at every ``NOMINAL_TAILS`` entry, shrunk toward
    ``parent``'s: (n·own + shrink_rows·parent) / (n + shrink_rows)."""
    w = campaign_weights(sub, method.weighting)
    share = len(sub) / (len(sub) + method.shrink_rows) if parent is not None else 1.0
    lo: dict[Metric, np.ndarray] = {}
    hi: dict[Metric, np.ndarray] = {}
    for m in METRICS:
        lo[m], hi[m] = weighted_quantiles(sub[f"res_{m}"].to_numpy(float), w, NOMINAL_TAILS)
        if parent is not None:
            lo[m] = share * lo[m] + (1.0 - share) * parent.lo[m]
            hi[m] = share * hi[m] + (1.0 - share) * parent.hi[m]
    return GroupFit(len(sub), int(sub["campaign"].nunique()), lo, hi)


def fit_groups(rows: pd.DataFrame, method: Method) -> Fit:
    """Every group of ``LEVELS`` with at least ``MIN_ROWS`` rows (and the pool) fitted on
    ``rows`` at every tail probability, from the pool down, each shrunk toward its parent."""
    fitted: dict[GroupKey, GroupFit] = {}
    for names in reversed(LEVELS):
        parts = rows.groupby(list(names), sort=True) if names else [((), rows)]
        for vals, sub in parts:
            if len(sub) >= MIN_ROWS or not names:
                vals = vals if isinstance(vals, tuple) else (vals,)
                key = tuple((n, str(v)) for n, v in zip(names, vals, strict=True))
                fitted[key] = _group_fit(sub, _parent(key, fitted), method)
    return Fit(
        fitted,
        frozenset(rows["gpu_name"].astype(str)),
        frozenset(rows["model_name"].astype(str)),
    )


def _widest_of(fits: list[GroupFit]) -> GroupFit:
    lo = {m: np.min([g.lo[m] for g in fits], axis=0) for m in METRICS}
    hi = {m: np.max([g.hi[m] for g in fits], axis=0) for m in METRICS}
    return GroupFit(sum(g.n for g in fits), 0, lo, hi)


def widest_by_tier(groups: dict[GroupKey, GroupFit]) -> dict[str, GroupFit]:
    """The bands of a GPU or model without rows (``planner.uncertainty.bands.widest_names``): per
    engine x mode x tier, mode x tier and tier, the widest of the finest groups; ``*``: of all
    groups (``grid_fit.widest_table``)."""
    return widest_table(groups, _widest_of)


def band_arrays(fit: Fit, rows: pd.DataFrame) -> dict[Metric, tuple[np.ndarray, np.ndarray]]:
    """Per row of ``rows`` (positional), the (lo, hi) log quantiles of each metric at every tail
    probability of ``fit`` (rows x tails), looked up as ``BandTable.lookup`` does."""
    widest = widest_by_tier(fit.groups)
    width = next(iter(fit.groups.values())).lo["ttft"].size
    out = {m: (np.empty((len(rows), width)), np.empty((len(rows), width))) for m in METRICS}
    cols = [*KEYS, "gpu_name", "model_name"]
    for combo, idx in rows.groupby(cols, sort=False).indices.items():
        k = dict(zip(cols, map(str, combo), strict=True))
        ref = resolve(
            {n: k[n] for n in KEYS},
            k["gpu_name"],
            k["model_name"],
            fit.groups,
            widest,
            fit.gpus,
            fit.models,
        )
        g = fit.groups[ref] if isinstance(ref, tuple) else widest[ref]
        for m in METRICS:
            out[m][0][idx], out[m][1][idx] = g.lo[m], g.hi[m]
    return out


def _cells(rows: pd.DataFrame) -> np.ndarray:
    """ "engine/mode" of every row."""
    return np.asarray((rows["engine"].astype(str) + "/" + rows["mode"].astype(str)).to_numpy())


def _misses(fit: Fit, rows: pd.DataFrame) -> dict[tuple[Metric, Side], np.ndarray]:
    """Per row and tail probability of ``fit``, whether the measured value lies below the band
    (``lo``) or above it (``hi``)."""
    b = band_arrays(fit, rows)
    out: dict[tuple[Metric, Side], np.ndarray] = {}
    for m in METRICS:
        r = rows[f"res_{m}"].to_numpy(float)[:, None]
        out[(m, "lo")], out[(m, "hi")] = r < b[m][0], r > b[m][1]
    return out


def _pools(rows: pd.DataFrame) -> dict[str, np.ndarray]:
    """Rows of every engine x mode cell, every mode ("*/mode") and all rows ("*/*")."""
    cells, modes = _cells(rows), rows["mode"].astype(str).to_numpy()
    pools = {"*/*": np.ones(len(rows), dtype=bool)}
    pools |= {f"*/{mo}": modes == mo for mo in sorted(set(modes))}
    return pools | {c: cells == c for c in sorted(set(cells))}


def choose_tails(rows: pd.DataFrame, level: float, method: Method) -> dict[str, float]:
    """Tail probability of each side of the band per engine x mode cell, per mode and for all rows
    ("engine/mode/metric/side", "*/mode/...", "*/*/..."): the ``NOMINAL_TAILS`` entry whose
    leave-one-campaign-out share of measured values beyond that side (quantiles fitted on the
    other campaigns of ``rows``) comes closest to (1 - level) / 2, the larger (narrower band) on a
    tie. Campaigns differ (protocol, software version), so a band fitted on other campaigns misses
    more than its nominal tails, and not equally on both sides. One campaign out, not one band
    fold: the table these tails go with is fitted on all of ``rows``, and a tail chosen on fits
    that lack a tenth of the campaigns expects more misses than that table makes (with fold-out
    inner fits the out-of-fold coverage of vLLM aggregated TTFT was 86.3%, 83.7% with one
    campaign out). A cell's miss rates are shrunk toward its mode's, a mode's toward all rows':
    (n·own + tail_shrink·parent) / (n + tail_shrink)."""
    rows = rows.reset_index(drop=True)
    camp = pd.factorize(rows["campaign"])[0]
    miss = {
        (m, e): np.zeros((len(rows), NOMINAL_TAILS.size), dtype=bool)
        for m in METRICS
        for e in SIDES
    }
    for k in np.unique(camp):
        got = _misses(fit_groups(rows[camp != k], method), rows[camp == k].reset_index(drop=True))
        for me, flags in got.items():
            miss[me][camp == k] = flags
    out: dict[str, float] = {}
    rate: dict[str, np.ndarray] = {}
    for name, sel in _pools(rows).items():
        up = "*/*" if name.startswith("*/") else f"*/{name.split('/')[1]}"
        n = int(sel.sum())
        for (m, e), flags in miss.items():
            at = f"{name}/{m}/{e}"
            rate[at] = flags[sel].mean(axis=0)
            if name != "*/*":
                k = method.tail_shrink
                rate[at] = (n * rate[at] + k * rate[f"{up}/{m}/{e}"]) / (n + k)
            gap = np.abs(rate[at] - (1.0 - level) / 2.0)
            out[at] = float(NOMINAL_TAILS[NOMINAL_TAILS.size - 1 - int(np.argmin(gap[::-1]))])
    return out


def _level_name(key: GroupKey) -> str:
    k = dict(key)
    return f"{k['engine']}/{k['mode']}" if "engine" in k else f"*/{k['mode']}" if k else "*/*"


def select(fit: Fit, tails: dict[str, float]) -> Fit:
    """``fit`` at the chosen tail probabilities: each group at its cell's (``choose_tails``)."""
    groups = {}
    for key, g in fit.groups.items():
        name = _level_name(key)
        at = {
            (m, e): int(np.argmin(np.abs(NOMINAL_TAILS - tails[f"{name}/{m}/{e}"])))
            for m in METRICS
            for e in SIDES
        }
        groups[key] = GroupFit(
            g.n,
            g.campaigns,
            {m: g.lo[m][at[(m, "lo")] : at[(m, "lo")] + 1] for m in METRICS},
            {m: g.hi[m][at[(m, "hi")] : at[(m, "hi")] + 1] for m in METRICS},
        )
    return Fit(groups, fit.gpus, fit.models)


def fit_table(rows: pd.DataFrame, level: float, method: Method) -> tuple[Fit, dict[str, float]]:
    """(the band table fitted on ``rows`` at the tail probabilities chosen on their campaigns,
    those tails)."""
    tails = choose_tails(rows, level, method)
    return select(fit_groups(rows, method), tails), tails


def _band(
    g: GroupFit, m: Metric, tails: dict[str, float] | None = None, name: str = ""
) -> BandDict:
    out = BandDict(lo=round(float(g.lo[m][0]), 4), hi=round(float(g.hi[m][0]), 4))
    if tails is not None:
        out["tail_lo"], out["tail_hi"] = tails[f"{name}/{m}/lo"], tails[f"{name}/{m}/hi"]
    return out


def table_dict(fit: Fit, level: float, tails: dict[str, float]) -> TableDict:
    """The YAML layout (``planner.uncertainty.bands.table_from_dict``) of a selected ``fit``."""
    groups = [
        GroupDict(
            key=dict(key),
            n=g.n,
            campaigns=g.campaigns,
            ttft=_band(g, "ttft", tails, _level_name(key)),
            tpot=_band(g, "tpot", tails, _level_name(key)),
        )
        for key, g in sorted(fit.groups.items(), key=lambda kv: (-len(kv[0]), kv[0]))
    ]
    widest = {
        name: {m: _band(g, m) for m in METRICS} for name, g in widest_by_tier(fit.groups).items()
    }
    return TableDict(
        level=level,
        tails=tails,
        groups=groups,
        widest_by_tier=widest,
        gpus=sorted(fit.gpus),
        models=sorted(fit.models),
    )


def residual_rows(pred: pd.DataFrame) -> pd.DataFrame:
    """Keyed rows with finite log residuals of both metrics and their campaign (measured from
    the nearer of two predictions where the serving regime is open, ``regimes``), repeated
    measurements dropped (equal on every column but ``DUPLICATE_IGNORES`` and the prediction and
    candidate columns, compared as ``planner.replay_e2e.layout.duplicate_key`` compares them; the
    lowest ``id`` is kept)."""
    rows = add_band_keys(regimes.with_alternatives(pred))
    rows["model_name"] = rows["model_path"].astype(str).map(lambda p: load_model(p).name)
    rows["gpu_name"] = rows["system"].astype(str).map(lambda s: get_gpu(s).name)
    rows["campaign"] = rows["silicon_data_source"].map(campaign)
    for m in METRICS:
        rows[f"res_{m}"] = regimes.envelope_residual(
            rows[f"silicon_{m}_ms"].to_numpy(float), *regimes.envelope(rows, m)
        )
    ok = np.isfinite(rows["res_ttft"]) & np.isfinite(rows["res_tpot"])
    rows = rows[ok]
    subset = [
        c
        for c in pred.columns
        if c not in DUPLICATE_IGNORES and not c.startswith(("pred_", "alt_", "c_"))
    ]
    key = duplicate_key(rows, subset)
    order = key.assign(_id=rows["id"].astype(str)).sort_values("_id", kind="stable").index
    keep = ~key.loc[order].duplicated(subset=subset, keep="first")
    return rows.loc[order[keep.to_numpy()]].sort_index().reset_index(drop=True)


def band_folds(rows: pd.DataFrame, k: int) -> np.ndarray:
    """Fold index (0..k-1) of every residual row, for the out-of-fold scoring of the band method
    (tails chosen and quantiles fitted on the other folds): campaigns dealt round-robin as
    ``holdout.campaign_folds`` deals them, stratified by cell: each campaign belongs to the engine x
    mode cell most of its rows are in (ties: the first in name order), campaigns are sorted by
    (cell, name) and dealt in one running round-robin. A cell's campaigns so land in different folds
    (up to K of them), and a cell's held-out fold is scored with the cell's other campaigns in the
    fit; the unstratified deal put the SGLang 0.5.1.post1 sweep and both copies of the DeepSeek-R1
    SGLang campaign (108 of the cell's 230 rows) in one of ten folds."""
    if not 2 <= k <= MAX_FOLDS:
        raise PlannerInputError("--folds", f"{k} not in [2, {MAX_FOLDS}]")
    camp = rows["silicon_data_source"].map(campaign)
    cell = rows["engine"].astype(str) + " x " + rows["mode"].astype(str)
    counts = pd.DataFrame({"camp": camp, "cell": cell}).value_counts()
    major: dict[str, str] = {}
    for (c, cl), _ in sorted(counts.items(), key=lambda t: (t[0][0], -t[1], t[0][1])):
        major.setdefault(str(c), str(cl))
    order = sorted(major, key=lambda c: (major[c], c))
    fold_of = {c: i % k for i, c in enumerate(order)}
    return camp.map(fold_of).to_numpy(dtype=int)


def _width_pct(rows: pd.DataFrame, m: Metric, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Band width (% of the prediction) of log quantiles ``lo``/``hi`` around each row's
    predictions (both regimes' where open; rows without predictions: around 1)."""
    if f"pred_{m}_ms" not in rows:
        return (np.exp(hi) - np.exp(lo)) * 100.0
    edge_lo, edge_hi = regimes.band_edges(*regimes.envelope(rows, m), lo, hi)
    return np.asarray((edge_hi - edge_lo) / rows[f"pred_{m}_ms"].to_numpy(float) * 100.0)


def _fold_part(
    rows: pd.DataFrame, fold: np.ndarray, k: int, level: float, method: Method
) -> pd.DataFrame:
    """Fold ``k``'s rows with the band whose tails were chosen and quantiles fitted on the other
    folds only, whether each measured value lies inside, and the band's width (% of the
    prediction)."""
    train = fold != k
    table, _ = fit_table(rows[train].reset_index(drop=True), level, method)
    test = rows[~train].reset_index(drop=True)
    b = band_arrays(table, test)
    part = test.assign(fold=k)
    for m in METRICS:
        lo, hi = b[m][0][:, 0], b[m][1][:, 0]
        r = part[f"res_{m}"].to_numpy(float)
        part[f"in_{m}"] = (r >= lo) & (r <= hi)
        part[f"width_{m}_pct"] = _width_pct(part, m, lo, hi)
    return part


def out_of_fold(
    rows: pd.DataFrame, folds: int, level: float, method: Method, progress: bool = False
) -> pd.DataFrame:
    """Rows with their out-of-fold band and coverage flags: for each campaign fold, the tail
    probabilities (``choose_tails``, itself leave-one-campaign-out on the training folds) and the
    quantiles fitted on the other K-1 folds only."""
    fold = band_folds(rows, folds)
    ks = [int(k) for k in np.unique(fold)]
    parts = []
    for n, k in enumerate(ks):
        parts.append(_fold_part(rows, fold, k, level, method))
        if progress:
            sys.stderr.write(f"\rbands: out-of-fold coverage, fold {n + 1}/{len(ks)}")
    if progress:
        sys.stderr.write("\n")
    return pd.concat(parts, ignore_index=True)


COVERAGE_RESAMPLES = 2000
"""Campaign bootstrap resamples behind each ``coverage_interval``."""
COVERAGE_INTERVAL_PCT = (5.0, 95.0)
"""Percentiles of the resampled coverage that bound the reported interval (a 90% interval)."""


def coverage_interval(
    inside: np.ndarray, campaigns: np.ndarray, resamples: int = COVERAGE_RESAMPLES, seed: int = 0
) -> tuple[float, float]:
    """5th and 95th percentile (%) of the pooled coverage of ``inside`` (one flag per row) when the
    rows' campaigns are drawn again with replacement, as many as there are: the spread a coverage
    figure has from which campaigns were measured. Rows of one campaign share its protocol and
    software, so they miss together; with a few campaigns in a cell this spread is far wider than
    the binomial one of its rows (SGLang disaggregated, 49 rows of 7 campaigns: TTFT 42-98%
    against 71-89% binomial). Deterministic (``seed``)."""
    names, index = np.unique(np.asarray(campaigns).astype(str), return_inverse=True)
    hits = np.bincount(index, weights=np.asarray(inside, dtype=float), minlength=len(names))
    rows = np.bincount(index, minlength=len(names)).astype(float)
    pick = np.random.default_rng(seed).integers(0, len(names), size=(resamples, len(names)))
    share = hits[pick].sum(axis=1) / rows[pick].sum(axis=1) * 100.0
    lo, hi = np.percentile(share, COVERAGE_INTERVAL_PCT)
    return round(float(lo), 1), round(float(hi), 1)


def coverage_report(oof: pd.DataFrame) -> list[CoverageRow]:
    """Pooled out-of-fold coverage (%), its campaign-bootstrap interval (``coverage_interval``)
    and the median band width (% of the prediction): overall, per engine x mode, per engine and
    per mode."""

    def cov(sub: pd.DataFrame, m: Metric) -> CoverageDict:
        return CoverageDict(
            coverage_pct=round(float(sub[f"in_{m}"].mean()) * 100, 1),
            median_width_pct=round(float(sub[f"width_{m}_pct"].median()), 1),
            coverage_interval_pct=list(
                coverage_interval(sub[f"in_{m}"].to_numpy(), sub["campaign"].to_numpy())
            ),
        )

    def one(by: str, key: str, sub: pd.DataFrame) -> CoverageRow:
        return CoverageRow(
            by=by,
            key=key,
            n=len(sub),
            campaigns=int(sub["campaign"].nunique()),
            ttft=cov(sub, "ttft"),
            tpot=cov(sub, "tpot"),
        )

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
        "c_concurrency",  # the open-regime rows are re-priced at the harness's request count
        "silicon_data_source",
        "backend",
        "mode",
    }
)


def held_out_predictions(
    data: Path, holdout_folds: int = HOLDOUT_FOLDS, progress: bool = True
) -> tuple[pd.DataFrame, int]:
    """(campaign-held-out predictions of every modelled row of ``data``, rows in the file): each
    campaign fold priced with engine constants refitted on the other folds, exactly as
    ``planner validate e2e --holdout campaign`` does on the prepared rows (``prepare_e2e``,
    ``planner.replay_e2e.holdout``)."""
    df, duplicates = drop_duplicates(prepare_frame(read_measurements(data)))
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
    method: Method = Method(),
    predictions_out: Path | None = None,
    force: bool = False,
) -> TableDict:
    """The band table (fitted on all held-out residuals) with its provenance and out-of-fold
    coverage. The residuals are campaign-held-out: predicted here (``held_out_predictions``) or
    read from ``predictions`` (the same predictions written by ``validate e2e --holdout campaign
    --predictions-out``); ``predictions_out``: where to write the predictions made here."""
    if predictions is None:
        pred, n_data = held_out_predictions(data, holdout_folds, progress)
        if predictions_out is not None:
            from planner.safe_files import write_new_file

            data_csv = pred.to_csv(index=False).encode()
            write_new_file(predictions_out, data_csv, force, "--predictions-out")
        source = (
            f"campaign held out: {holdout_folds} folds, engine constants refitted on the other "
            "folds (planner.replay_e2e.holdout, as validate e2e --holdout campaign)"
        )
    else:
        pred, n_data = _read_predictions(predictions), int(len(pd.read_csv(data)))
        source = f"{predictions} (validate e2e --holdout campaign --predictions-out)"
    rows = residual_rows(pred)
    oof = out_of_fold(rows, folds, level, method, progress)
    fit, tails = fit_table(rows, level, method)
    table = table_dict(fit, level, tails)
    table["provenance"] = {
        "data": str(data),
        "data_sha256": _sha256(data),
        "data_rows": n_data,
        "rows_used": len(rows),
        "campaigns": int(rows["campaign"].nunique()),
        "predictions": source,
        "folds": folds,
        "fold_rule": "campaign (protocol.campaign of silicon_data_source), "
        "campaigns sorted by (engine x mode cell of most of their rows, name) dealt "
        "round-robin (band_folds); rows repeating a configuration, measurement and prediction "
        "under another id, source or model label dropped",
        "min_group_rows": MIN_ROWS,
        "tail_shrink_rows": method.tail_shrink,
        "weighting": method.weighting,
        "shrink_rows": method.shrink_rows,
        "date": dt.date.today().isoformat(),
        "command": command,
        "method": method.describe(),
    }
    table["out_of_fold"] = coverage_report(oof)
    return table


def _print_summary(table: TableDict, out: Path) -> None:
    prov = table.get("provenance", {})
    folds = (
        f"{prov.get('gpus')} GPUs left out in turn"
        if table.get("gpu_held_out")
        else f"{prov.get('folds')} campaign folds"
    )
    print(
        f"wrote {out}: {len(table['groups'])} groups, {prov.get('rows_used')} rows, "
        f"{folds}, level {table['level']}"
    )
    print(
        f"{'by':16s} {'key':28s} {'n':>5s} {'TTFT cov%':>9s} {'width%':>7s} "
        f"{'TPOT cov%':>9s} {'width%':>7s}   (campaign bootstrap 90% interval of each coverage)"
    )

    def span(c: CoverageDict) -> str:
        lo, hi = c.get("coverage_interval_pct", [float("nan")] * 2)
        return f"{lo:.1f}-{hi:.1f}"

    for g in table.get("out_of_fold", []):
        t, p = g["ttft"], g["tpot"]
        print(
            f"{g['by']:16s} {g['key']:28s} {g['n']:5d} "
            f"{t['coverage_pct']:9.1f} {t['median_width_pct']:7.1f} "
            f"{p['coverage_pct']:9.1f} {p['median_width_pct']:7.1f}   "
            f"TTFT {span(t)}, TPOT {span(p)}"
        )
    calibration = table.get("quantile_calibration", [])
    if calibration:
        print("share (%) of held-out rows at or below the predicted c-quantile (TTFT / TPOT)")
    for row in calibration:
        shares = "  ".join(
            f"{c.removeprefix('q')}: {row['ttft'][c]:.1f} / {row['tpot'][c]:.1f}"
            for c in row["ttft"]
        )
        print(f"{row['by']:16s} {row['key']:28s} {row['n']:5d}  {shares}")


def main(argv: list[str] | None = None) -> int:
    from planner.safe_files import check_new_file, write_new_file

    ap = argparse.ArgumentParser(prog="python -m lab.bands", description=__doc__.splitlines()[0])
    ap.add_argument(
        "--data",
        type=Path,
        required=True,
        action="append",
        help="silicon_measured.csv layout; more than once for several files (--holdout gpu)",
    )
    ap.add_argument(
        "--holdout",
        choices=("gpu", "campaign"),
        default="gpu",
        help="residuals held out by GPU (quantile grids, the default) or by campaign (one file: "
        "the split-conformal table with chosen tails)",
    )
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
    ap.add_argument(
        "--weighting",
        choices=WEIGHTINGS,
        default=Method.weighting,
        help="weight of a row in its group's quantiles: sqrt (the default: 1/sqrt of its "
        "campaign's rows), rows (each row counts once) or campaigns (each campaign counts once)",
    )
    ap.add_argument(
        "--predictions-out",
        type=Path,
        default=None,
        help="also write the held-out predictions made here (CSV) for --predictions",
    )
    ap.add_argument("--force", action="store_true", help="replace --out / --predictions-out")
    args = ap.parse_args(argv)
    try:
        if not 2 <= args.folds <= 20:
            raise PlannerInputError("--folds", f"{args.folds} not in 2-20")
        if not 2 <= args.holdout_folds <= 20:
            raise PlannerInputError("--holdout-folds", f"{args.holdout_folds} not in 2-20")
        if not 0.5 <= args.level <= 0.95:
            raise PlannerInputError("--level", f"{args.level} not in 0.5-0.95")
        for d in args.data:
            if not d.is_file():
                raise PlannerInputError("--data", f"{d} does not exist")
        if args.holdout == "campaign" and len(args.data) != 1:
            raise PlannerInputError("--data", "--holdout campaign reads one file")
        check_new_file(args.out, args.force, "--out")  # before the long build
        if args.predictions_out is not None:
            if args.predictions is not None:
                raise PlannerInputError("--predictions-out", "not with --predictions")
            check_new_file(args.predictions_out, args.force, "--predictions-out")
        command = shlex.join(
            [
                "python",
                "-m",
                "lab.bands",
                *(argv if argv is not None else sys.argv[1:]),
            ]
        )
        if args.holdout == "gpu":
            from lab.bands_gpu import build_gpu

            table = build_gpu(
                args.data,
                args.level,
                args.predictions,
                command,
                predictions_out=args.predictions_out,
                force=args.force,
            )
        else:
            table = build(
                args.data[0],
                args.folds,
                args.level,
                args.predictions,
                command,
                args.holdout_folds,
                method=Method(weighting=args.weighting),
                predictions_out=args.predictions_out,
                force=args.force,
            )
        text = "# Prediction bands: generated by lab/bands.py; do not edit by hand.\n"
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
