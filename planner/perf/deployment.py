"""A concrete serving deployment: what the planner recommends and what emitters turn into flags."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

_FROZEN = ConfigDict(frozen=True, extra="forbid")

WeightQuant = Literal["bf16", "fp8", "fp4", "int4"]
KvDtype = Literal["bf16", "fp8"]
CheckpointFormat = Literal["", "bf16", "fp8", "mxfp4", "nvfp4", "int4", "int8"]


class Speculative(BaseModel):
    """Speculative decoding the deployment runs: a draft proposes ``draft_tokens`` tokens per
    decode step (mtp: the model's own multi-token-prediction layers, DeepSeek-V3/R1, Qwen3.5;
    eagle3: an EAGLE-3 head; draft: the separate model ``draft_model``)."""

    model_config = _FROZEN
    method: Literal["mtp", "eagle3", "draft"] = Field(
        description="Draft method: mtp (the model's MTP layers), eagle3 or draft."
    )
    draft_tokens: int = Field(ge=1, le=16, description="Tokens proposed per decode step.")
    draft_model: str = Field(default="", description="Draft checkpoint (method draft).")


class Parallelism(BaseModel):
    """How one engine instance (worker) is split over GPUs."""

    model_config = _FROZEN
    tp: int = Field(default=1, ge=1, le=1024, description="Tensor parallel size.")
    pp: int = Field(default=1, ge=1, le=1024, description="Pipeline parallel size.")
    dp: int = Field(
        default=1,
        ge=1,
        le=100_000,
        description="Attention data-parallel ranks inside the worker (DP-attention).",
    )
    ep: int = Field(default=1, ge=1, le=100_000, description="Expert parallel size for MoE layers.")

    @property
    def gpus(self) -> int:
        """GPUs of one worker: tp*pp*dp (EP reuses the same GPUs)."""
        return self.tp * self.pp * self.dp


class WorkerConfig(BaseModel):
    """One role's engine settings (the whole engine when aggregated)."""

    model_config = _FROZEN
    parallel: Parallelism = Field(
        default=Parallelism(), description="How one worker's GPUs split the model."
    )
    max_num_seqs: int = Field(
        default=256, ge=1, le=10_000_000, description="Max running requests per worker."
    )
    max_num_batched_tokens: int = Field(
        default=8192, ge=16, le=10_000_000, description="Token budget per step (chunk size)."
    )
    gpu_memory_utilization: float = Field(
        default=0.9, gt=0, le=1, description="Fraction of memory the engine may use."
    )
    kv_dtype: KvDtype = Field(default="bf16", description="Data type of the KV cache.")
    weight_quant: WeightQuant = Field(
        default="bf16",
        description="Weight format the engine runs (may differ from the checkpoint's).",
    )
    workers: int = Field(default=1, ge=1, le=100_000, description="Replicas of this worker.")


class Deployment(BaseModel):
    """A full deployment of one model on one GPU type."""

    model_config = _FROZEN
    model: str = Field(description="Bundled model name or HF id.")
    hf_id: str = Field(
        default="",
        description=(
            "The model's identity: the HF repository id (or local weights path) the engine loads; "
            "empty for a local config.json given without --model-id (such a plan cannot be "
            "emitted)."
        ),
    )
    checkpoint_quant: CheckpointFormat = Field(
        default="",
        description=(
            "Weight format the checkpoint stores, from its quantization_config (bf16, fp8, mxfp4, "
            "nvfp4, int4, int8); empty in plan files written before it was recorded."
        ),
    )
    gpu: str = Field(
        description="GPU key, e.g. 'h200_sxm' (of the decode workers when disaggregated)."
    )
    prefill_gpu: str = Field(
        default="",
        description="GPU key of the prefill workers where it differs from ``gpu`` (disaggregated "
        "over two GPU types); empty: both roles on ``gpu``.",
    )
    mode: Literal["agg", "disagg"] = Field(
        default="agg",
        description="agg: one engine prefills and decodes; disagg: prefill and decode workers.",
    )
    agg: WorkerConfig | None = Field(default=None, description="Aggregated worker (mode agg).")
    prefill: WorkerConfig | None = Field(default=None, description="Prefill role (mode disagg).")
    decode: WorkerConfig | None = Field(default=None, description="Decode role (mode disagg).")
    max_model_len: int = Field(
        default=8192, ge=16, le=1_000_000_000, description="Longest ISL+OSL the engine must accept."
    )
    cuda_graph_max_batch: int = Field(
        default=256, ge=1, le=10_000_000, description="Largest batch captured in CUDA graphs."
    )

    @property
    def prefill_gpu_key(self) -> str:
        """The prefill workers' GPU key (``gpu`` unless the roles run on two types)."""
        return self.prefill_gpu or self.gpu

    def role_gpu(self, role: str) -> str:
        """GPU key of ``role`` (agg, prefill or decode)."""
        return self.prefill_gpu_key if role == "prefill" else self.gpu

    @property
    def total_gpus(self) -> int:
        roles = [self.agg] if self.mode == "agg" else [self.prefill, self.decode]
        return sum(r.parallel.gpus * r.workers for r in roles if r is not None)


def placement_problem(p: Parallelism, domain_size: int, node_gpus: int) -> str | None:
    """Why ``p`` cannot be placed on GPUs grouped ``node_gpus`` to a host and ``domain_size`` to a
    scale-up (NVLink) domain, or None. TP stays inside one domain (its all-reduces run every layer);
    DP/EP ranks and PP stages may cross hosts over the scale-out network, in whole hosts so every
    host of a worker runs the same launch line with the same local GPU count."""
    if p.tp > domain_size:
        return f"tp {p.tp} exceeds the scale-up domain of {domain_size} GPUs"
    if p.gpus > node_gpus and p.gpus % node_gpus:
        return f"a {p.gpus}-GPU worker spans hosts of {node_gpus} GPUs but does not fill them"
    stage = p.tp * p.dp
    if p.pp > 1 and p.gpus > node_gpus and stage % node_gpus and node_gpus % stage:
        return f"pipeline stages of {stage} GPUs do not align with hosts of {node_gpus} GPUs"
    return None


class ShapeRules(BaseModel):
    """Which worker shapes an engine can launch, engine-neutral (filled from the emitters'
    capability table by ``planner.emitters.capabilities.shape_rules``; the solvers read only
    this)."""

    model_config = _FROZEN
    expert_parallel: Literal["divides", "all_ranks"] = Field(
        default="divides",
        description=("'divides': any EP size dividing tp*dp; 'all_ranks': EP is 1 or tp*dp."),
    )
    attention_dp_tp: Literal["any", "one"] = Field(
        default="any",
        description=(
            "'any': attention-DP ranks may use TP > 1; 'one': attention DP runs attention at TP 1."
        ),
    )
    multi_node_dp: Literal["any", "rank_per_host"] = Field(
        default="any",
        description=(
            "A worker spanning hosts with attention DP: 'any' = ranks may span hosts (one "
            "distributed group over all tp*dp*pp GPUs); 'rank_per_host' = each DP rank's tp*pp "
            "GPUs lie inside one host (hosts run whole DP ranks)."
        ),
    )
    source: str = Field(default="", description="Where the rule was checked.")
    multi_node_source: str = Field(
        default="", description="Where the engine's multi-node launch was checked."
    )

    def problem(self, p: Parallelism, node_gpus: int | None = None) -> str | None:
        """Why ``p`` cannot be launched under these rules, or None when it can (``node_gpus``:
        GPUs per host, for the multi-node rule; None = not checked)."""
        ranks = p.tp * p.dp
        if ranks % p.ep:
            return f"ep {p.ep} does not divide tp*dp = {ranks}"
        if self.expert_parallel == "all_ranks" and p.ep not in (1, ranks):
            return (
                f"expert parallelism spans all tp*dp = {ranks} ranks or none, "
                f"so ep {p.ep} cannot be expressed"
            )
        if self.attention_dp_tp == "one" and p.dp > 1 and p.tp > 1:
            return (
                f"attention DP runs attention at TP 1, so tp {p.tp} with dp {p.dp} "
                "cannot be expressed"
            )
        return self._multi_node_problem(p, node_gpus)

    def _multi_node_problem(self, p: Parallelism, node_gpus: int | None) -> str | None:
        if node_gpus is None or p.gpus <= node_gpus or p.dp == 1:
            return None
        rank = p.tp * p.pp
        if self.multi_node_dp == "rank_per_host" and node_gpus % rank:
            return (
                f"DP ranks of tp*pp = {rank} GPUs must each fit a host of {node_gpus} GPUs "
                "(hosts run whole DP ranks)"
            )
        return None
