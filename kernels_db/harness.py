"""What a measurement harness did that a serving engine does not, priced when fitting to its rows.

The fit and the validation price each measured row as it was measured (``measured_cols``); serving
predictions price the engine's kernel (no harness columns, every share 1).

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

from kernels_db.costs import KV_DRAM_SHARE
from kernels_db.tables import KernelTable

KV_ALIASED_HARNESSES: Final[tuple[str, ...]] = ("/attention/trtllm/1.0.0/generation_attention",)
"""Row origins (a substring of the ``source`` column) of decode tables whose grouped-query rows read
half the KV bytes from DRAM (module docstring)."""
HARNESS_KV_DRAM_SHARE: Final[float] = 0.5
"""Share of the K + V bytes those rows read from DRAM: K only (V aliases it). Not fitted: the
measured GQA / MHA and TRT-LLM 1.0 / 1.3 rate ratios are 1.9x, and 0.5 is the K-only count."""


def kv_dram_share(table: KernelTable) -> np.ndarray:
    """Per row, the share of the counted KV bytes that the measured kernel read from DRAM."""
    share = np.ones(len(table))
    if table.op != "attention_decode":
        return share
    origins = table.row_origins().astype(str)
    aliased = np.zeros(len(table), dtype=bool)
    for marker in KV_ALIASED_HARNESSES:
        aliased |= np.char.find(origins, marker) >= 0
    grouped = table.keys["heads"] != table.keys["kv_heads"]
    share[aliased & grouped] = HARNESS_KV_DRAM_SHARE
    return share


def measured_cols(table: KernelTable) -> dict[str, np.ndarray]:
    """The key columns of ``table`` plus the harness columns that price its rows as measured."""
    share = kv_dram_share(table)
    if np.all(share == 1.0):
        return dict(table.keys)
    return {**table.keys, KV_DRAM_SHARE: share}
