"""Kernels page inputs: which op family, which size to sweep, and the other keys held fixed.

When a measured table exists for the op, the fixed keys are chosen among the values it holds
(each choice narrows the next), so the measured points of that slice appear on the chart.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import numpy as np
import streamlit as st

from hardware.errors import PlannerInputError
from kernels_db import comm as cm
from kernels_db import costs, fitted, paths
from kernels_db.folder import read_folder
from kernels_db.lookup import KernelDB, OpCost
from kernels_db.ops import shape_of
from kernels_db.schema import OP_KEYS, STRING_COLUMNS
from kernels_db.tables import KernelTable, read_meta

OPS: Final[tuple[str, ...]] = (
    "gemm",
    "attention_decode",
    "attention_prefill",
    "moe",
    "comm",
    "memcpy",
    "mla_decode",
    "mla_prefill",
)
SWEEP: Final[dict[str, tuple[str, int, int]]] = {
    "gemm": ("m", 1, 16384),
    "attention_decode": ("kv_len", 128, 131072),
    "attention_prefill": ("seq", 128, 32768),
    "moe": ("tokens", 1, 16384),
    "comm": ("bytes", 1024, 1 << 30),
    "memcpy": ("bytes", 1024, 1 << 30),
    "mla_decode": ("kv_len", 128, 131072),
    "mla_prefill": ("seq", 128, 32768),
}
"""Op family -> (size key swept, default low, default high)."""
DEFAULTS: Final[dict[str, dict[str, Any]]] = {
    "gemm": {"m": 1024, "n": 8192, "k": 8192, "dtype": "bf16"},
    "attention_decode": {
        "batch": 32,
        "kv_len": 4096,
        "heads": 32,
        "kv_heads": 8,
        "head_dim": 128,
        "kv_dtype": "bf16",
    },
    "attention_prefill": {
        "batch": 1,
        "seq": 4096,
        "prior": 0,
        "heads": 32,
        "kv_heads": 8,
        "head_dim": 128,
        "dtype": "bf16",
        "kv_dtype": "bf16",
        "window": 0,
    },
    "moe": {
        "tokens": 1024,
        "hidden": 4096,
        "inter": 1536,
        "topk": 8,
        "experts": 128,
        "ep": 1,
        "dtype": "bf16",
    },
    "comm": {"collective": "all_reduce", "n_gpus": 8, "bytes": 1 << 20, "link": "nvlink"},
    "memcpy": {"bytes": 1 << 20},
    "mla_decode": {
        "batch": 32,
        "kv_len": 4096,
        "heads": 128,
        "kv_lora_rank": 512,
        "rope_dim": 64,
        "kv_dtype": "bf16",
    },
    "mla_prefill": {
        "batch": 1,
        "seq": 4096,
        "prior": 0,
        "heads": 128,
        "kv_lora_rank": 512,
        "rope_dim": 64,
        "dtype": "bf16",
    },
}
"""Fixed values of a Llama-3.1-8B-like layer (GQA 32/8) and a DeepSeek-V3-like MLA layer."""
POINTS: Final[int] = 25
EXTERNAL_DATA: Final[Path] = (
    Path(__file__).resolve().parents[2] / "shared" / "validation" / "kernels"
)
"""Public measured tables next to the checkout (AIConfigurator layout), when present."""


def sweep_sizes(lo: int, hi: int, points: int = POINTS) -> np.ndarray:
    """Integer sizes spaced evenly in log space from ``lo`` to ``hi`` (unique, sorted)."""
    if lo < 1 or hi <= lo:
        raise PlannerInputError("sweep", f"need 1 <= low < high, got {lo}..{hi}")
    return np.unique(np.round(np.geomspace(lo, hi, points)).astype(np.int64))


@st.cache_resource(show_spinner=False)
def bundled_db(gpu_key: str) -> KernelDB:
    """The lookup the planner itself uses for ``gpu_key`` (bundled tables and fit)."""
    from hardware.catalog import get_gpu

    return KernelDB.for_gpu(get_gpu(gpu_key))


@st.cache_resource(show_spinner=False)
def folder_tables(folder: str) -> dict[str, dict[str, KernelTable]]:
    """Tables of a folder (our schema or AIConfigurator layout) per GPU and op."""
    return read_folder(Path(folder)).tables


ROOT: Final[Path] = Path(__file__).resolve().parents[1]
DEFAULT_FOLDER: Final[str] = "../shared/validation/kernels"
"""The folder field's default, relative to the checkout (``EXTERNAL_DATA``)."""


def resolve_folder(folder: str) -> Path:
    """A folder as typed (relative to the checkout, or absolute)."""
    path = Path(folder)
    return path if path.is_absolute() else (ROOT / path).resolve()


def shown_path(path: Path) -> str:
    """A path as the page shows it: relative to the checkout where it is inside it."""
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return Path(path).name


def lookup_db(gpu_key: str, folder: str) -> tuple[KernelDB, str, bool]:
    """The DB to query, a line naming where its measured rows come from (the folder as typed,
    never the server's path), and whether the GPU has no measured rows there (the curve is then
    the model's alone)."""
    db = bundled_db(gpu_key)
    if not folder:
        where = f"bundled tables (kernels_db/data/{gpu_key})"
        return db, where if db.tables else "no bundled measured tables", not db.tables
    tables = folder_tables(str(resolve_folder(folder)))
    if gpu_key not in tables:
        return db, f"{folder} (no tables for this GPU)", True
    return KernelDB(db.spec, tables[gpu_key], db.fit), f"tables in {folder}", False


def model_only(db: KernelDB) -> KernelDB:
    """The same GPU and fit without measured tables: the model's own curve."""
    return KernelDB(db.spec, {}, db.fit)


def price(db: KernelDB, op: str, cols: dict[str, Any]) -> OpCost:
    """Cost of rows ``cols`` on ``db`` through the library's public methods."""
    if op == "comm":
        return db.comm(cols["collective"], cols["n_gpus"], cols["bytes"], cols["link"])
    return db.price(shape_of(op, cols))


def _choices(table: KernelTable | None, mask: np.ndarray | None, key: str) -> list[Any] | None:
    if table is None or mask is None or not mask.any():
        return None
    vals = np.unique(table.keys[key][mask])
    return [str(v) if key in STRING_COLUMNS else int(v) for v in vals]


def fixed_inputs(op: str, table: KernelTable | None) -> tuple[dict[str, Any], np.ndarray | None]:
    """Values of every key but the swept one, and the table rows that match them."""
    swept = SWEEP[op][0]
    mask = None if table is None else np.ones(len(table), dtype=bool)
    fixed: dict[str, Any] = {}
    cols = st.columns(4)
    for i, key in enumerate(k for k in OP_KEYS[op] if k != swept):
        default = DEFAULTS[op][key]
        options = _choices(table, mask, key)
        with cols[i % 4]:
            if options:
                index = options.index(default) if default in options else 0
                fixed[key] = st.selectbox(key, options, index=index, key=f"kernels_{op}_{key}_sel")
            elif key in STRING_COLUMNS:
                fixed[key] = st.text_input(key, value=str(default), key=f"kernels_{op}_{key}")
            else:
                fixed[key] = int(
                    st.number_input(
                        key, min_value=0, value=int(default), step=1, key=f"kernels_{op}_{key}"
                    )
                )
        if table is not None and mask is not None:
            mask &= table.keys[key] == fixed[key]
    return fixed, mask


def provenance_lines(db: KernelDB, gpu_key: str, folder: str) -> list[str]:
    """Where the curves' numbers come from: fit file, its error, measured-table metadata."""
    lines = []
    fit = db.fit
    if fit is None:
        lines.append(
            f"No fitted parameters for {db.spec.name}: the model is the roofline with default "
            "efficiencies (flagged roofline_uncalibrated)."
        )
    else:
        lines.append(
            f"Fitted parameters: {shown_path(paths.fitted_path(gpu_key))} (fitted {fit.date}; "
            f"`{fit.command}`)."
        )
        for name, fam in fit.families.items():
            lines.append(
                f"- {name}: fitted to {fam.fitted_to.rows} rows of "
                f"{', '.join(fam.fitted_to.files)}; median error "
                f"{fam.fit_error.median_ape_pct:.1f}%, p90 {fam.fit_error.p90_ape_pct:.1f}%"
            )
    meta = read_meta(paths.table_dir(gpu_key)) if not folder else {}
    if meta:
        lines.append("Measured tables: " + ", ".join(f"{k}={v}" for k, v in meta.items()))
    lines.append(
        f"Unfitted defaults: {', '.join(sorted(fitted.DEFAULT_PARAMS))} (kernels_db/fitted.py)."
    )
    return lines


def roofline_bound(db: KernelDB, op: str, cols: dict[str, Any]) -> np.ndarray:
    """Lower bound at 100% of peak FLOP/s and bandwidth (links: full bandwidth, no latency),
    seconds."""
    if op == "comm":
        prm = cm.default_params(db.spec, int(cols["n_gpus"]), cols["link"])
        factor = cm.algo_factor(
            cols["collective"], np.asarray(cols["n_gpus"]), nvls=cols["link"] == "nvls"
        )
        full_bw = prm.bus_bandwidth_bytes_per_s / fitted.DEFAULT_COMM_BW_EFF
        return cm.alpha_beta(cols["bytes"], factor, 0.0, full_bw)
    return costs.peak_bound(costs.counts(op, cols, db.spec), db.spec.hbm_bandwidth_bytes_per_s)
