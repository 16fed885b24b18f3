"""Fit the FP4 GEMM parameter set of one GPU to AIConfigurator's TensorRT-LLM table and add it to
the GPU's fitted file (``kernels_db/fitted/<gpu>.yaml``); fit and report the fused-MoE FP4 set
(``MOE_NOT_SHIPPED``):

    python -m kernels_db.tools.fp4_fit --aic-data DIR --gpu b200_sxm --fitted kernels_db/fitted

DIR is AIConfigurator's ``aic-core/src/aiconfigurator_core/systems/data`` folder (read at
``<gpu>/GEMM_TABLE`` and ``<gpu>/MOE_TABLE``). The tables hold tens of thousands of FP4 rows, far
more than the bf16 / fp8 samples the rest of the file is fitted to (``planner calibrate fit``), so
a seeded sample of ``--rows`` rows per table is fitted (``kernels_db.fit``: the same model, bounds
and loss as every other family) and the rest of the table is the held-out check, beside a k-fold
refit that holds out whole shapes. ``planner calibrate fit`` writes the file anew: run this
after it.

Which rows: GEMM ``gemm_dtype`` nvfp4 (ModelOpt NVFP4: e2m1 weights and activations, e4m3 scales
per 16 values); MoE ``moe_dtype`` in ``MOE_DTYPES`` under ``balanced`` routing (the planner prices
the busiest expert-parallel rank as a balanced layer, ``kernels_db.moe_load``), the gated CUTLASS
kernels (not TensorRT-LLM's non-gated and min-latency variants, as ``kernels_db.moe_load``). A
developer tool beside the runtime: ``kernels_db.fitted`` reads the file it writes.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import numpy as np
import pandas as pd
import yaml

from hardware.catalog import get_gpu
from hardware.errors import PlannerInputError
from hardware.spec import GpuSpec
from kernels_db import fitted, paths
from kernels_db.aiconfigurator import MS_TO_S, read_parquet
from kernels_db.fit import fit_error, fit_roofline_family
from kernels_db.fitted import FitError, FittedTo, PartFit, RooflineFamilyFit
from kernels_db.harness import measured_cols
from kernels_db.lookup import KernelDB
from kernels_db.tables import KernelTable, table_from_frame
from planner.safe_files import write_new_file

SOURCE_REPO: Final[str] = "github:ai-dynamo/aiconfigurator"
SOURCE_ROOT: Final[str] = "aic-core/src/aiconfigurator_core/systems/data"
SOURCE_COMMIT: Final[str] = "095f58a51c4ca8e61b66ec108d86f223f8d559ce"
"""The AIConfigurator commit the shipped FP4 sets were fitted at (``--commit``)."""
GEMM_TABLE: Final[str] = "gemm/trtllm/1.3.0rc20/gemm_perf.parquet"
MOE_TABLE: Final[str] = "moe/trtllm/1.3.0rc20/moe_perf.parquet"
FP4: Final[str] = "fp4"
"""The planner's dtype name of both FP4 formats (``planner.model.quantization.PRICING_DTYPE``)."""
GEMM_DTYPES: Final[tuple[str, ...]] = ("nvfp4",)
MOE_DTYPES: Final[tuple[str, ...]] = ("nvfp4",)
"""MoE rows fitted: NVFP4 (weights and activations in FP4). The MXFP4 rows (``w4a16_mxfp4``:
16-bit activations; ``w4a8_mxfp4_mxfp8``: MXFP8 activations; gpt-oss) are priced with the fit
and reported apart (``mxfp4_check``): the planner has one FP4 dtype, and 2,160 balanced MXFP4
rows against 13,986 NVFP4 ones would not move a joint fit."""
MXFP4_DTYPES: Final[tuple[str, ...]] = ("w4a16_mxfp4", "w4a8_mxfp4_mxfp8")
MOE_NOT_SHIPPED: Final[str] = (
    "The fused-MoE fit is reported, not written: on B200 it prices its own table at a median 23% "
    "(large token counts at wide EP up to 2.7x too fast: the table times work that grows with "
    "all tokens on every rank, which the per-rank grouped-GEMM model lacks) and the table times "
    "routing and quantization that the planner prices apart (``opgraph.moe_aux_ops``); end to end "
    "it raised the B200 NVFP4 TPOT error from 18% to 73% (TensorRT-LLM). FP4 expert GEMMs borrow "
    "the fitted FP4 GEMM (``fitted.BORROW``)."
)
FP4_NOTE: Final[str] = (
    "The gemm fp4 set is written by python -m kernels_db.tools.fp4_fit (its parts entry says on "
    "what); planner calibrate fit rewrites this file without it: run fp4_fit after it."
)
ROUTING: Final[str] = "balanced"
OTHER_KERNELS: Final[str] = "nongated|min_latency"
DEFAULT_ROWS: Final[int] = 3000
FOLDS: Final[int] = 5
SEED: Final[int] = 0
SHAPE_KEYS: Final[dict[str, tuple[str, ...]]] = {
    "gemm": ("n", "k"),
    "moe": ("hidden", "inter", "topk", "experts"),
}
"""Key columns that make one shape, the unit the k-fold refit holds out."""


def source_of(gpu: str, table: str, commit: str) -> str:
    """The ``source`` string of a row of ``<gpu>/<table>`` (``kernels_db.harness`` reads the
    ``/gemm/trtllm/<version>/`` part)."""
    return f"{SOURCE_REPO} {SOURCE_ROOT}/{gpu}/{table} @{commit}"


def _positive(df: pd.DataFrame, cols: list[str], path: Path) -> None:
    v = df[cols].to_numpy(dtype=float)
    if not np.isfinite(v).all() or (v <= 0).any():
        raise PlannerInputError(str(path), "sizes and latency (ms) must be positive and finite")


def gemm_frame(raw: pd.DataFrame, path: Path, source: str) -> pd.DataFrame:
    """The FP4 rows of a GEMM table in our schema (``schema.columns('gemm')`` + source)."""
    need = {"gemm_dtype", "m", "n", "k", "latency"}
    if not need <= set(raw.columns):
        raise PlannerInputError(str(path), f"needs columns {', '.join(sorted(need))}")
    df = raw[raw["gemm_dtype"].astype(str).isin(GEMM_DTYPES)]
    _positive(df, ["m", "n", "k", "latency"], path)
    return pd.DataFrame(
        {
            "m": df["m"],
            "n": df["n"],
            "k": df["k"],
            "dtype": FP4,
            "latency_s": df["latency"].astype(float) * MS_TO_S,
            "source": source,
        }
    ).reset_index(drop=True)


def moe_frame(raw: pd.DataFrame, path: Path, source: str, dtypes: Sequence[str]) -> pd.DataFrame:
    """The balanced, gated rows of ``dtypes`` of a fused-MoE table in our schema, with the
    table's ``moe_dtype`` kept as ``variant``."""
    need = {
        "moe_dtype",
        "num_tokens",
        "hidden_size",
        "inter_size",
        "topk",
        "num_experts",
        "moe_tp_size",
        "moe_ep_size",
        "distribution",
        "latency",
    }
    if not need <= set(raw.columns):
        raise PlannerInputError(str(path), f"needs columns {', '.join(sorted(need))}")
    df = raw[raw["moe_dtype"].astype(str).isin(dtypes) & (raw["distribution"] == ROUTING)]
    if "kernel_source" in df.columns:
        df = df[~df["kernel_source"].astype(str).str.contains(OTHER_KERNELS)]
    sizes = ["num_tokens", "hidden_size", "inter_size", "topk", "num_experts"]
    _positive(df, [*sizes, "moe_tp_size", "moe_ep_size", "latency"], path)
    df = df[
        (df["inter_size"] % df["moe_tp_size"] == 0) & (df["num_experts"] % df["moe_ep_size"] == 0)
    ]
    return pd.DataFrame(
        {
            "tokens": df["num_tokens"],
            "hidden": df["hidden_size"],
            "inter": df["inter_size"] // df["moe_tp_size"],
            "topk": df["topk"],
            "experts": df["num_experts"],
            "ep": df["moe_ep_size"],
            "dtype": FP4,
            "latency_s": df["latency"].astype(float) * MS_TO_S,
            "source": source,
            "variant": df["moe_dtype"].astype(str),
        }
    ).reset_index(drop=True)


def sample(n_rows: int, size: int, seed: int = SEED) -> np.ndarray:
    """Mask of a seeded sample of ``size`` of ``n_rows`` rows (all when fewer)."""
    mask = np.zeros(n_rows, dtype=bool)
    pick = np.random.default_rng(seed).permutation(n_rows)[: min(size, n_rows)]
    mask[pick] = True
    return mask


def shape_folds(df: pd.DataFrame, op: str, folds: int = FOLDS, seed: int = SEED) -> np.ndarray:
    """Fold index of each row: its shape's (``SHAPE_KEYS``) seeded assignment to ``folds`` (as
    many folds as shapes when fewer; at least two shapes)."""
    shape = df[list(SHAPE_KEYS[op])].astype(str).agg("x".join, axis=1)
    names = np.array(sorted(shape.unique()))
    if names.size < 2:
        raise PlannerInputError("--aic-data", f"{op}: {names.size} shape(s); held-out needs 2")
    folds = min(folds, names.size)
    order = np.random.default_rng(seed).permutation(len(names))
    fold_of = dict(zip(names[order], np.arange(len(names)) % folds, strict=True))
    return shape.map(fold_of).to_numpy(dtype=int)


def _table(df: pd.DataFrame, op: str, gpu: str, name: str) -> KernelTable:
    return table_from_frame(df, op, gpu, name)


def priced(fam: RooflineFamilyFit, table: KernelTable, spec: GpuSpec) -> np.ndarray:
    """Seconds of every row of ``table`` under ``fam``'s FP4 set, priced as measured."""
    db = KernelDB(spec, {}, _gpu_with(spec, table.op, fam))
    seconds, _, _ = db.model(table.op, measured_cols(table, spec))
    return np.broadcast_to(seconds, (len(table),)).astype(float)


def _gpu_with(spec: GpuSpec, op: str, fam: RooflineFamilyFit) -> fitted.FittedGpu:
    return fitted.FittedGpu(gpu=spec.key, date="", command="", spec_used={}, families={op: fam})


def fit_part(
    df: pd.DataFrame, op: str, spec: GpuSpec, rows: int, sources: tuple[str, ...], command: str
) -> tuple[RooflineFamilyFit, PartFit]:
    """The FP4 family fit on a seeded sample of ``rows`` of ``df`` and what it was fitted to,
    with its error on the other rows and on k-fold held-out shapes."""
    name = Path(sources[0].split(" @")[0]).name
    full = _table(df, op, spec.key, name)
    chosen = sample(len(df), rows)
    fam = fit_roofline_family(_table(df[chosen], op, spec.key, name), spec, sources)
    pred = priced(fam, full, spec)
    heldout = np.full(len(df), np.nan)
    fold = shape_folds(df, op)
    for f in range(int(fold.max()) + 1):
        test = fold == f
        sub = fit_roofline_family(_table(df[chosen & ~test], op, spec.key, name), spec, sources)
        heldout[test] = priced(sub, full.subset(test), spec)
    part = PartFit(
        command=command,
        fitted_to=FittedTo(files=(name,), rows=int(chosen.sum()), sources=sources),
        fit_error=fam.fit_error,
        heldout_rows_error=fit_error(pred[~chosen], full.latency_s[~chosen]),
        heldout_shapes_error=fit_error(heldout, full.latency_s),
    )
    return fam, part


def mxfp4_check(fam: RooflineFamilyFit, df: pd.DataFrame, spec: GpuSpec) -> dict[str, FitError]:
    """Error of the NVFP4 MoE set on each MXFP4 variant's rows (``MOE_DTYPES``)."""
    out = {}
    for variant in MXFP4_DTYPES:
        rows = df[df["variant"] == variant]
        if len(rows):
            table = _table(rows, "moe", spec.key, variant)
            out[variant] = fit_error(priced(fam, table, spec), table.latency_s)
    return out


def merged(
    base: fitted.FittedGpu, op: str, fam: RooflineFamilyFit, part: PartFit
) -> fitted.FittedGpu:
    """``base`` with ``fam``'s FP4 set added to family ``op`` (a new family when absent)."""
    old = base.families.get(op)
    if old is None:
        new = fam.model_copy(update={"parts": {FP4: part}})
    else:
        new = old.model_copy(
            update={
                "params": {**old.params, FP4: fam.params[FP4]},
                "parts": {**old.parts, FP4: part},
            }
        )
    return base.model_copy(update={"families": {**base.families, op: new}})


def run(root: Path, gpu: str, fitted_dir: Path, rows: int, commit: str) -> tuple[Path, dict]:
    """Fit the FP4 sets of ``gpu``, rewrite ``<fitted_dir>/<gpu>.yaml`` with the GEMM one; returns
    the path and the figures to report (the MoE fit's among them)."""
    spec = get_gpu(gpu)
    base = fitted.load(spec.key, fitted_dir)
    if base is None:
        raise PlannerInputError("--fitted", f"no {spec.key}.yaml in {fitted_dir}; fit it first")
    where = "" if fitted_dir == paths.FITTED_DIR else f" --fitted {fitted_dir}"
    command = (
        f"python -m kernels_db.tools.fp4_fit --aic-data DIR --gpu {spec.key}{where} --rows {rows}"
    )
    report: dict[str, object] = {}
    out = base
    gemm_path = root / spec.key / GEMM_TABLE
    gemm_src = source_of(spec.key, GEMM_TABLE, commit)
    gemm_df = gemm_frame(read_parquet(gemm_path, "--aic-data"), gemm_path, gemm_src)
    fam, part = fit_part(gemm_df, "gemm", spec, rows, (gemm_src,), command)
    out = merged(out, "gemm", fam, part)
    report["gemm"] = part.model_dump(exclude={"command", "fitted_to"})
    moe_path = root / spec.key / MOE_TABLE
    moe_src = source_of(spec.key, MOE_TABLE, commit)
    raw = read_parquet(moe_path, "--aic-data")
    moe_df = moe_frame(raw, moe_path, moe_src, MOE_DTYPES)
    fam, part = fit_part(moe_df.drop(columns="variant"), "moe", spec, rows, (moe_src,), command)
    # reported, not written: see MOE_NOT_SHIPPED
    report["moe_not_shipped"] = part.model_dump(exclude={"command", "fitted_to"})
    mx = moe_frame(raw, moe_path, moe_src, MXFP4_DTYPES)
    report["moe_mxfp4_priced_by_nvfp4_fit"] = {
        k: v.model_dump() for k, v in mxfp4_check(fam, mx, spec).items()
    }
    if FP4_NOTE not in out.notes:
        out = out.model_copy(update={"notes": f"{out.notes} {FP4_NOTE}".strip()})
    path = paths.fitted_path(spec.key, fitted_dir)
    text = yaml.safe_dump(out.model_dump(mode="json", exclude_none=True), sort_keys=False)
    written = write_new_file(path, text.encode(), True, "--fitted")
    fitted.load.cache_clear()  # the file read above has changed
    return written, report


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m kernels_db.tools.fp4_fit --aic-data DIR --gpu GPU [--fitted DIR]``."""
    ap = argparse.ArgumentParser(prog="python -m kernels_db.tools.fp4_fit", description=__doc__)
    ap.add_argument(
        "--aic-data", required=True, type=Path, help="AIConfigurator systems/data folder"
    )
    ap.add_argument("--gpu", default="b200_sxm", help="GPU key (default: b200_sxm)")
    ap.add_argument(
        "--fitted",
        type=Path,
        default=paths.FITTED_DIR,
        help="folder of <gpu>.yaml to add the FP4 sets to (default: the bundled kernels_db/fitted)",
    )
    ap.add_argument(
        "--rows",
        type=int,
        default=DEFAULT_ROWS,
        help=f"rows fitted per table (default: {DEFAULT_ROWS})",
    )
    ap.add_argument("--commit", default=SOURCE_COMMIT, help="AIConfigurator commit DIR is at")
    args = ap.parse_args(argv)
    try:
        path, report = run(args.aic_data, args.gpu, args.fitted, args.rows, args.commit)
    except PlannerInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(yaml.safe_dump({"written": str(path), **report}, sort_keys=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
