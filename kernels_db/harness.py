"""What a measurement harness did that a serving engine does not, priced when fitting to its rows.

The fit and the validation price each measured row as it was measured (``measured_cols``); serving
predictions price the engine's kernel (no harness columns, every share 1). Two facts of
AIConfigurator's collectors are priced: decode rows that read half their KV (below), the GEMM
weight copies a benchmark cycles through (``gemm_working_set``) and the dynamic per-tensor
activation scale its fp8 GEMM rows computed before each GEMM (``fp8_scale_passes``,
``kernels_db.fp8_scale``).

AIConfigurator's TensorRT-LLM 1.0.0 decode tables (``generation_attention_perf`` of
``systems/data/<gpu>/attention/trtllm/1.0.0``): the grouped-query rows (XQA kernel) read the KV
cache at about twice the rate that the same harness's multi-head rows, TensorRT-LLM 1.3.0rc20 on
the same GPU, and vLLM 0.14 on the same GPU reach. Largest working sets (> 1 GB, head_dim 128,
bf16 KV, K + V bytes counted) in aiconfigurator @ 095f58a5:

- A100-SXM4-80GB (2.04 TB/s HBM2e): TRT-LLM 1.0.0 GQA 2.3-3.45 TB/s (median 3.0, up to 1.69x the
  spec), TRT-LLM 1.0.0 MHA median 1.71 TB/s (84%), vLLM 0.14.0 GQA and MHA at most 1.73 TB/s.
- L40S (0.864 TB/s GDDR6): TRT-LLM 1.0.0 GQA 1.23-1.34 TB/s (1.5x the spec), MHA 0.74 TB/s;
  TRT-LLM 1.3.0rc20 GQA 0.61-0.68 TB/s, MHA 0.74 TB/s. Same ratio (1.9x) with fp8 KV.

No cache holds these working sets (0.5-2 GB against a 40 MB / 96 MB L2), so the XQA kernel of that
harness moved about half the K + V bytes from DRAM: ``HARNESS_KV_DRAM_SHARE``. The harness builds a
K-only cache pool (``CacheType.SELFKONLY`` in ``collector/trtllm/collect_attn.py``), so the V reads
most likely alias the K just read (an L2 hit in XQA, which loads K and V of a tile together; not in
the multi-head kernel, which reads all of K before any V). A100's decode rows are all from this
harness, so before this correction 17 of them read faster than 100% of the HBM spec and the fitted
A100 GQA bandwidth stood for a kernel that reads half its bytes.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from hardware.spec import GpuSpec
from kernels_db import roofline as rf
from kernels_db.costs import KV_DRAM_SHARE, WORKING_SET
from kernels_db.fp8_scale import TENSOR_SCALE
from kernels_db.tables import KernelTable

KV_ALIASED_HARNESSES: Final[tuple[str, ...]] = ("/attention/trtllm/1.0.0/generation_attention",)
"""Row origins (a substring of the ``source`` column) of decode tables whose grouped-query rows read
half the KV bytes from DRAM (module docstring)."""
HARNESS_KV_DRAM_SHARE: Final[float] = 0.5
"""Share of the K + V bytes those rows read from DRAM: K only (V aliases it). Not fitted: the
measured GQA / MHA and TRT-LLM 1.0 / 1.3 rate ratios are 1.9x, and 0.5 is the K-only count."""


def rows_from(table: KernelTable, markers: tuple[str, ...]) -> np.ndarray:
    """Per row of ``table``, whether its origin (``KernelTable.row_origins``) holds any of
    ``markers``."""
    origins = table.row_origins().astype(str)
    hit = np.zeros(len(table), dtype=bool)
    for marker in markers:
        hit |= np.char.find(origins, marker) >= 0
    return hit


def kv_dram_share(table: KernelTable) -> np.ndarray:
    """Per row, the share of the counted KV bytes that the measured kernel read from DRAM."""
    share = np.ones(len(table))
    if table.op != "attention_decode":
        return share
    aliased = rows_from(table, KV_ALIASED_HARNESSES)
    grouped = table.keys["heads"] != table.keys["kv_heads"]
    share[aliased & grouped] = HARNESS_KV_DRAM_SHARE
    return share


GEMM_HARNESS: Final[str] = "/gemm/trtllm/"
"""Row origin (a substring of ``source``) of AIConfigurator's TensorRT-LLM GEMM tables."""
GEMM_FIXED_COPIES: Final[dict[str, float]] = {"/gemm/trtllm/1.0.0/": 5.0}
"""Harness versions that ran a fixed number of weight copies in turn: the TensorRT-LLM 1.0.0
collector (``collector/trtllm/collect_gemm.py`` @ 9f2bf08b, ``repeat_n = 5  # to reduce impact of
L2 cache hit``)."""
GEMM_MAX_COPIES: Final[float] = 5.0
"""Later collectors (``collect_gemm.py`` @ dec5f4cd, which made the 1.3.0rc20 tables) run
``max(1, min(5, ceil(L2 / weight bytes)))`` copies, the L2 size as the CUDA runtime reports it: a
single copy of weights larger than the L2, and enough copies of small ones to fill it. The working
set they cycle through is those copies plus the (shared) activations and output."""


def gemm_working_set(table: KernelTable, spec: GpuSpec) -> np.ndarray | None:
    """Bytes each GEMM row's harness cycled through (``WORKING_SET``): AIConfigurator's copies
    (``GEMM_MAX_COPIES``), else the GEMM's own bytes (a benchmark that re-runs one GEMM); None
    for other families or a GPU without a known L2."""
    if table.op != "gemm" or not spec.l2_cache_bytes:
        return None
    origins = table.row_origins().astype(str)
    ours = np.char.find(origins, GEMM_HARNESS) >= 0
    k = table.keys
    elem = rf.dtype_bytes(k["dtype"].astype(str))
    weights = k["n"].astype(float) * k["k"].astype(float) * elem
    copies = np.maximum(1.0, np.minimum(GEMM_MAX_COPIES, np.ceil(spec.l2_cache_bytes / weights)))
    for marker, fixed in GEMM_FIXED_COPIES.items():
        copies = np.where(np.char.find(origins, marker) >= 0, fixed, copies)
    one = rf.gemm_bytes(k["m"].astype(float), k["n"].astype(float), k["k"].astype(float), elem)
    # rows of another origin: their own bytes, the reading before harnesses were told apart
    return np.asarray(np.where(ours, one + (copies - 1.0) * weights, one))


GEMM_DYNAMIC_FP8: Final[tuple[str, ...]] = ("/gemm/trtllm/1.3.0rc20/",)
"""Row origins of GEMM tables whose fp8 rows ran a dynamic per-tensor activation scale before each
GEMM: ``collect_gemm.py`` @ dec5f4cd gives the fp8 weights no input scale, so TensorRT-LLM's
``FP8QDQLinearMethod`` takes its dynamic path (``kernels_db.fp8_scale``)."""


def fp8_scale_passes(table: KernelTable) -> np.ndarray | None:
    """Per GEMM row, the dynamic per-tensor scale passes its harness ran (1 on the fp8 rows of
    ``GEMM_DYNAMIC_FP8``); None when no row ran one."""
    if table.op != "gemm":
        return None
    dynamic = rows_from(table, GEMM_DYNAMIC_FP8)
    dynamic &= table.keys["dtype"].astype(str) == "fp8"
    return dynamic.astype(float) if dynamic.any() else None


def measured_cols(table: KernelTable, spec: GpuSpec) -> dict[str, np.ndarray]:
    """The key columns of ``table`` plus the harness columns that price its rows as measured."""
    out = dict(table.keys)
    share = kv_dram_share(table)
    if not np.all(share == 1.0):
        out[KV_DRAM_SHARE] = share
    ws = gemm_working_set(table, spec)
    if ws is not None:
        out[WORKING_SET] = ws
    passes = fp8_scale_passes(table)
    if passes is not None:
        out[TENSOR_SCALE] = passes
    return out
