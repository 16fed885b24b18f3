"""Shape grids the planner needs: the GEMMs, attention and MoE shapes that real models produce at
TP 1-8 (model dimensions from the public HF configs in docs/architecture.md), plus a small CPU grid.

Conventions of each table's keys: ``CONVENTIONS`` (also written into meta.yaml).
"""

from __future__ import annotations

from typing import NamedTuple

CONVENTIONS: dict[str, str] = {
    "gemm": "C(m, n) = A(m, k) @ W(n, k)^T; m = tokens in the step",
    "attention_prefill": "heads/kv_heads per GPU (after TP); seq new tokens per sequence over "
    "prior cached tokens, causal (bottom-right aligned); window 0 = full causal",
    "attention_decode": "one query token per sequence over kv_len cached tokens; heads per GPU; "
    "Triton kernel reads a paged cache (16-token pages), SDPA a contiguous one",
    "moe": "tokens entering the layer; each GPU runs tokens*topk/ep routed rows spread evenly over "
    "its experts/ep local experts: grouped GEMM hidden -> 2*inter, SiLU-and-mul, grouped GEMM "
    "inter -> hidden; inter per GPU (after TP)",
    "memcpy": "bytes copied (each byte read once and written once)",
    "comm": "bytes = per-GPU buffer (all_reduce: the buffer; all_gather: the gathered output; "
    "reduce_scatter: the input; all_to_all: the send buffer); latency = max over ranks of the "
    "median per call",
}


class Dense(NamedTuple):
    """Attention and dense-MLP dimensions of one model."""

    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int  # 0 for MoE models (their MLP is in MOE_MODELS)


DENSE_MODELS: dict[str, Dense] = {
    "llama-3.1-8b": Dense(4096, 32, 8, 128, 14336),
    "llama-3.1-70b": Dense(8192, 64, 8, 128, 28672),
    "llama-3.1-405b": Dense(16384, 128, 8, 128, 53248),
    "qwen3-32b": Dense(5120, 64, 8, 128, 25600),
    "qwen3-235b-a22b": Dense(4096, 64, 4, 128, 0),
    "gpt-oss-120b": Dense(2880, 64, 8, 64, 0),
}


class Moe(NamedTuple):
    hidden: int
    inter: int
    experts: int
    topk: int


MOE_MODELS: dict[str, Moe] = {
    "mixtral-8x7b": Moe(4096, 14336, 8, 2),
    "qwen3-235b-a22b": Moe(4096, 1536, 128, 8),
    "deepseek-v3": Moe(7168, 2048, 256, 8),
    "gpt-oss-120b": Moe(2880, 2880, 128, 4),
}


class GemmShape(NamedTuple):
    m: int
    n: int
    k: int


class PrefillShape(NamedTuple):
    batch: int
    seq: int
    prior: int
    heads: int
    kv_heads: int
    head_dim: int
    window: int


class DecodeShape(NamedTuple):
    batch: int
    kv_len: int
    heads: int
    kv_heads: int
    head_dim: int


class MoeShape(NamedTuple):
    tokens: int
    hidden: int
    inter: int
    topk: int
    experts: int
    ep: int


TPS = (1, 2, 4, 8)


def _heads_per_gpu(d: Dense, tp: int) -> tuple[int, int]:
    """Query and KV heads on one GPU; KV heads are replicated when tp > kv_heads."""
    return d.heads // tp, max(1, d.kv_heads // tp)


def gemm_nk(models: list[str], tps: tuple[int, ...]) -> list[tuple[int, int]]:
    """(n, k) of the QKV, O, gate-up and down projections of ``models`` at each TP degree."""
    pairs: set[tuple[int, int]] = set()
    for name in models:
        d = DENSE_MODELS[name]
        for tp in tps:
            h, kv = _heads_per_gpu(d, tp)
            pairs.add(((h + 2 * kv) * d.head_dim, d.hidden))
            pairs.add((d.hidden, h * d.head_dim))
            if d.ffn:
                pairs.add((2 * d.ffn // tp, d.hidden))
                pairs.add((d.hidden, d.ffn // tp))
    return sorted(pairs)


def head_configs(models: list[str], tps: tuple[int, ...]) -> list[tuple[int, int, int]]:
    """Distinct (heads, kv_heads, head_dim) per GPU of ``models`` at each TP degree."""
    out = {
        (*_heads_per_gpu(DENSE_MODELS[m], tp), DENSE_MODELS[m].head_dim)
        for m in models
        for tp in tps
    }
    return sorted(out)


GPU_GEMM_M = (1, 4, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
GPU_MODELS = ["llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b", "qwen3-32b", "gpt-oss-120b"]
QUICK_MODELS = ["llama-3.1-8b", "llama-3.1-70b"]


def gpu_gemm(quick: bool) -> list[GemmShape]:
    """GEMMs of dense models at TP 1-8 over token counts 1..8192 (quick: 2 models, TP 1 and 8)."""
    ms = (1, 16, 128, 1024, 4096) if quick else GPU_GEMM_M
    nk = gemm_nk(QUICK_MODELS, (1, 8)) if quick else gemm_nk(GPU_MODELS, TPS)
    return [GemmShape(m, n, k) for n, k in nk for m in ms]


def gpu_prefill(quick: bool) -> list[PrefillShape]:
    """Causal prefill: whole prompts (prior 0) and chunks over a cached prefix."""
    heads = head_configs(QUICK_MODELS if quick else GPU_MODELS, (1, 8) if quick else TPS)
    seqs = (512, 4096) if quick else (128, 512, 1024, 2048, 4096, 8192)
    out = []
    for h, kv, d in heads:
        for seq in seqs:
            for prior in (0, 4096) if quick else (0, 2048, 8192):
                for batch in (1,) if quick else (1, 4):
                    if batch * (seq + prior) <= 32768:
                        out.append(PrefillShape(batch, seq, prior, h, kv, d, 0))
    return out


def gpu_decode(quick: bool) -> list[DecodeShape]:
    """Decode over a paged cache; KV footprint capped at 16 GiB per shape."""
    heads = head_configs(QUICK_MODELS if quick else GPU_MODELS, (1, 8) if quick else TPS)
    batches = (1, 32, 256) if quick else (1, 8, 32, 64, 128, 256, 512)
    lens = (1024, 8192) if quick else (512, 2048, 8192, 32768)
    out = []
    for h, kv, d in heads:
        for b in batches:
            for n in lens:
                if 2 * b * n * kv * d * 2 <= 16 * 2**30:
                    out.append(DecodeShape(b, n, h, kv, d))
    return out


def gpu_moe(quick: bool) -> list[MoeShape]:
    """MoE layers with the expert FFN split by TP (ep=1) or by EP (tp=1, ep=8)."""
    tokens = (16, 256, 4096) if quick else (1, 16, 64, 256, 1024, 4096, 16384)
    models = ["mixtral-8x7b", "qwen3-235b-a22b"] if quick else list(MOE_MODELS)
    out = []
    for name in models:
        m = MOE_MODELS[name]
        layouts = [(tp, 1) for tp in ((1, 8) if quick else TPS)] + [(1, 8)]
        for tp, ep in layouts:
            for t in tokens:
                out.append(MoeShape(t, m.hidden, m.inter // tp, m.topk, m.experts, ep))
    return out


def memcpy_bytes(device: str, quick: bool) -> list[int]:
    """Copy sizes: powers of two (GPU 4 KiB..4 GiB, CPU 4 KiB..64 MiB),
    every other one when quick."""
    top = 32 if device == "cuda" else 26
    step = 2 if quick else 1
    return [2**e for e in range(12, top + 1, step)]


def comm_bytes(device: str, quick: bool) -> list[int]:
    """Collective buffer sizes: powers of two (GPU 1 KiB..1 GiB, CPU 1 KiB..16 MiB)."""
    top = 30 if device == "cuda" else 24
    return [2**e for e in range(10, top + 1, 4 if quick else 2)]


def cpu_gemm(quick: bool) -> list[GemmShape]:
    """A small lattice that a 2-core CPU sweeps in seconds."""
    ms = (1, 4, 16, 64, 256) if quick else (1, 4, 16, 64, 256, 1024)
    ns = (256, 512, 1024) if quick else (256, 512, 1024, 2048)
    ks = (256, 1024) if quick else (256, 512, 1024, 2048)
    return [GemmShape(m, n, k) for n in ns for k in ks for m in ms]


def cpu_prefill(quick: bool) -> list[PrefillShape]:
    heads = ((8, 2, 64), (4, 1, 64)) if quick else ((8, 2, 64), (4, 1, 64), (16, 4, 64))
    seqs = (32, 128, 256) if quick else (32, 128, 256, 512, 1024)
    return [
        PrefillShape(1, seq, prior, h, kv, d, 0)
        for h, kv, d in heads
        for seq in seqs
        for prior in (0, 256)
    ]


def cpu_decode(quick: bool) -> list[DecodeShape]:
    heads = ((8, 2, 64), (4, 4, 64)) if quick else ((8, 2, 64), (4, 4, 64), (16, 4, 64))
    batches = (1, 4, 16) if quick else (1, 4, 16, 64)
    lens = (128, 512, 2048) if quick else (128, 512, 2048, 8192)
    return [DecodeShape(b, n, h, kv, d) for h, kv, d in heads for b in batches for n in lens]


def cpu_moe(quick: bool) -> list[MoeShape]:
    tokens = (4, 32, 128) if quick else (4, 32, 128, 512)
    return [
        MoeShape(t, 256, inter, 2, 8, ep) for inter in (256, 512) for ep in (1, 2) for t in tokens
    ]
