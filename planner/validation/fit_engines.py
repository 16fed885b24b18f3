"""Fit the per-engine constants (``planner/engines/<name>/constants.yaml``) to measured rows.

    python -m planner.validation.fit_engines              # rewrite the packaged constants
    python -m planner.validation.fit_engines --check              # exit 1 if it would change
    python -m planner.validation.fit_engines --data my_rows.csv --out my_engines.yaml

Every fitted constant (``CONSTANTS``) has a physical meaning, a unit and bounds; the fit is a
coordinate search over a grid inside the bounds (``SWEEPS`` sweeps, constants in ``CONSTANTS``
order, each from its fixed ``start``). Each constant minimises the median |ln(predicted /
measured)| over the rows of the modes it acts on (per engine, or over every engine's rows for a
``shared`` one) of what it sets: TPOT for the step-time constants (a step is what TPOT measures),
TTFT for the others. A shared constant with a ``partner`` (the first-wave share, whose TTFT
each engine's request overhead trades against at low load) is searched jointly with it: for each
share, every engine takes its best overhead, and the share with the least loss over every engine's
rows wins (``joint_pick``). Each grid is priced in one call: the rows are repeated once per grid
value (or pair of values) with per-row constants (``e2e.with_constants``). The same two functions
serve the held-out folds (``planner.validation.holdout``) and a user's own rows: ``fit_constants``
(rows -> constants) and ``e2e.predict(e2e.with_constants(rows, constants))`` (rows, constants ->
predictions).
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from hardware.errors import PlannerInputError
from planner.engine_calibration import (
    CONSTANTS_FILE,
    ENGINE_DEFAULTS,
    EngineCalibration,
    Sourced,
    load_engines,
    load_file,
    packaged_text,
    split_text,
)
from planner.engines import get_engine
from planner.engines.registry import BUILTIN
from planner.safe_files import write_new_file
from planner.validation.e2e import predict, prepare, read_rows, with_constants

DEFAULT_DATA = (
    Path(__file__).resolve().parents[2]
    / ".."
    / "shared"
    / "validation"
    / "e2e"
    / "silicon_measured.csv"
)
FIT_COMMAND_SHORT = "python -m planner.validation.fit_engines"
FIT_COMMAND = f"{FIT_COMMAND_SHORT} --data ../shared/validation/e2e/silicon_measured.csv"
MISSING_LOSS = 5.0
"""|ln error| charged for a row the model cannot price (out of memory, saturated): a factor e^5."""
SWEEPS = 2
ALL = "*"
"""Key of a shared constant's losses (fitted on the rows of every engine together)."""


@dataclass(frozen=True)
class Constant:
    """One fitted engine constant: name, unit, meaning, bounds and the grid searched inside them."""

    name: str
    unit: str
    meaning: str
    bounds: tuple[float, float]
    grid: tuple[float, ...]
    start: float
    modes: tuple[str, ...]  # the modes whose rows it changes (others skip its pricing)
    metrics: tuple[str, ...] = ("ttft",)  # what it is fitted to: step-time constants to TPOT
    shared: bool = (
        False  # one value for every engine (a property of the benchmarks, not the engine)
    )
    held: bool = False
    """Held at ``start`` by the packaged fit (and its held-out folds): the campaign-held-out figures
    are better without fitting it. A user's own calibration (``planner calibrate e2e``,
    ``calibration_profile.GRID``) still searches ``grid``."""
    partner: str | None = None
    """A per-engine constant of the same modes and metric searched together with this shared one
    (``joint_pick``): alone, each stops the other at the first point where neither can move."""

    def __post_init__(self) -> None:
        lo, hi = self.bounds
        assert all(lo <= g <= hi for g in self.grid) and self.start in self.grid, self.name
        assert self.partner is None or self.shared, self.name


CONSTANTS: tuple[Constant, ...] = (
    Constant(
        "kernel_scale",
        "1",
        "achieved / priced kernel time of the engine's kernels (kernel quality "
        "beyond the fitted kernel tier; 1 = as priced)",
        (0.7, 1.5),
        (0.8, 0.9, 1.0, 1.1, 1.2),
        1.0,
        ("agg", "disagg"),
        ("tpot",),
        shared=True,
        held=True,
    ),
    Constant(
        "step_overhead_s",
        "s per step",
        "CPU time per engine step not hidden behind the GPU (scheduling, sampling, graph launch)",
        (0.0, 0.01),
        (0.0, 0.001, 0.002, 0.003, 0.004, 0.006),
        0.002,
        ("agg", "disagg"),
        ("tpot",),
        shared=False,
    ),
    Constant(
        "request_overhead_s",
        "s per request",
        "time to first token outside the engine steps, aggregated (HTTP, tokenization, admission)",
        (0.0, 0.3),
        (0.0, 0.01, 0.02, 0.03, 0.05, 0.08, 0.1, 0.15, 0.2),
        0.05,
        ("agg",),
    ),
    Constant(
        "disagg_request_overhead_s",
        "s per request",
        "the same for a disaggregated deployment "
        "(adds the router hop, remote-prefill dispatch, KV-transfer set-up)",
        (0.0, 0.3),
        (0.03, 0.06, 0.1, 0.13, 0.16, 0.2, 0.25),
        0.1,
        ("disagg",),
    ),
    Constant(
        "burst_fraction",
        "1 (share of requests)",
        "share 1/W of a closed-loop run's requests "
        "in its first lockstep wave (a run of W waves), aggregated campaigns",
        (0.0, 1.0),
        (0.0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0),
        0.1,
        ("agg",),
        shared=True,
        partner="request_overhead_s",
    ),
    Constant(
        "disagg_burst_fraction",
        "1 (share of requests)",
        "the same for the disaggregated campaigns (other benchmark harnesses)",
        (0.0, 1.0),
        (0.0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0),
        0.1,
        ("disagg",),
        shared=True,
        partner="disagg_request_overhead_s",
    ),
)
"""The fitted constants, in coordinate-search order (kernel and step time first: they set TPOT,
which the TTFT constants then build on). Each first-wave share is searched jointly with its
``partner`` request overhead since the fourteenth pass (2026-12-02): with grouped expert GEMMs
priced at the busiest EP rank's load, the coordinate search stopped at a share of 0.1 with overheads
(TensorRT-LLM 0.15 s, vLLM 0.08 s) that priced every engine's aggregated TTFT worse than the share
0.15 point (median |ln| 0.276 against 0.225 on the 1,430 aggregated rows), where neither constant
alone could move; jointly it finds 0.15 (TensorRT-LLM 0.08 s, vLLM 0.03 s). Held out, on the pricing
before that change, the joint search gives the same aggregated figures and disaggregated TTFT 25.40
-> 24.39 %, TPOT 14.19 -> 14.31 %. ``step_overhead_s`` is fitted per engine since the tenth pass
(2026-12-02): with FP8 GEMMs priced without the kernel harness's activation-scale pass and fused-MoE
layers as their kernels, a shared value fell to 1 ms in four of five folds and priced the dense vLLM
campaigns fast; per engine (SGLang and TensorRT-LLM 1 ms, vLLM 2 ms on all rows) held out agg TTFT
24.74 -> 24.88 %, agg TPOT 13.26 -> 12.69 %, disagg TTFT 29.80 -> 28.82 %, disagg TPOT 12.70 -> 9.89
% (on the kernel tier before, per engine was worse: 27.21 / 13.45 / 30.76 / 12.80 % against 27.18 /
12.96 / 28.64 / 10.14 % shared). Dropped because the campaign-held-out figures do not need them: a
CPU time per running request per step (fitted 1e-5 s shared; held out without it agg TTFT 30.7 vs
30.8 %, TPOT 15.3 vs 15.6 %, disagg TTFT 41.8 vs 42.0 %, TPOT 13.1 vs 12.1 %) and per-engine
lockstep constants (shared values: agg TTFT 30.8 vs 31.0 %, disagg TPOT 12.1 vs 20.1 % with the step
time per engine too, on an earlier kernel tier). Tried and not kept: one disaggregated request
overhead shared by the engines (held out disagg TTFT 45.6 vs 45.1 %, agg TTFT 27.5 vs 27.6 %;
2026-12-01, 1,618 rows). ``kernel_scale`` is held at 1 (``held``): the kernel tier is calibrated to
measured kernels, the full-data fit gives 1.0, and fitting it in the folds only adds a near-tie
(fifth pass, 1,588 rows: one fold's median |ln| TPOT loss 0.1291 at 0.9 against 0.1300 at 1.0 flips
it, and with it every engine's TPOT in that fold); held out, fitted vs held: agg TTFT 27.91 vs 27.57
%, agg TPOT 13.53 vs 12.47 %, disagg TTFT 43.23 vs 42.32 %, disagg TPOT 11.61 vs 9.53 %, rows off >
3x 190 vs 189. (In the third pass, 1,618 rows, holding it was mixed: agg TPOT 15.7 vs 16.6 % but
disagg TPOT 13.5 vs 12.5 %.)"""
BY_NAME: dict[str, Constant] = {c.name: c for c in CONSTANTS}
FITTED: tuple[Constant, ...] = tuple(c for c in CONSTANTS if not c.held)
"""The constants the packaged fit searches (``Constant.held`` ones keep their start)."""

Values = dict[str, dict[str, float]]
"""Fitted constants: backend -> constant name -> value."""


def _abs_log(pred: np.ndarray, meas: np.ndarray) -> np.ndarray:
    """|ln(pred / meas)| per row; ``MISSING_LOSS`` where a row has no finite answer."""
    with np.errstate(divide="ignore", invalid="ignore"):
        err = np.abs(np.log(pred / meas))
    return np.where(np.isfinite(err), err, MISSING_LOSS)


def _median_abs_log(pred: np.ndarray, meas: np.ndarray) -> float:
    err = _abs_log(pred, meas)
    return float(np.median(err)) if err.size else 0.0


def loss(pred: pd.DataFrame, metrics: tuple[str, ...] = ("ttft", "tpot")) -> float:
    """Sum over ``metrics`` of the median |ln(pred / measured)| of the rows."""
    return sum(
        _median_abs_log(
            pred[f"pred_{m}_ms"].to_numpy(float), pred[f"silicon_{m}_ms"].to_numpy(float)
        )
        for m in metrics
    )


def _grid_losses(
    rows: pd.DataFrame, values: Values, c: Constant, overrides: Overrides = None
) -> dict[str, list[float]]:
    """Loss of each backend at each grid value of ``c``, the other constants at ``values``
    (``overrides``: engines' constants replacing the packaged ones, ``e2e.predict``)."""
    sub = rows[rows["mode"].isin(c.modes)]
    copies = []
    for g, v in enumerate(c.grid):
        copies.append(
            with_constants(sub, {b: {**vals, c.name: v} for b, vals in values.items()}).assign(
                _grid=g
            )
        )
    pred = predict(pd.concat(copies, ignore_index=True), progress=False, overrides=overrides)
    out: dict[str, list[float]] = {}
    if c.shared:
        by_g = dict(tuple(pred.groupby("_grid")))
        return {ALL: [loss(by_g[g], c.metrics) if g in by_g else 0.0 for g in range(len(c.grid))]}
    for b, by_b in pred.groupby("backend"):
        by_g = dict(tuple(by_b.groupby("_grid")))
        out[str(b)] = [loss(by_g[g], c.metrics) if g in by_g else 0.0 for g in range(len(c.grid))]
    return out


def joint_pick(err: pd.DataFrame) -> tuple[int, dict[str, int]]:
    """The joint search's choice from per-row errors ``err`` (columns backend, i = the shared
    constant's grid index, j = the partner's, e = the row's loss): for each i every backend takes
    the j of its least median e, and the i whose rows so chosen have the least median e over every
    backend wins (ties: the lower index). Returns (i, backend -> j)."""
    per = err.groupby(["backend", "i", "j"])["e"].median()
    best: tuple[float, int, dict[str, int]] | None = None
    for i in sorted(set(err["i"])):
        pick = {
            str(b): int(g.idxmin()[2])
            for b, g in per.xs(i, level="i", drop_level=False).groupby(level="backend")
        }
        chosen = err[(err["i"] == i) & (err["j"] == err["backend"].map(pick))]
        total = float(np.median(chosen["e"]))
        if best is None or total < best[0]:
            best = (total, int(i), pick)
    assert best is not None, "no rows to search"
    return best[1], best[2]


def _joint_step(
    rows: pd.DataFrame, values: Values, c: Constant, overrides: Overrides = None
) -> None:
    """Set shared ``c`` and its per-engine partner in ``values`` by ``joint_pick`` over every
    pair of grid values (the rows of ``c``'s modes priced once per pair)."""
    assert c.partner is not None
    d = BY_NAME[c.partner]
    sub = rows[rows["mode"].isin(c.modes)]
    if sub.empty:
        return
    copies = [
        with_constants(
            sub, {b: {**vals, c.name: s, d.name: v} for b, vals in values.items()}
        ).assign(_i=i, _j=j)
        for i, s in enumerate(c.grid)
        for j, v in enumerate(d.grid)
    ]
    pred = predict(pd.concat(copies, ignore_index=True), progress=False, overrides=overrides)
    (metric,) = c.metrics
    err = pd.DataFrame(
        {
            "backend": pred["backend"].astype(str).to_numpy(),
            "i": pred["_i"].to_numpy(),
            "j": pred["_j"].to_numpy(),
            "e": _abs_log(
                pred[f"pred_{metric}_ms"].to_numpy(float),
                pred[f"silicon_{metric}_ms"].to_numpy(float),
            ),
        }
    )
    i, pick = joint_pick(err)
    for b in values:
        values[b][c.name] = c.grid[i]
        if b in pick:
            values[b][d.name] = d.grid[pick[b]]


def fit_constants(
    rows: pd.DataFrame, progress: bool = False, overrides: Overrides = None
) -> Values:
    """Coordinate search of every constant in ``CONSTANTS`` for each backend of prepared ``rows``
    (``e2e.prepare``); a constant whose modes have no rows of a backend keeps its ``start``;
    ``overrides``: engines' constants replacing the packaged ones (a profile's)."""
    values: Values = {
        str(b): {c.name: c.start for c in CONSTANTS} for b in sorted(set(rows["backend"]))
    }
    fitted = FITTED
    steps = SWEEPS * len(fitted)
    for n in range(steps):
        c = fitted[n % len(fitted)]
        if c.partner is not None:
            _joint_step(rows, values, c, overrides)
        else:
            for b, losses in _grid_losses(rows, values, c, overrides).items():
                for backend in values if b == ALL else (b,):
                    values[backend][c.name] = c.grid[int(np.argmin(losses))]
        if progress:
            sys.stderr.write(f"\rfit_engines: {n + 1}/{steps} coordinate searches")
    if progress:
        sys.stderr.write("\n")
    return values


def _source(c: Constant, backend: str, date: str) -> str:
    """One short source: what it is, what it was fitted to on which rows by which command, when
    (unit and bounds stand next to it; the history is in the fit log)."""
    if c.held:
        return (
            f"{c.meaning}; held at {c.start:g} by `{FIT_COMMAND_SHORT}` (held-out figures are "
            f"better unfitted; `planner calibrate e2e` fits it to your rows), {date}"
        )
    rows = "every engine's" if c.shared else f"the {backend}"
    modes = "+".join(c.modes)
    return (
        f"{c.meaning}; fitted to {'/'.join(c.metrics).upper()} on {rows} {modes} rows of "
        f"silicon_measured.csv by `{FIT_COMMAND_SHORT}`, {date}"
    )


HEADER = """\
# An engine's calibration of the serving model (planner/engine_calibration.py reads this file).
# GENERATED on {date} by
#   {command}
# from silicon_measured.csv (github:ai-dynamo/aiconfigurator
# aic-core/src/aiconfigurator_core/systems/silicon_sample.csv @095f58a5), duplicates dropped.
# Do not edit by hand: rerun that command after a change to the serving model or the data (a test
# checks that it reproduces this file; each write appends to lab/engines_fit_log.md).
# Fitted constants carry their unit and bounds (the fit searches inside them; loading checks
# them); engine defaults (max_*, kv_held_osl_fraction) come from each engine's documentation.
"""
DATE_LINE = re.compile(r"^# GENERATED on (\d{4}-\d{2}-\d{2}) by$", re.MULTILINE)


def _yaml_value(v: float) -> str:
    """A float YAML 1.1 reads as a float (PyYAML wants a dot in the mantissa: 3.0e-05)."""
    if v == int(v):
        return f"{float(v):.1f}"
    return f"{v:.1e}" if abs(v) < 1e-3 else repr(float(v))


def _default_line(name: str, d: Sourced) -> str:
    """An engine default copied from the loaded file: integers for the max_* settings."""
    value = str(int(d.value)) if name.startswith("max_") else _yaml_value(d.value)
    bounds = (
        f"bounds: [{_yaml_value(d.bounds[0])}, {_yaml_value(d.bounds[1])}], " if d.bounds else ""
    )
    src = d.source.replace('"', "'")
    return f'  {name}: {{value: {value}, {bounds}source: "{src}"}}'


def render(values: Values, engines: Mapping[str, EngineCalibration], date: str) -> str:
    """engines.yaml text for fitted ``values`` written on ``date`` (YYYY-MM-DD); engine defaults
    (``ENGINE_DEFAULTS``) copied from ``engines``."""
    lines = [HEADER.format(command=FIT_COMMAND, date=date).rstrip("\n")]
    for b in sorted(engines):
        lines.append(f"{b}:")
        for c in CONSTANTS:
            v = values.get(b, {}).get(c.name, c.start)
            lo, hi = c.bounds
            src = _source(c, b, date).replace('"', "'")
            lines.append(
                f'  {c.name}: {{value: {_yaml_value(v)}, unit: "{c.unit}", '
                f'bounds: [{_yaml_value(lo)}, {_yaml_value(hi)}], source: "{src}"}}'
            )
        lines.extend(_default_line(n, getattr(engines[b], n)) for n in ENGINE_DEFAULTS)
    return "\n".join(lines) + "\n"


Overrides = dict[str, EngineCalibration] | None
"""Engines' constants replacing the packaged ones in every prediction of the fit (a profile's)."""
PACKAGED_LOG = Path(__file__).resolve().parents[2] / "lab" / "engines_fit_log.md"
"""Fit log of the packaged constants (each built-in engine's constants.yaml)."""


def _current(path: Path | None) -> str | None:
    """Text of the engines file ``path`` (None: the packaged constants files), None if absent."""
    if path is None:
        return packaged_text(sorted(BUILTIN))
    return path.read_text() if path.is_file() else None


def written_date(path: Path | None) -> str | None:
    """The date in the header of an engines file that ``render`` wrote (None: the packaged
    constants files), else None."""
    text = _current(path)
    m = DATE_LINE.search(text) if text is not None else None
    return m.group(1) if m else None


def fit_log_entry(old: Values, new: Values, data: Path, date: str) -> str:
    """One entry of the fit log: when, the command, the data (sha256) and each changed value."""
    digest = hashlib.sha256(data.read_bytes()).hexdigest()[:16]
    changed = [
        f"- {b}.{name}: {old.get(b, {}).get(name, float('nan')):g} -> {v:g}"
        for b in sorted(new)
        for name, v in new[b].items()
        if old.get(b, {}).get(name) != v
    ]
    return (
        f"\n## {date}: `{FIT_COMMAND_SHORT} --data {data.name}`\n\n"
        f"Data: {data.name} (sha256 {digest}...).\n"
        + ("\n".join(changed) if changed else "No value changed.")
        + "\n"
    )


def fitted_values(engines: Mapping[str, EngineCalibration]) -> Values:
    """The fitted constants of loaded ``engines`` as ``Values``."""
    return {
        b: {c.name: float(getattr(e, c.name).value) for c in CONSTANTS} for b, e in engines.items()
    }


def fit_file(data: Path, progress: bool = True) -> Values:
    """``fit_constants`` on the rows of ``data`` (duplicates dropped, unmodellable rows skipped)."""
    df, _ = read_rows(data)
    return fit_constants(prepare(df).rows, progress)


def _old_values(out: Path | None) -> Values:
    """The fitted values in ``out`` before it is rewritten (none when absent or not an engines
    file), for the fit log."""
    if out is None:
        return fitted_values(load_engines())
    try:
        return fitted_values(load_file(out)) if out.is_file() else {}
    except (ValueError, TypeError, AttributeError, yaml.YAMLError):
        return {}


def fit_log_path(out: Path | None) -> Path:
    """The fit log next to an engines file: ``engines.yaml`` -> ``engines_fit_log.md`` (None:
    ``PACKAGED_LOG``)."""
    return PACKAGED_LOG if out is None else out.with_name(f"{out.stem}_fit_log.md")


def _append_log(out: Path | None, entry: str) -> None:
    """Append ``entry`` to the fit log of ``out`` (created with a title; never through a link)."""
    log = fit_log_path(out)
    if log.is_symlink():
        raise PlannerInputError("--out", f"{log} is a symbolic link; refusing to follow it")
    name = out.name if out is not None else "engines.yaml"
    head = log.read_text() if log.is_file() else f"# Fit log of {name}\n"
    write_new_file(log, (head + entry).encode(), force=True)


def _write(out: Path | None, text: str, force: bool) -> None:
    if out is None:  # the packaged files: each built-in engine's block into its own file
        for name, part in split_text(text).items():
            write_new_file(get_engine(name).file(CONSTANTS_FILE), part.encode(), force=True)
        return
    if out.is_symlink():
        raise PlannerInputError("--out", f"{out} is a symbolic link; refusing to follow it")
    if out.exists() and not force:
        raise PlannerInputError("--out", f"{out} exists; pass --force to overwrite it")
    write_new_file(out, text.encode(), force=True)  # temporary file + rename, no link followed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m planner.validation.fit_engines", description=__doc__.splitlines()[0]
    )
    ap.add_argument(
        "--data", type=Path, default=DEFAULT_DATA, help="CSV in the layout of silicon_measured.csv"
    )
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        help="engines file to write (default: the packaged constants.yaml of each engine)",
    )
    ap.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if --out differs from the fit"
    )
    ap.add_argument(
        "--force",
        action="store_true",
        help="overwrite an existing --out other than the packaged file",
    )
    args = ap.parse_args(argv)
    try:
        values, engines = fit_file(args.data), load_engines()
        if args.check:  # the fit date is the file's own: only the values are checked
            text = render(values, engines, written_date(args.out) or "")
            same = _current(args.out) == text
            where = args.out or "the packaged constants"
            sys.stderr.write(f"{where}: {'reproduced' if same else 'differs from the fit'}\n")
            return 0 if same else 1
        date = datetime.datetime.now(datetime.UTC).date().isoformat()
        old = _old_values(args.out)
        _write(args.out, render(values, engines, date), args.force)
        _append_log(args.out, fit_log_entry(old, values, args.data, date))
    except PlannerInputError as e:
        sys.stderr.write(f"error: {e}\n")
        return 2
    where = args.out or "the packaged constants"
    sys.stderr.write(f"wrote {where} and its fit log {fit_log_path(args.out).name}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
