"""The memory model, vectorized: weights, KV + state per sequence, activations and reserve per GPU.

This is the one implementation of the memory terms (docs/architecture.md "Memory"; bytes): weights
sharded attention/tp, FFN and experts/(tp·dp), embeddings/tp on the first and last stage;
activations for the chunk; reserve. Every function takes arrays of candidates (``ParallelArrays``)
or scalars (one deployment). Pipeline stages two ways, both here: exactly, the layers of each
stage (``stage_weight_bytes``, ``stage_kv_per_token``, ``stage_seq_bytes``; K = 1 is
:func:`planner.memory.plan_memory`, the memory ``estimate`` and ``planner memory`` report), and
as ceil(layers/pp) layers of the model's mix (``weights_per_gpu``, ``seq_bytes_per_gpu``: the KV
capacity the serving model of ``evaluate_batch`` and the solvers reads). The two agree on models
whose layers are all alike; on mixed ones (dense-then-MoE, hybrid attention) at pp > 1 they
differ by a few percent.

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
from enum import IntEnum
from typing import Protocol, TypeAlias

import numpy as np

from hardware.spec import GpuSpec
from planner.model_spec import LayerSpec, ModelSpec
from planner.opgraph import ParallelArrays, layer_groups
from planner.params import embedding_params, layer_params

Num: TypeAlias = "np.ndarray | float"
"""One value per candidate (array) or one deployment's value (scalar)."""
LayerCounts: TypeAlias = "Iterable[tuple[LayerSpec, int]]"
"""Distinct layers of a stage and how many of each."""

GIB = 1024**3
KV_BLOCK_TOKENS = 16
"""Paged-KV block size (vLLM/SGLang/TRT-LLM default 16 to 64 tokens; we use 16)."""

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
"""ASSUMPTION: memory held by captured CUDA graphs (vLLM logs 0.3-1 GiB for default sizes)."""
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
    stage_frac = np.ceil(m.num_layers / p.pp) / m.num_layers
    total = layers_weight_bytes(m, _groups(m), p.tp, p.dp, p.weight_bytes)
    return np.asarray(total * stage_frac + embedding_bytes(m, p.tp))


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


# --- Engines' default KV pools (replaying measured rows) ---------------------------------------
# Our budget is vLLM's: KV = gpu_memory_utilization x device - weights - activations - reserve.
# A measured row that does not record its engine's memory flag ran at that engine's default,
# which sizes the pool differently; ``default_pool_util`` expresses each default as the
# equivalent utilization, so the rest of the memory model is shared.

MIB = 1024**2


class KvPool(IntEnum):
    """How an engine sizes its KV pool at its default memory flag."""

    VLLM = 0
    """``gpu_memory_utilization`` 0.9 of the device: KV = 0.9 x device - weights - activations -
    reserve (vllm/v1/worker/gpu_worker.py ``determine_available_memory``: requested memory
    total x utilization minus the profiled non-KV memory; vllm-project/vllm @35d5cda)."""
    TRTLLM = 1
    """``KvCacheConfig.free_gpu_memory_fraction`` 0.9 of the memory free after the weights and
    the profiled peak: KV = 0.9 x (device - weights - activations - reserve)."""
    SGLANG = 2
    """``mem_fraction_static`` from ``ServerArgs._handle_gpu_memory_settings`` (SGLang >= 0.5.3):
    KV = fraction x device - weights - CUDA context and NCCL (the replay applies it only with
    ``planner.validation.e2e.SGLANG_AT_DEFAULT``)."""
    SGLANG_052 = 3
    """``mem_fraction_static`` from ``ServerArgs.__post_init__`` of SGLang <= 0.5.2."""


TRTLLM_FREE_FRACTION = 0.9
"""TensorRT-LLM ``KvCacheConfig.free_gpu_memory_fraction`` default (tensorrt_llm/llmapi/
llm_args.py, NVIDIA/TensorRT-LLM @fcd3f31): ``KvCacheCreator._cal_max_memory`` in
tensorrt_llm/_torch/pyexecutor/_util.py (@0004396) sizes the pool as (total - peak memory of the
profiling run + the temporary KV it held) x fraction, the peak being weights, activations and
workspace (the TensorRT engine path takes the same fraction of ``cudaMemGetInfo`` free memory
after the engine is loaded)."""
SGLANG_SIZES: tuple[tuple[float, int, int, int], ...] = (
    (20 * 1024, 2048, 8, 8),
    (35 * 1024, 2048, 24, 80),
    (60 * 1024, 4096, 32, 160),
    (160 * 1024, 8192, 256, 512),
    (math.inf, 16384, 512, 512),
)
"""SGLang (>= 0.5.3) defaults by GPU memory: (below this many MiB, ``chunked_prefill_size``,
``cuda_graph_max_bs`` at tp_size < 4, at tp_size >= 4); ``_handle_gpu_memory_settings`` of
python/sglang/srt/server_args.py (CUDA GPUs; the NPU rows left out)."""
SGLANG_052_RESERVE_GIB: tuple[tuple[float, float, float], ...] = (
    (35 * 1024, 2.8, 0.1),
    (90 * 1024, 9.5, 0.5),
    (160 * 1024, 12.0, 0.5),
    (math.inf, 32.0, 0.0),
)
"""SGLang <= 0.5.2's reserve by GPU memory: (below this many MiB, GiB, GiB per GPU of
tp_size x pp); ``__post_init__`` of python/sglang/srt/server_args.py."""
SGLANG_052_CHUNKS: tuple[tuple[float, int], ...] = (
    (35 * 1024, 2048),
    (160 * 1024, 8192),
    (math.inf, 16384),
)
"""SGLang <= 0.5.2's ``chunked_prefill_size`` default by GPU memory: (below this many MiB,
tokens); ``ServerArgs.__post_init__`` of python/sglang/srt/server_args.py in the 0.5.0rc0,
0.5.1.post1 and 0.5.2 wheels ("A10, L40, 4090" / "H100, H200, A100, H20" / "B200, MI300")."""


def _by_memory(table: tuple[tuple[float, ...], ...], mib: float) -> tuple[float, ...]:
    """The first row of a by-memory ``table`` whose limit (its first value, MiB) lies above
    ``mib``."""
    return next(row for row in table if mib < row[0])


def sglang_chunked_prefill(memory_bytes: float, before_053: bool = False) -> int:
    """SGLang's default ``--chunked-prefill-size`` (tokens a prefill step takes, whole worker) on
    a GPU of ``memory_bytes`` (as nvidia-smi reports it: ``get_device_memory_capacity`` reads
    ``memory.total``, the smallest GPU), from python/sglang/srt/server_args.py of the PyPI wheels:
    0.5.3, 0.5.5.post2, 0.5.6.post2, 0.5.8, 0.5.8.post1, 0.5.9 ``_handle_gpu_memory_settings``
    (``SGLANG_SIZES``: 2048 below 35 GiB, 4096 below 60 GiB, 8192 below 160 GiB, else 16384;
    0.5.23 keeps the rule from 35 GiB up, ``srt/arg_groups/memory_hook.py``); with
    ``before_053`` (0.5.0rc0 to 0.5.2, ``__post_init__``) ``SGLANG_052_CHUNKS``, which has no
    60 GiB step. Neither depends on TP or the model. With DP attention SGLang divides it by the
    DP size per rank (``chunked_prefill_size // dp_size``), so the worker's step still takes
    this many tokens."""
    mib = memory_bytes / MIB
    return int(_by_memory(SGLANG_052_CHUNKS if before_053 else SGLANG_SIZES, mib)[1])


def sglang_mem_fraction(memory_bytes: float, tp: Num, pp: Num, dp: Num) -> np.ndarray:
    """SGLang's default ``mem_fraction_static`` ((weights + KV pool) / device memory), versions
    0.5.3 to 0.5.9 (python/sglang/srt/server_args.py ``_handle_gpu_memory_settings`` of the
    0.5.3, 0.5.4, 0.5.5.post2 and 0.5.9 wheels, identical here). Reserve, MiB: 512
    + 1.5 x max(chunked prefill, 2048) + 2 x ``cuda_graph_max_bs`` + 1024 x tp_size x pp / 8,
    + 3 x graph bs x dp (+ 1.5 x graph bs x dp above 300) with DP attention, at least 10 GiB on
    GPUs over 60 GiB; fraction = round((memory - reserve) / memory, 3). SGLang's ``tp_size`` is
    every GPU of a worker's stage (attention TP x attention DP); speculative decoding and
    piecewise CUDA graphs are off by default. Memory as nvidia-smi reports it, MiB."""
    mib = memory_bytes / MIB
    sgl_tp = np.asarray(tp) * dp
    _, chunk, small_bs, big_bs = _by_memory(SGLANG_SIZES, mib)
    graph_bs = np.where(sgl_tp >= 4, big_bs, small_bs)
    reserve = 512 + 1.5 * max(chunk, 2048) + 2 * graph_bs + 1024 * sgl_tp * pp / 8
    dp_attention = np.asarray(dp) > 1
    reserve = reserve + dp_attention * graph_bs * dp * (3 + 1.5 * (graph_bs > 300))
    if mib > 60 * 1024:
        reserve = np.maximum(reserve, 10 * 1024)
    return np.asarray(np.round((mib - reserve) / mib, 3))


def sglang_052_mem_fraction(memory_bytes: float, tp: Num, pp: Num, dp: Num) -> np.ndarray:
    """SGLang <= 0.5.2's default ``mem_fraction_static`` (python/sglang/srt/server_args.py
    ``__post_init__`` of the 0.5.1.post1 and 0.5.2 wheels): a reserve by GPU memory
    (``SGLANG_052_RESERVE_GIB``) + 4 GiB with DP attention."""
    mib = memory_bytes / MIB
    gpus = np.asarray(tp) * dp * pp
    _, base, per_gpu = _by_memory(SGLANG_052_RESERVE_GIB, mib)
    reserve = (base + per_gpu * gpus + 4 * (np.asarray(dp) > 1)) * 1024
    return np.asarray(np.round((mib - reserve) / mib, 3))


def default_pool_util(
    pool: np.ndarray,
    m: ModelSpec,
    gpu: GpuSpec,
    p: ParallelArrays,
    chunk: np.ndarray,
    max_num_seqs: np.ndarray,
    util: float | np.ndarray = 0.9,
    flag: np.ndarray | None = None,
) -> np.ndarray:
    """The ``gpu_memory_utilization`` (vLLM's meaning, as ``kv_budget_per_gpu`` takes it) that
    gives each candidate the KV pool its engine (``pool``: ``KvPool`` values) sizes at its memory
    flag: the engine's default, or ``flag`` where finite (the engine's own flag as a launch set it:
    vLLM ``--gpu-memory-utilization``, TensorRT-LLM ``free_gpu_memory_fraction``, SGLang
    ``--mem-fraction-static``); ``util`` for vLLM otherwise. TensorRT-LLM: util = f + (1 - f) x
    non-KV / device, so KV = f x (device - non-KV). SGLang: util = fraction + (activations + CUDA
    graphs) / device, so KV = fraction x device - weights - CUDA context and NCCL (SGLang reserves
    the rest for activations and graphs; its weights are loaded before it reads free memory)."""
    device = gpu.memory_bytes
    act = activation_bytes(m, p, chunk, max_num_seqs)
    non_kv = weights_per_gpu(m, p) + act + reserved_bytes(p.tp * p.pp * p.dp)
    given = np.full(np.shape(pool), np.nan) if flag is None else np.asarray(flag, dtype=float)
    set_ = np.isfinite(given)
    f_trt = np.where(set_, given, TRTLLM_FREE_FRACTION)
    trt = f_trt + (1.0 - f_trt) * non_kv / device
    sgl_extra = (act + CUDA_GRAPH_BYTES) / device
    sgl = np.where(set_, given, sglang_mem_fraction(device, p.tp, p.pp, p.dp)) + sgl_extra
    sgl_052 = np.where(set_, given, sglang_052_mem_fraction(device, p.tp, p.pp, p.dp)) + sgl_extra
    util = np.where(set_, given, util)
    return np.asarray(
        np.select(
            [pool == KvPool.TRTLLM, pool == KvPool.SGLANG, pool == KvPool.SGLANG_052],
            [trt, sgl, sgl_052],
            default=np.broadcast_to(util, np.shape(pool)),
        ),
        dtype=float,
    )


# --- Exact pipeline stages ---------------------------------------------------------------------
# One deployment (scalars, K = 1) or candidates sharing one pp (arrays of tp, dp): the layers of
# each stage exactly, the fullest stage per term. ``planner.memory.plan_memory`` is this with
# K = 1; ``weights_per_gpu`` / ``seq_bytes_per_gpu`` above price ceil(layers / pp) layers of the
# model's mix instead (the solvers' sweep, unchanged numbers).


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
