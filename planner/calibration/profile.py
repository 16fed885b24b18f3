"""A user's calibration profile: the end-to-end engine constants fitted to their own results.

``planner calibrate e2e`` fits, per engine (and per GPU when the data cover several), the serving
model's constants (each engine's ``constants.yaml``) to the rows that
:mod:`planner.calibration.data` reads, and writes a profile (YAML) that records the rows used,
the fit residuals before and after, and the data's provenance. ``--calibration PROFILE`` on
``estimate``, ``plan``, ``simulate`` and ``validate e2e`` then replaces the packaged constants
(the request carries them: :class:`planner.engines.calibration.EngineConstants`), and outputs name
the profile.

The fit itself goes through one adapter, :func:`fit_constants` (rows -> constants); it uses the
packaged fitter's pieces (``planner.replay_e2e.fit``: its loss and grid, then a bounded
refinement), so another fitter can be plugged in at that one place.

With few rows fewer constants are fitted (:func:`constants_to_fit`, the rule is written into
the profile): the TPOT constants need distinct load points to be told apart, the lockstep share
needs several concurrencies.
"""

from __future__ import annotations

import hashlib
import math
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeAlias

import numpy as np
import pandas as pd
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from planner.calibration.data import LoadedData, Source, read_text
from planner.engines import engine_names
from planner.engines.calibration import (
    PACKAGED,
    EngineCalibration,
    EngineConstants,
    Sourced,
    load_engines,
)
from planner.errors import PlannerInputError
from planner.perf.batch import KV_DTYPES
from planner.replay_e2e import fit as fit_engines
from planner.replay_e2e.candidates import prepare
from planner.replay_e2e.launch import named_runs
from planner.replay_e2e.predict import predict
from planner.replay_e2e.stats import error_stats
from planner.uncertainty.bands import Bands, packaged_bands
from planner.uncertainty.profile_bands import MIN_ROWS, ModeBands, halves, mode_bands, profile_bands

FORMAT = "planner-calibration-profile/1"
BOUNDS: dict[str, tuple[float, float]] = {
    "kernel_scale": (0.5, 2.0),
    "step_overhead_s": (0.0, 0.02),
    "request_overhead_s": (0.0, 2.0),
    "disagg_request_overhead_s": (0.0, 2.0),
    "burst_fraction": (0.0, 1.0),
    "disagg_burst_fraction": (0.0, 1.0),
    "disagg_prefill_kernel_scale": (0.25, 4.0),
}
"""Range of each fitted constant: achieved kernel time 0.5-2x the priced one; 0-20 ms of CPU per
step and 0-200 us per running request per step; 0-2 s per request outside the steps (HTTP,
tokenization, admission; plus the router hop and KV set-up when disaggregated); the lockstep
share is a fraction. The packaged fit's grid (``fit_engines.GRID``) lies inside these ranges."""
TIERS: tuple[tuple[str, str, int], ...] = (
    ("kernel_scale", "all", 1),
    ("request_overhead_s", "agg", 1),
    ("disagg_request_overhead_s", "disagg", 1),
    ("step_overhead_s", "all", 3),
    ("burst_fraction", "agg", 4),
    ("disagg_burst_fraction", "disagg", 4),
)
"""(constant, rows it is fitted from, least distinct load points): a constant is fitted when the
rows of that mode hold at least that many distinct (model, GPU, mode, ISL, OSL, concurrency) points;
the others keep the packaged value."""
PREFILL_RULE_SHORT = (
    "disagg_prefill_kernel_scale follows kernel_scale: the prefill worker keeps its packaged "
    "kernel time"
)
RULE = (
    "fitted when the rows hold at least N distinct (model, GPU, mode, ISL, OSL, concurrency) load "
    "points: kernel_scale and the request overheads N=1, step_overhead_s N=3, the lockstep "
    "shares N=4 (of their mode, among rows that do not name their benchmark run's request "
    "count: a named run's share is known), and of those the set (none, the step-time "
    "constants, all) with the lowest 2-fold cross-validation loss on the rows; the rest keep "
    "the packaged value; " + PREFILL_RULE_SHORT
)
GRID_SWEEPS = 1
"""Sweeps of the grid stage (the packaged fit uses ``fit_engines.SWEEPS``; the refinement after it
moves each constant off the grid anyway)."""
ROBUST_SCALE = 0.1
"""Log error (about 10 %) beyond which a row's residual weighs less and less (Cauchy loss): rows the
model cannot follow do not drag the constants away from the rows it can."""
MAX_EVALS = 200
"""Most model evaluations of the refinement."""


RowRecord: TypeAlias = dict[str, str | int | float]
"""One fitted row of a profile: its load point, measurement and predictions before and after."""


class Residuals(BaseModel):
    """Median absolute percentage error of the rows, per mode (``None``: no rows of that mode)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    agg_ttft_median_ape_pct: float | None = Field(
        default=None, description="Aggregated TTFT median absolute % error; None without such rows."
    )
    agg_tpot_median_ape_pct: float | None = Field(
        default=None, description="Aggregated TPOT median absolute % error; None without such rows."
    )
    disagg_ttft_median_ape_pct: float | None = Field(
        default=None,
        description="Disaggregated TTFT median absolute % error; None without such rows.",
    )
    disagg_tpot_median_ape_pct: float | None = Field(
        default=None,
        description="Disaggregated TPOT median absolute % error; None without such rows.",
    )


class Fit(BaseModel):
    """The constants of one engine (optionally on one GPU) and how they were obtained."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    gpus: list[str] = Field(description="GPUs of the rows fitted.")
    rows_used: int = Field(ge=1, description="Measured rows the fit used.")
    load_points: int = Field(ge=1, description="Distinct load points among them.")
    fitted: list[str] = Field(description="Constants fitted to these rows.")
    kept_packaged: list[str] = Field(
        description="Constants the rows cannot determine, kept at the packaged values."
    )
    constants: dict[str, float] = Field(description="Every constant's value after the fit.")
    residuals_before: Residuals = Field(description="Errors with the packaged constants.")
    residuals_after: Residuals = Field(description="Errors with the fitted constants.")
    rows: list[RowRecord] = Field(
        default_factory=list, description="Per-row predictions before and after the fit."
    )


class EngineProfile(BaseModel):
    """One engine: its fit on every row, per GPU when the rows cover several, and its own bands
    per mode (``planner.uncertainty.profile_bands``; empty in a profile written before them)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    all_gpus: Fit = Field(description="The fit on the engine's rows of every GPU.")
    by_gpu: dict[str, Fit] = Field(
        default_factory=dict,
        description="GPU -> the fit on that GPU's rows alone (where they determine it).",
    )
    own_bands: dict[str, ModeBands] = Field(
        default_factory=dict,
        description="Mode -> bands from the profile's own out-of-sample residuals.",
    )


class DataProvenance(BaseModel):
    """The measured data a profile was fitted to."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    files: list[Source] = Field(
        default_factory=list,
        description="Every data file read: path, sha256, format, sidecar, rows taken.",
    )
    skipped_rows: dict[str, int] = Field(
        default_factory=dict, description="Rows not fitted, counted by reason."
    )


class Profile(BaseModel):
    """A calibration profile file."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    format: str = Field(description="Profile format version.")
    created_utc: str = Field(description="When the profile was written (UTC, ISO 8601).")
    rule: str = Field(
        description="Which constants are fitted from how many load points (the rest stay packaged)."
    )
    data: DataProvenance = Field(
        description="The measured data the profile was fitted to: files and skipped rows."
    )
    engines: dict[str, EngineProfile] = Field(description="Engine -> its fits.")


def prepared(rows: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, int]]:
    """e2e-prepared rows; rows that name their deployment's batch limit or KV dtype keep them."""
    prep = prepare(rows.reset_index(drop=True))
    out = prep.rows
    if "max_num_seqs" in out:
        given = pd.to_numeric(out["max_num_seqs"], errors="coerce")
        agg = (out["mode"] == "agg") & given.notna()
        out.loc[agg, "c_max_num_seqs"] = given[agg]
    if "kv_dtype" in out:
        kv = out["kv_dtype"].map({k: float(i) for i, k in enumerate(KV_DTYPES)})
        out.loc[kv.notna(), "c_kv_dtype"] = kv[kv.notna()]
    return out, dict(prep.skipped)


def load_points(rows: pd.DataFrame, mode: str = "all") -> int:
    """Distinct (model, GPU, mode, ISL, OSL, concurrency) points among ``rows`` (of ``mode``)."""
    sub = rows if mode == "all" else rows[rows["mode"] == mode]
    keys = ["model_path", "system", "mode", "isl", "osl", "c_concurrency"]
    return int(len(sub[keys].drop_duplicates()))


SHARES = ("burst_fraction", "disagg_burst_fraction")
"""The fitted lockstep shares: they price only rows that do not name their benchmark run (a named
run of P requests has the share N/P, ``planner.replay_e2e.launch.named_runs``)."""


def constants_to_fit(rows: pd.DataFrame) -> list[str]:
    """The constants the rows can determine (``TIERS``); the lockstep shares from the rows that do
    not name their benchmark run only."""
    unnamed = rows[named_runs(rows) == 0] if len(rows) else rows
    return [
        name
        for name, mode, least in TIERS
        if load_points(unnamed if name in SHARES else rows, mode) >= least
    ]


PREFILL = "disagg_prefill_kernel_scale"
"""Not fitted: it follows a fitted ``kernel_scale`` so that a disaggregated prefill worker keeps
the packaged kernel time. Disaggregated TPOT measures decode steps only, which say nothing of the
prefill worker's compute-bound kernels; with the prefill worker moved by the decode fit, held-out
disaggregated TTFT got worse (the self-calibration table in the README)."""
STEP_CONSTANTS = ("kernel_scale", "step_overhead_s")
"""The step-time constants (what TPOT measures); the others act on TTFT only."""
SELECT_EVALS = 60
"""Most model evaluations of each fold's refinement in ``select_constants``."""
MIN_SELECT_ROWS = 6
"""Fewest rows for the cross-validated choice of ``select_constants`` (3 per fold)."""


def select_constants(rows: pd.DataFrame, backend: str, base: EngineCalibration) -> list[str]:
    """The constants to fit on ``rows``: of the packaged values (none), the step-time constants
    only, or every constant ``constants_to_fit`` allows, the one whose 2-fold cross-validation
    loss on ``rows`` (alternate rows by mode and concurrency; ``fit_engines.loss`` of the other
    fold, each fold fitted by ``fit_constants`` with at most ``SELECT_EVALS`` evaluations) is
    lowest, the fewer constants on a tie. Rows
    that mix deployments the model prices differently (the disaggregated campaigns) then keep
    constants one half of them cannot teach the other."""
    names = constants_to_fit(rows)
    step = [n for n in names if n in STEP_CONSTANTS]
    choices: list[list[str]] = []
    for choice in ([], step, names):
        if choice not in choices:
            choices.append(choice)
    if len(rows) < MIN_SELECT_ROWS or len(choices) == 1:
        return names
    a, b = halves(rows)
    scores = []
    for choice in choices:
        score = 0.0
        for fit, test in ((a, b), (b, a)):
            use = [n for n in choice if n in constants_to_fit(fit)]
            values = fit_constants(fit, backend, use, base, max_evals=SELECT_EVALS) if use else {}
            score += _loss(test, backend, with_constants(base, values, "fit"))
        scores.append(score)
    return choices[int(np.argmin(scores))]


def with_constants(
    base: EngineCalibration, values: dict[str, float], source: str
) -> EngineCalibration:
    """``base`` with ``values`` replaced, each tagged ``source``. A fitted ``kernel_scale`` leaves
    a disaggregated prefill worker's kernel time as ``base`` prices it (its relative factor
    ``disagg_prefill_kernel_scale`` follows, ``PREFILL``)."""
    if "kernel_scale" in values and PREFILL not in values:
        lo, hi = BOUNDS[PREFILL]
        kept = base.kernel_scale.value * getattr(base, PREFILL).value / values["kernel_scale"]
        values = {**values, PREFILL: float(np.clip(kept, lo, hi))}
    return base.model_copy(
        update={
            k: Sourced(value=v, source=source, unit=getattr(base, k).unit, bounds=BOUNDS.get(k))
            for k, v in values.items()
        }
    )


def _loss(rows: pd.DataFrame, backend: str, cal: EngineCalibration) -> float:
    """The packaged fit's loss (``fit_engines.loss``: median |ln(pred/measured)| of TTFT + TPOT)."""
    return fit_engines.loss(predict(rows, progress=False, overrides={backend: cal}))


GRID: dict[str, tuple[float, ...]] = {c.name: c.grid for c in fit_engines.CONSTANTS}
"""The packaged fit's search grid of each constant (``fit_engines.CONSTANTS``)."""


def _log_errors(
    rows: pd.DataFrame, backend: str, base: EngineCalibration, progress: str = ""
) -> Callable[[dict[str, float]], np.ndarray]:
    """values -> log(pred/measured) of TTFT and of TPOT of every row (5 where unmodelled); with
    ``progress``, the count of evaluations goes to stderr."""
    count = [0]

    def errors(values: dict[str, float]) -> np.ndarray:
        count[0] += 1
        if progress and count[0] % 5 == 0:
            sys.stderr.write(f"\r{progress}: refinement, {count[0]} model evaluations")
        cal = with_constants(base, values, "fit")
        pred = predict(rows, progress=False, overrides={backend: cal})
        err = [
            np.log(pred[f"pred_{m}_ms"] / pred[f"silicon_{m}_ms"]).to_numpy(float)
            for m in ("ttft", "tpot")
        ]
        return np.nan_to_num(np.concatenate(err), nan=5.0, posinf=5.0, neginf=-5.0)

    return errors


def _grid_stage(
    rows: pd.DataFrame, backend: str, names: list[str], base: EngineCalibration
) -> dict[str, float]:
    """The packaged fitter's coordinate search (``fit_engines.GRID``, ``fit_engines.loss``)."""
    values = {k: float(getattr(base, k).value) for k in names}
    for _ in range(GRID_SWEEPS):
        for name in names:
            grid = sorted({*GRID[name], values[name]})
            scores = [
                _loss(rows, backend, with_constants(base, {**values, name: v}, "fit")) for v in grid
            ]
            values[name] = grid[int(np.argmin(scores))]
    return values


def fit_constants(
    rows: pd.DataFrame,
    backend: str,
    names: list[str],
    base: EngineCalibration,
    progress: str = "",
    max_evals: int = MAX_EVALS,
) -> dict[str, float]:
    """THE adapter (rows -> constants): ``names`` fitted on prepared ``rows`` of ``backend``, the
    other constants kept from ``base``. Grid stage: the packaged fitter's coordinate search; then
    a bounded robust least-squares refinement (Cauchy loss on the log errors of TTFT and TPOT)
    inside ``BOUNDS``; of the two, the one with the lower packaged loss (``fit_engines.loss``,
    median |log error|) is kept. ``progress``: a label for progress lines on stderr."""
    from scipy.optimize import least_squares

    if progress:
        sys.stderr.write(f"{progress}: grid stage over {', '.join(names)}\n")
    start = _grid_stage(rows, backend, names, base)
    lo = np.array([BOUNDS[n][0] for n in names])
    span = np.array([BOUNDS[n][1] - BOUNDS[n][0] for n in names])
    errors = _log_errors(rows, backend, base, progress)

    def unscale(x: np.ndarray) -> dict[str, float]:
        return dict(zip(names, (lo + np.clip(x, 0, 1) * span).tolist(), strict=True))

    x0 = np.clip((np.array([start[n] for n in names]) - lo) / span, 0, 1)
    res = least_squares(
        lambda x: errors(unscale(x)),
        x0,
        bounds=(0.0, 1.0),
        loss="cauchy",
        f_scale=ROBUST_SCALE,
        diff_step=1e-3,
        max_nfev=max_evals,
    )
    if progress:
        sys.stderr.write("\n")
    refined = unscale(res.x)
    scores = [_loss(rows, backend, with_constants(base, v, "fit")) for v in (start, refined)]
    return refined if scores[1] <= scores[0] else start


def residuals(pred: pd.DataFrame) -> Residuals:
    """Median APE per mode of predicted rows."""
    out: dict[str, float | None] = {}
    for mode, sub in pred.groupby("mode"):
        for m in ("ttft", "tpot"):
            ape = error_stats(
                sub[f"pred_{m}_ms"].to_numpy(float), sub[f"silicon_{m}_ms"].to_numpy(float)
            )["median_ape_pct"]
            out[f"{mode}_{m}_median_ape_pct"] = None if math.isnan(ape) else round(ape, 3)
    return Residuals(**out)


def _row_records(before: pd.DataFrame, after: pd.DataFrame) -> list[RowRecord]:
    keep = [
        "id",
        "model_path",
        "system",
        "mode",
        "isl",
        "osl",
        "c_concurrency",
        "silicon_ttft_ms",
        "silicon_tpot_ms",
    ]
    recs = before[[c for c in keep if c in before]].rename(columns={"c_concurrency": "concurrency"})
    recs = recs.assign(
        bench_requests=named_runs(before),  # the run's requests when it names them, else 0
        pred_before_ttft_ms=before["pred_ttft_ms"],
        pred_before_tpot_ms=before["pred_tpot_ms"],
        pred_after_ttft_ms=after["pred_ttft_ms"],
        pred_after_tpot_ms=after["pred_tpot_ms"],
    )
    return [
        {
            k: (
                round(float(v), 4)
                if isinstance(v, (float, np.floating))
                else int(v)
                if isinstance(v, np.integer)
                else str(v)
            )
            for k, v in r.items()
        }
        for r in recs.to_dict("records")
    ]


def fit_engine(rows: pd.DataFrame, backend: str, progress: str = "") -> Fit:
    """Fit one engine's constants on prepared ``rows`` (all of that engine)."""
    base = load_engines()[backend]
    names = select_constants(rows, backend, base)
    values = fit_constants(rows, backend, names, base, progress) if names else {}
    cal = with_constants(base, values, "fit")
    before = predict(rows, progress=False, overrides={backend: base})
    after = predict(rows, progress=False, overrides={backend: cal})
    constants = {k: round(float(getattr(cal, k).value), 9) for k in BOUNDS}
    return Fit(
        gpus=sorted(set(rows["system"].astype(str))),
        rows_used=len(rows),
        load_points=load_points(rows),
        fitted=names,
        kept_packaged=[k for k in BOUNDS if k not in names and k != PREFILL],
        constants=constants,
        residuals_before=residuals(before),
        residuals_after=residuals(after),
        rows=_row_records(before, after),
    )


def cross_fit(rows: pd.DataFrame, backend: str, progress: str = "") -> dict[str, ModeBands]:
    """Own bands of one engine's prepared ``rows`` (``planner.uncertainty.profile_bands``): each
    half's
    constants (as many as that half can fit) predict the other half. Modes with fewer than
    ``MIN_ROWS`` rows are not cross-fitted (their bands stay the table's)."""
    counts = rows["mode"].value_counts()
    if not (counts >= MIN_ROWS).any():
        return mode_bands(rows.assign(pred_ttft_ms=np.nan, pred_tpot_ms=np.nan))
    base = load_engines()[backend]
    a, b = halves(rows)
    held = []
    for n, (fit_half, test) in enumerate(((a, b), (b, a))):
        label = progress and f"{progress}: own bands, half {n + 1} of 2"
        names = select_constants(fit_half, backend, base)
        values = fit_constants(fit_half, backend, names, base, label) if names else {}
        cal = with_constants(base, values, "fit")
        held.append(predict(test, progress=False, overrides={backend: cal}))
    return mode_bands(pd.concat(held, ignore_index=True))


def calibrate(data: LoadedData, progress: bool = True) -> Profile:
    """The profile of every engine (and GPU) in ``data``."""
    rows, skipped = prepared(data.rows)
    if not len(rows):
        raise PlannerInputError("--data", f"no row can be modelled (skipped: {skipped})")
    engines: dict[str, EngineProfile] = {}
    for backend, sub in rows.groupby("backend"):
        sub = sub.reset_index(drop=True)
        if progress:
            sys.stderr.write(f"calibrate e2e: {backend}: {len(sub)} rows\n")
        by_gpu: dict[str, Fit] = {}
        gpus = sorted(set(sub["system"].astype(str)))
        label = f"calibrate e2e: {backend}" if progress else ""
        if len(gpus) > 1:
            for gpu in gpus:
                one = sub[sub["system"] == gpu].reset_index(drop=True)
                by_gpu[gpu] = fit_engine(one, str(backend), label and f"{label} on {gpu}")
        all_gpus = fit_engine(sub, str(backend), label and f"{label} on {', '.join(gpus)}")
        own = cross_fit(sub, str(backend), label)
        engines[str(backend)] = EngineProfile(all_gpus=all_gpus, by_gpu=by_gpu, own_bands=own)
    prov = DataProvenance(files=data.sources, skipped_rows={**data.skipped, **skipped})
    return Profile(
        format=FORMAT,
        created_utc=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        rule=RULE,
        data=prov,
        engines=engines,
    )


def profile_text(profile: Profile) -> str:
    """The profile as YAML with a header naming what it is."""
    head = (
        "# planner calibration profile: end-to-end engine constants fitted to measured rows\n"
        "# by `planner calibrate e2e`; use with --calibration on estimate/plan/simulate/"
        "validate e2e.\n"
    )
    return head + yaml.safe_dump(profile.model_dump(mode="json"), sort_keys=False, width=100)


def load_profile(path: Path) -> Profile:
    """Read and check a profile: its format, engines, and every constant finite and in range."""
    text = read_text(path, "a calibration profile", "--calibration")
    try:
        raw = yaml.safe_load(text)
        prof = Profile.model_validate(raw)
    except yaml.YAMLError as exc:
        raise PlannerInputError("--calibration", f"{path}: not YAML ({exc})") from None
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise PlannerInputError("--calibration", f"{path}: field '{loc}': {err['msg']}") from None
    if prof.format != FORMAT:
        raise PlannerInputError(
            "--calibration", f"{path}: format {prof.format!r}, expected {FORMAT}"
        )
    for backend, eng in prof.engines.items():
        if backend not in engine_names():
            raise PlannerInputError(
                "--calibration", f"{path}: engine {backend!r} not one of {list(engine_names())}"
            )
        for scope, fit in [("all_gpus", eng.all_gpus), *eng.by_gpu.items()]:
            _check_constants(path, f"engines.{backend}.{scope}", fit.constants)
    return prof


def _check_constants(path: Path, where: str, constants: dict[str, float]) -> None:
    for name, value in constants.items():
        if name not in BOUNDS:
            raise PlannerInputError(
                "--calibration",
                f"{path}: {where}.constants.{name}: unknown constant (allowed: {sorted(BOUNDS)})",
            )
        lo, hi = BOUNDS[name]
        if not (math.isfinite(value) and lo <= value <= hi):
            raise PlannerInputError(
                "--calibration",
                f"{path}: {where}.constants.{name} = {value} is outside [{lo:g}, {hi:g}]",
            )


def profile_engines(
    prof: Profile, label: str, gpu: str | None = None
) -> dict[str, EngineCalibration]:
    """Engine calibrations of ``prof``: the per-GPU fit for ``gpu`` when there is one, else the
    fit on all GPUs; each constant's source names the profile."""
    base = load_engines()
    out = {}
    for backend, eng in prof.engines.items():
        fit = eng.by_gpu.get(gpu, eng.all_gpus) if gpu else eng.all_gpus
        scope = f"on {gpu}" if gpu in eng.by_gpu else f"on {', '.join(fit.gpus)}"
        out[backend] = base[backend].model_copy(
            update={
                k: Sourced(
                    value=v,
                    source=f"{label}: {'fitted' if k in fit.fitted else 'packaged'} "
                    f"({fit.rows_used} rows {scope})",
                )
                for k, v in fit.constants.items()
            }
        )
    return out


def calibration_of(path: Path | None, gpu: str | None = None) -> tuple[EngineConstants, Bands]:
    """The engine constants and bands of the profile at ``path`` (``--calibration``), read once:
    its constants (the per-GPU fit for ``gpu`` where it has one) with its label, and its own bands
    over the packaged table; the packaged ones when ``path`` is None."""
    if path is None:
        return PACKAGED, packaged_bands()
    prof = load_profile(path)
    label = profile_label(path)
    consts = EngineConstants.of(profile_engines(prof, label, gpu), label)
    return consts, bands_of_profile(prof, label)


def activate(path: Path | None, gpu: str | None = None) -> EngineConstants:
    """The engine constants of ``calibration_of(path, gpu)``."""
    return calibration_of(path, gpu)[0]


def profile_label(path: Path) -> str:
    """How outputs name the profile at ``path``: its path and the start of its sha256."""
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    return f"calibration profile {path} (sha256 {digest})"


def bands_of_profile(prof: Profile, label: str) -> Bands:
    """The band table a plan or estimate with ``prof`` states: its own bands over the packaged
    table (``planner.uncertainty.profile_bands.profile_bands``)."""
    return profile_bands({e: eng.own_bands for e, eng in prof.engines.items()}, label)


def bands_for(path: Path | None) -> Bands:
    """The bands of ``calibration_of(path)``."""
    return calibration_of(path)[1]
