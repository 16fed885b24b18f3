"""The memory model, vectorized: weights, KV + state per sequence, activations and reserve per GPU.

This is the one implementation of the memory terms (docs/architecture.md "Memory"; bytes): weights
sharded attention/tp, FFN and experts/(tp·dp), embeddings/tp on the first and last stage;
activations for the chunk; reserve. Every function takes arrays of candidates (``ParallelArrays``)
or scalars (one deployment). Pipeline stages two ways, both here: exactly, the layers of each
stage (``stage_weight_bytes``, ``stage_kv_per_token``, ``stage_seq_bytes``; K = 1 is
:func:`planner.perf.memory_plan.plan_memory`, the memory ``estimate`` and ``planner memory``
report), and
for the KV capacity the serving model of ``evaluate_batch`` and the solvers reads: weights as the
heaviest stage, exactly as above (``weights_per_gpu``), KV as ceil(layers/pp) layers of the
model's mix (``seq_bytes_per_gpu``). The two KV counts agree on models whose layers are all alike;
on mixed ones (dense-then-MoE, hybrid attention) at pp > 1 they differ by a few percent.

KV per token for a GQA layer is 2 (K and V) x kv_heads_per_gpu x head_dim x bytes; for MLA it is
(kv_lora_rank + rope_dim) x bytes, replicated on every TP rank (so not divided by TP);
sliding-window layers hold at most the window. A DSA model (``index_head_dim`` > 0) also caches the
lightning indexer's one key per token and layer in fp8 with an fp32 scale per 128 elements
(:func:`indexer_key_bytes_per_token`), whatever the KV dtype.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol, TypeAlias

import numpy as np

from hardware.spec import GpuSpec
from planner.model.params import embedding_params, layer_params
from planner.model.spec import LayerSpec, ModelSpec
from planner.perf.opgraph import ParallelArrays, layer_groups

Num: TypeAlias = "np.ndarray | float"
"""One value per candidate (array) or one deployment's value (scalar)."""
LayerCounts: TypeAlias = "Iterable[tuple[LayerSpec, int]]"
"""Distinct layers of a stage and how many of each."""

GIB = 1024**3
MIB = 1024**2
KV_BLOCK_TOKENS = 16
"""Paged-KV block size (engines default to 16 to 64 tokens; we use 16)."""

# Bytes per weight element including block-scale overhead:
# fp8 with 128x128 fp32 block scales: 1 + 4/16384; NVFP4 (16-element groups, fp8 scale): 0.5 + 1/16;
# int4 AWQ/GPTQ (128-element groups, fp16 scale + zero): 0.5 + 4/128.
WEIGHT_BYTES: dict[str, float] = {
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0 + 4 / 16384,
    "fp4": 0.5 + 1 / 16,
    "int4": 0.5 + 4 / 128,
}
KV_BYTES: dict[str, float] = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0}

CUDA_CONTEXT_BYTES = 0.75 * GIB
"""ASSUMPTION: CUDA context + library handles per GPU (typical 0.5-1 GiB on Hopper)."""
CUDA_GRAPH_BYTES = 0.5 * GIB
"""ASSUMPTION: memory held by captured CUDA graphs (engines log 0.3-1 GiB for default sizes)."""
NCCL_BYTES = 0.25 * GIB
"""ASSUMPTION: NCCL/custom all-reduce buffers when the worker spans more than one GPU."""


class Split(Protocol):
    """TP, DP and EP sizes: ints (one deployment) or arrays (many candidates)."""

    @property
    def tp(self) -> Num: ...
    @property
    def dp(self) -> Num: ...
    @property
    def ep(self) -> Num: ...


def _groups(m: ModelSpec) -> list[tuple[LayerSpec, int]]:
    """``layer_groups`` of ``m`` as (layer, count) pairs."""
    return [
        (LayerSpec(attention=g.attention, window=g.window, moe=g.moe), g.count)  # type: ignore[arg-type]
        for g in layer_groups(m)
    ]


def layers_weight_bytes(
    m: ModelSpec, layers: LayerCounts, tp: Num, dp: Num, weight_bytes: Num
) -> np.ndarray:
    """Weight bytes of ``layers`` on one GPU (no embeddings): attention and shared experts / tp,
    dense FFN and routed experts / (tp·dp) in ``weight_bytes`` per element; the router in bf16."""
    total = np.zeros(np.shape(tp))
    for layer, count in layers:
        lp = layer_params(m, layer)
        per = (
            lp.attention / tp
            + (lp.dense_ffn + lp.routed_experts) / (tp * dp)
            + lp.shared_experts / tp
        )
        total += count * (per * weight_bytes + lp.router * WEIGHT_BYTES["bf16"])
    return total


def embedding_bytes(m: ModelSpec, tp: Num) -> Num:
    """Embedding and LM-head weights (bf16) on one GPU of the first or last stage."""
    return embedding_params(m) * WEIGHT_BYTES["bf16"] / tp


def weights_per_gpu(m: ModelSpec, p: ParallelArrays) -> np.ndarray:
    """Weight bytes on the fullest GPU."""
    # the heaviest stage, as planner.perf.memory_plan counts it: a model's layers differ in weight
    # (dense-then-MoE), so ceil(layers/pp) layers of the mix would under-count the fullest stage
    shape = np.broadcast(p.pp, p.tp, p.dp, p.weight_bytes).shape
    pp, tp, dp, wb = (
        np.broadcast_to(np.asarray(x, dtype=float), shape)
        for x in (p.pp, p.tp, p.dp, p.weight_bytes)
    )
    out = np.zeros(shape)
    for v in np.unique(pp):
        sel = pp == v
        out[sel] = stage_weight_bytes(m, int(v), tp[sel], dp[sel], wb[sel])
    return out


def kv_elems_per_token(m: ModelSpec, layer: LayerSpec, tp: Num) -> Num:
    """KV elements one token adds to one GPU in ``layer`` (0 for linear attention)."""
    if layer.attention == "mla":
        assert m.mla is not None
        return np.full(np.shape(tp), float(m.mla.kv_lora_rank + m.mla.qk_rope_head_dim))
    if layer.attention == "linear":
        return 0.0
    return 2.0 * np.ceil(m.num_kv_heads / tp) * m.head_dim


INDEXER_SCALE_BLOCK = 128
"""Elements of an indexer key that share one fp32 scale (DeepSeek-V3.2's fp8 indexer cache, as the
engines store it: e.g. lightllm ``Deepseek3_2MemoryManager(index_quant_block_size)``; vLLM and
SGLang keep 128-element blocks too)."""


def indexer_key_bytes_per_token(m: ModelSpec, layer: LayerSpec) -> float:
    """Bytes of the DSA lightning indexer's cached key for one token in ``layer`` on one GPU: one
    fp8 key of ``index_head_dim`` plus fp32 block scales, replicated on every TP rank like the MLA
    latent; 0 for models without an indexer."""
    if layer.attention != "mla" or m.mla is None or m.mla.index_head_dim <= 0:
        return 0.0
    dim = m.mla.index_head_dim
    return dim * 1.0 + math.ceil(dim / INDEXER_SCALE_BLOCK) * 4.0


def state_bytes_per_seq(m: ModelSpec, layer: LayerSpec, tp: Num) -> Num:
    """Recurrent state of a linear-attention layer per sequence: fp32 matrix state + bf16 conv
    state."""
    if layer.attention != "linear" or m.linear_attn is None:
        return 0.0
    la = m.linear_attn
    ssm = la.num_value_heads * la.key_head_dim * la.value_head_dim * 4.0
    conv = (
        (2 * la.num_key_heads * la.key_head_dim + la.num_value_heads * la.value_head_dim)
        * (la.conv_kernel - 1)
        * 2.0
    )
    return (ssm + conv) / tp


def layers_seq_bytes(
    m: ModelSpec, layers: LayerCounts, tp: Num, kv_bytes: Num, tokens: Num
) -> np.ndarray:
    """KV + state bytes of one sequence of ``tokens`` in ``layers`` on one GPU, windows and block
    rounding included."""
    total = np.zeros(np.shape(tp))
    for layer, count in layers:
        if layer.attention == "linear":
            total += count * state_bytes_per_seq(m, layer, tp)
            continue
        held = np.minimum(tokens, layer.window) if layer.window else tokens
        held = np.ceil(held / KV_BLOCK_TOKENS) * KV_BLOCK_TOKENS
        per_token = kv_elems_per_token(m, layer, tp) * kv_bytes
        total += count * (per_token + indexer_key_bytes_per_token(m, layer)) * held
    return total


def seq_bytes_per_gpu(m: ModelSpec, p: ParallelArrays, tokens: np.ndarray) -> np.ndarray:
    """KV + recurrent state of one sequence of ``tokens`` on one GPU of the fullest stage."""
    stage_frac = np.ceil(m.num_layers / p.pp) / m.num_layers
    return layers_seq_bytes(m, _groups(m), p.tp, p.kv_bytes, tokens) * stage_frac


def activation_bytes(m: ModelSpec, p: Split, max_num_batched_tokens: Num, max_num_seqs: Num) -> Num:
    """Peak activation workspace of one step of ``max_num_batched_tokens`` tokens (bf16), bytes.

    Estimate of the live tensors at the widest point of a layer: the residual stream and its
    normed copy (2h), the QKV output, and the gated FFN output (2 x inter / tp, or for MoE the
    top_k expert copies of each token), plus fp32 logits for ``max_num_seqs`` sampled rows.
    """
    h = m.hidden_size
    qkv = (m.num_heads + 2 * m.num_kv_heads) * m.head_dim / p.tp
    ffn = 3 * m.intermediate_size / (p.tp * p.dp)
    if m.moe is not None:
        moe_tp = np.maximum(1, p.tp * p.dp // p.ep)
        ffn = np.maximum(ffn, m.moe.top_k * (h + 3 * m.moe.expert_intermediate / moe_tp))
    per_token = (2 * h + np.maximum(qkv, ffn)) * 2.0
    logits = max_num_seqs * m.vocab_size / p.tp * 4.0
    return max_num_batched_tokens * per_token + logits


def reserved_bytes(gpus: Num, cuda_graphs: bool = True) -> Num:
    """CUDA context, CUDA-graph pool and comm buffers per GPU of a worker of ``gpus`` GPUs
    (stated assumptions above)."""
    graphs = CUDA_GRAPH_BYTES if cuda_graphs else 0.0
    return CUDA_CONTEXT_BYTES + graphs + NCCL_BYTES * (np.asarray(gpus) > 1)


def kv_budget_per_gpu(
    m: ModelSpec,
    gpu: GpuSpec,
    p: ParallelArrays,
    chunk: np.ndarray,
    max_num_seqs: np.ndarray,
    util: float | np.ndarray,
) -> np.ndarray:
    """Bytes left for KV on the fullest GPU (<= 0: does not fit)."""
    return np.asarray(
        gpu.memory_bytes * util
        - weights_per_gpu(m, p)
        - activation_bytes(m, p, chunk, max_num_seqs)
        - reserved_bytes(p.tp * p.pp * p.dp)
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
    """KV bytes of one prompt that one prefill GPU sends (its shard; MLA latent sent once per
    stage)."""
    tok = np.ceil(isl / KV_BLOCK_TOKENS) * KV_BLOCK_TOKENS
    per = seq_bytes_per_gpu(m, p, tok)
    mla = m.mla is not None
    return per / p.tp if mla else per


def stage_layers(m: ModelSpec, pp: int) -> list[tuple[LayerSpec, ...]]:
    """Layers of each pipeline stage (even split, the first stages take the remainder)."""
    per, extra = divmod(m.num_layers, pp)
    stages, start = [], 0
    for s in range(pp):
        n = per + (1 if s < extra else 0)
        stages.append(m.layers[start : start + n])
        start += n
    return stages


def layer_counts(layers: tuple[LayerSpec, ...]) -> list[tuple[LayerSpec, int]]:
    """Distinct layers of ``layers`` (first-seen order) and how many of each."""
    return list(Counter(layers).items())


@dataclass(frozen=True)
class Stage:
    """The layers of one pipeline stage."""

    counts: tuple[tuple[LayerSpec, int], ...]
    """``layer_counts`` of the stage's layers."""
    index: tuple[int, ...]
    """Each layer of the stage, in order: its index into the model's distinct layers."""


@functools.lru_cache(maxsize=64)
def stages(m: ModelSpec, pp: int) -> tuple[tuple[LayerSpec, ...], tuple[Stage, ...]]:
    """The distinct layers of ``m`` (first-seen order) and its ``pp`` stages (``stage_layers``),
    cached per spec and pp (a ModelSpec hashes its fields once, ``hardware.frozen.FrozenSpec``):
    a model's layers are distinct-but-equal objects, so finding the equal ones (pydantic
    equality) is the costly part of a memory plan."""
    distinct: dict[LayerSpec, int] = {}
    out = tuple(
        Stage(
            tuple(layer_counts(layers)),
            tuple(distinct.setdefault(x, len(distinct)) for x in layers),
        )
        for layers in stage_layers(m, pp)
    )
    return tuple(distinct), out


def layer_kv_bytes_per_token(m: ModelSpec, layer: LayerSpec, tp: Num, kv_bytes: float) -> Num:
    """KV bytes one token adds to one GPU in ``layer`` (0 for linear attention; a DSA indexer's
    key included)."""
    return kv_elems_per_token(m, layer, tp) * kv_bytes + indexer_key_bytes_per_token(m, layer)


def stage_weight_bytes(m: ModelSpec, pp: int, tp: Num, dp: Num, weight_bytes: Num) -> np.ndarray:
    """Weight bytes on the fullest GPU, stage by stage: each stage's layers
    (``layers_weight_bytes``), embeddings on the first and last stage; the largest stage."""
    _, st = stages(m, pp)
    per_stage = [
        layers_weight_bytes(m, s.counts, tp, dp, weight_bytes)
        + (embedding_bytes(m, tp) if i in (0, pp - 1) else 0.0)
        for i, s in enumerate(st)
    ]
    return np.asarray(np.max(per_stage, axis=0))


def stage_kv_per_token(
    m: ModelSpec, pp: int, tp: Num, kv_bytes: float
) -> tuple[np.ndarray, np.ndarray]:
    """(KV bytes per token of context, recurrent-state bytes per sequence) on one GPU of the stage
    holding the most KV per token (the first such stage), full attention (no window)."""
    distinct, st = stages(m, pp)
    kv_of = [layer_kv_bytes_per_token(m, x, tp, kv_bytes) for x in distinct]
    state_of = [state_bytes_per_seq(m, x, tp) for x in distinct]
    sums = [_in_order(kv_of, s.index) for s in st] + [_in_order(state_of, s.index) for s in st]
    both = np.array(np.broadcast_arrays(*sums), dtype=float)
    kv, state = both[: len(st)], both[len(st) :]
    fullest = np.argmax(kv, axis=0)[None, ...]  # the first stage with the most KV per token
    return (
        np.squeeze(np.take_along_axis(kv, fullest, axis=0), axis=0),
        np.squeeze(np.take_along_axis(state, fullest, axis=0), axis=0),
    )


def _in_order(values: list[Num], index: tuple[int, ...]) -> Num:
    """Sum of ``values[i]`` for ``i`` in ``index``, added in that order (a stage's layers)."""
    total: Num = 0
    for i in index:
        total = total + values[i]
    return total


def stage_seq_bytes(m: ModelSpec, pp: int, tp: Num, kv_bytes: float, tokens: Num) -> np.ndarray:
    """KV + state bytes of one sequence of ``tokens`` on one GPU of the fullest stage (windows and
    block rounding included)."""
    _, st = stages(m, pp)
    per_stage = [layers_seq_bytes(m, s.counts, tp, kv_bytes, tokens) for s in st]
    return np.asarray(np.max(per_stage, axis=0))
