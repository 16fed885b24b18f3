"""Vectorized memory check for many candidates: KV budget per GPU and sequences that fit.

Same terms as :mod:`planner.memory` (weights sharded attention/tp, FFN and experts/(tp·dp),
embeddings/tp on the first and last stage; activations for the chunk; reserve), with pipeline
stages approximated as ceil(layers/pp) layers each. ``planner.memory.plan_memory`` stays the exact,
scalar reference (used by ``estimate``); tests check the two agree.
"""

from __future__ import annotations

import numpy as np

from hardware.spec import GpuSpec
from planner import memory
from planner.memory import (
    CUDA_CONTEXT_BYTES,
    CUDA_GRAPH_BYTES,
    KV_BLOCK_TOKENS,
    NCCL_BYTES,
    WEIGHT_BYTES,
)
from planner.model_spec import LayerSpec, ModelSpec
from planner.opgraph import ParallelArrays, layer_groups
from planner.params import embedding_params, layer_params


def weights_per_gpu(m: ModelSpec, p: ParallelArrays) -> np.ndarray:
    """Weight bytes on the fullest GPU."""
    stage_frac = np.ceil(m.num_layers / p.pp) / m.num_layers
    total = np.zeros_like(p.tp)
    for g in layer_groups(m):
        lp = layer_params(m, LayerSpec(attention=g.attention, window=g.window, moe=g.moe))  # type: ignore[arg-type]
        per = (
            lp.attention / p.tp
            + (lp.dense_ffn + lp.routed_experts) / (p.tp * p.dp)
            + lp.shared_experts / p.tp
        )
        total += g.count * (per * p.weight_bytes + lp.router * WEIGHT_BYTES["bf16"])
    return total * stage_frac + embedding_params(m) * WEIGHT_BYTES["bf16"] / p.tp


def seq_bytes_per_gpu(m: ModelSpec, p: ParallelArrays, tokens: np.ndarray) -> np.ndarray:
    """KV + recurrent state of one sequence of ``tokens`` on one GPU of the fullest stage."""
    stage_frac = np.ceil(m.num_layers / p.pp) / m.num_layers
    total = np.zeros_like(p.tp)
    for g in layer_groups(m):
        held = np.minimum(tokens, g.window) if g.window else tokens
        held = np.ceil(held / KV_BLOCK_TOKENS) * KV_BLOCK_TOKENS
        if g.attention == "mla":
            assert m.mla is not None
            elems = np.full_like(p.tp, float(m.mla.kv_lora_rank + m.mla.qk_rope_head_dim))
        elif g.attention == "linear":
            layer = LayerSpec(attention="linear", window=g.window, moe=g.moe)
            total += g.count * memory.state_bytes_per_seq(m, layer, p.tp)
            continue
        else:
            elems = 2.0 * np.ceil(m.num_kv_heads / p.tp) * m.head_dim
        total += g.count * elems * p.kv_bytes * held
    return total * stage_frac


def activation_bytes(
    m: ModelSpec, p: ParallelArrays, chunk: np.ndarray, max_num_seqs: np.ndarray
) -> np.ndarray:
    """Activation workspace per candidate (``planner.memory.activation_bytes`` over arrays)."""
    return np.asarray(memory.activation_bytes(m, p, chunk, max_num_seqs), dtype=float)


def kv_budget_per_gpu(
    m: ModelSpec,
    gpu: GpuSpec,
    p: ParallelArrays,
    chunk: np.ndarray,
    max_num_seqs: np.ndarray,
    util: float | np.ndarray,
) -> np.ndarray:
    """Bytes left for KV on the fullest GPU (<= 0: does not fit)."""
    gpus = p.tp * p.pp * p.dp
    reserve = CUDA_CONTEXT_BYTES + CUDA_GRAPH_BYTES + NCCL_BYTES * (gpus > 1)
    return (
        gpu.memory_bytes * util
        - weights_per_gpu(m, p)
        - activation_bytes(m, p, chunk, max_num_seqs)
        - reserve
    )


def seq_capacity(
    m: ModelSpec,
    gpu: GpuSpec,
    p: ParallelArrays,
    chunk: np.ndarray,
    max_num_seqs: np.ndarray,
    tokens: np.ndarray,
    util: float | np.ndarray,
) -> np.ndarray:
    """Sequences of ``tokens`` that fit in the worker's KV budget (0 when weights do not fit)."""
    budget = kv_budget_per_gpu(m, gpu, p, chunk, max_num_seqs, util)
    per_seq = np.maximum(seq_bytes_per_gpu(m, p, tokens), 1.0)
    return np.where(budget > 0, np.floor(np.maximum(budget, 0.0) / per_seq) * p.dp, 0.0)


def kv_transfer_bytes_per_gpu(m: ModelSpec, p: ParallelArrays, isl: np.ndarray) -> np.ndarray:
    """KV bytes of one prompt that one prefill GPU sends
    (its shard; MLA latent sent once per stage)."""
    tok = np.ceil(isl / KV_BLOCK_TOKENS) * KV_BLOCK_TOKENS
    per = seq_bytes_per_gpu(m, p, tok)
    mla = m.mla is not None
    return per / p.tp if mla else per
