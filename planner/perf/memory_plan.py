"""Per-GPU memory of one deployment: weights, KV cache, activations, reserve -> KV capacity and
concurrency (``plan_memory``, used by ``estimate`` and ``planner memory``; bad flags rejected
here).

A view of :mod:`planner.perf.memory`, the one implementation (vectorized; formulas there and in
docs/architecture.md "Memory"): its exact pipeline-stage terms with K = 1, as a :class:`MemoryPlan`.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from hardware.errors import InfeasibleError, PlannerInputError
from hardware.spec import GpuSpec
from planner.model.spec import LayerSpec, ModelSpec
from planner.perf import memory as mb
from planner.perf.deployment import Parallelism
from planner.perf.memory import KV_BYTES, WEIGHT_BYTES, activation_bytes, stage_layers

__all__ = [
    "KV_BYTES",
    "WEIGHT_BYTES",
    "MemoryPlan",
    "activation_bytes",
    "check_parallelism",
    "kv_bytes_per_token",
    "plan_memory",
    "reserved_bytes",
    "seq_kv_bytes",
    "stage_layers",
    "weight_bytes_per_gpu",
]


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
        default=(
            "analytical memory model (planner/perf/memory_plan.py); "
            "reserve terms are stated assumptions"
        ),
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


def weight_bytes_per_gpu(
    m: ModelSpec, p: Parallelism, quant: str, layers: tuple[LayerSpec, ...], with_embed: bool
) -> float:
    """Weights one GPU holds: attention / tp, dense FFN and experts / (tp*dp), embeddings / tp
    (``memory_batch.layers_weight_bytes`` of these layers)."""
    total = float(
        mb.layers_weight_bytes(m, mb.layer_counts(layers), p.tp, p.dp, WEIGHT_BYTES[quant])
    )
    return total + (float(mb.embedding_bytes(m, p.tp)) if with_embed else 0.0)


def kv_bytes_per_token(m: ModelSpec, layer: LayerSpec, tp: int, kv_dtype: str) -> float:
    """KV bytes one token adds to one GPU in ``layer`` (0 for linear attention; a DSA indexer's
    key included)."""
    return float(mb.layer_kv_bytes_per_token(m, layer, tp, KV_BYTES[kv_dtype]))


def seq_kv_bytes(
    m: ModelSpec, layers: tuple[LayerSpec, ...], tp: int, kv_dtype: str, tokens: int
) -> float:
    """KV + state bytes of one sequence of ``tokens`` on one GPU, windows and block rounding
    included (``memory_batch.layers_seq_bytes`` of these layers)."""
    counts = mb.layer_counts(layers)
    return float(mb.layers_seq_bytes(m, counts, tp, KV_BYTES[kv_dtype], tokens))


def reserved_bytes(p: Parallelism, cuda_graphs: bool = True) -> float:
    """CUDA context, CUDA-graph pool and comm buffers per GPU (``memory_batch.reserved_bytes``)."""
    return float(mb.reserved_bytes(p.gpus, cuda_graphs))


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
    weights = float(mb.stage_weight_bytes(m, p.pp, p.tp, p.dp, WEIGHT_BYTES[quant]))
    act = float(activation_bytes(m, p, max_num_batched_tokens, max_num_seqs))
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
    kv, st = mb.stage_kv_per_token(m, p.pp, p.tp, KV_BYTES[kv_dtype])
    kv_tok, state = float(kv), float(st)
    capacity = int(kv_budget / kv_tok) * p.dp if kv_tok > 0 else 0
    tokens = (isl or 0) + (osl or 0) if (isl or osl) else None
    conc = None
    if tokens:
        per_seq = float(mb.stage_seq_bytes(m, p.pp, p.tp, KV_BYTES[kv_dtype], tokens))
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
