"""Grouped (MoE) GEMM in Triton: every expert multiplies its own block of routed token rows.

A (T, K) holds the routed rows sorted by expert, ``offsets[e]:offsets[e+1]`` belonging to expert e;
W (E, K, N) the expert weights; C (T, N). The host turns the group sizes into a list of row tiles
(expert, first row, end row), as vLLM's ``moe_align_block_size`` does, so one launch covers all
experts with no padding rows in memory.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels_db.bench.triton_gemm import interpreting


@triton.jit
def _grouped_gemm_kernel(
    a_ptr,
    w_ptr,
    c_ptr,
    tile_e_ptr,
    tile_lo_ptr,
    tile_hi_ptr,
    N,
    K,
    stride_am,
    stride_ak,
    stride_we,
    stride_wk,
    stride_wn,
    stride_cm,
    stride_cn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    UPCAST: tl.constexpr,
):
    tile = tl.program_id(0)
    pid_n = tl.program_id(1)
    expert = tl.load(tile_e_ptr + tile)
    row_lo = tl.load(tile_lo_ptr + tile)
    row_hi = tl.load(tile_hi_ptr + tile)
    offs_m = row_lo + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    m_ok = offs_m < row_hi
    n_ok = offs_n < N
    w_base = w_ptr + expert.to(tl.int64) * stride_we
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + offs_k
        a = tl.load(
            a_ptr + offs_m[:, None] * stride_am + kk[None, :] * stride_ak,
            mask=m_ok[:, None] & (kk[None, :] < K),
            other=0.0,
        )
        w = tl.load(
            w_base + kk[:, None] * stride_wk + offs_n[None, :] * stride_wn,
            mask=(kk[:, None] < K) & n_ok[None, :],
            other=0.0,
        )
        if UPCAST:
            a = a.to(tl.float32)
            w = w.to(tl.float32)
        acc = tl.dot(a, w, acc)
    tl.store(
        c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn,
        acc.to(c_ptr.dtype.element_ty),
        mask=m_ok[:, None] & n_ok[None, :],
    )


def tile_map(
    counts: list[int], block_m: int, device: torch.device | str
) -> tuple[torch.Tensor, ...]:
    """(expert, first row, end row) per BLOCK_M row tile for group sizes ``counts``."""
    experts, lo, hi = [], [], []
    start = 0
    for e, c in enumerate(counts):
        for r in range(start, start + c, block_m):
            experts.append(e)
            lo.append(r)
            hi.append(start + c)
        start += c

    def as_t(x: list[int]) -> torch.Tensor:
        return torch.tensor(x, dtype=torch.int32, device=device)

    return as_t(experts), as_t(lo), as_t(hi)


def moe_blocks(rows_per_expert: float) -> tuple[int, int, int, int]:
    """(BLOCK_M, BLOCK_N, BLOCK_K, num_warps) by average rows per expert."""
    if rows_per_expert <= 16:
        return 16, 64, 128, 4
    if rows_per_expert <= 64:
        return 64, 64, 64, 4
    return 128, 128, 64, 8


def grouped_gemm(
    a: torch.Tensor,
    w: torch.Tensor,
    counts: list[int],
    out: torch.Tensor | None = None,
    *,
    tiles: tuple[torch.Tensor, ...] | None = None,
    blocks: tuple[int, int, int] | None = None,
) -> torch.Tensor:
    """C[rows of e] = A[rows of e] @ W[e] for each expert e; ``counts[e]`` rows each, in order.

    ``tiles`` (from ``tile_map`` with the same BLOCK_M) may be precomputed outside a timing loop.
    """
    t_rows, k = a.shape
    n_exp, k2, n = w.shape
    assert k == k2 and len(counts) == n_exp and sum(counts) == t_rows, "shape mismatch"
    bm, bn, bk, warps = moe_blocks(t_rows / max(1, n_exp))
    if blocks is not None:
        bm, bn, bk = blocks
    if out is None:
        out = torch.empty((t_rows, n), device=a.device, dtype=a.dtype)
    tile_e, tile_lo, tile_hi = tiles if tiles is not None else tile_map(counts, bm, a.device)
    if tile_e.numel() == 0:
        return out
    grid = (tile_e.numel(), triton.cdiv(n, bn))
    _grouped_gemm_kernel[grid](
        a,
        w,
        out,
        tile_e,
        tile_lo,
        tile_hi,
        n,
        k,
        a.stride(0),
        a.stride(1),
        w.stride(0),
        w.stride(1),
        w.stride(2),
        out.stride(0),
        out.stride(1),
        BLOCK_M=bm,
        BLOCK_N=bn,
        BLOCK_K=bk,
        UPCAST=interpreting(),
        num_warps=warps,
        num_stages=3,
    )
    return out
