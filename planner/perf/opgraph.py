"""Ops of one forward step of a mixed batch, per GPU, vectorized over candidate configurations.

A step holds ``decode_reqs`` decode requests (one token each, mean context ``decode_ctx``) and
``prefill_tokens`` prompt tokens cut into chunks of ``prefill_chunk`` tokens with ``prefill_prior``
tokens of earlier context each (docs/architecture.md "Pricing"). Every array has shape (K,)
(one entry per candidate config); the model is one :class:`ModelSpec`.

Sharding (per GPU of one worker): attention heads / tp, tokens / dp (attention-DP ranks); dense FFN
and experts over tp*dp GPUs (experts: ep groups of moe_tp = tp*dp/ep); pipeline: the batch is split
in pp micro-batches that pass through all layers in turn, so one step of the whole batch takes one
micro-batch's trip through every layer (latency) while pp micro-batches are in flight (throughput).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, TypedDict

import numpy as np

from kernels_db.costs import MOE_GROUPED_GEMMS
from kernels_db.ops import (
    AttentionDecode,
    AttentionPrefill,
    Gemm,
    KernelShape,
    Memcpy,
    MlaDecode,
    MlaPrefill,
    Moe,
)
from planner.model.params import attention_params
from planner.model.spec import LayerSpec, ModelSpec

OpKind = Literal["gemm", "attention", "moe", "comm", "elementwise", "lm_head"]
OP_KINDS: tuple[OpKind, ...] = ("gemm", "attention", "moe", "comm", "elementwise", "lm_head")
Family = Literal["gemm", "attention_prefill", "attention_decode", "moe", "elementwise", "comm"]
Collective = Literal["all_reduce", "all_to_all", "all_gather", "send_recv", "none"]

ACT_BYTES = 2.0
"""Activations travel in bf16 (2 bytes per element)."""
NORM_PASSES = 8.0
"""Hidden-vector passes of the two fused residual-add + RMSNorm kernels of a layer: each reads the
input and the residual and writes the new residual and the normed output (vLLM
``fused_add_rms_norm``, SGLang/FlashInfer ``fused_add_rmsnorm``); every TP rank holds the whole
hidden vector, so this does not shrink with TP."""
ELEMENTWISE_KERNELS = 4.0
"""Two add+norm kernels, RoPE and SiLU-and-mul per layer (fp8 activation quantization of the dense
GEMMs is fused into the norm and activation kernels in vLLM, SGLang and TensorRT-LLM; a fused-MoE
layer's own quantizations are ``MOE_QUANT_KERNELS``)."""
MOE_ROUTING_KERNELS = 3.0
"""Memory-bound kernels of one fused-MoE layer besides its two grouped GEMMs
(``kernels_db.costs.MOE_GROUPED_GEMMS``) and the gated activation (one of
``ELEMENTWISE_KERNELS``): top-k selection over the router logits, the sort of token-expert pairs by
expert (block alignment) and the weighted sum of each token's top-k outputs. Counted in SGLang's
Triton path (``fused_experts_impl`` in ``python/sglang/srt/layers/moe/fused_moe_triton/
fused_moe.py`` of the sglang 0.5.6.post2 wheel: ``select_experts``, ``moe_align_block_size``,
``moe_sum_reduce``); vLLM's Triton path runs the same steps."""
MOE_QUANT_KERNELS = 2.0
"""Further memory-bound kernels of a fused-MoE layer whose experts take 8-bit activations (fp8,
int8): the activation is quantized before each grouped GEMM (``scaled_fp8_quant`` or
``per_token_group_quant_fp8`` in ``invoke_fused_moe_kernel``, same wheel); a dense layer fuses that
quantization into its norm and activation kernels."""
QUANTIZED_ACTIVATIONS = ("fp8", "int8")
"""GEMM dtypes whose inputs are quantized to 8 bits."""
MOE_IMBALANCE_Z = 1.0
"""Expert load imbalance: the busiest EP rank gets mean + z·std of a multinomial share, z = 1 (a
routed load of n token-expert pairs over ep ranks has std sqrt(n/ep)); measured DeepSeek-V3 routing
is near this level with auxiliary-loss-free balancing (DeepSeek-V3 report, sec. 2.1.2). The step
waits for that rank, so its grouped GEMMs are priced at its load (``moe_ops``: the kernel shape's
tokens scaled by the factor), not as the balanced time times the factor: a weight-bound (decode)
grouped GEMM reads the same experts whatever their rows, so its time barely moves with the load,
and only the compute-bound (prefill) part grows with it. AIConfigurator's fused-MoE tables show
this on H200 (``systems/data/h200_sxm/moe/<engine>/<version>/moe_perf.parquet``
@095f58a51, github:ai-dynamo/aiconfigurator): with the heavily skewed ``power_law_1.01`` routing
against ``balanced``, at EP 8 the median latency ratio is 0.99-1.08 up to 64 tokens and 1.05-1.45
at 2,048-8,192 tokens (SGLang 0.5.9, TensorRT-LLM 1.2.0rc5 / 1.3.0rc20, vLLM 0.14); priced this way
the ratio is off by a median |ln| of 0.10, against 0.24 for the time multiplier
(``python -m kernels_db.moe_load``, 12,000 pairs at EP 2-16)."""


@dataclass(frozen=True)
class ParallelArrays:
    """Per-candidate parallelism and precision, arrays of shape (K,)."""

    tp: np.ndarray
    pp: np.ndarray
    dp: np.ndarray
    ep: np.ndarray
    weight_bytes: np.ndarray  # bytes per linear-weight element (incl. block scales)
    kv_bytes: np.ndarray  # bytes per KV element
    gemm_peak_flops_per_s: np.ndarray  # tensor-core peak for the weight dtype
    gemm_dtype: np.ndarray | None = (
        None  # tensor-core dtype names (str); None: derived from weight_bytes
    )

    def gemm_dtypes(self) -> np.ndarray:
        """Tensor-core dtype of the linear layers per candidate ('bf16', 'fp8', 'fp4')."""
        if self.gemm_dtype is not None:
            return self.gemm_dtype
        return np.where(
            self.weight_bytes >= 2.0, "bf16", np.where(self.weight_bytes >= 1.0, "fp8", "fp4")
        )

    def kv_dtypes(self) -> np.ndarray:
        """KV-cache dtype per candidate ('bf16' or 'fp8')."""
        return np.where(self.kv_bytes >= 2.0, "bf16", "fp8")

    @classmethod
    def concat(cls, pars: Sequence[ParallelArrays]) -> ParallelArrays:
        """``pars`` end to end: one set of their candidates in order (``gemm_dtype`` resolved)."""
        arrays = (f for f in cls.__dataclass_fields__ if f != "gemm_dtype")
        return cls(
            **{f: np.concatenate([getattr(p, f) for p in pars]) for f in arrays},
            gemm_dtype=np.concatenate([p.gemm_dtypes() for p in pars]),
        )


@dataclass(frozen=True)
class StepMix:
    """The batch of one step (whole worker), arrays of shape (K,)."""

    decode_reqs: np.ndarray
    decode_ctx: np.ndarray
    prefill_tokens: np.ndarray
    prefill_chunk: np.ndarray
    prefill_prior: np.ndarray

    @classmethod
    def concat(cls, mixes: Sequence[StepMix]) -> StepMix:
        """``mixes`` end to end: one mix of their candidates in order (priced in one call)."""
        return cls(
            *(np.concatenate([getattr(s, f) for s in mixes]) for f in cls.__dataclass_fields__)
        )


@dataclass(frozen=True)
class Op:
    """Work of one op on one GPU: per instance FLOPs and bytes,
    repeated ``count`` times per step."""

    name: str
    kind: OpKind
    family: Family
    count: float
    flops: np.ndarray
    nbytes: np.ndarray
    peak_flops_per_s: np.ndarray | float
    kernels: float = 1.0
    collective: Collective = "none"
    n_gpus: np.ndarray | float = 1.0
    shape: KernelShape | None = None
    """Kernel shape for ``kernels_db`` (``kernels_db.ops``: its family's key columns, arrays of
    shape (K,)); None when the op has no kernels_db family (it is then priced by the roofline)."""
    span_gpus: np.ndarray | float | None = None
    """GPUs the collective's members are spread over when that differs from ``n_gpus`` (a PP hop
    joins 2 GPUs of a worker spread over tp*dp*pp): the link is the scale-out NIC when it exceeds
    the scale-up domain; None = ``n_gpus``."""

    def spread(self) -> np.ndarray | float:
        """GPUs whose placement decides the link (``span_gpus``, else ``n_gpus``)."""
        return self.n_gpus if self.span_gpus is None else self.span_gpus

    @property
    def lookup(self) -> str:
        """kernels_db op family of ``shape`` ('gemm', 'attention_prefill', 'moe', ...); '' if
        none."""
        return self.shape.family if self.shape is not None else ""


@dataclass(frozen=True)
class LayerGroup:
    """Layers that cost the same: attention kind, window, MoE or not; how many of them."""

    attention: str
    window: int
    moe: bool
    count: int
    attn_params: float


@functools.lru_cache(maxsize=64)
def layer_groups(m: ModelSpec) -> tuple[LayerGroup, ...]:
    """Group the decoder layers of ``m`` by cost signature (cached per spec: a ModelSpec hashes
    its fields once, ``hardware.frozen.FrozenSpec``)."""
    counts: dict[tuple[str, int, bool], int] = {}
    for layer in m.layers:
        key = (layer.attention, layer.window, layer.moe)
        counts[key] = counts.get(key, 0) + 1
    return tuple(
        LayerGroup(a, w, e, n, attention_params(m, LayerSpec(attention=a, window=w, moe=e)))  # type: ignore[arg-type]
        for (a, w, e), n in counts.items()
    )


def _tokens_per_rank(p: ParallelArrays, s: StepMix) -> np.ndarray:
    """Tokens one attention rank processes per micro-batch."""
    return (s.decode_reqs + s.prefill_tokens) / (p.dp * p.pp)


def attention_proj_op(m: ModelSpec, g: LayerGroup, p: ParallelArrays, s: StepMix) -> Op:
    """QKV + output projections: 2·tokens·params/tp FLOPs; weights/tp + activations bytes."""
    ta = _tokens_per_rank(p, s)
    w = g.attn_params / p.tp
    nbytes = w * p.weight_bytes + ta * m.hidden_size * 4 * ACT_BYTES
    # two GEMM inputs: the normed hidden state (QKV) and the attention output (O)
    shape = _gemm_shape(ta, w / m.hidden_size, m.hidden_size, p, **_fp8_columns(m, p, 2.0))
    return Op(
        "attn_proj",
        "gemm",
        "gemm",
        g.count,
        2.0 * ta * w,
        nbytes,
        p.gemm_peak_flops_per_s,
        kernels=3.0,
        shape=shape,
    )


def tensor_scale_passes(m: ModelSpec, p: ParallelArrays) -> np.ndarray:
    """Per candidate, 1 where its FP8 GEMMs compute a whole-tensor activation scale at run time
    before each GEMM input (``kernels_db.fp8_scale``): the checkpoint asks for dynamic per-tensor
    scales (``CheckpointQuant.activation_scale`` "tensor"), or a 16-bit checkpoint is quantized to
    FP8 on load (vLLM / SGLang ``--quantization fp8``: dynamic per-tensor activation scales;
    ASSUMPTION: a TensorRT-LLM plan of a 16-bit checkpoint at FP8 is priced the same way, as its
    FP8QDQ linear layer without an input scale takes the same dynamic path). Static, per-token and
    block scales are computed inside the quantizing pass that the fitted GEMM already holds: 0."""
    q = m.quant
    dynamic = q.activation_scale == "tensor" or (
        q.weight_format == "bf16" and q.activation_scale == "none"
    )
    return np.asarray((p.gemm_dtypes() == "fp8") & dynamic, dtype=float)


def block_scaled(m: ModelSpec, p: ParallelArrays) -> np.ndarray:
    """Per candidate, 1 where its FP8 GEMMs apply 128 x 128 block scales as they accumulate
    (``CheckpointQuant.activation_scale`` "block", DeepSeek-style FP8): its dense GEMMs (the
    ``gemm`` family) run at the GPU's ``block_compute_share`` of the per-tensor FP8 GEMM's compute
    rate (``kernels_db.fp8_scale``). Grouped expert GEMMs (``moe_ops``) do not take it: they run
    at ``fitted.GROUPED_GEMM_COMPUTE_FRACTION`` of the dense rate, fitted end to end on campaigns
    that are mostly block-scaled, which would count the block scales twice."""
    return np.asarray((p.gemm_dtypes() == "fp8") & (m.quant.activation_scale == "block"), float)


class _Fp8Columns(TypedDict):
    """The FP8 keyword columns of ``_gemm_shape``."""

    scale_passes: np.ndarray
    block_scale: np.ndarray


def _fp8_columns(m: ModelSpec, p: ParallelArrays, inputs: float) -> _Fp8Columns:
    """The FP8 columns of a GEMM op over ``inputs`` GEMM inputs (``_gemm_shape``)."""
    return {
        "scale_passes": inputs * tensor_scale_passes(m, p),
        "block_scale": block_scaled(m, p),
    }


def _gemm_shape(
    rows: np.ndarray,
    n: np.ndarray | float,
    k: float,
    p: ParallelArrays,
    dtype: str | None = None,
    scale_passes: np.ndarray | float = 0.0,
    block_scale: np.ndarray | float = 0.0,
) -> Gemm:
    """kernels_db GEMM key: (rows x k) @ (k x n) in the weight dtype (or ``dtype``), with
    ``scale_passes`` dynamic per-tensor activation-scale passes over its input (one per GEMM input
    a merged op holds, where ``tensor_scale_passes``) and ``block_scale`` 1 where it is
    block-scaled FP8 (``block_scaled``)."""
    if not (isinstance(n, np.ndarray) and n.shape == np.shape(rows)):
        n = np.broadcast_to(n, np.shape(rows))
    return Gemm(rows, n, float(k), dtype or p.gemm_dtypes(), scale_passes, block_scale)


def _kv_elems_per_token(m: ModelSpec, g: LayerGroup, tp: np.ndarray) -> np.ndarray:
    """Cached elements per token of one layer on one GPU (GQA kv heads replicated when tp > kv)."""
    if g.attention == "mla":
        assert m.mla is not None
        return np.full_like(tp, float(m.mla.kv_lora_rank + m.mla.qk_rope_head_dim))
    return 2.0 * np.ceil(m.num_kv_heads / tp) * m.head_dim


def _linear_state_bytes(m: ModelSpec, tp: np.ndarray) -> np.ndarray:
    """fp32 recurrent state of a linear-attention layer per sequence on one GPU."""
    assert m.linear_attn is not None
    la = m.linear_attn
    return la.num_value_heads * la.key_head_dim * la.value_head_dim * 4.0 / tp


def _qk_v_dims(m: ModelSpec, g: LayerGroup) -> tuple[float, float]:
    """(q·k dim, v dim) per head of softmax attention."""
    if g.attention == "mla":
        assert m.mla is not None
        return float(m.mla.qk_nope_head_dim + m.mla.qk_rope_head_dim), float(m.mla.v_head_dim)
    return float(m.head_dim), float(m.head_dim)


def prefill_attention_op(m: ModelSpec, g: LayerGroup, p: ParallelArrays, s: StepMix) -> Op:
    """Causal attention of the prefill chunks: 2·h·(dqk+dv)·s·(c + s/2) FLOPs per chunk
    (docs/architecture.md "Pricing")."""
    heads = m.num_heads / p.tp
    chunk = np.maximum(s.prefill_chunk, 1.0)
    chunks = s.prefill_tokens / chunk / (p.dp * p.pp)
    span = s.prefill_prior + chunk / 2.0
    if g.window:
        span = np.minimum(span, g.window)
    if g.attention == "linear":
        state = _linear_state_bytes(m, p.tp)
        flops = (
            chunks * chunk * state
        )  # chunked delta rule: ~2 FLOPs per state element per token / 2 bytes
        nbytes = chunks * (2.0 * state + chunk * m.hidden_size * 3 * ACT_BYTES / p.tp)
        return Op("attn_prefill", "attention", "attention_prefill", g.count, flops, nbytes, 0.0)
    dqk, dv = _qk_v_dims(m, g)
    topk = _dsa_topk(m, g)
    if topk:  # DSA: each query attends its top-k keys (at most all keys before it)
        span = sparse_span(s.prefill_prior, chunk, topk)
    flops = chunks * 2.0 * heads * (dqk + dv) * chunk * span
    kv = _kv_elems_per_token(m, g, p.tp) * p.kv_bytes
    nbytes = chunks * ((s.prefill_prior + chunk) * kv + chunk * heads * (dqk + dv) * 2 * ACT_BYTES)
    seq = chunk * (chunks > 0)
    if g.attention == "mla":
        assert m.mla is not None
        batch, seq, prior = _as_dense_chunks(chunks, seq, s.prefill_prior, span)
        mla = MlaPrefill(
            batch,
            seq,
            prior,
            heads,
            float(m.mla.kv_lora_rank),
            float(m.mla.qk_rope_head_dim),
            "bf16",
        )
        return Op(
            "attn_prefill",
            "attention",
            "attention_prefill",
            g.count,
            flops,
            nbytes,
            0.0,
            shape=mla,
        )
    shape = AttentionPrefill(
        chunks,
        seq,
        s.prefill_prior,
        heads,
        np.ceil(m.num_kv_heads / p.tp),
        float(m.head_dim),
        "bf16",
        p.kv_dtypes(),
        float(g.window),
    )
    return Op(
        "attn_prefill",
        "attention",
        "attention_prefill",
        g.count,
        flops,
        nbytes,
        0.0,
        shape=shape,
    )


def decode_attention_op(m: ModelSpec, g: LayerGroup, p: ParallelArrays, s: StepMix) -> Op:
    """Decode attention: reads the whole cached context of every request (memory bound)."""
    reqs = s.decode_reqs / (p.dp * p.pp)
    heads = m.num_heads / p.tp
    ctx = np.minimum(s.decode_ctx, g.window) if g.window else s.decode_ctx
    topk = _dsa_topk(m, g)
    if topk:  # DSA: the new token attends (and gathers) its top-k cached keys
        ctx = np.minimum(ctx, float(topk))
    if g.attention == "linear":
        state = _linear_state_bytes(m, p.tp)
        return Op(
            "attn_decode",
            "attention",
            "attention_decode",
            g.count,
            reqs * state,
            reqs * 2.0 * state,
            0.0,
        )
    if g.attention == "mla":
        assert m.mla is not None
        flops = reqs * ctx * 2.0 * heads * (2 * m.mla.kv_lora_rank + m.mla.qk_rope_head_dim)
    else:
        flops = reqs * ctx * 4.0 * heads * m.head_dim
    nbytes = reqs * ctx * _kv_elems_per_token(m, g, p.tp) * p.kv_bytes
    if g.attention == "mla":
        assert m.mla is not None
        mla_dec = MlaDecode(
            reqs,
            ctx * (reqs > 0),
            heads,
            float(m.mla.kv_lora_rank),
            float(m.mla.qk_rope_head_dim),
            p.kv_dtypes(),
        )
        return Op(
            "attn_decode",
            "attention",
            "attention_decode",
            g.count,
            flops,
            nbytes,
            0.0,
            shape=mla_dec,
        )
    shape = AttentionDecode(
        reqs,
        ctx * (reqs > 0),
        heads,
        np.ceil(m.num_kv_heads / p.tp),
        float(m.head_dim),
        p.kv_dtypes(),
    )
    return Op(
        "attn_decode",
        "attention",
        "attention_decode",
        g.count,
        flops,
        nbytes,
        0.0,
        shape=shape,
    )


def _dsa_topk(m: ModelSpec, g: LayerGroup) -> int:
    """Keys per query of DeepSeek sparse attention (``index_topk``) on an MLA layer; 0 = dense."""
    return m.mla.index_topk if g.attention == "mla" and m.mla is not None else 0


def sparse_span(prior: np.ndarray, chunk: np.ndarray, topk: float) -> np.ndarray:
    """Mean keys a query of a causal chunk attends when it attends at most ``topk``: the query at
    position x (x from prior to prior + chunk) sees min(x, topk) keys; the mean of that over the
    chunk (= prior + chunk/2 when topk does not bind)."""
    a, b = prior, prior + chunk
    below = np.minimum(b, topk)  # the part of [a, b] under topk
    low = np.where(a < topk, (below**2 - np.minimum(a, topk) ** 2) / 2.0, 0.0)
    high = topk * np.maximum(b - np.maximum(a, topk), 0.0)
    return (low + high) / np.maximum(chunk, 1.0)


def _as_dense_chunks(
    chunks: np.ndarray, seq: np.ndarray, prior: np.ndarray, span: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(batch, seq, prior) of dense causal chunks with the same query tokens and mean span as a
    chunk of ``seq`` tokens whose queries attend ``span`` keys on average (the kernel key of a
    sparse prefill): the same chunk over a shorter prior when span >= seq/2, else
    seq·chunks/(2·span) chunks of 2·span tokens with no prior."""
    whole = span >= seq / 2.0
    short = np.maximum(2.0 * span, 1.0)
    return (
        np.where(whole, chunks, chunks * seq / short),
        np.where(whole, seq, np.where(seq > 0, short, 0.0)),
        np.where(whole, np.minimum(prior, span - seq / 2.0), 0.0),
    )


INDEXER_BYTES = 1.0
"""Bytes of one element of the lightning indexer's cached keys and math (FP8, DeepSeek-V3.2
report, sec. 2.1)."""
LOGIT_BYTES = 4.0
"""fp32 index score of one (query, key) pair, written by the score kernel and read by top-k."""


def dsa_indexer_ops(m: ModelSpec, g: LayerGroup, p: ParallelArrays, s: StepMix) -> list[Op]:
    """The DSA lightning indexer of one MLA layer (DeepSeek-V3.2, GLM-5): per token a query of
    ``index_n_heads`` x ``index_head_dim`` (from the query latent), one key of ``index_head_dim``
    and one weight per head (from the hidden state), then a score against every cached key before
    it (2·heads·dim FLOPs per pair, FP8) and a top-k over the scores. ASSUMPTION: the indexer is
    replicated on every TP rank (its projections are small), so its work is not split by TP."""
    mla = m.mla
    if g.attention != "mla" or mla is None or not (mla.index_topk and mla.index_n_heads):
        return []
    h, d = float(mla.index_n_heads), float(mla.index_head_dim)
    ta = _tokens_per_rank(p, s)
    q_in = float(mla.q_lora_rank or m.hidden_size)
    proj = [
        ("dsa_indexer_q", h * d, q_in),
        ("dsa_indexer_kw", d + h, float(m.hidden_size)),
    ]
    ops = [
        Op(
            name,
            "gemm",
            "gemm",
            g.count,
            2.0 * ta * n * k,
            n * k * p.weight_bytes + ta * (n + k) * ACT_BYTES,
            p.gemm_peak_flops_per_s,
            shape=_gemm_shape(ta, n, k, p, **_fp8_columns(m, p, 1.0)),
        )
        for name, n, k in proj
    ]
    # prefill: each chunk token scores every key before it (mean prior + chunk/2)
    chunk = np.maximum(s.prefill_chunk, 1.0)
    chunks = s.prefill_tokens / chunk / (p.dp * p.pp)
    pairs = chunks * chunk * (s.prefill_prior + chunk / 2.0)
    keys = chunks * (s.prefill_prior + chunk) * d * INDEXER_BYTES
    ops.append(_indexer_score_op("dsa_indexer_prefill", "attention_prefill", g, h, d, pairs, keys))
    reqs = s.decode_reqs / (p.dp * p.pp)
    pairs = reqs * s.decode_ctx
    keys = pairs * d * INDEXER_BYTES
    ops.append(_indexer_score_op("dsa_indexer_decode", "attention_decode", g, h, d, pairs, keys))
    return ops


def _indexer_score_op(
    name: str,
    family: Family,
    g: LayerGroup,
    h: float,
    d: float,
    pairs: np.ndarray,
    keys: np.ndarray,
) -> Op:
    """Scores of ``pairs`` (query, key) pairs reading ``keys`` bytes of cached indexer keys, plus
    the fp32 scores written and read back by the top-k (priced by the roofline)."""
    return Op(
        name,
        "attention",
        family,
        g.count,
        2.0 * h * d * pairs,
        keys + 2.0 * LOGIT_BYTES * pairs,
        0.0,
        kernels=2.0,
    )


def all_reduce_op(name: str, m: ModelSpec, count: float, p: ParallelArrays, s: StepMix) -> Op:
    """TP all-reduce of the hidden states of a rank's tokens (bf16)."""
    nbytes = _tokens_per_rank(p, s) * m.hidden_size * ACT_BYTES
    return Op(
        name,
        "comm",
        "comm",
        count,
        np.zeros_like(nbytes),
        nbytes,
        0.0,
        collective="all_reduce",
        n_gpus=p.tp,
    )


QK_NORM_STATS_BYTES = 2 * 4
"""Per token, the two fp32 partial sums of squares (q and k) a per-layer QK-norm all-reduces
(vLLM MiniMaxText01RMSNormTP.forward_qk: one all-reduce of a (tokens, 2) fp32 tensor)."""


def qk_norm_all_reduce_op(m: ModelSpec, g: LayerGroup, p: ParallelArrays, s: StepMix) -> Op:
    """All-reduce of the QK-norm statistics of a rank's tokens when the norm spans all heads
    (``ModelSpec.qk_norm_across_heads``): latency-bound, one per layer under TP."""
    nbytes = _tokens_per_rank(p, s) * QK_NORM_STATS_BYTES
    return Op(
        "tp_all_reduce_qk_norm",
        "comm",
        "comm",
        g.count,
        np.zeros_like(nbytes),
        nbytes,
        0.0,
        collective="all_reduce",
        n_gpus=p.tp,
    )


def ffn_all_reduce_op(m: ModelSpec, g: LayerGroup, p: ParallelArrays, s: StepMix) -> Op:
    """All-reduce of FFN outputs over tp*dp GPUs (with attention-DP: gather + reduce-scatter of all
    ranks' tokens, same volume); none after MoE when experts exchange tokens by all-to-all."""
    tokens = (s.decode_reqs + s.prefill_tokens) / p.pp
    a2a = (p.dp > 1) & (p.ep > 1) & g.moe
    nbytes = np.where(a2a, 0.0, tokens * m.hidden_size * ACT_BYTES / np.where(p.dp > 1, 1.0, p.dp))
    return Op(
        "tp_all_reduce_ffn",
        "comm",
        "comm",
        g.count,
        np.zeros_like(nbytes),
        nbytes,
        0.0,
        collective="all_reduce",
        n_gpus=p.tp * p.dp,
    )


def dense_ffn_op(m: ModelSpec, g: LayerGroup, p: ParallelArrays, s: StepMix) -> Op:
    """Gated MLP: 3 matrices h x inter, sharded over tp*dp GPUs."""
    tokens = (s.decode_reqs + s.prefill_tokens) / p.pp
    w = 3.0 * m.hidden_size * m.intermediate_size / (p.tp * p.dp)
    ta = tokens / p.dp
    nbytes = (
        w * p.weight_bytes + ta * (2 * m.hidden_size + 3 * m.intermediate_size / p.tp) * ACT_BYTES
    )
    # two GEMM inputs: the normed hidden state (gate-up) and the activation (down)
    shape = _gemm_shape(tokens, w / m.hidden_size, m.hidden_size, p, **_fp8_columns(m, p, 2.0))
    return Op(
        "mlp",
        "gemm",
        "gemm",
        g.count,
        2.0 * tokens * w,
        nbytes,
        p.gemm_peak_flops_per_s,
        kernels=2.0,
        shape=shape,
    )


def moe_imbalance(pairs: np.ndarray, ep: np.ndarray) -> np.ndarray:
    """Busiest-rank load / mean load for ``pairs`` token-expert assignments over ``ep`` ranks."""
    mean = np.maximum(pairs / ep, 1e-9)
    return 1.0 + MOE_IMBALANCE_Z * np.sqrt(mean * (1.0 - 1.0 / ep)) / mean * (ep > 1)


def moe_ops(m: ModelSpec, g: LayerGroup, p: ParallelArrays, s: StepMix) -> list[Op]:
    """Router, routed experts (grouped GEMM at the busiest EP rank's load), shared experts, EP
    all-to-all."""
    assert m.moe is not None
    e, h = m.moe, m.hidden_size
    tokens = (s.decode_reqs + s.prefill_tokens) / p.pp
    ta = tokens / p.dp
    router = Op(
        "router",
        "moe",
        "gemm",
        g.count,
        2.0 * ta * h * e.num_experts,
        h * e.num_experts * ACT_BYTES + ta * h * ACT_BYTES,
        p.gemm_peak_flops_per_s,
        shape=_gemm_shape(ta, float(e.num_experts), h, p, "bf16"),
    )
    pairs = tokens * e.top_k
    moe_tp = p.tp * p.dp / p.ep
    expert_w = 3.0 * h * e.expert_intermediate / moe_tp
    # the busiest EP rank's load, as tokens of a balanced layer (the step waits for that rank)
    busiest = tokens * moe_imbalance(pairs, p.ep)
    touched = (e.num_experts / p.ep) * (1.0 - (1.0 - e.top_k / e.num_experts) ** busiest)
    flops = 2.0 * busiest * e.top_k / p.ep * 3.0 * h * e.expert_intermediate / moe_tp
    nbytes = (
        touched * expert_w * p.weight_bytes
        + busiest * e.top_k / p.ep * (2 * h + 3 * e.expert_intermediate / moe_tp) * ACT_BYTES
    )
    shape = Moe(
        busiest,
        float(h),
        e.expert_intermediate / moe_tp,
        float(e.top_k),
        float(e.num_experts),
        p.ep,
        p.gemm_dtypes(),
    )
    ops = [
        router,
        Op(
            "experts",
            "moe",
            "moe",
            g.count,
            flops,
            nbytes,
            p.gemm_peak_flops_per_s,
            kernels=MOE_GROUPED_GEMMS,
            shape=shape,
        ),
    ]
    if e.shared_experts:
        ws = 3.0 * h * e.shared_intermediate * e.shared_experts / p.tp
        ops.append(
            Op(
                "shared_expert",
                "moe",
                "gemm",
                g.count,
                2.0 * ta * ws,
                ws * p.weight_bytes + ta * h * 2 * ACT_BYTES,
                p.gemm_peak_flops_per_s,
                kernels=2.0,
                shape=_gemm_shape(ta, ws / h, h, p, **_fp8_columns(m, p, 2.0)),
            )
        )
    ops.extend(moe_aux_ops(m, g, p, s))
    # tokens replicated on the tp ranks (dp = 1) need no dispatch: experts' outputs are all-reduced
    a2a = 2.0 * ta * e.top_k * h * ACT_BYTES * (1.0 - 1.0 / p.ep) * (p.dp > 1)
    ops.append(
        Op(
            "ep_all_to_all",
            "comm",
            "comm",
            g.count,
            np.zeros_like(a2a),
            a2a,
            0.0,
            kernels=2.0,
            collective="all_to_all",
            n_gpus=p.ep,
        )
    )
    return ops


def moe_aux_ops(m: ModelSpec, g: LayerGroup, p: ParallelArrays, s: StepMix) -> list[Op]:
    """The memory-bound kernels of one fused-MoE layer besides its grouped GEMMs and activation:
    routing and combine (``MOE_ROUTING_KERNELS``: reads the fp32 router logits, sorts the pairs,
    sums the top-k outputs) and, for 8-bit expert inputs, the two activation quantizations
    (``MOE_QUANT_KERNELS``: read 16-bit, write 8-bit, over each GEMM's input). Priced as the step's
    other memory-bound kernels (``memory_bound_op``: a fixed cost per kernel plus its bytes); the
    quantization costs 0 where the experts take 16-bit activations."""
    assert m.moe is not None
    e, h = m.moe, m.hidden_size
    tokens = (s.decode_reqs + s.prefill_tokens) / p.pp
    pairs = tokens * e.top_k / p.ep
    routing = tokens / p.dp * (e.num_experts * 4.0 + e.top_k * 8.0) + pairs * h * ACT_BYTES
    q = m.quant
    # an 8-bit GEMM dtype takes 8-bit inputs, but for an int8 weight-only (W8A16) checkpoint,
    # priced at the fp8 rate (``quantization.PRICING_DTYPE``), which keeps 16-bit inputs
    weight_only = q.weight_format == "int8" and q.activation_bits > 8
    quantized = (np.isin(p.gemm_dtypes(), QUANTIZED_ACTIVATIONS) & (not weight_only)).astype(float)
    inter = e.expert_intermediate * p.ep / (p.tp * p.dp)
    # the gate-up input: this rank's tokens before an expert-parallel dispatch, every token where
    # the experts' GPUs hold the whole batch (ep 1); the down input: its routed pairs
    gate_up_rows = np.where(p.ep > 1, tokens / p.dp, tokens)
    quant = quantized * (gate_up_rows * h + pairs * inter) * (ACT_BYTES + 1.0)
    return [
        memory_bound_op("moe_routing", g.count, routing, MOE_ROUTING_KERNELS),
        memory_bound_op("moe_quant", g.count, quant, MOE_QUANT_KERNELS),
    ]


def memory_bound_op(name: str, count: float, nbytes: np.ndarray, kernels: float) -> Op:
    """``kernels`` memory-bound kernels moving ``nbytes`` in all, repeated ``count`` times a step.
    kernels_db's memcpy of N bytes moves 2·N (read + write), so each kernel is priced as a copy of
    half its share of the traffic."""
    return Op(
        name,
        "elementwise",
        "elementwise",
        count,
        np.zeros_like(nbytes),
        nbytes,
        0.0,
        kernels=kernels,
        shape=Memcpy(nbytes / 2.0 / kernels),
    )


def elementwise_elems_per_token(m: ModelSpec, g: LayerGroup, p: ParallelArrays) -> np.ndarray:
    """Elements one GPU reads + writes per token of one layer in memory-bound kernels: add+norms on
    the full hidden vector (``NORM_PASSES``), RoPE in place on this rank's q and k heads (read +
    write), SiLU-and-mul on this rank's FFN width (read gate and up, write one: 3 widths)."""
    rope = 2.0 * (m.num_heads + m.num_kv_heads) * m.head_dim / p.tp
    if g.moe and m.moe is not None:
        e = m.moe
        # a rank's routed pairs (tokens·top_k/ep over dp attention ranks) at width inter/moe_tp
        width = (e.top_k * e.expert_intermediate + e.shared_experts * e.shared_intermediate) / p.tp
    else:
        width = m.intermediate_size / p.tp
    return NORM_PASSES * m.hidden_size + rope + 3.0 * width


def elementwise_op(m: ModelSpec, g: LayerGroup, p: ParallelArrays, s: StepMix) -> Op:
    """Norms, RoPE, residuals and activation kernels (memory bound): ``elementwise_elems_per_token``
    bf16 elements per token over ``ELEMENTWISE_KERNELS`` kernels (``memory_bound_op``)."""
    nbytes = _tokens_per_rank(p, s) * elementwise_elems_per_token(m, g, p) * ACT_BYTES
    return memory_bound_op("elementwise", g.count, nbytes, ELEMENTWISE_KERNELS)


def lm_head_op(m: ModelSpec, p: ParallelArrays, s: StepMix) -> Op:
    """LM head on the rows sampled this step (decode requests + finishing prefills), vocab / tp."""
    rows = (s.decode_reqs + np.minimum(s.prefill_tokens, 1.0)) / (p.dp * p.pp)
    w = m.hidden_size * m.vocab_size / p.tp
    nbytes = w * ACT_BYTES + rows * m.vocab_size / p.tp * 4.0
    shape = _gemm_shape(rows, m.vocab_size / p.tp, m.hidden_size, p, "bf16")
    return Op(
        "lm_head",
        "lm_head",
        "gemm",
        1.0,
        2.0 * rows * w,
        nbytes,
        p.gemm_peak_flops_per_s,
        kernels=2.0,
        shape=shape,
    )


def pp_send_op(m: ModelSpec, p: ParallelArrays, s: StepMix) -> Op:
    """Hidden states handed between pipeline stages (pp - 1 hops per micro-batch); a worker wider
    than the scale-up domain sends them over the NIC (every hop priced so: an upper bound)."""
    nbytes = _tokens_per_rank(p, s) * m.hidden_size * ACT_BYTES
    hops = float(np.max(p.pp)) - 1.0
    scale = (p.pp - 1.0) / max(hops, 1.0)
    return Op(
        "pp_send",
        "comm",
        "comm",
        max(hops, 0.0),
        np.zeros_like(nbytes),
        nbytes * scale,
        0.0,
        collective="send_recv",
        n_gpus=2.0 * (p.pp > 1),
        span_gpus=p.tp * p.dp * p.pp,
    )


def step_ops(m: ModelSpec, p: ParallelArrays, s: StepMix) -> list[Op]:
    """All ops of one step (per GPU); comm ops with tp/ep of 1 cost nothing when priced."""
    ops: list[Op] = []
    for g in layer_groups(m):
        ops.append(attention_proj_op(m, g, p, s))
        ops.append(prefill_attention_op(m, g, p, s))
        ops.append(decode_attention_op(m, g, p, s))
        ops.extend(dsa_indexer_ops(m, g, p, s))
        ops.append(all_reduce_op("tp_all_reduce_attn", m, g.count, p, s))
        if m.qk_norm_across_heads and g.attention == "gqa":
            ops.append(qk_norm_all_reduce_op(m, g, p, s))
        if g.moe and m.moe is not None:
            ops.extend(moe_ops(m, g, p, s))
        else:
            ops.append(dense_ffn_op(m, g, p, s))
        ops.append(ffn_all_reduce_op(m, g, p, s))
        ops.append(elementwise_op(m, g, p, s))
    ops.append(lm_head_op(m, p, s))
    if float(np.max(p.pp)) > 1:
        ops.append(pp_send_op(m, p, s))
    return ops
