"""Decode attention over a paged KV cache with split-KV (flash-decoding) in Triton.

One new query token per sequence attends to its whole cached context. The cache is paged as in
vLLM's PagedAttention (Kwon et al., 2023, arXiv 2309.06180): k_cache, v_cache are
(num_pages, PAGE, KVH, D) and ``block_table[b, i]`` is the page holding tokens
[i*PAGE, (i+1)*PAGE) of sequence b. Each sequence's context is cut into ``splits`` pieces processed
in parallel (flash-decoding, Dao et al., 2023); a second kernel merges the partial softmaxes by
their log-sum-exp. One program serves a whole GQA group, so each K/V tile is read once.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from kernels_db.bench.triton_attention import LOG2E
from kernels_db.bench.triton_gemm import interpreting

MIN_DOT = 16  # tl.dot needs every dimension >= 16 on GPUs


@triton.jit
def _decode_split_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    bt_ptr,
    len_ptr,
    po_ptr,
    plse_ptr,
    sqb,
    sqh,
    skp,
    sks,
    skh,
    svp,
    svs,
    svh,
    sbt,
    spb,
    sph,
    sps,
    slb,
    slh,
    GROUP,
    PAGE,
    TOK_PER_SPLIT,
    qk_scale,
    BLOCK_G: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
    HEAD_D: tl.constexpr,
    UPCAST: tl.constexpr,
):
    b = tl.program_id(0)
    kvh = tl.program_id(1)
    split = tl.program_id(2)
    seq_len = tl.load(len_ptr + b)
    offs_g = tl.arange(0, BLOCK_G)
    offs_d = tl.arange(0, BLOCK_D)
    g_ok = offs_g < GROUP
    d_ok = offs_d < HEAD_D
    heads = kvh * GROUP + offs_g
    q = tl.load(
        q_ptr + b * sqb + heads[:, None] * sqh + offs_d[None, :],
        mask=g_ok[:, None] & d_ok[None, :],
        other=0.0,
    )
    if UPCAST:
        q = q.to(tl.float32)
    m_i = tl.full((BLOCK_G,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_G,), tl.float32)
    acc = tl.zeros((BLOCK_G, BLOCK_D), tl.float32)
    lo = split * TOK_PER_SPLIT
    hi = tl.minimum(lo + TOK_PER_SPLIT, seq_len)
    for start in range(lo, hi, BLOCK_N):
        tok = start + tl.arange(0, BLOCK_N)
        tok_ok = tok < hi
        # int64: page * page_stride exceeds 2**31 elements for caches over 4 GiB
        page = tl.load(bt_ptr + b * sbt + tok // PAGE, mask=tok_ok, other=0).to(tl.int64)
        slot = tok % PAGE
        kv_ok = tok_ok[:, None] & d_ok[None, :]
        k = tl.load(
            k_ptr + page[:, None] * skp + slot[:, None] * sks + kvh * skh + offs_d[None, :],
            mask=kv_ok,
            other=0.0,
        )
        v = tl.load(
            v_ptr + page[:, None] * svp + slot[:, None] * svs + kvh * svh + offs_d[None, :],
            mask=kv_ok,
            other=0.0,
        )
        if UPCAST:
            k = k.to(tl.float32)
            v = v.to(tl.float32)
        qk = tl.dot(q, tl.trans(k)) * qk_scale
        qk = tl.where(tok_ok[None, :], qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.exp2(qk - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    empty = l_i == 0.0  # this split lies past the end of the sequence
    out = acc / tl.where(empty, 1.0, l_i)[:, None]
    lse = tl.where(empty, float("-inf"), m_i + tl.log2(tl.where(empty, 1.0, l_i)))
    tl.store(
        po_ptr + b * spb + heads[:, None] * sph + split * sps + offs_d[None, :],
        out,
        mask=g_ok[:, None] & d_ok[None, :],
    )
    tl.store(plse_ptr + b * slb + heads * slh + split, lse, mask=g_ok)


@triton.jit
def _decode_merge_kernel(
    po_ptr,
    plse_ptr,
    o_ptr,
    spb,
    sph,
    sps,
    slb,
    slh,
    sob,
    soh,
    SPLITS,
    BLOCK_S: tl.constexpr,
    BLOCK_D: tl.constexpr,
    HEAD_D: tl.constexpr,
):
    b = tl.program_id(0)
    h = tl.program_id(1)
    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, BLOCK_D)
    s_ok = offs_s < SPLITS
    lse = tl.load(plse_ptr + b * slb + h * slh + offs_s, mask=s_ok, other=float("-inf"))
    w = tl.exp2(lse - tl.max(lse, 0))
    w = tl.where(s_ok & (lse > float("-inf")), w, 0.0)
    part = tl.load(
        po_ptr + b * spb + h * sph + offs_s[:, None] * sps + offs_d[None, :],
        mask=s_ok[:, None] & (offs_d[None, :] < HEAD_D),
        other=0.0,
    )
    out = tl.sum(part * w[:, None], 0) / tl.sum(w, 0)
    tl.store(
        o_ptr + b * sob + h * soh + offs_d, out.to(o_ptr.dtype.element_ty), mask=offs_d < HEAD_D
    )


def default_splits(batch: int, kv_heads: int, max_len: int, sm_count: int, block_n: int) -> int:
    """Splits per sequence so that batch * kv_heads * splits fills about two waves of SMs."""
    want = max(1, -(-2 * sm_count // (batch * kv_heads)))
    return max(1, min(want, -(-max_len // block_n)))


def paged_decode_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    out: torch.Tensor | None = None,
    *,
    splits: int | None = None,
    block_n: int = 64,
    sm_count: int = 132,
) -> torch.Tensor:
    """Attention of q (B, H, D) over the paged cache; returns (B, H, D).

    ``seq_lens`` (B,) int32 tokens per sequence; ``block_table`` (B, max_pages) int32 page ids.
    """
    bsz, heads, head_d = q.shape
    page, kv_heads = k_cache.shape[1], k_cache.shape[2]
    group = heads // kv_heads
    assert heads % kv_heads == 0, "heads must be a multiple of kv_heads"
    max_len = block_table.shape[1] * page
    n_split = splits or default_splits(bsz, kv_heads, max_len, sm_count, block_n)
    tok_per_split = -(-max_len // n_split)
    tok_per_split = -(-tok_per_split // block_n) * block_n
    if out is None:
        out = torch.empty_like(q)
    part = torch.empty((bsz, heads, n_split, head_d), device=q.device, dtype=torch.float32)
    lse = torch.empty((bsz, heads, n_split), device=q.device, dtype=torch.float32)
    block_d = triton.next_power_of_2(head_d)
    _decode_split_kernel[(bsz, kv_heads, n_split)](
        q,
        k_cache,
        v_cache,
        block_table,
        seq_lens,
        part,
        lse,
        q.stride(0),
        q.stride(1),
        k_cache.stride(0),
        k_cache.stride(1),
        k_cache.stride(2),
        v_cache.stride(0),
        v_cache.stride(1),
        v_cache.stride(2),
        block_table.stride(0),
        part.stride(0),
        part.stride(1),
        part.stride(2),
        lse.stride(0),
        lse.stride(1),
        group,
        page,
        tok_per_split,
        LOG2E / math.sqrt(head_d),
        BLOCK_G=max(MIN_DOT, triton.next_power_of_2(group)),
        BLOCK_N=block_n,
        BLOCK_D=block_d,
        HEAD_D=head_d,
        UPCAST=interpreting(),
        num_warps=4,
        num_stages=2,
    )
    _decode_merge_kernel[(bsz, heads)](
        part,
        lse,
        out,
        part.stride(0),
        part.stride(1),
        part.stride(2),
        lse.stride(0),
        lse.stride(1),
        out.stride(0),
        out.stride(1),
        n_split,
        BLOCK_S=triton.next_power_of_2(n_split),
        BLOCK_D=block_d,
        HEAD_D=head_d,
    )
    return out


def make_paged_cache(
    k: torch.Tensor,
    v: torch.Tensor,
    page: int,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Scatter contiguous k, v (B, KVH, L, D) into shuffled pages;
    returns (k_cache, v_cache, table)."""
    bsz, kv_heads, length, head_d = k.shape
    n_pages = -(-length // page)
    perm = torch.randperm(bsz * n_pages, generator=generator).to(k.device)
    table = perm.view(bsz, n_pages).to(torch.int32)
    pad = n_pages * page - length

    def paged(x: torch.Tensor) -> torch.Tensor:
        x = torch.nn.functional.pad(x, (0, 0, 0, pad))  # (B, KVH, n_pages*page, D)
        x = x.view(bsz, kv_heads, n_pages, page, head_d).permute(0, 2, 3, 1, 4)
        cache = torch.empty((bsz * n_pages, page, kv_heads, head_d), dtype=x.dtype, device=x.device)
        cache[perm] = x.reshape(bsz * n_pages, page, kv_heads, head_d)
        return cache

    return paged(k), paged(v), table
