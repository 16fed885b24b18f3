"""Importer for AIConfigurator's public kernel-table layout (github:ai-dynamo/aiconfigurator).

Files are told apart by their columns, not their names. Their conventions, converted here:
latency in **milliseconds**; comm ``message_size`` counts **elements** (x bytes per element of
``nccl_dtype``/``allreduce_dtype``); generation attention has ``isl`` prompt tokens plus ``step``
generated ones, so the KV length is ``isl + step``. Rows of a dtype we do not model are skipped and
counted. NCCL tables hold the same collective in ``half`` and ``int8``; in bytes these are duplicate
keys, so the 16-bit rows are kept (what tensor-parallel all-reduce sends) and the others are
dropped.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import numpy as np
import pandas as pd

from hardware.catalog import get_gpu
from hardware.errors import PlannerInputError
from hardware.input_files import read_bytes, read_csv
from kernels_db.comm import scale_up_link
from kernels_db.tables import plain

MS_TO_S: Final[float] = 1e-3
DTYPE_NAMES: Final[dict[str, str]] = {
    "bfloat16": "bf16",
    "bf16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "fp16": "fp16",
    "fp8": "fp8",
    "fp8_block": "fp8",
    "float8_e4m3fn": "fp8",
    "nvfp4": "fp4",
    "int8": "int8",
    "float32": "fp32",
    "float": "fp32",
}
ELEMENT_BYTES: Final[dict[str, int]] = {"bf16": 2, "fp16": 2, "fp8": 1, "int8": 1, "fp32": 4}
COLLECTIVE_NAMES: Final[dict[str, str]] = {
    "all_reduce": "all_reduce",
    "all_gather": "all_gather",
    "reduce_scatter": "reduce_scatter",
    "alltoall": "all_to_all",
    "all_to_all": "all_to_all",
}
# kind -> columns that identify it
SIGNATURES: Final[dict[str, tuple[str, ...]]] = {
    "gemm": ("gemm_dtype", "m", "n", "k", "latency"),
    "attention": (
        "op_name",
        "batch_size",
        "isl",
        "num_heads",
        "num_key_value_heads",
        "head_dim",
        "kv_cache_dtype",
        "step",
        "latency",
    ),
    "nccl": ("op_name", "nccl_dtype", "num_gpus", "message_size", "latency"),
    "custom_allreduce": ("allreduce_dtype", "num_gpus", "message_size", "latency"),
}
_GPU_IN_PATH = re.compile(r"/data/([a-z0-9_]+)/")


@dataclass
class Imported:
    """Frames in our schema keyed by (gpu, op), plus what was skipped and why."""

    frames: dict[tuple[str, str], list[pd.DataFrame]] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)

    def add(self, gpu: str, op: str, df: pd.DataFrame) -> None:
        self.frames.setdefault((gpu, op), []).append(df)

    def skip(self, reason: str, count: int) -> None:
        if count:
            self.skipped[reason] = self.skipped.get(reason, 0) + count


def _link_of(gpu: str) -> str:
    """Scale-up link of a known GPU (L40S talks over PCIe); NVLink otherwise."""
    try:
        return scale_up_link(get_gpu(gpu))
    except PlannerInputError:
        return "nvlink"


def read_parquet(path: Path, flag: str) -> pd.DataFrame:
    """One of AIConfigurator's ``.parquet`` tables as a DataFrame: a regular, size-capped file
    (``hardware.input_files.read_bytes``), else one input error naming ``flag``."""
    data = read_bytes(path, "kernel CSV", flag)  # regular, size-capped (the kernel-table cap)
    try:
        return pd.read_parquet(io.BytesIO(data))
    except ImportError as exc:  # pyarrow: the [sweep] extra
        raise PlannerInputError(flag, "reading .parquet needs pyarrow") from exc
    except (ValueError, OSError) as exc:
        raise PlannerInputError(flag, f"{path} is not a readable parquet table") from exc


def detect_kind(cols: pd.Index) -> str | None:
    """Which AIConfigurator table these columns are, or None."""
    for kind, needed in SIGNATURES.items():
        if all(c in cols for c in needed):
            return kind
    return None


def _gpu_column(df: pd.DataFrame, default: str | None) -> pd.Series:
    if "source_path" in df.columns:
        found = df["source_path"].astype(str).str.extract(_GPU_IN_PATH)[0]
        if default is not None:
            found = found.fillna(default)
        if not found.isna().any():
            return found
    if default is None:
        raise PlannerInputError("--gpu", "the table does not say which GPU it measured; pass --gpu")
    return pd.Series(default, index=df.index)


def _source(df: pd.DataFrame, path: Path) -> pd.Series:
    if "source_path" in df.columns:
        return df["source_path"].astype(str)
    return pd.Series(str(path), index=df.index)


def _check_raw(df: pd.DataFrame, path: Path, kind: str) -> None:
    for col in SIGNATURES[kind]:
        vals = df[col]
        bad = vals.isna().to_numpy().copy()
        if col == "latency":
            num = pd.to_numeric(vals, errors="coerce").to_numpy(dtype=float)
            bad |= ~np.isfinite(num) | (num <= 0)
        if bad.any():
            i = int(bad.argmax())
            value = plain(vals.iloc[i])
            raise PlannerInputError(
                "kernel table", f"{path} row {i + 2}: bad '{col}' value {value!r}"
            )


def _dtype(series: pd.Series) -> pd.Series:
    return series.astype(str).str.lower().map(DTYPE_NAMES)


def _gemm(df: pd.DataFrame) -> dict[str, pd.DataFrame]:
    out = pd.DataFrame(
        {"m": df["m"], "n": df["n"], "k": df["k"], "dtype": _dtype(df["gemm_dtype"])}
    )
    return {"gemm": out}


def _attention(df: pd.DataFrame) -> dict[str, pd.DataFrame]:
    common = {
        "batch": df["batch_size"],
        "heads": df["num_heads"],
        "kv_heads": df["num_key_value_heads"],
        "head_dim": df["head_dim"],
        "kv_dtype": _dtype(df["kv_cache_dtype"]),
    }
    window = df["window_size"] if "window_size" in df.columns else 0
    dtype = _dtype(df["attn_dtype"]) if "attn_dtype" in df.columns else "bf16"
    prefill = pd.DataFrame(
        {**common, "seq": df["isl"], "prior": df["step"], "dtype": dtype, "window": window}
    )
    decode = pd.DataFrame({**common, "kv_len": df["isl"] + df["step"]})
    is_ctx = df["op_name"].astype(str).str.startswith("context").to_numpy()
    return {"attention_prefill": prefill[is_ctx], "attention_decode": decode[~is_ctx]}


def _comm(df: pd.DataFrame, dtype_col: str, collective: pd.Series) -> dict[str, pd.DataFrame]:
    dtype = _dtype(df[dtype_col])
    nbytes = df["message_size"] * dtype.map(ELEMENT_BYTES)
    out = pd.DataFrame(
        {
            "collective": collective,
            "n_gpus": df["num_gpus"],
            "bytes": nbytes,
            "link": "nvlink",
            "dtype": dtype,
        }
    )
    return {"comm": out}


def convert(df: pd.DataFrame, path: Path, gpu: str | None, result: Imported) -> None:
    """Convert one AIConfigurator frame into our schema and add it to ``result``."""
    kind = detect_kind(df.columns)
    if kind is None:
        raise PlannerInputError("kernel table", f"{path}: not an AIConfigurator table (row 1)")
    _check_raw(df, path, kind)
    if kind == "gemm":
        parts = _gemm(df)
    elif kind == "attention":
        parts = _attention(df)
    elif kind == "nccl":
        coll = df["op_name"].astype(str).map(COLLECTIVE_NAMES)
        parts = _comm(df, "nccl_dtype", coll)
    else:
        parts = _comm(df, "allreduce_dtype", pd.Series("custom_all_reduce", index=df.index))
    gpus = _gpu_column(df, gpu)
    lat = df["latency"].astype(float) * MS_TO_S
    for op, part in parts.items():
        if part.empty:
            continue
        if op == "comm":
            part = part.assign(link=gpus[part.index].map(_link_of))
        part = part.assign(
            latency_s=lat[part.index],
            kernel_source=df.get("kernel_source", kind),
            source=_source(df, path)[part.index],
            gpu=gpus[part.index],
            file=path.name,
            line=part.index + 2,
        )  # input CSV line, for messages
        known = part.notna().all(axis=1)
        result.skip(f"{path.name}: dtype or collective not modelled", int((~known).sum()))
        for g, rows in part[known].groupby("gpu", sort=True):
            result.add(str(g), op, rows.drop(columns="gpu"))


def _dedupe_comm(df: pd.DataFrame, result: Imported) -> pd.DataFrame:
    keys = ["collective", "n_gpus", "bytes", "link"]
    width = df["dtype"].map(ELEMENT_BYTES).fillna(0)
    order = (width != 2).astype(int)  # 16-bit rows first
    df = df.assign(_order=order).sort_values([*keys, "_order"], kind="stable")
    dup = df.duplicated(subset=keys, keep="first")
    result.skip("comm: same bytes in another dtype (kept the 16-bit row)", int(dup.sum()))
    return df[~dup].drop(columns=["_order", "dtype"])


def merged(result: Imported) -> dict[tuple[str, str], pd.DataFrame]:
    """One frame per (gpu, op): the parts concatenated, comm duplicates across dtypes resolved."""
    out = {}
    for (gpu, op), frames in sorted(result.frames.items()):
        df = pd.concat(frames, ignore_index=True)
        if op == "comm":
            df = _dedupe_comm(df, result)
        cols = list(df.columns)
        out[(gpu, op)] = df[cols].reset_index(drop=True)
    return out


def read_file(path: Path, gpu: str | None, result: Imported) -> bool:
    """Convert ``path`` into ``result`` if it is an AIConfigurator table; False otherwise."""
    df = read_csv(path, "kernel CSV", "kernel table", low_memory=False)
    if detect_kind(df.columns) is None:
        return False
    convert(df, path, gpu, result)
    return True
