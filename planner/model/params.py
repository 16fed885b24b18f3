"""Parameter counts of a :class:`ModelSpec` (elements, not bytes).

Linear layers only count weights (biases and norms are < 0.1% of any model here). Gated FFNs
(SwiGLU) have three matrices: gate, up (hidden x inter) and down (inter x hidden).
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.model.spec import LayerSpec, ModelSpec


@dataclass(frozen=True)
class LayerParams:
    """Parameters of one layer split by how they are sharded."""

    attention: float
    dense_ffn: float
    routed_experts: float  # all routed experts of the layer
    shared_experts: float
    router: float


def attention_params(m: ModelSpec, layer: LayerSpec) -> float:
    """Projection weights of one attention block."""
    h = m.hidden_size
    if layer.attention == "mla":
        assert m.mla is not None
        d = m.mla
        qk = d.qk_nope_head_dim + d.qk_rope_head_dim
        q = (
            h * d.q_lora_rank + d.q_lora_rank * m.num_heads * qk
            if d.q_lora_rank
            else h * m.num_heads * qk
        )
        kv = h * (d.kv_lora_rank + d.qk_rope_head_dim) + d.kv_lora_rank * m.num_heads * (
            d.qk_nope_head_dim + d.v_head_dim
        )
        return float(q + kv + m.num_heads * d.v_head_dim * h)
    if layer.attention == "linear":
        assert m.linear_attn is not None
        la = m.linear_attn
        qk = la.num_key_heads * la.key_head_dim
        v = la.num_value_heads * la.value_head_dim
        in_proj = h * (2 * qk + 2 * v) + h * 2 * la.num_value_heads  # q,k,v,z + beta,alpha
        conv = (2 * qk + v) * la.conv_kernel
        return float(in_proj + conv + v * h)
    q_out = m.num_heads * m.head_dim * (2 if m.attention_output_gate else 1)
    kv_out = 2 * m.num_kv_heads * m.head_dim
    return float(h * (q_out + kv_out) + m.num_heads * m.head_dim * h)


def layer_params(m: ModelSpec, layer: LayerSpec) -> LayerParams:
    """Parameters of one decoder layer."""
    h = m.hidden_size
    attn = attention_params(m, layer)
    if not layer.moe or m.moe is None:
        return LayerParams(attn, 3.0 * h * m.intermediate_size, 0.0, 0.0, 0.0)
    e = m.moe
    return LayerParams(
        attention=attn,
        dense_ffn=0.0,
        routed_experts=3.0 * h * e.expert_intermediate * e.num_experts,
        shared_experts=3.0 * h * e.shared_intermediate * e.shared_experts,
        router=float(h * e.num_experts),
    )


def embedding_params(m: ModelSpec) -> float:
    """Input embedding plus LM head (once when tied)."""
    return float(m.vocab_size * m.hidden_size * (1 if m.tie_word_embeddings else 2))


def total_params(m: ModelSpec) -> float:
    """All parameters of the main model (MTP/draft layers excluded)."""
    total = embedding_params(m)
    for layer in m.layers:
        p = layer_params(m, layer)
        total += p.attention + p.dense_ffn + p.routed_experts + p.shared_experts + p.router
    return total


def active_params(m: ModelSpec) -> float:
    """Parameters touched per token: routed experts scaled by top_k / num_experts."""
    active = embedding_params(m)
    for layer in m.layers:
        p = layer_params(m, layer)
        frac = m.moe.top_k / m.moe.num_experts if (layer.moe and m.moe) else 0.0
        active += p.attention + p.dense_ffn + p.routed_experts * frac + p.shared_experts + p.router
    return active
