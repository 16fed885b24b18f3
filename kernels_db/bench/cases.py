"""Timed cases: for one shape, the production reference kernel and (on CUDA) our Triton kernel,
each as a zero-argument closure over pre-allocated inputs. ``{kernel_source: fn}`` per shape.

Triton modules are imported lazily so the CPU path never needs a working Triton backend.
``triton`` defaults to ``device == "cuda"``; tests pass ``triton=True`` on CPU under
``TRITON_INTERPRET=1`` to run the GPU path's glue on tiny shapes.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from kernels_db.bench.shapes import DecodeShape, GemmShape, MoeShape, PrefillShape

Cases = dict[str, Callable[[], object]]
TORCH_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
FP8 = "fp8"
DECODE_PAGE = 16  # tokens per KV page, vLLM's default block size


def _rand(*shape: int, dtype: torch.dtype, device: str, scale: float = 1.0) -> torch.Tensor:
    """Normal random tensor; drawn in 16 bits on GPUs (no 2x fp32 temporaries for big weights)."""
    draw = torch.float32 if device == "cpu" or dtype == torch.float32 else torch.bfloat16
    x = torch.randn(*shape, device=device, dtype=draw)
    if scale != 1.0:
        x.mul_(scale)
    return x if draw == dtype else x.to(dtype)


def _want_triton(device: str, triton: bool | None) -> bool:
    return device == "cuda" if triton is None else triton


def gemm_cases(s: GemmShape, dtype: str, device: str, triton: bool | None = None) -> Cases:
    """x (m, k) @ w.T with w (n, k) row-major, as nn.Linear stores weights."""
    if dtype == FP8:
        return _fp8_gemm_cases(s, device)
    dt = TORCH_DTYPES[dtype]
    x = _rand(s.m, s.k, dtype=dt, device=device)
    w = _rand(s.n, s.k, dtype=dt, device=device)
    out = torch.empty(s.m, s.n, dtype=dt, device=device)
    cases: Cases = {"torch.matmul": lambda: torch.matmul(x, w.t(), out=out)}
    if _want_triton(device, triton):
        from kernels_db.bench.triton_gemm import gemm

        cases["triton"] = lambda: gemm(x, w.t(), out)
    return cases


def _fp8_gemm_cases(s: GemmShape, device: str) -> Cases:
    """e4m3 inputs with per-tensor scales, bf16 output (the common fp8 serving GEMM)."""
    from kernels_db.bench.triton_gemm import gemm

    x = _rand(s.m, s.k, dtype=torch.float8_e4m3fn, device=device)
    w = _rand(s.n, s.k, dtype=torch.float8_e4m3fn, device=device)
    one = torch.ones((), device=device, dtype=torch.float32)
    out = torch.empty(s.m, s.n, dtype=torch.bfloat16, device=device)
    return {
        "torch._scaled_mm": lambda: torch._scaled_mm(
            x, w.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16
        ),
        "triton": lambda: gemm(x, w.t(), out, scale=1.0),
    }


def prefill_cases(s: PrefillShape, dtype: str, device: str, triton: bool | None = None) -> Cases:
    """Causal GQA prefill of ``seq`` tokens over ``prior`` cached ones (SDPA vs Triton)."""
    dt = TORCH_DTYPES[dtype]
    kv_len = s.prior + s.seq
    q = _rand(s.batch, s.heads, s.seq, s.head_dim, dtype=dt, device=device)
    k = _rand(s.batch, s.kv_heads, kv_len, s.head_dim, dtype=dt, device=device)
    v = _rand(s.batch, s.kv_heads, kv_len, s.head_dim, dtype=dt, device=device)
    mask = None
    if s.window:
        pos_q = torch.arange(s.prior, kv_len, device=device)[:, None]
        pos_k = torch.arange(kv_len, device=device)[None, :]
        mask = (pos_k <= pos_q) & (pos_k > pos_q - s.window)
    elif s.prior:
        from torch.nn.attention.bias import causal_lower_right

        mask = causal_lower_right(s.seq, kv_len)

    def sdpa() -> torch.Tensor:
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=mask is None, enable_gqa=True
        )

    cases: Cases = {"torch.sdpa": sdpa}
    if s.prior and not s.window:
        try:
            sdpa()
        except RuntimeError:  # a backend without GQA under a lower-right causal bias
            group = s.heads // s.kv_heads
            k_rep, v_rep = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
            cases = {
                "torch.sdpa+repeat_kv": lambda: F.scaled_dot_product_attention(
                    q, k_rep, v_rep, attn_mask=mask
                )
            }
    if _want_triton(device, triton):
        from kernels_db.bench.triton_attention import prefill_attention

        out = torch.empty_like(q)
        cases["triton"] = lambda: prefill_attention(q, k, v, out, window=s.window)
    return cases


def decode_cases(
    s: DecodeShape,
    dtype: str,
    device: str,
    sm_count: int = 0,
    triton: bool | None = None,
) -> Cases:
    """One query token per sequence over ``kv_len`` cached tokens: SDPA over a contiguous cache,
    and the Triton split-KV kernel over the same keys laid out in shuffled pages."""
    dt = TORCH_DTYPES[dtype]
    q = _rand(s.batch, s.heads, 1, s.head_dim, dtype=dt, device=device)
    k = _rand(s.batch, s.kv_heads, s.kv_len, s.head_dim, dtype=dt, device=device)
    v = _rand(s.batch, s.kv_heads, s.kv_len, s.head_dim, dtype=dt, device=device)
    cases: Cases = {
        "torch.sdpa": lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True),
    }
    if _want_triton(device, triton):
        from kernels_db.bench.triton_decode import make_paged_cache, paged_decode_attention

        k_cache, v_cache, table = make_paged_cache(k, v, DECODE_PAGE)
        lens = torch.full((s.batch,), s.kv_len, dtype=torch.int32, device=device)
        q3 = q[:, :, 0].contiguous()
        out = torch.empty_like(q3)
        cases["triton"] = lambda: paged_decode_attention(
            q3, k_cache, v_cache, table, lens, out, sm_count=sm_count or 132
        )
    return cases


def moe_counts(s: MoeShape) -> list[int]:
    """Routed rows per local expert under even routing: tokens*topk/ep over experts/ep experts."""
    local = max(1, s.experts // s.ep)
    rows = max(1, s.tokens * s.topk // s.ep)
    base, extra = divmod(rows, local)
    return [base + (1 if e < extra else 0) for e in range(local)]


def _grouped_mm_fn() -> Callable[..., torch.Tensor] | None:
    fn = getattr(F, "grouped_mm", None) or getattr(torch, "_grouped_mm", None)
    return fn


def moe_cases(s: MoeShape, dtype: str, device: str, triton: bool | None = None) -> Cases:
    """Expert FFN of one MoE layer: grouped GEMM up (hidden -> 2*inter), SiLU-and-mul, grouped
    GEMM down (inter -> hidden). Reference: torch grouped_mm where it runs, else a per-expert
    loop."""
    dt = TORCH_DTYPES[dtype]
    counts = moe_counts(s)
    rows, local = sum(counts), len(counts)
    x = _rand(rows, s.hidden, dtype=dt, device=device)
    w_up = _rand(local, s.hidden, 2 * s.inter, dtype=dt, device=device, scale=0.05)
    w_down = _rand(local, s.inter, s.hidden, dtype=dt, device=device, scale=0.05)
    ends = torch.tensor(counts, device=device).cumsum(0).to(torch.int32)
    starts = [sum(counts[:e]) for e in range(local)]

    def act(h: torch.Tensor) -> torch.Tensor:
        return F.silu(h[:, : s.inter]) * h[:, s.inter :]

    def loop() -> torch.Tensor:
        outs = [
            act(x[a : a + c] @ w_up[e]) @ w_down[e]
            for e, (a, c) in enumerate(zip(starts, counts, strict=True))
        ]
        return torch.cat(outs)

    cases: Cases = {"torch.matmul-loop": loop}
    gmm = _grouped_mm_fn()
    if gmm is not None and (device == "cpu" or dt == torch.bfloat16):
        try:
            gmm(x, w_up, offs=ends)
            cases = {
                "torch.grouped_mm": lambda: gmm(act(gmm(x, w_up, offs=ends)), w_down, offs=ends)
            }
        except (RuntimeError, TypeError, NotImplementedError):
            pass  # unsupported on this device/dtype: keep the loop
    if _want_triton(device, triton):
        from kernels_db.bench.triton_moe import grouped_gemm, moe_blocks, tile_map

        tiles = tile_map(counts, moe_blocks(rows / local)[0], device)
        h = torch.empty(rows, 2 * s.inter, device=device, dtype=dt)
        y = torch.empty(rows, s.hidden, device=device, dtype=dt)
        cases["triton"] = lambda: grouped_gemm(
            act(grouped_gemm(x, w_up, counts, h, tiles=tiles)), w_down, counts, y, tiles=tiles
        )
    return cases


def memcpy_cases(n_bytes: int, device: str, triton: bool | None = None) -> Cases:
    """Copy ``n_bytes`` between two buffers."""
    src = torch.empty(n_bytes, dtype=torch.uint8, device=device).random_(0, 255)
    dst = torch.empty_like(src)
    cases: Cases = {"torch.copy_": lambda: dst.copy_(src)}
    if _want_triton(device, triton):
        from kernels_db.bench.triton_copy import copy

        cases["triton"] = lambda: copy(src, dst)
    return cases
