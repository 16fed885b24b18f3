"""Calibrated prediction bands: how far measured TTFT/TPOT fall from the prediction.

The band table (``planner/calibration/bands.yaml``, rebuilt by
``python -m lab.bands``)
holds split-conformal quantiles of the log residual ln(measured / predicted) of the end-to-end
validation rows, fitted per group of what predicts the error: engine, agg/disagg, load relative to
capacity (the prefill stage's utilisation, ``LOAD_BUCKETS``) and the provenance tier of the ops
that dominate the step (``provenance_tier``). A prediction's band at the table's level (80 %) is
[pred·exp(lo), pred·exp(hi)] with the quantiles of the most specific group that has enough rows
(``Band table`` lookup order in ``LEVELS``); a GPU or model without rows in the data gets the
widest band of its tier. The same multiplicative band is applied to the mean and to p50/p90/p99:
the data measure the central number, and the model's error on it is what the band states.
"""

from __future__ import annotations

from collections.abc import Container, Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from statistics import NormalDist

import numpy as np
import yaml

from hardware.errors import PlannerInputError
from hardware.input_files import read_packaged_yaml
from hardware.spec import GpuSpec
from planner.model.spec import ModelSpec
from planner.perf.batch import KV_DTYPES, WEIGHT_QUANTS, parallel_arrays
from planner.perf.opgraph import StepMix
from planner.perf.pricer import default_pricer
from planner.perf.step import StepCost, price_step

BANDS_FILE = Path(__file__).parents[1] / "calibration" / "bands.yaml"
KEYS: tuple[str, ...] = ("engine", "mode", "load", "tier")
LEVELS: tuple[tuple[str, ...], ...] = (
    KEYS,
    ("engine", "mode", "load"),
    ("engine", "mode"),
    ("mode",),
    (),
)
"""Group keys from the most specific to the pooled table; a lookup takes the first group present."""
GroupKey = tuple[tuple[str, str], ...]
"""A group's (key name, value) pairs in ``LEVELS`` order, e.g. (("engine", "vllm"),)."""
LOAD_BUCKETS: tuple[tuple[str, float], ...] = (
    ("light", 0.5),
    ("busy", 0.9),
    ("at_capacity", np.inf),
)
"""Load relative to capacity: the prefill stage's utilisation below 0.5, below 0.9, above."""
REFERENCE_BATCH = 32.0
REFERENCE_CTX = 2048.0
REFERENCE_PREFILL = 2048.0
"""The step whose op times name a deployment's provenance tier: 32 decode requests at 2048 tokens of
context plus a 2048-token prefill chunk, one GPU (the tier depends on the model, GPU and dtypes)."""


def load_bucket(prefill_utilization: np.ndarray | float) -> np.ndarray:
    """``LOAD_BUCKETS`` name of each utilisation (NaN: the busiest bucket)."""
    names = np.array([n for n, _ in LOAD_BUCKETS])
    return np.asarray(names[load_bucket_index(prefill_utilization)])


def load_bucket_index(prefill_utilization: np.ndarray | float) -> np.ndarray:
    """Index into ``LOAD_BUCKETS`` of each utilisation (NaN: the busiest bucket)."""
    u = np.nan_to_num(np.asarray(prefill_utilization, dtype=float), nan=np.inf)
    edges = np.array([e for _, e in LOAD_BUCKETS[:-1]])
    return np.searchsorted(edges, u, side="right")


_TIERS: dict[tuple[str, str, str, str, str], str] = {}


def provenance_tier(m: ModelSpec, gpu: GpuSpec, weight_quant: str, kv_dtype: str = "bf16") -> str:
    """The provenance tier (kernels_db ``PROVENANCE``) that prices most of the reference step's
    kernel time for this model on this GPU with these dtypes (memoised per name and dtypes)."""
    key = (m.name, m.hf_id, gpu.name, weight_quant, kv_dtype)
    if key not in _TIERS:
        _TIERS[key] = _dominant_tier(m, gpu, weight_quant, kv_dtype)
    return _TIERS[key]


def source_shares(cost: StepCost) -> dict[str, float]:
    """Share of an already priced step's kernel time (candidate 0) from each provenance tier,
    from ``StepCost.by_source_s``."""
    times: dict[str, float] = {}
    for tag, t in cost.by_source_s:
        times[tag] = float(t[0])
    total = sum(times.values()) or 1.0
    return {tag: v / total for tag, v in sorted(times.items())}


def _dominant_tier(m: ModelSpec, gpu: GpuSpec, weight_quant: str, kv_dtype: str) -> str:
    one = np.ones(1)
    par = parallel_arrays(
        gpu,
        one,
        one,
        one,
        one,
        np.array([float(WEIGHT_QUANTS.index(weight_quant))]),
        np.array([float(KV_DTYPES.index(kv_dtype))]),
    )
    mix = StepMix(
        np.array([REFERENCE_BATCH]),
        np.array([REFERENCE_CTX]),
        np.array([REFERENCE_PREFILL]),
        np.array([REFERENCE_PREFILL]),
        np.zeros(1),
    )
    shares = source_shares(price_step(m, par, mix, default_pricer(gpu)))
    return max(shares, key=lambda k: shares[k]) if shares else "roofline_uncalibrated"


@dataclass(frozen=True)
class LogBand:
    """Quantiles (natural log of measured / predicted) of one metric's residuals: ``lo`` and
    ``hi`` the edges of the table's central band (level 0.8: the 0.1 and 0.9 quantiles) and, where
    the table stores one, ``grid``: (probability, quantile) pairs in increasing probability."""

    lo: float
    hi: float
    grid: tuple[tuple[float, float], ...] = ()

    def apply(self, pred: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
        """(low, high) edges of the band around ``pred`` (inf stays inf)."""
        p = np.asarray(pred, dtype=float)
        return p * np.exp(self.lo), p * np.exp(self.hi)

    def quantile(self, c: float, level: float = 0.8) -> float:
        """The ``c``-quantile (0 < c < 1) of ln(measured / predicted): the measured value is at or
        below pred * exp(quantile(c)) with probability c. Read from ``grid`` by linear
        interpolation in probability (clamped to its ends); without a grid, from a normal in log
        space through the band's edges (``lo``, ``hi`` the (1 -/+ level) / 2 quantiles)."""
        if not 0.0 < c < 1.0:
            raise ValueError(f"quantile probability {c} not in (0, 1)")
        if self.grid:
            ps, qs = zip(*self.grid, strict=True)
            return float(np.interp(c, ps, qs))
        z_edge = NormalDist().inv_cdf(0.5 + level / 2.0)
        mu, sigma = (self.lo + self.hi) / 2.0, max(self.hi - self.lo, 0.0) / (2.0 * z_edge)
        return float(mu + sigma * NormalDist().inv_cdf(c))


def widest_names(key: Mapping[str, str]) -> tuple[str, ...]:
    """The ``widest_by_tier`` entries a GPU or model without rows tries, in order."""
    engine, mode, tier = key.get("engine", ""), key.get("mode", ""), key.get("tier", "")
    return (f"{engine}/{mode}/{tier}", f"{mode}/{tier}", tier, "*")


def resolve(
    key: Mapping[str, str],
    gpu: str,
    model: str,
    groups: Container[GroupKey],
    widest: Container[str],
    gpus: Container[str],
    models: Container[str],
) -> GroupKey | str:
    """Which band a deployment gets: the most specific group of ``key`` (``LEVELS``) present in
    ``groups``, or, when its GPU or model has no rows, the first ``widest_names`` entry present."""
    if (gpu and gpu not in gpus) or (model and model not in models):
        for name in widest_names(key):
            if name in widest:
                return name
        raise KeyError("band table has no widest band '*'")
    for names in LEVELS:
        k = tuple((n, key[n]) for n in names)
        if k in groups:
            return k
    raise KeyError("band table has no pooled group")


CellSpread = tuple[int, tuple[float, float], tuple[float, float]]
"""Campaigns of an "engine x mode" cell and the 90% interval (%) of its TTFT and TPOT coverage."""


@dataclass(frozen=True)
class BandTable:
    """A loaded band table (see module docstring)."""

    level: float
    groups: dict[GroupKey, dict[str, LogBand]]
    widest_by_tier: dict[str, dict[str, LogBand]]
    gpus: frozenset[str]
    models: frozenset[str]
    provenance: dict[str, str | int | float]
    support: dict[GroupKey, tuple[int, int]] = field(default_factory=dict)
    """Rows and campaigns each group was fitted on (where the table records them)."""
    cell_coverage: dict[str, tuple[float, float, int]] = field(default_factory=dict)
    """Out-of-fold coverage (%) of TTFT and TPOT and rows per "engine x mode" cell."""
    cell_spread: dict[str, CellSpread] = field(default_factory=dict)
    """Campaigns per "engine x mode" cell and the 90% interval (%) of its TTFT and TPOT coverage
    over campaign resamples (``lab.bands.coverage_interval``), where recorded."""
    gpu_held_out: bool = False
    """The groups were fitted on residuals of GPUs held out of the constants' fit
    (``planner.uncertainty.grid_fit``): a GPU without rows takes them as a measured GPU does (only
    a model without rows takes its tier's widest band)."""

    def _ref(self, key: dict[str, str], gpu: str, model: str) -> GroupKey | str:
        gpu = "" if self.gpu_held_out else gpu
        return resolve(key, gpu, model, self.groups, self.widest_by_tier, self.gpus, self.models)

    def lookup(self, key: dict[str, str], gpu: str = "", model: str = "") -> dict[str, LogBand]:
        """Bands (``ttft``, ``tpot``) of the most specific group of ``key`` with enough rows; the
        widest band of the tier when the GPU (unless ``gpu_held_out``) or model has no rows."""
        ref = self._ref(key, gpu, model)
        return self.groups[ref] if isinstance(ref, tuple) else self.widest_by_tier[ref]

    def account(self, key: dict[str, str], gpu: str = "", model: str = "") -> str:
        """Which group ``lookup`` takes, what it was fitted on, and how often the bands of its
        engine x mode held measured values of campaigns left out of their fit: a user reads
        whether this band's stated level was met where it came from."""
        ref = self._ref(key, gpu, model)
        if isinstance(ref, str):
            return f"widest band of tier '{ref}' (no data for this GPU/model)"
        name = "/".join(v for _, v in ref) or "all rows"
        rows = self.support.get(ref)
        text = f"group {name}" + (f" ({rows[0]:,} rows, {rows[1]} campaigns)" if rows else "")
        name_cell = f"{key.get('engine', '')} x {key.get('mode', '')}"
        cell = self.cell_coverage.get(name_cell)
        if cell:
            how = " (each GPU against bands fitted on the others)" if self.gpu_held_out else ""
            text += (
                f"; out of fold{how} its engine x mode held {cell[0]:.1f}% of measured TTFT and "
                f"{cell[1]:.1f}% of TPOT ({cell[2]:,} rows; stated level {self.level:.0%})"
            )
            spread = self.cell_spread.get(name_cell)
            if spread:
                (c, (t_lo, t_hi), (p_lo, p_hi)) = spread
                text += (
                    f", figures that move over {t_lo:.0f}-{t_hi:.0f}% (TTFT) and "
                    f"{p_lo:.0f}-{p_hi:.0f}% (TPOT) with which of its {c} campaigns were measured"
                )
        return text


def _mapping(raw: object, what: str) -> Mapping[str, object]:
    if not isinstance(raw, Mapping):
        raise TypeError(f"{what}: not a mapping")
    return raw


def _number(raw: object, what: str) -> float:
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not np.isfinite(raw):
        raise ValueError(f"{what}: {raw!r} is not a finite number")
    return float(raw)


def _grid(raw: object, what: str) -> tuple[tuple[float, float], ...]:
    """A stored quantile grid: [probability, log quantile] pairs, probabilities increasing inside
    (0, 1), quantiles non-decreasing (a ``ValueError`` naming the entry when not)."""
    if not isinstance(raw, list) or not raw:
        raise TypeError(f"{what}: not a list of [probability, quantile] pairs")
    pairs = []
    for i, pair in enumerate(raw):
        if not isinstance(pair, list) or len(pair) != 2:
            raise TypeError(f"{what}[{i}]: not a [probability, quantile] pair")
        pairs.append((_number(pair[0], f"{what}[{i}]"), _number(pair[1], f"{what}[{i}]")))
    ps, qs = np.array(pairs).T
    if not (0.0 < ps[0] and ps[-1] < 1.0 and np.all(np.diff(ps) > 0)):
        raise ValueError(f"{what}: probabilities not increasing inside (0, 1)")
    if np.any(np.diff(qs) < 0):
        raise ValueError(f"{what}: quantiles decrease")
    return tuple(pairs)


def _bands(raw: object, what: str) -> dict[str, LogBand]:
    out = {}
    for m in ("ttft", "tpot"):
        band = _mapping(_mapping(raw, what)[m], f"{what}.{m}")
        lo, hi = (_number(band[e], f"{what}.{m}.{e}") for e in ("lo", "hi"))
        if lo > hi:
            raise ValueError(f"{what}.{m}: lo {lo} above hi {hi}")
        grid = _grid(band["grid"], f"{what}.{m}.grid") if "grid" in band else ()
        out[m] = LogBand(lo, hi, grid)
    return out


def _strings(raw: object, what: str) -> frozenset[str]:
    if not isinstance(raw, list):
        raise TypeError(f"{what}: not a list")
    return frozenset(str(x) for x in raw)


def table_from_dict(raw: object) -> BandTable:
    """A ``BandTable`` from the YAML layout written by ``lab.bands`` (a
    ``KeyError``, ``TypeError`` or ``ValueError`` naming the entry when it is not one)."""
    top = _mapping(raw, "table")
    listed = top["groups"]
    if not isinstance(listed, list):
        raise TypeError("groups: not a list")
    groups, support = {}, {}
    for i, g in enumerate(listed):
        key = _mapping(_mapping(g, f"groups[{i}]")["key"], f"groups[{i}].key")
        gk = tuple((str(k), str(v)) for k, v in key.items())
        groups[gk] = _bands(g, f"groups[{i}]")
        if "n" in g and "campaigns" in g:
            support[gk] = (
                int(_number(g["n"], f"groups[{i}].n")),
                int(_number(g["campaigns"], f"groups[{i}].campaigns")),
            )
    widest = {
        str(t): _bands(b, f"widest_by_tier.{t}")
        for t, b in _mapping(top["widest_by_tier"], "widest_by_tier").items()
    }
    prov = _mapping(top.get("provenance", {}), "provenance")
    return BandTable(
        _number(top["level"], "level"),
        groups,
        widest,
        _strings(top["gpus"], "gpus"),
        _strings(top["models"], "models"),
        {str(k): v if isinstance(v, (str, int, float)) else str(v) for k, v in prov.items()},
        support,
        _cell_coverage(top.get("out_of_fold", [])),
        _cell_spread(top.get("out_of_fold", [])),
        bool(top.get("gpu_held_out", False)),
    )


def _engine_mode_rows(raw: object) -> Iterator[tuple[str, str, Mapping[str, object]]]:
    """(key, where, row) of the "engine x mode" rows of a table's ``out_of_fold`` list."""
    if not isinstance(raw, list):
        raise TypeError("out_of_fold: not a list")
    for i, row in enumerate(raw):
        r = _mapping(row, f"out_of_fold[{i}]")
        if r.get("by") == "engine x mode":
            yield str(r["key"]), f"out_of_fold[{i}]", r


def _cell_coverage(raw: object) -> dict[str, tuple[float, float, int]]:
    """The "engine x mode" rows of a table's ``out_of_fold`` list: (TTFT %, TPOT %, rows)."""
    out = {}
    for key, where, r in _engine_mode_rows(raw):
        t, p = (_mapping(r[m], f"{where}.{m}") for m in ("ttft", "tpot"))
        out[key] = (
            _number(t["coverage_pct"], f"{where}.ttft.coverage_pct"),
            _number(p["coverage_pct"], f"{where}.tpot.coverage_pct"),
            int(_number(r["n"], f"{where}.n")),
        )
    return out


def _span(raw: object, where: str) -> tuple[float, float] | None:
    """A recorded ``[lo, hi]`` interval (%), or None where the table has none."""
    if not isinstance(raw, list) or len(raw) != 2:
        return None
    return _number(raw[0], where), _number(raw[1], where)


def _cell_spread(raw: object) -> dict[str, CellSpread]:
    """The "engine x mode" rows of ``out_of_fold`` that record their campaigns and coverage
    intervals (tables built before they were recorded have none)."""
    out = {}
    for key, where, r in _engine_mode_rows(raw):
        t, p = (
            _span(
                _mapping(r[m], f"{where}.{m}").get("coverage_interval_pct"),
                f"{where}.{m}.coverage_interval_pct",
            )
            for m in ("ttft", "tpot")
        )
        if "campaigns" in r and t is not None and p is not None:
            out[key] = (int(_number(r["campaigns"], f"{where}.campaigns")), t, p)
    return out


@lru_cache(maxsize=2)
def load_bands(path: Path = BANDS_FILE) -> BandTable:
    """The committed band table (an input error naming the file when it is unreadable)."""
    try:
        return table_from_dict(read_packaged_yaml(path))
    except (OSError, KeyError, TypeError, ValueError, yaml.YAMLError) as exc:
        raise PlannerInputError("bands", f"{path}: not a band table ({exc})") from exc


def _model_name(m: ModelSpec) -> str:
    return m.name


OwnBands = Mapping[tuple[str, str], tuple[dict[str, LogBand] | None, str]]
"""A calibration profile's bands per (engine, mode): its own out-of-sample residual quantiles and a
one-line account, or None and the reason the table's band applies (too few rows)."""


@dataclass(frozen=True)
class Bands:
    """The bands a request is priced with: the packaged table and, per (engine, mode), a
    calibration profile's own bands that replace the table's
    (``planner.uncertainty.profile_bands``)."""

    table: BandTable
    own: OwnBands = field(default_factory=dict)

    def of(self, engine: str, mode: str) -> tuple[dict[str, LogBand] | None, str] | None:
        """The profile's bands of ``engine``/``mode`` (see ``OwnBands``), or None."""
        return self.own.get((engine, mode))


def packaged_bands(path: Path = BANDS_FILE) -> Bands:
    """The committed band table with no profile over it."""
    return Bands(load_bands(path))


def deployment_bands(
    m: ModelSpec,
    gpu: GpuSpec,
    engine: str,
    mode: str,
    prefill_utilization: float,
    weight_quant: str,
    kv_dtype: str,
    bands: Bands | None = None,
) -> tuple[dict[str, LogBand], str]:
    """(bands of ``ttft`` and ``tpot``, a one-line account of the group they came from) for one
    deployment, from ``bands`` (default: the packaged table)."""
    b = bands or packaged_bands()
    own = b.of(engine, mode)
    if own is not None and own[0] is not None:
        return own[0], own[1]
    t = b.table
    key = {
        "engine": engine,
        "mode": mode,
        "load": str(load_bucket(prefill_utilization)),
        "tier": provenance_tier(m, gpu, weight_quant, kv_dtype),
    }
    how = (
        " ".join(f"{k}={v}" for k, v in key.items())
        + ": "
        + t.account(key, gpu=gpu.name, model=_model_name(m))
    )
    note = f"{own[1]}; " if own is not None else ""
    return t.lookup(key, gpu=gpu.name, model=_model_name(m)), (
        f"{note}{how}; {BANDS_FILE.name} level {t.level}"
    )


def candidate_bands(
    m: ModelSpec,
    gpu: GpuSpec,
    engine: str,
    mode: int,
    prefill_utilization: float,
    weight_quant: int,
    kv_dtype: int,
    bands: Bands | None = None,
) -> dict[str, LogBand]:
    """Bands (``ttft``, ``tpot``) of one candidate (mode 0 agg / 1 disagg, quant and KV codes as in
    ``CandidateArrays``) from ``bands`` (default: the packaged table)."""
    b = bands or packaged_bands()
    own = b.of(engine, "disagg" if mode else "agg")
    if own is not None and own[0] is not None:
        return own[0]
    t = b.table
    key = {
        "engine": engine,
        "mode": "disagg" if mode else "agg",
        "load": str(load_bucket(prefill_utilization)),
        "tier": provenance_tier(m, gpu, WEIGHT_QUANTS[weight_quant], KV_DTYPES[kv_dtype]),
    }
    return t.lookup(key, gpu=gpu.name, model=_model_name(m))


def upper_factor(
    m: ModelSpec,
    gpu: GpuSpec,
    engine: str,
    modes: np.ndarray,
    utils: np.ndarray,
    weight_quants: np.ndarray,
    kv_dtypes: np.ndarray,
    metric: str,
    bands: Bands | None = None,
    confidence: float | None = None,
) -> np.ndarray:
    """Per candidate, exp(q) of ``metric``'s band, q its one-sided ``confidence``-quantile of
    ln(measured / predicted) (``LogBand.quantile``): the measured value stays at or below
    prediction x factor with probability ``confidence``; None: exp(hi), the upper edge of the
    table's central band. ``modes`` 0 agg / 1 disagg, quant and KV codes as in
    ``CandidateArrays``."""
    level = (bands or packaged_bands()).table.level
    names = [n for n, _ in LOAD_BUCKETS]
    edge = {
        n: u for n, u in zip(names, (0.0, 0.5, 0.9), strict=True)
    }  # a utilisation inside each bucket
    bucket = np.atleast_1d(load_bucket_index(utils))
    combos = np.stack(
        [
            np.asarray(modes, int),
            bucket,
            np.asarray(weight_quants, int),
            np.asarray(kv_dtypes, int),
        ],
        axis=1,
    )
    # one small integer per row (each column < 64), so the unique is a 1-D sort
    code = ((combos[:, 0] * 64 + combos[:, 1]) * 64 + combos[:, 2]) * 64 + combos[:, 3]
    _, first, inverse = np.unique(code, return_index=True, return_inverse=True)
    uniq = combos[first]
    picked = [
        candidate_bands(m, gpu, engine, int(mode), edge[names[b]], int(q), int(kv), bands)[metric]
        for mode, b, q, kv in uniq
    ]
    factors = np.exp(
        [band.hi if confidence is None else band.quantile(confidence, level) for band in picked]
    )
    return np.asarray(factors[np.ravel(inverse)])
