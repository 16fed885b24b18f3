"""Speculative decoding priced as the engines run it.

One decode iteration of a speculating engine (SGLang EAGLE/NEXTN worker, vLLM and TensorRT-LLM
MTP/EAGLE-3 paths) is: ``k`` draft steps, each a decode step of the draft (an MTP head, an EAGLE-3
head or a separate small model) at the batch's size, then one verify step of the target over
``k + 1`` tokens per sequence. The iteration emits E tokens per sequence
(``SpecDecode.tokens_per_step``).

The verify step is priced by the same step model as a plain decode step at ``batch·(k + 1)``
tokens (``serving.verify_rows``): every linear layer sees ``k + 1`` times the tokens, while
attention reads each sequence's KV once (its ``k + 1`` queries share it). At low batch the step
is bound by reading weights, so the extra tokens are nearly free and TPOT falls by about E; at
high batch the GEMMs are compute-bound, the verify step costs up to ``k + 1`` times a plain step
and speculating costs more than it gives. The draft's weights and KV share the GPU's memory
(``seq_capacity``).

The draft's cost is the ratio of parameters it touches per token to the target's
(``draft_cost_ratio``): decode is weight-bound for both at the batches where drafting pays, and
FLOPs scale with the same parameter counts where it is compute-bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from hardware.spec import GpuSpec
from planner.errors import PlannerInputError
from planner.model.bundled import load_model
from planner.model.params import active_params, attention_params, layer_params
from planner.model.spec import LayerSpec, ModelSpec
from planner.perf import memory
from planner.perf.opgraph import ParallelArrays
from planner.workload.spec import SpecDecode

SpecMethod = Literal["none", "mtp", "eagle3", "draft"]
SPEC_METHODS: tuple[str, ...] = ("none", "mtp", "eagle3", "draft")

EAGLE3_DRAFT_VOCAB = 32000
"""Rows of an EAGLE-3 head's LM head: EAGLE-3 maps the target vocabulary to a 32k draft
vocabulary (Li et al. 2025, arXiv:2503.01840, §3; the released heads' ``draft_vocab_size``)."""


@dataclass(frozen=True)
class MethodDefault:
    """A method's default draft length and per-position acceptance, with the source."""

    draft_len: int
    acceptance: tuple[float, ...]
    lengths: tuple[int, ...]  # draft lengths ``plan`` searches
    source: str


METHOD_DEFAULTS: dict[str, MethodDefault] = {
    "mtp": MethodDefault(
        1,
        (0.85,),
        (1, 2, 3, 4),
        "DeepSeek-V3 technical report (arXiv:2412.19437, §5.4.3): the second token's acceptance "
        "rate with one MTP module is 85-90%; the lower end",
    ),
    "eagle3": MethodDefault(
        3,
        (0.75,),
        (1, 2, 3, 4, 5),
        "EAGLE-3 (arXiv:2503.01840, Table 1-2): chain acceptance rates n-alpha of about 0.7-0.8 "
        "per position on MT-bench for LLaMA-3.1-8B",
    ),
    "draft": MethodDefault(
        4,
        (0.6,),
        (1, 2, 3, 4, 5, 6),
        "Leviathan et al. 2023 (arXiv:2211.17192, Table 3): acceptance alpha 0.5-0.8 for small "
        "drafts of the same family; a mid value",
    ),
}

FAMILY_ACCEPTANCE: dict[tuple[str, str], tuple[tuple[float, ...], str]] = {
    ("mtp", "hybrid_moe"): (
        (0.691,),
        "fitted (median fit, 3 drafted tokens) by `python -m lab.fit_spec` on the 6 B200 fp4 "
        "MTP/no-MTP pairs of Qwen3.5-397B-A17B in "
        "../shared/validation/power/inferencex_power_single_turn.csv (lab/notes/spec.md)",
    ),
}
"""Per-position acceptance of a method on a model family where it was fitted, with the source."""


def mtp_head_params(m: ModelSpec) -> float:
    """Parameters an MTP module touches per token: one decoder layer like the target's last
    (routed experts at top_k / num_experts), its 2h x h projection of [embedding; hidden]
    and the LM head it shares with the target (DeepSeek-V3 report §2.2)."""
    layer = m.layers[-1]
    p = layer_params(m, layer)
    frac = m.moe.top_k / m.moe.num_experts if (layer.moe and m.moe) else 0.0
    body = p.attention + p.dense_ffn + p.routed_experts * frac + p.shared_experts + p.router
    h = m.hidden_size
    return float(body + 2 * h * h + m.vocab_size * h)


def eagle3_head_params(m: ModelSpec) -> float:
    """Parameters of an EAGLE-3 head: one dense decoder layer at the target's width, the 3h -> h
    fusion of three target layers' features and a 32k-row LM head (arXiv:2503.01840 §3)."""
    h = m.hidden_size
    attn = attention_params(m, m.layers[0]) if m.layers[0].attention != "linear" else 4.0 * h * h
    return float(attn + 3 * h * m.intermediate_size + 3 * h * h + EAGLE3_DRAFT_VOCAB * h)


def draft_cost_ratio(m: ModelSpec, method: str, draft: ModelSpec | None = None) -> float:
    """Cost of one draft step over one target decode step: parameters touched per token of the
    draft over the target's (both weight-bound at the batches where drafting pays)."""
    if method == "mtp":
        return mtp_head_params(m) / active_params(m)
    if method == "eagle3":
        return eagle3_head_params(m) / active_params(m)
    if method == "draft":
        assert draft is not None
        return active_params(draft) / active_params(m)
    raise ValueError(f"no draft for method {method!r}")


def check_method(m: ModelSpec, method: str, draft: ModelSpec | None, draft_ref: str) -> None:
    """Refuse a method the checkpoint cannot run (identity: never substitute a draft)."""
    if method == "mtp" and m.mtp_layers < 1:
        raise PlannerInputError(
            "--spec-method", f"mtp: {m.name} ships no MTP layers (mtp_layers=0 in its config)"
        )
    if method == "draft":
        if draft is None:
            raise PlannerInputError("--spec-draft-model", "required with --spec-method draft")
        if draft.vocab_size != m.vocab_size:
            raise PlannerInputError(
                "--spec-draft-model",
                f"{draft_ref}: vocabulary {draft.vocab_size} != {m.name}'s {m.vocab_size}; "
                "a draft must share the target's tokenizer",
            )
        if active_params(draft) >= active_params(m):
            raise PlannerInputError(
                "--spec-draft-model",
                f"{draft_ref} touches no fewer parameters per token than {m.name}",
            )
    elif draft is not None:
        raise PlannerInputError("--spec-draft-model", "only with --spec-method draft")


def default_acceptance(method: str, family: str) -> tuple[tuple[float, ...], str]:
    """(per-position acceptance, source) of ``method`` on a model ``family``."""
    fitted = FAMILY_ACCEPTANCE.get((method, family))
    if fitted is not None:
        return fitted
    d = METHOD_DEFAULTS[method]
    return d.acceptance, d.source


def _head_layer(m: ModelSpec) -> LayerSpec:
    """The layer an MTP / EAGLE-3 head is built like: the target's last full-attention layer."""
    return next((ly for ly in reversed(m.layers) if ly.attention != "linear"), m.layers[-1])


def draft_weights_per_gpu(m: ModelSpec, sd: SpecDecode, p: ParallelArrays) -> np.ndarray:
    """Bytes of the draft's weights on one GPU: an MTP head's layer (all its experts, spread over
    EP) and projection, an EAGLE-3 head, or the draft model sharded like the target; an MTP
    head's LM head is the target's own (DeepSeek-V3 report §2.2)."""
    h = m.hidden_size
    if sd.method == "draft":
        return np.asarray(memory.weights_per_gpu(load_model(sd.draft_model), p))
    if sd.method == "eagle3":
        return np.asarray(eagle3_head_params(m) * p.weight_bytes / p.tp)
    lp = layer_params(m, _head_layer(m))
    dense = lp.attention + lp.dense_ffn + lp.shared_experts + lp.router + 2 * h * h
    return np.asarray((dense / p.tp + lp.routed_experts / np.maximum(p.ep, 1)) * p.weight_bytes)


def draft_seq_bytes_per_gpu(
    m: ModelSpec, sd: SpecDecode, p: ParallelArrays, tokens: np.ndarray
) -> np.ndarray:
    """KV bytes one sequence of ``tokens`` adds on one GPU in the draft: one attention layer for
    an MTP or EAGLE-3 head, every layer of a draft model."""
    if sd.method == "draft":
        return np.asarray(memory.seq_bytes_per_gpu(load_model(sd.draft_model), p, tokens))
    layer = _head_layer(m)
    elems = memory.kv_elems_per_token(m, layer, p.tp)
    per_token = elems * p.kv_bytes + memory.indexer_key_bytes_per_token(m, layer)
    return np.asarray(per_token * tokens)


def seq_capacity(
    m: ModelSpec,
    gpu: GpuSpec,
    p: ParallelArrays,
    role: tuple[np.ndarray, np.ndarray, np.ndarray],
    util: float | np.ndarray,
    sd: SpecDecode,
) -> np.ndarray:
    """``memory.seq_capacity`` with the draft resident: its weights come off the KV budget and
    each sequence also holds the draft's KV. ``role``: (chunk tokens, max running sequences, KV
    tokens of one sequence)."""
    chunk, seqs, tokens = role
    budget = memory.kv_budget_per_gpu(m, gpu, p, chunk, seqs, util) - draft_weights_per_gpu(
        m, sd, p
    )
    per_seq = memory.seq_bytes_per_gpu(m, p, tokens) + draft_seq_bytes_per_gpu(m, sd, p, tokens)
    per_seq = np.maximum(per_seq, 1.0)
    return np.where(budget > 0, np.floor(np.maximum(budget, 0.0) / per_seq) * p.dp, 0.0)
