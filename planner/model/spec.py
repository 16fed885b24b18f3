"""Typed transformer model description derived from a Hugging Face ``config.json``."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from hardware.frozen import FrozenSpec
from planner.model.quantization import CheckpointQuant

_FROZEN = ConfigDict(frozen=True, extra="forbid")

AttentionKind = Literal["gqa", "mla", "linear"]
"""gqa: multi-head / grouped-query softmax attention (MHA is gqa with kv_heads == heads);
mla: DeepSeek multi-head latent attention (compressed KV); linear: recurrent linear attention
(Gated DeltaNet style) with a fixed-size state per sequence."""

Family = Literal["dense", "moe", "mla_moe", "hybrid_moe", "hybrid_dense"]


class MlaDims(BaseModel):
    """Multi-head latent attention sizes (DeepSeek-V2/V3)."""

    model_config = _FROZEN
    q_lora_rank: int = Field(ge=0, description="Query low-rank dim; 0 = no query compression.")
    kv_lora_rank: int = Field(gt=0, description="Compressed KV latent dim (cached).")
    qk_nope_head_dim: int = Field(gt=0, description="Per-head non-rotary query/key dim.")
    qk_rope_head_dim: int = Field(gt=0, description="Rotary dim (cached once per token, shared).")
    v_head_dim: int = Field(gt=0, description="Per-head value dim.")
    index_topk: int = Field(
        default=0, ge=0, description="Sparse-attention (DSA) keys per query; 0 = dense."
    )
    index_n_heads: int = Field(
        default=0, ge=0, description="Heads of the DSA lightning indexer; 0 = no indexer."
    )
    index_head_dim: int = Field(
        default=0, ge=0, description="Query/key dim of one lightning-indexer head."
    )


class LinearAttnDims(BaseModel):
    """Gated-DeltaNet style linear attention sizes (fixed recurrent state per sequence)."""

    model_config = _FROZEN
    num_key_heads: int = Field(gt=0, description="Key heads of a linear-attention layer.")
    num_value_heads: int = Field(gt=0, description="Value heads of a linear-attention layer.")
    key_head_dim: int = Field(gt=0, description="Dimension of one key head.")
    value_head_dim: int = Field(gt=0, description="Dimension of one value head.")
    conv_kernel: int = Field(ge=1, description="Short causal convolution width.")


class MoeDims(BaseModel):
    """Mixture-of-experts FFN sizes."""

    model_config = _FROZEN
    num_experts: int = Field(gt=1, description="Routed experts per MoE layer.")
    top_k: int = Field(gt=0, description="Experts per token.")
    expert_intermediate: int = Field(gt=0, description="FFN width of one routed expert.")
    shared_experts: int = Field(default=0, ge=0, description="Always-on shared experts.")
    shared_intermediate: int = Field(
        default=0, ge=0, description="FFN width of each shared expert."
    )


class LayerSpec(BaseModel):
    """One decoder layer: its attention kind, optional window, and FFN kind."""

    model_config = _FROZEN
    attention: AttentionKind = Field(description="Attention kind of the layer.")
    window: int = Field(
        default=0, ge=0, description="Sliding/chunked attention span in tokens; 0 = full."
    )
    moe: bool = Field(description="True when the FFN is a mixture of experts.")


class ModelSpec(FrozenSpec):
    """Everything the planner needs from a model config. Sizes are element counts, not bytes."""

    model_config = _FROZEN
    name: str = Field(description="Display name, e.g. 'Llama-3.1-70B'.")
    hf_id: str = Field(default="", description="Hugging Face repository id when known.")
    architecture: str = Field(description="HF architectures[0], e.g. 'LlamaForCausalLM'.")
    family: Family = Field(description="Architecture family the op graph is built for.")
    num_layers: int = Field(gt=0, description="Decoder layers.")
    hidden_size: int = Field(gt=0, description="Model (residual stream) width.")
    num_heads: int = Field(gt=0, description="Query heads.")
    num_kv_heads: int = Field(gt=0, description="KV heads (== num_heads for MHA and MLA).")
    head_dim: int = Field(
        gt=0, description="Per-head dim of softmax attention (q/k for MLA: nope+rope)."
    )
    intermediate_size: int = Field(gt=0, description="FFN width of dense layers.")
    vocab_size: int = Field(gt=0, description="Vocabulary size (LM head and embedding rows).")
    tie_word_embeddings: bool = Field(
        default=False, description="LM head shares the embedding weights."
    )
    attention_output_gate: bool = Field(
        default=False, description="Extra gate projection on attention output."
    )
    qk_norm_across_heads: bool = Field(
        default=False,
        description=(
            "QK-norm over all heads of a layer at once (MiniMax-M2 qk_norm_type 'per_layer'): "
            "under TP each rank holds some heads, so the norm's mean square is all-reduced over "
            "the TP ranks every layer."
        ),
    )
    layers: tuple[LayerSpec, ...] = Field(description="Every layer in order.")
    mla: MlaDims | None = Field(
        default=None,
        description="Multi-head latent attention dimensions (DeepSeek-style); None otherwise.",
    )
    moe: MoeDims | None = Field(
        default=None, description="Mixture-of-experts dimensions; None for a dense model."
    )
    linear_attn: LinearAttnDims | None = Field(
        default=None,
        description="Linear-attention dimensions; None without linear-attention layers.",
    )
    max_position_embeddings: int = Field(
        gt=0, description="Longest context the model supports, tokens."
    )
    weight_dtype: str = Field(
        default="bf16", description="Dtype the checkpoint's linear weights are priced at."
    )
    quant: CheckpointQuant = Field(
        default_factory=CheckpointQuant,
        description="The checkpoint's quantization, from its config.",
    )
    mtp_layers: int = Field(
        default=0, ge=0, description="Multi-token-prediction (draft) layers shipped."
    )
    notes: tuple[str, ...] = Field(default=(), description="Approximations made while parsing.")
