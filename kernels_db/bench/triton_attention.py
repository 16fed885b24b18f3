"""Causal prefill flash attention with GQA (Triton).

A chunk of ``seq`` new query tokens attends to ``prior`` cached tokens plus itself, causally
(bottom-right aligned: query i sits at absolute position prior + i). Optional sliding window:
query at position p sees keys in (p - window, p]. Online softmax after FlashAttention-2
(Dao, 2023, arXiv 2307.08691), exp2 with log2(e) folded into the scale.

Layouts: q (B, H, S, D); k, v (B, KVH, prior + S, D); out (B, H, S, D); H % KVH == 0.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from kernels_db.bench.triton_gemm import interpreting

LOG2E = 1.4426950408889634


@triton.jit
def _prefill_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    o_ptr,
    sqb,
    sqh,
    sqs,
    skb,
    skh,
    sks,
    svb,
    svh,
    svs,
    sob,
    soh,
    sos,
    H,
    S,
    L,
    PRIOR,
    WINDOW,
    GROUP,
    qk_scale,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
    HEAD_D: tl.constexpr,
    UPCAST: tl.constexpr,
):
    start_m = tl.program_id(0) * BLOCK_M
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    kvh = h // GROUP
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < HEAD_D
    q = tl.load(
        q_ptr + b * sqb + h * sqh + offs_m[:, None] * sqs + offs_d[None, :],
        mask=(offs_m[:, None] < S) & d_ok[None, :],
        other=0.0,
    )
    if UPCAST:
        q = q.to(tl.float32)
    q_pos = PRIOR + offs_m
    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, BLOCK_D), tl.float32)
    hi = tl.minimum(PRIOR + start_m + BLOCK_M, L)
    lo = tl.maximum(PRIOR + start_m - WINDOW + 1, 0) // BLOCK_N * BLOCK_N
    k_base = k_ptr + b * skb + kvh * skh
    v_base = v_ptr + b * svb + kvh * svh
    for start_n in range(lo, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        kv_ok = (offs_n[:, None] < L) & d_ok[None, :]
        k = tl.load(k_base + offs_n[:, None] * sks + offs_d[None, :], mask=kv_ok, other=0.0)
        v = tl.load(v_base + offs_n[:, None] * svs + offs_d[None, :], mask=kv_ok, other=0.0)
        if UPCAST:
            k = k.to(tl.float32)
            v = v.to(tl.float32)
        qk = tl.dot(q, tl.trans(k)) * qk_scale
        visible = (offs_n[None, :] <= q_pos[:, None]) & (offs_n[None, :] < L)
        visible = visible & (offs_n[None, :] > q_pos[:, None] - WINDOW)
        qk = tl.where(visible, qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # rows with nothing visible yet
        p = tl.exp2(qk - m_safe[:, None])
        alpha = tl.exp2(m_i - m_safe)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    acc = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]  # l_i == 0 only on padding rows
    tl.store(
        o_ptr + b * sob + h * soh + offs_m[:, None] * sos + offs_d[None, :],
        acc.to(o_ptr.dtype.element_ty),
        mask=(offs_m[:, None] < S) & d_ok[None, :],
    )


def prefill_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    out: torch.Tensor | None = None,
    *,
    window: int = 0,
    blocks: tuple[int, int] | None = None,
) -> torch.Tensor:
    """Causal GQA attention of q (B, H, S, D) over k, v (B, KVH, prior + S, D); returns (B, H, S,
    D).

    ``window`` > 0 limits each query to the last ``window`` keys (itself included).
    ``blocks`` = (BLOCK_M, BLOCK_N) overrides the default (128, 64); tests use small ones.
    """
    bsz, heads, seq, head_d = q.shape
    kv_heads, kv_len = k.shape[1], k.shape[2]
    assert heads % kv_heads == 0 and kv_len >= seq, "bad GQA or cache shape"
    assert q.stride(3) == 1 and k.stride(3) == 1 and v.stride(3) == 1, "head_dim must be contiguous"
    if out is None:
        out = torch.empty_like(q)
    bm, bn = blocks or ((64, 64) if head_d > 128 else (128, 64))
    grid = (triton.cdiv(seq, bm), bsz * heads)
    _prefill_kernel[grid](
        q,
        k,
        v,
        out,
        q.stride(0),
        q.stride(1),
        q.stride(2),
        k.stride(0),
        k.stride(1),
        k.stride(2),
        v.stride(0),
        v.stride(1),
        v.stride(2),
        out.stride(0),
        out.stride(1),
        out.stride(2),
        heads,
        seq,
        kv_len,
        kv_len - seq,
        window if window > 0 else kv_len + bm,
        heads // kv_heads,
        LOG2E / math.sqrt(head_d),
        BLOCK_M=bm,
        BLOCK_N=bn,
        BLOCK_D=triton.next_power_of_2(head_d),
        HEAD_D=head_d,
        UPCAST=interpreting(),
        num_warps=8 if bm >= 128 else 4,
        num_stages=2,
    )
    return out
