"""Fit the dynamic per-tensor FP8 activation-scale pass (``kernels_db.fp8_scale``) to
AIConfigurator's measured ``compute_scale`` step, and the block-scaled FP8 GEMM's compute share,
and write ``kernels_db/fp8_scale.yaml``:

    python -m kernels_db.tools.fp8_scale_fit --aic-data DIR --out kernels_db/fp8_scale.yaml

A developer tool beside the runtime: ``kernels_db.fp8_scale`` reads the file it writes and never
imports it.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

import numpy as np
import pandas as pd
import yaml
from scipy.optimize import least_squares

from hardware.catalog import get_gpu
from hardware.errors import PlannerInputError
from hardware.spec import GpuSpec
from kernels_db import costs, fitted
from kernels_db.aiconfigurator import read_parquet
from kernels_db.fp8_scale import BLOCK_BOUNDS, PARAM_BOUNDS, ScalePass, seconds
from planner.safe_files import write_new_file

AIC_TABLE: Final[str] = "quantize/trtllm/1.3.0rc20/computescale_perf.parquet"
"""Path of the measured table under AIConfigurator's ``systems/data/<gpu>/`` folder."""
AIC_GEMM_TABLE: Final[str] = "gemm/trtllm/1.3.0rc20/gemm_perf.parquet"
"""Its GEMM table, whose ``fp8_block`` rows fit ``block_compute_share``."""
ROBUST_SCALE: Final[float] = 0.1  # soft-L1 on log time, as the kernel fit (kernels_db.fit)
COMMAND: Final[str] = (
    "python -m kernels_db.tools.fp8_scale_fit --aic-data DIR --out kernels_db/fp8_scale.yaml"
)


def fit(m: np.ndarray, k: np.ndarray, latency_s: np.ndarray, spec: GpuSpec) -> ScalePass:
    """Least-squares constants (log time, soft-L1, within ``PARAM_BOUNDS``) of measured passes."""
    keep = np.asarray(latency_s) > 0.0  # the collector clips dynamic - static at 0
    if not keep.any():
        raise PlannerInputError("--aic-data", f"no compute_scale row of '{spec.key}' with time")
    m, k, t = np.asarray(m, float)[keep], np.asarray(k, float)[keep], np.asarray(latency_s)[keep]
    lo = np.log([b[0] for b in PARAM_BOUNDS.values()])
    hi = np.log([b[1] for b in PARAM_BOUNDS.values()])

    def resid(x: np.ndarray) -> np.ndarray:
        sp = ScalePass.model_construct(
            fixed_s=math.exp(x[0]), memory_eff=math.exp(x[1]), cache_speedup=math.exp(x[2])
        )
        return np.log(seconds(m, k, spec, sp)) - np.log(t)

    x0 = np.log([5e-6, 0.5, 2.0])
    res = least_squares(resid, x0, bounds=(lo, hi), loss="soft_l1", f_scale=ROBUST_SCALE)
    v = np.exp(res.x)
    return ScalePass(
        fixed_s=float(f"{v[0]:.4g}"),
        memory_eff=float(f"{v[1]:.4g}"),
        cache_speedup=float(f"{v[2]:.4g}"),
        rows=int(keep.sum()),
    )


def fit_block(
    m: np.ndarray, n: np.ndarray, k: np.ndarray, latency_s: np.ndarray, spec: GpuSpec
) -> float:
    """``block_compute_share`` of measured block-scaled FP8 GEMMs against the GPU's fitted
    per-tensor FP8 GEMM (``kernels_db/fitted/<gpu>.yaml``, serving form: no harness columns):
    the share of its compute rate that prices them best (log time, soft-L1)."""
    gpu_fit = fitted.load(spec.key)
    if gpu_fit is None:
        raise PlannerInputError("--gpu", f"no fitted kernel file for '{spec.key}'")
    keep = np.asarray(latency_s) > 0.0  # as ``fit``: a row of no time has no log residual
    if not keep.any():
        raise PlannerInputError("--aic-data", f"no fp8_block GEMM row of '{spec.key}' with time")
    m, n, k = (np.asarray(x, float)[keep] for x in (m, n, k))
    latency_s = np.asarray(latency_s, float)[keep]
    prm = gpu_fit.families["gemm"].params["fp8"]
    p, bw = prm.as_array(), spec.hbm_bandwidth_bytes_per_s
    cols = {"m": m, "n": n, "k": k, "dtype": np.full(len(m), "fp8")}
    cnt = costs.counts("gemm", cols, spec)

    def resid(x: np.ndarray) -> np.ndarray:
        c = dataclasses.replace(cnt, peak_flops_per_s=cnt.peak_flops_per_s * math.exp(x[0]))
        return np.log(costs.model_time(c, p, bw, prm.pad_rows)) - np.log(latency_s)

    lo, hi = math.log(BLOCK_BOUNDS[0]), math.log(BLOCK_BOUNDS[1])
    res = least_squares(
        resid, [math.log(0.7)], bounds=([lo], [hi]), loss="soft_l1", f_scale=ROBUST_SCALE
    )
    return float(f"{math.exp(res.x[0]):.4g}")


def _checked(path: Path, df: object, need: set[str], sizes: list[str]) -> np.ndarray:
    """``sizes`` + latency columns of ``df`` as floats: positive sizes, finite latency >= 0."""
    assert isinstance(df, pd.DataFrame)
    if not need <= set(df.columns):
        raise PlannerInputError(f"{path}", f"needs columns {', '.join(sorted(need))}")
    v = df[[*sizes, "latency"]].to_numpy(dtype=float)
    if not np.isfinite(v).all() or (v[:, :-1] <= 0).any() or (v[:, -1] < 0).any():
        raise PlannerInputError(f"{path}", "sizes must be positive and latency (ms) >= 0, finite")
    return v


def read_aic(root: Path, gpu: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(m, k, seconds) of ``<root>/<gpu>/AIC_TABLE`` (``compute_scale`` rows, fp8)."""
    path = root / gpu / AIC_TABLE
    df = read_parquet(path, "--aic-data")
    need = {"m", "k", "latency", "op_name", "quant_dtype"}
    if need <= set(df.columns):  # type: ignore[attr-defined]
        df = df[(df["op_name"] == "compute_scale") & (df["quant_dtype"] == "fp8")]  # type: ignore[index]
    v = _checked(path, df, need, ["m", "k"])
    return v[:, 0], v[:, 1], v[:, 2] * 1e-3


def read_aic_block(root: Path, gpu: str) -> tuple[np.ndarray, ...]:
    """(m, n, k, seconds) of the ``fp8_block`` rows of ``<root>/<gpu>/AIC_GEMM_TABLE``."""
    path = root / gpu / AIC_GEMM_TABLE
    df = read_parquet(path, "--aic-data")
    need = {"m", "n", "k", "latency", "gemm_dtype"}
    if need <= set(df.columns):  # type: ignore[attr-defined]
        df = df[df["gemm_dtype"] == "fp8_block"]  # type: ignore[index]
    v = _checked(path, df, need, ["m", "n", "k"])
    return v[:, 0], v[:, 1], v[:, 2], v[:, 3] * 1e-3


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m kernels_db.tools.fp8_scale_fit --aic-data DIR --out FILE [--gpus ...]``: fit
    and write."""
    ap = argparse.ArgumentParser(
        prog="python -m kernels_db.tools.fp8_scale_fit", description=__doc__
    )
    ap.add_argument(
        "--aic-data", required=True, type=Path, help="AIConfigurator systems/data folder"
    )
    ap.add_argument("--out", required=True, type=Path, help="YAML to write")
    ap.add_argument("--gpus", nargs="+", default=["b200_sxm", "h100_sxm", "h200_sxm", "l40s"])
    ap.add_argument("--force", action="store_true", help="overwrite --out")
    args = ap.parse_args(argv)
    try:
        out = write(args.aic_data, args.out, args.gpus, args.force)
    except PlannerInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {out}")
    return 0


def write(root: Path, out: Path, gpus: Sequence[str], force: bool) -> Path:
    """Fit ``gpus`` from ``root`` and write the constants file ``out`` (never over a file or a
    link without ``force``)."""
    if (out.exists() or out.is_symlink()) and not force:
        raise PlannerInputError("--out", f"{out} exists; pass --force to replace it")
    if out.is_symlink():
        raise PlannerInputError("--out", f"{out} is a symbolic link; not followed")
    fits: dict[str, dict[str, object]] = {}
    for name in gpus:
        spec = get_gpu(name)  # a known GPU: its key, not the flag's spelling, names the folder
        gpu = spec.key
        m, k, t = read_aic(root, gpu)
        bm, bn, bk, bt = read_aic_block(root, gpu)
        sp = fit(m, k, t, spec).model_copy(
            update={
                "source": f"systems/data/{gpu}/{AIC_TABLE} and {AIC_GEMM_TABLE} (fp8_block)",
                "block_compute_share": fit_block(bm, bn, bk, bt, spec),
                "block_rows": int(np.count_nonzero(np.asarray(bt) > 0.0)),  # the rows fitted
            }
        )
        fits[gpu] = sp.model_dump()
    doc: Mapping[str, object] = {
        "command": COMMAND,
        "source": "github:ai-dynamo/aiconfigurator aic-core/src/aiconfigurator_core/systems/data "
        "@095f58a51c4ca8e61b66ec108d86f223f8d559ce (compute_scale = dynamic - static FP8 "
        "quantization, collector/trtllm/collect_computescale.py)",
        "param_bounds": {k: list(v) for k, v in PARAM_BOUNDS.items()}
        | {"block_compute_share": list(BLOCK_BOUNDS)},
        "gpus": fits,
    }
    # through an exclusively created temporary file and a rename (no planted link at a fixed name)
    return write_new_file(out, yaml.safe_dump(dict(doc), sort_keys=False).encode(), True, "--out")


if __name__ == "__main__":
    raise SystemExit(main())
