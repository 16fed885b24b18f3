"""Per-GPU memory model: weights, KV cache, activations, reserve -> KV capacity and concurrency.

Formulas follow DESIGN.md "Memory". Sizes in bytes. KV per token for a GQA layer is
2 (K and V) x kv_heads_per_gpu x head_dim x bytes; for MLA it is (kv_lora_rank + rope_dim) x bytes,
replicated on every TP rank (so not divided by TP); sliding-window layers hold at most the window.
"""

from __future__ import annotations

import math
from typing import Any, Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from hardware.errors import InfeasibleError, PlannerInputError
from hardware.spec import GpuSpec
from planner.deployment import Parallelism
from planner.model_spec import LayerSpec, ModelSpec
from planner.params import embedding_params, layer_params

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
    def tp(self) -> Any: ...
    @property
    def dp(self) -> Any: ...
    @property
    def ep(self) -> Any: ...


class MemoryPlan(BaseModel):
    """Memory of one GPU of a worker (the fullest pipeline stage)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    gpu_memory_bytes: float = Field(description="Device memory, bytes.")
    budget_bytes_per_gpu: float = Field(
        description="gpu_memory_utilization x device memory, bytes."
    )
    weights_bytes_per_gpu: float = Field(description="Weight bytes held by one GPU (its shard).")
    activation_bytes_per_gpu: float = Field(
        description="Peak activation workspace for one step, bytes."
    )
    reserved_bytes_per_gpu: float = Field(
        description="CUDA context, CUDA graphs, comm buffers, bytes."
    )
    kv_budget_bytes_per_gpu: float = Field(description="Bytes left for KV blocks.")
    total_bytes_per_gpu: float = Field(
        description="Everything the engine holds (= budget when it fits)."
    )
    kv_bytes_per_token_per_gpu: float = Field(
        description="KV of one token of context on one GPU (all layers of the stage, full "
        "attention)."
    )
    state_bytes_per_seq_per_gpu: float = Field(
        description="Fixed recurrent state per sequence (linear attention), bytes."
    )
    kv_capacity_tokens: int = Field(
        description="Tokens of context the worker can hold (all attention-DP ranks)."
    )
    max_concurrency: int | None = Field(
        description="Sequences of isl+osl that fit at once (None without isl/osl)."
    )
    tokens_per_seq: int | None = Field(
        default=None,
        description="Tokens per sequence of max_concurrency (ISL + OSL); None without lengths.",
    )
    weight_quant: str = Field(description="Weight format of the plan.")
    kv_dtype: str = Field(description="KV cache data type of the plan.")
    parallel: Parallelism = Field(description="The worker's parallelism.")
    source: str = Field(
        default="analytical memory model (planner/memory.py); reserve terms are stated assumptions",
        description="How the numbers were computed.",
    )


def check_parallelism(m: ModelSpec, p: Parallelism) -> None:
    """Reject splits the model cannot take; the message names the flag and what is allowed."""
    heads_ok = [d for d in range(1, m.num_heads + 1) if m.num_heads % d == 0]
    if m.num_heads % p.tp:
        raise PlannerInputError(
            "--tp",
            f"{p.tp} must divide the {m.num_heads} attention heads of {m.name}; allowed: "
            f"{heads_ok}",
        )
    if m.mla is None and p.tp > m.num_kv_heads and p.tp % m.num_kv_heads:
        raise PlannerInputError(
            "--tp", f"{p.tp} must be a multiple of the {m.num_kv_heads} KV heads when larger"
        )
    if p.pp > m.num_layers:
        raise PlannerInputError("--pp", f"{p.pp} exceeds the {m.num_layers} layers")
    if p.ep > 1:
        if m.moe is None:
            raise PlannerInputError("--ep", f"{m.name} has no experts; use --ep 1")
        if m.moe.num_experts % p.ep or (p.tp * p.dp) % p.ep:
            raise PlannerInputError(
                "--ep",
                f"{p.ep} must divide the {m.moe.num_experts} experts and tp*dp={p.tp * p.dp}",
            )


def stage_layers(m: ModelSpec, pp: int) -> list[tuple[LayerSpec, ...]]:
    """Layers of each pipeline stage (even split, the first stages take the remainder)."""
    per, extra = divmod(m.num_layers, pp)
    stages, start = [], 0
    for s in range(pp):
        n = per + (1 if s < extra else 0)
        stages.append(m.layers[start : start + n])
        start += n
    return stages


def weight_bytes_per_gpu(
    m: ModelSpec, p: Parallelism, quant: str, layers: tuple[LayerSpec, ...], with_embed: bool
) -> float:
    """Weights one GPU holds: attention / tp, dense FFN and experts / (tp*dp), embeddings / tp."""
    wq = WEIGHT_BYTES[quant]
    total = 0.0
    for layer in layers:
        lp = layer_params(m, layer)
        total += lp.attention * wq / p.tp
        total += (lp.dense_ffn + lp.routed_experts) * wq / (p.tp * p.dp)
        total += lp.shared_experts * wq / p.tp + lp.router * WEIGHT_BYTES["bf16"]
    if with_embed:
        total += embedding_params(m) * WEIGHT_BYTES["bf16"] / p.tp
    return total


def kv_bytes_per_token(m: ModelSpec, layer: LayerSpec, tp: int, kv_dtype: str) -> float:
    """KV bytes one token adds to one GPU in ``layer`` (0 for linear attention)."""
    b = KV_BYTES[kv_dtype]
    if layer.attention == "mla":
        assert m.mla is not None
        return (m.mla.kv_lora_rank + m.mla.qk_rope_head_dim) * b
    if layer.attention == "linear":
        return 0.0
    kv_heads_per_gpu = math.ceil(m.num_kv_heads / tp)
    return 2.0 * kv_heads_per_gpu * m.head_dim * b


def state_bytes_per_seq(m: ModelSpec, layer: LayerSpec, tp: Any) -> Any:
    """Recurrent state of a linear-attention layer per sequence:
    fp32 matrix state + bf16 conv state."""
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


def seq_kv_bytes(
    m: ModelSpec, layers: tuple[LayerSpec, ...], tp: int, kv_dtype: str, tokens: int
) -> float:
    """KV + state bytes of one sequence of ``tokens`` on one GPU,
    windows and block rounding included."""
    total = 0.0
    for layer in layers:
        held = min(tokens, layer.window) if layer.window else tokens
        held = math.ceil(held / KV_BLOCK_TOKENS) * KV_BLOCK_TOKENS
        total += kv_bytes_per_token(m, layer, tp, kv_dtype) * held + state_bytes_per_seq(
            m, layer, tp
        )
    return total


def activation_bytes(m: ModelSpec, p: Split, max_num_batched_tokens: Any, max_num_seqs: Any) -> Any:
    """Peak activation workspace of one step of ``max_num_batched_tokens`` tokens (bf16), bytes.

    Estimate of the live tensors at the widest point of a layer: the residual stream and its
    normed copy (2h), the QKV output, and the gated FFN output (2 x inter / tp, or for MoE the
    top_k expert copies of each token), plus fp32 logits for ``max_num_seqs`` sampled rows.
    Works on scalars and on arrays of candidates alike.
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


def reserved_bytes(p: Parallelism, cuda_graphs: bool = True) -> float:
    """CUDA context, CUDA-graph pool and comm buffers per GPU (stated assumptions above)."""
    return (
        CUDA_CONTEXT_BYTES
        + (CUDA_GRAPH_BYTES if cuda_graphs else 0.0)
        + (NCCL_BYTES if p.gpus > 1 else 0.0)
    )


def _check_sizes(**sizes: float | None) -> None:
    for name, val in sizes.items():
        if val is not None and val <= 0:
            raise PlannerInputError(f"--{name.replace('_', '-')}", f"must be > 0, got {val}")


def plan_memory(
    m: ModelSpec,
    gpu: GpuSpec,
    p: Parallelism,
    *,
    weight_quant: str | None = None,
    kv_dtype: str = "bf16",
    max_num_batched_tokens: int = 8192,
    max_num_seqs: int = 256,
    gpu_memory_utilization: float = 0.9,
    isl: int | None = None,
    osl: int | None = None,
) -> MemoryPlan:
    """Memory of the fullest GPU; raises InfeasibleError (out of memory) when weights do not fit."""
    _check_sizes(
        max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=max_num_seqs, isl=isl, osl=osl
    )
    if not 0 < gpu_memory_utilization <= 1:
        raise PlannerInputError(
            "--gpu-memory-utilization", f"must be in (0, 1], got {gpu_memory_utilization}"
        )
    quant = weight_quant or m.weight_dtype
    if quant not in WEIGHT_BYTES:
        raise PlannerInputError("--weight-quant", f"'{quant}' not one of {sorted(WEIGHT_BYTES)}")
    if kv_dtype not in KV_BYTES:
        raise PlannerInputError("--kv-dtype", f"'{kv_dtype}' not one of {sorted(KV_BYTES)}")
    check_parallelism(m, p)
    stages = stage_layers(m, p.pp)
    weights = max(
        weight_bytes_per_gpu(m, p, quant, layers, with_embed=(s == 0 or s == p.pp - 1))
        for s, layers in enumerate(stages)
    )
    act = activation_bytes(m, p, max_num_batched_tokens, max_num_seqs)
    reserve = reserved_bytes(p)
    budget = gpu.memory_bytes * gpu_memory_utilization
    kv_budget = budget - weights - act - reserve
    if kv_budget <= 0:
        need = weights + act + reserve
        raise InfeasibleError(
            "memory",
            f"out of memory on {gpu.name}: {m.name} ({quant} weights, "
            f"tp={p.tp} pp={p.pp} dp={p.dp} ep={p.ep}) needs {need / 1e9:.1f} GB per GPU for "
            f"weights+activations+reserve but only {budget / 1e9:.1f} GB is available "
            f"({gpu_memory_utilization:g} x {gpu.memory_bytes / 1e9:.0f} GB)",
            binding_constraint="memory",
        )
    fullest = max(stages, key=lambda ls: sum(kv_bytes_per_token(m, x, p.tp, kv_dtype) for x in ls))
    kv_tok = sum(kv_bytes_per_token(m, x, p.tp, kv_dtype) for x in fullest)
    state = sum(state_bytes_per_seq(m, x, p.tp) for x in fullest)
    capacity = int(kv_budget / kv_tok) * p.dp if kv_tok > 0 else 0
    tokens = (isl or 0) + (osl or 0) if (isl or osl) else None
    conc = None
    if tokens:
        per_seq = max(seq_kv_bytes(m, layers, p.tp, kv_dtype, tokens) for layers in stages)
        conc = int(kv_budget // per_seq) * p.dp
    return MemoryPlan(
        gpu_memory_bytes=gpu.memory_bytes,
        budget_bytes_per_gpu=budget,
        weights_bytes_per_gpu=weights,
        activation_bytes_per_gpu=act,
        reserved_bytes_per_gpu=reserve,
        kv_budget_bytes_per_gpu=kv_budget,
        total_bytes_per_gpu=budget,
        kv_bytes_per_token_per_gpu=kv_tok,
        state_bytes_per_seq_per_gpu=state,
        kv_capacity_tokens=capacity,
        max_concurrency=conc,
        tokens_per_seq=tokens,
        weight_quant=quant,
        kv_dtype=kv_dtype,
        parallel=p,
    )
