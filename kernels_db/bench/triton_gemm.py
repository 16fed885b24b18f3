"""Tiled GEMM in Triton (bf16/fp16/fp32, and fp8 e4m3 with per-tensor scales on sm_89+).

C[M, N] = scale_a * scale_b * A[M, K] @ B[K, N], fp32 accumulation, output in ``out.dtype``.
Block sizes follow a small size-based heuristic instead of autotuning, so a sweep of thousands
of shapes compiles a handful of kernels rather than benchmarking every config per shape.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl


def interpreting() -> bool:
    """True under ``TRITON_INTERPRET=1`` (kernels run on CPU through numpy)."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


@triton.jit
def _gemm_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    scale,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    UPCAST: tl.constexpr,
):
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    # Grouped tile order: GROUP_M row-tiles share B columns while they sit in L2.
    width = GROUP_M * num_n
    first_m = (pid // width) * GROUP_M
    size_m = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % width) % size_m
    pid_n = (pid % width) // size_m
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + offs_k
        a = tl.load(
            a_ptr + offs_m[:, None] * stride_am + kk[None, :] * stride_ak,
            mask=(offs_m[:, None] < M) & (kk[None, :] < K),
            other=0.0,
        )
        b = tl.load(
            b_ptr + kk[:, None] * stride_bk + offs_n[None, :] * stride_bn,
            mask=(kk[:, None] < K) & (offs_n[None, :] < N),
            other=0.0,
        )
        if UPCAST:  # the interpreter mis-computes low-precision tl.dot
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc)
    acc = acc * scale
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(
        c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N)
    )


def gemm_blocks(m: int, fp8: bool) -> tuple[int, int, int, int]:
    """(BLOCK_M, BLOCK_N, BLOCK_K, num_warps) for a GEMM with ``m`` rows (H100/H200-class GPUs)."""
    block_k = 128 if fp8 else 64
    if m <= 16:
        return 16, 64, block_k * 2, 4
    if m <= 64:
        return 64, 64, block_k, 4
    if m <= 256:
        return 128, 128, block_k, 8
    return 128, 256, block_k, 8


def gemm(
    a: torch.Tensor,
    b: torch.Tensor,
    out: torch.Tensor | None = None,
    *,
    scale: float = 1.0,
    blocks: tuple[int, int, int] | None = None,
) -> torch.Tensor:
    """``out = scale * a @ b`` with the Triton kernel; ``a`` is (M, K), ``b`` is (K, N).

    ``blocks`` = (BLOCK_M, BLOCK_N, BLOCK_K) overrides the heuristic (tests use small ones).
    fp8 inputs produce bf16 output unless ``out`` is given.
    """
    m, k = a.shape
    k2, n = b.shape
    assert k == k2, "inner dimensions differ"
    fp8 = a.dtype in (torch.float8_e4m3fn, torch.float8_e5m2)
    if out is None:
        out = torch.empty((m, n), device=a.device, dtype=torch.bfloat16 if fp8 else a.dtype)
    bm, bn, bk, warps = gemm_blocks(m, fp8)
    if blocks is not None:
        bm, bn, bk = blocks
    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
    _gemm_kernel[grid](
        a,
        b,
        out,
        m,
        n,
        k,
        a.stride(0),
        a.stride(1),
        b.stride(0),
        b.stride(1),
        out.stride(0),
        out.stride(1),
        scale,
        BLOCK_M=bm,
        BLOCK_N=bn,
        BLOCK_K=bk,
        GROUP_M=8,
        UPCAST=interpreting(),
        num_warps=warps,
        num_stages=3,
    )
    return out
