"""Parse a Hugging Face ``config.json`` into a :class:`ModelSpec`.

Supported families (by ``model_type``): dense GQA (llama, mistral, qwen2, qwen3, qwen3_vl_text;
gptj as multi-head attention with an equal-weight gated MLP),
MoE GQA (mixtral, qwen2_moe, qwen3_moe, qwen3_vl_moe_text, minimax_m2, gpt_oss, llama4_text),
MLA+MoE (deepseek_v2, deepseek_v3, deepseek_v32, kimi_k2, glm_moe_dsa) and hybrid linear
attention (qwen3_5_text, qwen3_5_moe_text, qwen3_next). Anything else is refused with the list of
supported types, never guessed.
"""

from __future__ import annotations

from collections.abc import Mapping

from hardware.errors import PlannerInputError
from hardware.input_files import check_number
from planner.model.quantization import read_quantization
from planner.model.spec import LayerSpec, LinearAttnDims, MlaDims, ModelSpec, MoeDims

DENSE_TYPES = frozenset({"llama", "mistral", "qwen2", "qwen3", "qwen3_vl_text", "qwen3_5_text"})
MOE_TYPES = frozenset(
    {
        "mixtral",
        "qwen2_moe",
        "qwen3_moe",
        "qwen3_vl_moe_text",
        "minimax_m2",
        "gpt_oss",
        "llama4_text",
        "qwen3_5_moe_text",
        "qwen3_next",
    }
)
MLA_TYPES = frozenset({"deepseek_v2", "deepseek_v3", "deepseek_v32", "kimi_k2", "glm_moe_dsa"})
SUPPORTED_TYPES = DENSE_TYPES | MOE_TYPES | MLA_TYPES | {"gptj"}
HYBRID_LINEAR_TYPES = frozenset({"qwen3_5_text", "qwen3_5_moe_text", "qwen3_next"})
GPTJ_TYPE = "gptj"
GPTJ_MLP_RATIO = 4
"""GPT-J's MLP width when ``n_inner`` is null: 4 x n_embd
(HF transformers GPTJConfig / GPTJBlock)."""


def _gptj_as_dense(cfg: Mapping[str, object]) -> dict[str, object]:
    """GPT-J (multi-head attention; a non-gated GELU MLP fc_in/fc_out of width I) in the dense-GQA
    field names. Its 2·H·I MLP weights and FLOPs equal those of a gated MLP of width 2I/3, which is
    how the op graph (gate, up, down) prices it; attention and MLP run in parallel in GPT-J but are
    priced in sequence (the same ops and bytes)."""
    hidden = _int(cfg, "n_embd")
    inner = _int(cfg, "n_inner", default=GPTJ_MLP_RATIO * hidden)
    return {
        **cfg,
        "model_type": GPTJ_TYPE,
        "hidden_size": hidden,
        "num_hidden_layers": _int(cfg, "n_layer"),
        "num_attention_heads": _int(cfg, "n_head"),
        "max_position_embeddings": _int(cfg, "n_positions"),
        "intermediate_size": round(2 * inner / 3),
    }


def _get(
    cfg: Mapping[str, object], *keys: str, default: object = None, required: bool = True
) -> object:
    """First present key of ``keys``; a missing required field is a one-line input error."""
    for k in keys:
        if k in cfg and cfg[k] is not None:
            return cfg[k]
    if required and default is None:
        raise PlannerInputError(f"config.json: {keys[0]}", "required field is missing")
    return default


MAX_LAYERS = 1_000
"""Most decoder layers accepted (the deepest public LLMs have ~130)."""
MAX_DIM = 10_000_000
"""Largest width, head count, vocabulary or expert count accepted from a config.json."""
MAX_POSITIONS = 1_000_000_000
"""Largest ``max_position_embeddings`` accepted (public models stay under 2^24)."""


def _int(
    cfg: Mapping[str, object],
    *keys: str,
    default: int | None = None,
    minimum: int = 1,
    maximum: int = MAX_DIM,
) -> int:
    val = _get(cfg, *keys, default=default)
    return int(check_number(val, f"config.json: {keys[0]}", minimum, maximum, integer=True))


def _opt_int(cfg: Mapping[str, object], key: str, maximum: int = MAX_DIM) -> int:
    """An optional count (absent, null or 0 -> 0)."""
    val = cfg.get(key)
    if val is None or val is False or val == 0:
        return 0
    return int(check_number(val, f"config.json: {key}", 0, maximum, integer=True))


def _int_list(cfg: Mapping[str, object], key: str) -> list[int]:
    """An optional list of layer indices or flags."""
    val = cfg.get(key) or []
    if not isinstance(val, list):
        raise PlannerInputError(f"config.json: {key}", f"must be a list, got {type(val).__name__}")
    return [int(check_number(v, f"config.json: {key}", 0, MAX_DIM, integer=True)) for v in val]


def _check_types(cfg: Mapping[str, object]) -> None:
    """Fields read as objects or lists must be of that type (a string there is a broken config)."""
    q = cfg.get("quantization_config")
    if q is not None and not isinstance(q, dict):
        raise PlannerInputError(
            "config.json: quantization_config",
            f"must be an object (quant_method, ...), got {type(q).__name__}",
        )
    types = cfg.get("layer_types")
    if types is not None and not (
        isinstance(types, list) and all(isinstance(t, str) for t in types)
    ):
        raise PlannerInputError(
            "config.json: layer_types",
            "must be a list of strings (full_attention, sliding_attention, ...)",
        )


def _layer_types(cfg: Mapping[str, object]) -> list[str]:
    """``layer_types`` (checked to be a list of strings by :func:`_check_types`); [] if absent."""
    types = cfg.get("layer_types")
    return [str(t) for t in types] if isinstance(types, list) else []


def text_config(raw: object) -> tuple[Mapping[str, object], str]:
    """The language-model part of a (possibly multimodal) config and its architecture name."""
    if not isinstance(raw, dict):
        raise PlannerInputError("config.json", "must be a JSON object")
    archs = raw.get("architectures") or []
    arch = (
        str(archs[0])
        if isinstance(archs, list) and archs
        else str(raw.get("model_type", "unknown"))
    )
    sub = raw.get("text_config")
    if isinstance(sub, dict) and sub:
        merged: dict[str, object] = {k: v for k, v in raw.items() if k != "text_config"}
        merged.update(sub)
        return merged, arch
    return raw, arch


def _moe_dims(cfg: Mapping[str, object], model_type: str) -> MoeDims:
    experts = _int(cfg, "n_routed_experts", "num_local_experts", "num_experts")
    inter_key = (
        "intermediate_size"
        if model_type in {"mixtral", "gpt_oss", "minimax_m2", "llama4_text"}
        else "moe_intermediate_size"
    )
    shared = _opt_int(cfg, "n_shared_experts")
    shared_inter = _opt_int(cfg, "shared_expert_intermediate_size") or _opt_int(
        cfg, "shared_intermediate_size"
    )
    if model_type == "llama4_text":
        shared = 1
        shared_inter = _int(cfg, "intermediate_size")
    if shared and not shared_inter:
        shared_inter = _int(cfg, "moe_intermediate_size")
    if shared_inter and not shared:
        shared = 1
    return MoeDims(
        num_experts=experts,
        top_k=_int(cfg, "num_experts_per_tok", "experts_per_token"),
        expert_intermediate=_int(cfg, inter_key, "intermediate_size"),
        shared_experts=shared,
        shared_intermediate=shared_inter,
    )


def _moe_flags(cfg: Mapping[str, object], model_type: str, n: int) -> list[bool]:
    """Which layers carry a MoE FFN."""
    if model_type in MLA_TYPES:
        first_dense = _opt_int(cfg, "first_k_dense_replace")
        freq = _opt_int(cfg, "moe_layer_freq") or 1
        return [i >= first_dense and i % freq == 0 for i in range(n)]
    if model_type == "llama4_text":
        step = _opt_int(cfg, "interleave_moe_layer_step") or 1
        return [(i + 1) % step == 0 for i in range(n)]
    dense_only = set(_int_list(cfg, "mlp_only_layers"))
    step = _opt_int(cfg, "decoder_sparse_step") or 1
    return [i not in dense_only and (i + 1) % step == 0 for i in range(n)]


def _attention_layers(cfg: Mapping[str, object], model_type: str, n: int) -> list[tuple[str, int]]:
    """(attention kind, window) per layer."""
    if model_type in MLA_TYPES:
        return [("mla", 0)] * n
    types = _layer_types(cfg)
    if model_type in HYBRID_LINEAR_TYPES:
        if not types:
            interval = _int(cfg, "full_attention_interval")
            types = [
                "full_attention" if (i + 1) % interval == 0 else "linear_attention"
                for i in range(n)
            ]
        return [("linear", 0) if t == "linear_attention" else ("gqa", 0) for t in types]
    if model_type == "llama4_text":
        chunk = _opt_int(cfg, "attention_chunk_size", MAX_POSITIONS)
        nope = _int_list(cfg, "no_rope_layers")
        if nope and len(nope) < n:
            raise PlannerInputError(
                "config.json: no_rope_layers", f"has {len(nope)} entries, expected {n}"
            )
        # Llama-4: every 4th layer is global NoPE attention, the others attend within chunks.
        global_layer = (
            [bool(nope[i]) is False for i in range(n)]
            if nope
            else [(i + 1) % 4 == 0 for i in range(n)]
        )
        return [("gqa", 0) if g else ("gqa", chunk) for g in global_layer]
    window = _opt_int(cfg, "sliding_window", MAX_POSITIONS)
    if types:
        if len(types) != n:
            raise PlannerInputError(
                "config.json: layer_types", f"has {len(types)} entries, expected {n}"
            )
        return [("gqa", window) if t == "sliding_attention" else ("gqa", 0) for t in types]
    if window and cfg.get("use_sliding_window", model_type == "mistral"):
        return [("gqa", window)] * n
    return [("gqa", 0)] * n


def _mla_dims(cfg: Mapping[str, object]) -> MlaDims:
    return MlaDims(
        q_lora_rank=_opt_int(cfg, "q_lora_rank"),
        kv_lora_rank=_int(cfg, "kv_lora_rank"),
        qk_nope_head_dim=_int(cfg, "qk_nope_head_dim"),
        qk_rope_head_dim=_int(cfg, "qk_rope_head_dim"),
        v_head_dim=_int(cfg, "v_head_dim"),
        index_topk=_opt_int(cfg, "index_topk", MAX_POSITIONS),
        index_n_heads=_opt_int(cfg, "index_n_heads"),
        index_head_dim=_opt_int(cfg, "index_head_dim"),
    )


def _linear_dims(cfg: Mapping[str, object]) -> LinearAttnDims:
    return LinearAttnDims(
        num_key_heads=_int(cfg, "linear_num_key_heads"),
        num_value_heads=_int(cfg, "linear_num_value_heads"),
        key_head_dim=_int(cfg, "linear_key_head_dim"),
        value_head_dim=_int(cfg, "linear_value_head_dim"),
        conv_kernel=_int(cfg, "linear_conv_kernel_dim", default=4),
    )


def _family(model_type: str, any_moe: bool) -> str:
    if model_type in MLA_TYPES:
        return "mla_moe"
    if model_type in HYBRID_LINEAR_TYPES:
        return "hybrid_moe" if any_moe else "hybrid_dense"
    return "moe" if any_moe else "dense"


def parse_config(
    raw: object,
    name: str = "",
    hf_id: str = "",
    hf_quant_config: Mapping[str, object] | None = None,
) -> ModelSpec:
    """Build a :class:`ModelSpec` from a HF config dict; refuses architectures it cannot model.

    ``hf_quant_config`` is ModelOpt's ``hf_quant_config.json`` of the same checkpoint, when it
    keeps its quantization there instead of in config.json.
    """
    cfg, arch = text_config(raw)
    quant = read_quantization(cfg, hf_quant_config)
    model_type = str(cfg.get("model_type", ""))
    if model_type == GPTJ_TYPE:
        cfg = _gptj_as_dense(cfg)
    if model_type not in SUPPORTED_TYPES:
        raise PlannerInputError(
            "config.json: model_type",
            f"'{model_type or arch}' ({arch}) is not supported yet; supported: "
            f"{', '.join(sorted(SUPPORTED_TYPES))}",
        )
    _check_types(cfg)
    n = _int(cfg, "num_hidden_layers", maximum=MAX_LAYERS)
    hidden = _int(cfg, "hidden_size")
    heads = _int(cfg, "num_attention_heads")
    kv_heads = _int(cfg, "num_key_value_heads", default=heads)
    if heads % kv_heads:
        raise PlannerInputError(
            "config.json: num_key_value_heads",
            f"{kv_heads} must divide num_attention_heads={heads}",
        )
    mla = _mla_dims(cfg) if model_type in MLA_TYPES else None
    head_dim = (
        (mla.qk_nope_head_dim + mla.qk_rope_head_dim)
        if mla
        else _int(cfg, "head_dim", default=hidden // heads)
    )
    moe_flags = (
        _moe_flags(cfg, model_type, n) if model_type in MOE_TYPES | MLA_TYPES else [False] * n
    )
    attn = _attention_layers(cfg, model_type, n)
    layers = tuple(
        LayerSpec(attention=a, window=w, moe=m) for (a, w), m in zip(attn, moe_flags, strict=True)
    )  # type: ignore[arg-type]
    notes: list[str] = []
    if isinstance(raw, dict) and raw.get("vision_config"):
        notes.append("vision encoder not modelled (text decoder only)")
    if model_type == GPTJ_TYPE:
        notes.append("GELU MLP priced as a gated MLP of equal weights (width 2/3 of n_inner)")
    if mla and mla.index_topk:
        notes.append(
            f"DSA: MLA over at most {mla.index_topk} keys per query plus a lightning indexer "
            f"of {mla.index_n_heads} x {mla.index_head_dim} over the whole context"
        )
    return ModelSpec(
        name=name or hf_id or arch,
        hf_id=hf_id,
        architecture=arch,
        family=_family(model_type, any(moe_flags)),  # type: ignore[arg-type]
        num_layers=n,
        hidden_size=hidden,
        num_heads=heads,
        num_kv_heads=heads if mla else kv_heads,
        head_dim=head_dim,
        intermediate_size=_int(
            cfg, "intermediate_size_mlp", "intermediate_size", "moe_intermediate_size"
        ),
        vocab_size=_int(cfg, "vocab_size"),
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        attention_output_gate=bool(cfg.get("attn_output_gate", False)),
        qk_norm_across_heads=bool(cfg.get("use_qk_norm", False))
        and cfg.get("qk_norm_type") == "per_layer",
        layers=layers,
        mla=mla,
        moe=_moe_dims(cfg, model_type) if any(moe_flags) else None,
        linear_attn=_linear_dims(cfg) if any(a == "linear" for a, _ in attn) else None,
        max_position_embeddings=_int(
            cfg, "max_position_embeddings", default=4096, maximum=MAX_POSITIONS
        ),
        weight_dtype=quant.pricing_dtype,
        quant=quant,
        mtp_layers=(
            _opt_int(cfg, "num_nextn_predict_layers", MAX_LAYERS)
            or _opt_int(cfg, "mtp_num_hidden_layers", MAX_LAYERS)
        ),
        notes=tuple(notes),
    )
