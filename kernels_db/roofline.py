"""FLOP and byte counts per op family, and the roofline time formula (all vectorized, numpy).

time = launch + tile_s * tiles
       + max((FLOPs * o + F_half) / (peak * eff_c), (bytes * o + B_half) / (BW * eff_m)),
o = 1 + U_half / units

The ``*_half`` terms make efficiency grow with size (eff = eff_max * x / (x + x_half)) while keeping
time monotone in every size. ``units`` counts the independent pieces of work a kernel can spread
over
the SMs (decode attention: batch x kv heads; prefill attention: its query tiles); with few of them
the achieved FLOP/s and bandwidth are units / (units + U_half) of their maximum. ``tile_s`` is the
fixed cost of one thread-block tile (prologue, Q load, softmax epilogue, O store) averaged over the
SMs, which dominates prefill attention of many short sequences (B200 batch 64 x 64 heads of one
token: 100 us measured, 21 ns per (sequence, head) on H100 and B200 alike). The bytes scale with
the units at fixed shape, so the time
still never falls as the batch grows. A working set that fits the last-level cache (``resident``
fraction, ``l2_resident_fraction``) is read ``cache_speedup`` times faster than from DRAM; the
cached share only falls as the bytes grow, so the time stays monotone. Counts follow the standard
forms: GEMM 2mnk; causal prefill attention 4·b·h·d·(c·s + s²/2) for chunk s over prior context c
(FlashAttention-2 paper, arXiv 2307.08691); decode attention reads the KV of every context.
"""

from __future__ import annotations

from typing import Final

import numpy as np

ArrayLike = np.ndarray | float | int
DTYPE_BYTES: Final[dict[str, float]] = {
    "fp32": 4.0,
    "tf32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "fp6": 0.75,  # 6 bits (OCP Microscaling Formats v1.0: FP6 E2M3 / E3M2), scales not counted
    "fp4": 0.5,
    "int4": 0.5,
}
OUT_BYTES: Final[float] = 2.0  # GEMM / attention outputs are written in 16-bit
DECODE_MMA_ROWS: Final[float] = 16.0  # M rows of the mma.m16n8k16 tile (PTX ISA, "Matrix shape")
# ASSUMPTION: steepness of the loss of cache residency around the cache size. A benchmark re-reads
# the same working set; under (near-)LRU replacement a cyclic sweep larger than the cache misses
# almost every line, so residency drops steeply: 1 / (1 + (bytes / cache)^4) keeps 94% at half the
# cache and 6% at twice it. Supported by the L40S (96 MB L2) decode tables: 67 MB reads at 2.4 TB/s,
# 268 MB at 0.65 TB/s (GDDR6 peak 0.864 TB/s).
CACHE_RESIDENCY_POWER: Final[float] = 4.0


def dtype_bytes(dtype: np.ndarray | str) -> np.ndarray:
    """Bytes per element of each dtype name (array or scalar)."""
    if isinstance(dtype, str):
        return np.asarray(DTYPE_BYTES[dtype])
    names, inverse = np.unique(np.asarray(dtype, dtype=str), return_inverse=True)
    return np.array([DTYPE_BYTES[str(n)] for n in names])[inverse].reshape(np.shape(dtype))


def resident_share(ratio: ArrayLike, power: ArrayLike = CACHE_RESIDENCY_POWER) -> np.ndarray:
    """Share of a re-read working set of ``ratio`` times the cache size found in the cache:
    1 / (1 + ratio^power), non-increasing in ``ratio`` (0.5 at the cache size for any power)."""
    return np.asarray(1.0 / (1.0 + np.power(np.asarray(ratio, dtype=float), power)))


def l2_resident_fraction(nbytes: ArrayLike, cache_bytes: float | None) -> np.ndarray:
    """Share of a re-read working set of ``nbytes`` found in a cache of ``cache_bytes`` (0 if
    unknown): ``resident_share(nbytes / cache)`` at ``CACHE_RESIDENCY_POWER``."""
    if not cache_bytes:
        return np.zeros(np.shape(nbytes))
    return resident_share(np.asarray(nbytes, dtype=float) / cache_bytes)


def cached_read_factor(resident: ArrayLike, cache_speedup: ArrayLike) -> np.ndarray:
    """DRAM-equivalent bytes per byte read when a ``resident`` share is read ``cache_speedup`` times
    faster."""
    return np.asarray(1.0 - np.asarray(resident) * (1.0 - 1.0 / np.maximum(cache_speedup, 1.0)))


GEMV_EFF_ROW: Final[int] = 9
GEMV_LAUNCH_ROW: Final[int] = 10
CLIFF_ROW: Final[int] = 11
"""Rows of ``gemv_memory_eff``, ``gemv_launch_s`` and ``cache_cliff_power`` in a parameter array
(``RooflineParams.as_array``); an array may end before them (no such terms)."""


def roofline_time(
    flops: ArrayLike,
    nbytes: ArrayLike,
    peak_flops_per_s: ArrayLike,
    bandwidth_bytes_per_s: float,
    p: np.ndarray,
    units: ArrayLike = np.inf,
    resident: ArrayLike = 0.0,
    tiles: ArrayLike = 0.0,
    kernels: ArrayLike = 1.0,
    streams: bool = False,
    gemv: ArrayLike = 0.0,
) -> np.ndarray:
    """Seconds of one op. ``p`` rows: launch_s, compute_eff, compute_half_flops, memory_eff,
    memory_half_bytes, parallel_half_units, cache_speedup, tile_s (each broadcastable against the
    sizes); ``units`` >= 1; ``resident`` = cached share of the bytes (``l2_resident_fraction``);
    ``tiles`` = thread-block tiles of the kernel (prefill attention: ``prefill_tiles``);
    ``kernels`` = launches (2 for a split-KV decode: the partial results are combined after);
    ``streams``: each unit is a serial stream (decode attention), so the achieved rate grows in
    proportion to the units up to ``parallel_half_units`` of them and is flat after
    (``max(1, U / units)``) rather than ``1 + U / units``. ``gemv`` (1 on single-row GEMMs) lets
    rows ``GEMV_EFF_ROW`` and ``GEMV_LAUNCH_ROW`` of ``p`` price the matrix-vector kernel
    where it is faster (``gemv_time``); rows beyond p[8] may be absent (no such path)."""
    occupancy = np.maximum(1.0, p[5] / units) if streams else 1.0 + p[5] / units
    compute = (flops * occupancy + p[2]) / (peak_flops_per_s * p[1])
    read_factor = cached_read_factor(resident, p[6])
    dram_bytes = nbytes * occupancy * read_factor
    memory = (dram_bytes + p[4] * (1.0 - np.asarray(resident))) / (bandwidth_bytes_per_s * p[3])
    tiled = np.asarray(p[0] * kernels + p[7] * tiles + np.maximum(compute, memory))
    if len(p) <= GEMV_EFF_ROW or not np.any(np.asarray(gemv) > 0.0):
        return tiled
    vector = gemv_time(
        nbytes * read_factor, bandwidth_bytes_per_s, p[GEMV_EFF_ROW], p[GEMV_LAUNCH_ROW]
    )
    return np.asarray(np.where(np.asarray(gemv) > 0.0, np.minimum(tiled, vector), tiled))


def gemv_time(
    dram_bytes: ArrayLike, bandwidth_bytes_per_s: float, eff: ArrayLike, launch_s: ArrayLike
) -> np.ndarray:
    """Seconds of the matrix-vector kernel a library runs for a single-row GEMM (cuBLAS gemv,
    TensorRT-LLM's CUDA-core GEMV): it streams the weights once at ``eff`` of the DRAM bandwidth
    (``dram_bytes``: bytes after the cached share, ``cached_read_factor``) after a fixed
    ``launch_s``, with no tensor-core tile to pad. ``eff`` 0 = no such kernel (infinite time), so
    the tiled GEMM is priced. The tiled GEMM's time never falls with m, and the single row is
    priced at the faster of the two, so the time stays monotone in m, n and k."""
    e = np.asarray(eff, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        stream = np.where(e > 0.0, np.asarray(dram_bytes) / (bandwidth_bytes_per_s * e), np.inf)
    return np.asarray(launch_s + stream)


def gemm_flops(m: ArrayLike, n: ArrayLike, k: ArrayLike) -> np.ndarray:
    """FLOPs of an (m x k) @ (k x n) product: 2mnk."""
    return np.asarray(2.0 * m * n * k)


GEMM_TILE: Final[float] = 128.0
"""Rows and columns of one output tile of a tensor-core GEMM. ASSUMPTION: 128 x 128, the common
CUTLASS / cuBLAS tile for large bf16 and fp8 problems."""


def gemm_tiles(m: ArrayLike, n: ArrayLike) -> np.ndarray:
    """Output tiles of an (m x n) result (each one thread block's work): max(m / tile, 1) x
    max(n / tile, 1), counted continuously so that FLOPs per tile never fall as a size grows and
    the occupancy term keeps the time monotone (whole tiles would make it a sawtooth). A tile
    holds at least one row: a skinny GEMM (decode, m of a few tokens) still runs n / tile blocks,
    so its parallelism, and the share of the SMs it keeps busy, follow n."""
    rows = np.maximum(np.asarray(m, dtype=float) / GEMM_TILE, 1.0)
    return np.asarray(rows * np.maximum(np.asarray(n, dtype=float) / GEMM_TILE, 1.0))


GEMM_SPLIT_K: Final[float] = 256.0
"""Shortest K slice one split-K thread block takes. ASSUMPTION: cuBLAS / CUTLASS split a long K
into slices of at least 256 when the output tiles are too few to fill the SMs."""


def gemm_units(m: ArrayLike, n: ArrayLike, k: ArrayLike, sm_count: float) -> np.ndarray:
    """Thread blocks a GEMM keeps busy: its output tiles (``gemm_tiles``), or, when they are fewer
    than the SMs, as many split-K blocks as fill the SMs and K allows (K / ``GEMM_SPLIT_K``
    slices). Libraries split K for skinny products: without it a larger m (more tiles) priced a
    long-K GEMM up to 23% faster than a smaller one on B200. Non-decreasing in m and n."""
    tiles = gemm_tiles(m, n)
    slices = np.maximum(np.asarray(k, dtype=float) / GEMM_SPLIT_K, 1.0)
    return np.asarray(np.maximum(tiles, np.minimum(float(sm_count), tiles * slices)))


def gemm_bytes(m: ArrayLike, n: ArrayLike, k: ArrayLike, elem_bytes: ArrayLike) -> np.ndarray:
    """Bytes moved: read A (m·k) and B (k·n) in the input dtype, write C (m·n) in 16-bit."""
    return np.asarray((m * k + k * n) * elem_bytes + m * n * OUT_BYTES)


def prefill_attention_flops(
    batch: ArrayLike,
    seq: ArrayLike,
    prior: ArrayLike,
    heads: ArrayLike,
    head_dim: ArrayLike,
    window: ArrayLike,
) -> np.ndarray:
    """Causal FLOPs 4·b·h·d·s·(c + s/2); a sliding window (>0) caps the keys per query."""
    keys = np.asarray(prior + seq / 2.0, dtype=float)
    keys = np.where(np.asarray(window) > 0, np.minimum(keys, window), keys)
    return np.asarray(4.0 * batch * heads * head_dim * seq * keys)


PREFILL_QUERY_TILE: Final[float] = 128.0
"""Query rows per thread block of a fused prefill attention kernel. ASSUMPTION: 128, the forward
block of FlashAttention-2 at head dim 128 (arXiv 2307.08691, section 3.3) and of FlashAttention-3
on Hopper; TensorRT-LLM's fmha_v2 uses 64 or 128."""


def prefill_tiles(batch: ArrayLike, seq: ArrayLike, heads: ArrayLike) -> np.ndarray:
    """Thread-block tiles of a prefill attention: one per (sequence, query head, 128 query rows),
    counted continuously (b h s / 128, at least one per sequence and head) so that the time stays
    monotone in the sequence length."""
    bh = np.asarray(batch, dtype=float) * heads
    return np.asarray(bh * np.maximum(np.asarray(seq, dtype=float) / PREFILL_QUERY_TILE, 1.0))


def prefill_attention_bytes(
    batch: ArrayLike,
    seq: ArrayLike,
    prior: ArrayLike,
    heads: ArrayLike,
    kv_heads: ArrayLike,
    head_dim: ArrayLike,
    elem_bytes: ArrayLike,
    kv_bytes: ArrayLike,
) -> np.ndarray:
    """Read Q, write O (16-bit) and read K and V of prior + new tokens."""
    qo = 2.0 * batch * seq * heads * head_dim * elem_bytes
    kv = 2.0 * batch * (prior + seq) * kv_heads * head_dim * kv_bytes
    return np.asarray(qo + kv)


def decode_attention_flops(
    batch: ArrayLike, kv_len: ArrayLike, heads: ArrayLike, head_dim: ArrayLike
) -> np.ndarray:
    """One new token per sequence attends to ``kv_len`` keys: 4·b·h·d·kv_len."""
    return np.asarray(4.0 * batch * heads * head_dim * kv_len)


DECODE_KV_CHUNK: Final[float] = 128.0
"""Fewest KV tokens per thread block of a split-KV (multi-block) decode: TensorRT-LLM XQA's
``kMinHistoryTokensPerBlock`` (NVIDIA/TensorRT-LLM
cpp/tensorrt_llm/kernels/decoderMaskedMultiheadAttention/decoderXQAConstants.h @ 37e602fd)."""
DECODE_SPLIT_SQRT: Final[float] = 8.0
"""XQA caps the blocks per sequence at round(sqrt(8 x chunks)) "otherwise the final reduction may
dominate" (``computeMultiBlockCount`` in decoderXQAImplCommon.h @ b35ac1b6): the last block of a
sequence merges every block's partial result, a cost that grows with the blocks while each block's
share of the KV shrinks with them."""
MMHA_BLOCKS_PER_SM: Final[float] = 1.0
"""Resident masked-MHA blocks per SM that its multi-block mode fills (``blocks_per_sm`` from the
CUDA occupancy query in TensorRT-LLM). ASSUMPTION: 1; of 1 / 2 / 4 / 8 it gives the lowest
multi-head decode p90 on H100 and H200 (14 / 20 / 20 / 19% on H100 bf16)."""
DECODE_TARGET_WAVES: Final[float] = 8.0
"""XQA's ``kTargetWaveFactor``: the blocks per sequence are cut so that the whole grid (batch x KV
heads x blocks) is at most 8 waves of the SMs (same file and function)."""


def decode_kv_splits(
    units: ArrayLike, kv_len: ArrayLike, sm_count: float, grouped: ArrayLike = True
) -> np.ndarray:
    """Thread blocks per (sequence, KV head) of a multi-block decode, at least 1, counted
    continuously (the engines round down) so that the time is monotone: the blocks never fall as
    the KV grows, units x blocks never falls as the batch grows, and the tokens per block (KV /
    blocks) never fall as either grows.

    Grouped-query attention runs TensorRT-LLM XQA (``computeMultiBlockCount``): one block per
    ``DECODE_KV_CHUNK`` tokens, at most sqrt(``DECODE_SPLIT_SQRT`` x chunks), cut to
    ``DECODE_TARGET_WAVES`` waves of the SMs over all ``units``. Multi-head attention (``grouped``
    false) runs the masked MHA kernel (``multi_block_grid_setup`` in NVIDIA/TensorRT-LLM
    cpp/tensorrt_llm/kernels/decoderMaskedMultiheadAttention/decoderMaskedMultiheadAttentionLaunch.h
    @ 05316d33): enough blocks to fill the SMs with ``MMHA_BLOCKS_PER_SM`` each (its occupancy
    query at up to 1,024 threads a block), at most one per ``DECODE_KV_CHUNK`` tokens (its loop of
    block size / threads per value x 8 unrolled keys: 128 at 256 threads)."""
    chunks = np.asarray(kv_len, dtype=float) / DECODE_KV_CHUNK
    per_unit = 1.0 / np.maximum(np.asarray(units, dtype=float), 1.0)
    xqa = np.minimum(
        np.minimum(chunks, np.sqrt(DECODE_SPLIT_SQRT * chunks)),
        DECODE_TARGET_WAVES * sm_count * per_unit,
    )
    mmha = np.minimum(chunks, MMHA_BLOCKS_PER_SM * sm_count * per_unit)
    return np.asarray(np.maximum(np.where(grouped, xqa, mmha), 1.0))


def decode_issued_heads(heads: ArrayLike, kv_heads: ArrayLike) -> np.ndarray:
    """Query heads a decode kernel computes per step. Multi-head attention (one query head per KV
    head) runs head by head; grouped-query kernels put the query heads of one KV head into the rows
    of a tensor-core MMA tile (``DECODE_MMA_ROWS``, mma.m16n8k16), so a group smaller than the tile
    costs a full tile. ASSUMPTION, supported by the TRT-LLM tables in ../shared/validation: 64 and
    32 query heads over 8 KV heads take the same time on all five GPUs."""
    h = np.asarray(heads, dtype=float)
    kvh = np.maximum(np.asarray(kv_heads, dtype=float), 1.0)
    group = h / kvh
    return np.asarray(
        np.where(group <= 1.0, h, kvh * DECODE_MMA_ROWS * np.ceil(group / DECODE_MMA_ROWS))
    )


def decode_attention_bytes(
    batch: ArrayLike,
    kv_len: ArrayLike,
    heads: ArrayLike,
    kv_heads: ArrayLike,
    head_dim: ArrayLike,
    kv_bytes: ArrayLike,
) -> np.ndarray:
    """Read K and V of every context plus Q and O of one token each."""
    return np.asarray(
        batch * (2.0 * kv_len * kv_heads * head_dim * kv_bytes + 2.0 * heads * head_dim * OUT_BYTES)
    )


def mla_prefill_flops(
    batch: ArrayLike,
    seq: ArrayLike,
    prior: ArrayLike,
    heads: ArrayLike,
    kv_lora_rank: ArrayLike,
    rope_dim: ArrayLike,
) -> np.ndarray:
    """Decompressed (MHA-form) MLA prefill; ASSUMPTION: no-rope q/k and v head dims = kv_lora_rank/4
    (DeepSeek-V2/V3: 512/4 = 128). FLOPs 2·b·h·s·(c + s/2)·(d_qk + d_v)."""
    d_qk = kv_lora_rank / 4.0 + rope_dim
    d_v = kv_lora_rank / 4.0
    return np.asarray(2.0 * batch * heads * seq * (prior + seq / 2.0) * (d_qk + d_v))


def mla_prefill_bytes(
    batch: ArrayLike,
    seq: ArrayLike,
    prior: ArrayLike,
    heads: ArrayLike,
    kv_lora_rank: ArrayLike,
    rope_dim: ArrayLike,
    elem_bytes: ArrayLike,
) -> np.ndarray:
    """Read the latent cache (rank + rope per token) of prior + new tokens, read Q and write O."""
    latent = batch * (prior + seq) * (kv_lora_rank + rope_dim) * elem_bytes
    qo = batch * seq * heads * (kv_lora_rank / 2.0 + rope_dim) * elem_bytes
    return np.asarray(latent + qo)


def mla_decode_flops(
    batch: ArrayLike,
    kv_len: ArrayLike,
    heads: ArrayLike,
    kv_lora_rank: ArrayLike,
    rope_dim: ArrayLike,
) -> np.ndarray:
    """Weight-absorbed MLA decode (FlashMLA form): 2·b·h·kv_len·(2·rank + rope)."""
    return np.asarray(2.0 * batch * heads * kv_len * (2.0 * kv_lora_rank + rope_dim))


MLA_DECODE_HEAD_TILE: Final[int] = 64
"""Query rows of one absorbed-MLA decode tile: FlashMLA multiplies query heads x query tokens as
the M dimension of its tensor-core MMA in tiles of 64 rows and targets ``heads >= 64``
(github:deepseek-ai/FlashMLA README.md, 2025-04-22 update: "number of q heads x number of q tokens
per request >= 64"); fewer heads (a TP-split model: 128 / TP 8 = 16) still issue a 64-row tile."""


def mla_decode_issue_scale(heads: ArrayLike) -> np.ndarray:
    """Issued / useful FLOPs of absorbed MLA decode: heads padded to whole 64-row tiles."""
    h = np.maximum(np.asarray(heads, dtype=float), 1.0)
    return np.asarray(np.ceil(h / MLA_DECODE_HEAD_TILE) * MLA_DECODE_HEAD_TILE / h)


def mla_decode_bytes(
    batch: ArrayLike,
    kv_len: ArrayLike,
    kv_lora_rank: ArrayLike,
    rope_dim: ArrayLike,
    kv_bytes: ArrayLike,
) -> np.ndarray:
    """Read the latent cache once per sequence (shared by all heads)."""
    return np.asarray(batch * kv_len * (kv_lora_rank + rope_dim) * kv_bytes)


def moe_active_experts(
    tokens: ArrayLike, topk: ArrayLike, experts: ArrayLike, ep: ArrayLike
) -> np.ndarray:
    """Expected local experts hit by at least one token under uniform routing:
    (E/ep)·(1-(1-1/E)^(T·k))."""
    miss = np.power(
        1.0 - 1.0 / np.asarray(experts, dtype=float), np.asarray(tokens * topk, dtype=float)
    )
    return np.asarray(experts / ep * (1.0 - miss))


def moe_flops(
    tokens: ArrayLike, hidden: ArrayLike, inter: ArrayLike, topk: ArrayLike, ep: ArrayLike
) -> np.ndarray:
    """Gated expert MLP (gate, up, down = 3·H·I MACs per routed token) on this GPU's share."""
    return np.asarray(2.0 * 3.0 * tokens * topk / ep * hidden * inter)


def moe_bytes(
    tokens: ArrayLike,
    hidden: ArrayLike,
    inter: ArrayLike,
    topk: ArrayLike,
    experts: ArrayLike,
    ep: ArrayLike,
    elem_bytes: ArrayLike,
) -> np.ndarray:
    """Weights of the local experts that are hit, plus activations in and out (16-bit)."""
    weights = moe_active_experts(tokens, topk, experts, ep) * 3.0 * hidden * inter * elem_bytes
    acts = tokens * topk / ep * (2.0 * hidden + 2.0 * inter) * OUT_BYTES
    return np.asarray(weights + acts)


def memcpy_bytes(nbytes: ArrayLike) -> np.ndarray:
    """A device-local copy reads and writes every byte."""
    return np.asarray(2.0 * nbytes, dtype=float)
