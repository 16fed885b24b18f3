"""A checkpoint's quantization, read from its ``quantization_config`` (or ModelOpt's
``hf_quant_config.json``): the weight format the engine will load, the activation precision, the
layers left unquantized and the KV-cache scheme.

Three producers write these records, each in its own shape:
- Hugging Face quantizers (``quant_method``: ``fp8``, ``fbgemm_fp8``, ``mxfp4``, ``awq``, ``gptq``);
- NVIDIA ModelOpt (``producer.name == "modelopt"``, ``quantization.quant_algo``: ``FP8``, ``NVFP4``,
  ``W4A16_AWQ``, ``W4A8_AWQ``...), either in ``hf_quant_config.json`` or inlined in config.json;
- llm-compressor's ``compressed-tensors`` (``config_groups.*.weights.num_bits`` / ``type``).
A method we cannot read is refused by name: the planner never guesses a checkpoint's format.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from planner.errors import PlannerInputError

WeightFormat = Literal["bf16", "fp8", "mxfp4", "nvfp4", "int4", "int8"]
"""bf16: unquantized 16-bit weights (fp16 too); fp8: e4m3 weights (per-tensor, per-channel or
128x128 blocks); mxfp4: OCP MX fp4 with e8m0 scales per 32 values; nvfp4: NVIDIA fp4 with e4m3
scales per 16 values; int4 / int8: integer weights (AWQ, GPTQ, compressed-tensors)."""

PRICING_DTYPE: dict[str, str] = {
    "bf16": "bf16",
    "fp8": "fp8",
    "mxfp4": "fp4",
    "nvfp4": "fp4",
    "int4": "int4",
    "int8": "fp8",
}
"""Weight dtype the cost model prices a format at (int8 GEMMs run at the fp8 peak on the GPUs we
model: H100/H200 dense int8 TOPS equal their fp8 TFLOPS)."""

ActivationScale = Literal["none", "static", "token", "block", "tensor"]
"""How a checkpoint scales its quantized activations: none (16-bit activations), static (a
calibrated scale stored with the weights: ModelOpt FP8, ``activation_scheme: static``), token
(computed per token, or per 16-value block of NVFP4, inside the quantizing pass), block (per
128-value group with 128 x 128 weight blocks, DeepSeek-style FP8: scaled inside the quantizing
pass, and the GEMM applies the block scales as it accumulates, ``kernels_db.fp8_scale``) or tensor
(computed for the whole tensor at run time: a reduction before the quantizing pass,
``kernels_db.fp8_scale``)."""

READABLE_METHODS = ("fp8", "fbgemm_fp8", "mxfp4", "modelopt", "compressed-tensors", "awq", "gptq")


class CheckpointQuant(BaseModel):
    """What a checkpoint stores, as its own config says."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    method: str = Field(default="none", description="quant_method / producer, 'none' if absent.")
    weight_format: WeightFormat = Field(default="bf16", description="Format of the linear weights.")
    activation_bits: int = Field(default=16, ge=4, le=16, description="Activation precision.")
    group_size: int = Field(
        default=0, ge=0, description="Values per scale; 0 = per tensor/channel."
    )
    activation_scale: ActivationScale = Field(
        default="none", description="How quantized activations are scaled (``ActivationScale``)."
    )
    ignored: tuple[str, ...] = Field(default=(), description="Modules left unquantized.")
    kv_cache: str = Field(default="", description="KV-cache scheme the checkpoint ships ('fp8').")
    source: str = Field(default="", description="Which file and field this was read from.")

    @property
    def pricing_dtype(self) -> str:
        """The weight dtype the cost model uses for this format."""
        return PRICING_DTYPE[self.weight_format]

    @property
    def quantized(self) -> bool:
        return self.weight_format != "bf16"


def _field(name: str) -> str:
    return f"config.json: quantization_config.{name}"


def _str_list(value: object, name: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise PlannerInputError(_field(name), "must be a list of module names")
    return tuple(value)


def _count(value: object, default: int, field: str) -> int:
    """A whole-number field (a number or its text); absent, null or 0 -> ``default``."""
    if not value:
        return default
    if isinstance(value, int | float | str):
        try:
            return int(value)
        except ValueError:
            pass
    raise PlannerInputError(_field(field), f"must be a whole number, got {value!r}")


def _modelopt(q: Mapping[str, object], where: str) -> CheckpointQuant:
    """ModelOpt's ``quantization`` block (``quant_algo``, ``kv_cache_quant_algo``...)."""
    algo = str(q.get("quant_algo") or "").upper()
    # (weight format, activation bits, values per scale, activation scale): ModelOpt calibrates
    # per-tensor FP8 / INT8-SQ / W4A8 input scales (static); per-token and block formats scale
    # inside the quantizing pass
    formats: dict[str, tuple[WeightFormat, int, int, ActivationScale]] = {
        "FP8": ("fp8", 8, 0, "static"),
        "FP8_PER_CHANNEL_PER_TOKEN": ("fp8", 8, 0, "token"),
        "FP8_BLOCK_SCALES": ("fp8", 8, 128, "block"),
        "NVFP4": ("nvfp4", 4, 16, "token"),
        "W4A16_AWQ": ("int4", 16, 128, "none"),
        "W4A8_AWQ": ("int4", 8, 128, "static"),
        "W8A16": ("int8", 16, 0, "none"),
        "W8A8_SQ_PER_CHANNEL": ("int8", 8, 0, "token"),
        "MIXED_PRECISION": ("nvfp4", 4, 16, "token"),
    }
    if algo not in formats:
        raise PlannerInputError(
            f"{where}.quant_algo",
            f"'{algo}' is not supported; supported: {', '.join(sorted(formats))}",
        )
    fmt, act, group, scale = formats[algo]
    kv = str(q.get("kv_cache_quant_algo") or "").lower()
    return CheckpointQuant(
        method="modelopt",
        weight_format=fmt,
        activation_bits=act,
        group_size=_count(q.get("group_size"), group, "group_size"),
        activation_scale=scale,
        ignored=_str_list(q.get("exclude_modules"), "exclude_modules"),
        kv_cache="fp8" if kv == "fp8" else kv,
        source=f"{where}.quant_algo",
    )


_CT_FORMATS: dict[tuple[object, str], WeightFormat] = {
    (4, "int"): "int4",
    (8, "int"): "int8",
    (8, "float"): "fp8",
    (4, "float"): "nvfp4",
}


def _ct_scale(acts: object, weights: Mapping[str, object]) -> ActivationScale:
    """compressed-tensors ``input_activations``: absent -> none; ``dynamic`` false -> static;
    dynamic with ``strategy`` tensor -> tensor; with block-scaled weights (``strategy`` block)
    -> block; else (token, group) -> token."""
    if not isinstance(acts, dict):
        return "none"
    if not acts.get("dynamic"):
        return "static"
    if str(acts.get("strategy", "token")) == "tensor":
        return "tensor"
    return "block" if str(weights.get("strategy", "")) == "block" else "token"


def _compressed_tensors(q: Mapping[str, object]) -> CheckpointQuant:
    """llm-compressor's ``config_groups``: the widest group decides the weight format."""
    groups = q.get("config_groups")
    if not isinstance(groups, dict) or not groups:
        raise PlannerInputError(_field("config_groups"), "must be a non-empty object")
    seen: list[tuple[WeightFormat, int, int, ActivationScale]] = []
    for name, group in groups.items():
        weights = group.get("weights") if isinstance(group, dict) else None
        if not isinstance(weights, dict):
            raise PlannerInputError(_field(f"config_groups.{name}.weights"), "must be an object")
        bits, kind = weights.get("num_bits"), str(weights.get("type", "int"))
        fmt = _CT_FORMATS.get((bits, kind))
        if fmt is None:
            raise PlannerInputError(
                _field(f"config_groups.{name}.weights"),
                f"{bits}-bit {kind} weights are not supported; supported: "
                "4/8-bit int, 8-bit float, 4-bit float",
            )
        acts = group.get("input_activations")
        act = (
            _count(acts.get("num_bits", 16), 0, "input_activations.num_bits")
            if isinstance(acts, dict)
            else 16
        )
        seen.append(
            (fmt, act, _count(weights.get("group_size"), 0, "group_size"), _ct_scale(acts, weights))
        )
    fmt, act, group_size, scale = max(
        seen, key=lambda s: ("int4", "nvfp4", "int8", "fp8").index(s[0])
    )
    kv = q.get("kv_cache_scheme")
    kv_text = "fp8" if isinstance(kv, (dict, str)) and "8" in str(kv) else ""
    return CheckpointQuant(
        method="compressed-tensors",
        weight_format=fmt,
        activation_bits=min(16, max(4, act)),
        group_size=group_size,
        activation_scale=scale,
        ignored=_str_list(q.get("ignore"), "ignore"),
        kv_cache=kv_text,
        source="config.json: quantization_config.config_groups",
    )


def _hf_method(q: Mapping[str, object], method: str) -> CheckpointQuant:
    """Hugging Face quantizers named by ``quant_method``."""
    src = "config.json: quantization_config.quant_method"
    ignored = _str_list(
        q.get("modules_to_not_convert") or q.get("ignored_layers"), "modules_to_not_convert"
    )
    if method in ("fp8", "fbgemm_fp8"):
        block = q.get("weight_block_size")
        group = _count(block[0], 0, "weight_block_size") if isinstance(block, list) and block else 0
        scheme = str(q.get("activation_scheme", "dynamic"))
        if scheme not in ("static", "dynamic"):
            raise PlannerInputError(
                _field("activation_scheme"), f"'{scheme}' is not one of: static, dynamic"
            )
        static = scheme == "static"
        # 128-value blocks (DeepSeek-style); fbgemm_fp8 per token; plain dynamic fp8 per tensor
        scale: ActivationScale = (
            "block"
            if group
            else "static"
            if static
            else "token"
            if method == "fbgemm_fp8"
            else "tensor"
        )
        return CheckpointQuant(
            method=method,
            weight_format="fp8",
            activation_bits=8,
            group_size=group,
            activation_scale=scale,
            ignored=ignored,
            source=src,
            kv_cache="fp8" if static and q.get("kv_cache_scheme") else "",
        )
    if method == "mxfp4":
        return CheckpointQuant(
            method=method,
            weight_format="mxfp4",
            activation_bits=16,
            group_size=32,
            ignored=ignored,
            source=src,
        )
    bits = q.get("bits", q.get("w_bit"))
    if bits not in (4, 8):
        raise PlannerInputError(
            _field("bits"), f"{method} with {bits!r}-bit weights is not supported; supported: 4, 8"
        )
    return CheckpointQuant(
        method=method,
        weight_format="int4" if bits == 4 else "int8",
        activation_bits=16,
        group_size=_count(q.get("group_size"), 0, "group_size"),
        ignored=ignored,
        source=src,
    )


def read_quantization(
    cfg: Mapping[str, object], hf_quant_config: Mapping[str, object] | None = None
) -> CheckpointQuant:
    """The checkpoint's quantization; unquantized (bf16) when neither record is present."""
    q = cfg.get("quantization_config")
    if q is None and hf_quant_config is not None:
        block = hf_quant_config.get("quantization")
        if not isinstance(block, dict):
            raise PlannerInputError("hf_quant_config.json: quantization", "must be an object")
        return _modelopt(block, "hf_quant_config.json: quantization")
    if q is None:
        return CheckpointQuant(source="no quantization_config (unquantized weights)")
    if not isinstance(q, dict):
        raise PlannerInputError("config.json: quantization_config", "must be a JSON object")
    method = str(q.get("quant_method") or "").lower()
    producer = q.get("producer")
    if method == "modelopt" or (isinstance(producer, dict) and producer.get("name") == "modelopt"):
        block = hf_quant_config.get("quantization") if hf_quant_config is not None else None
        if isinstance(block, dict):
            return _modelopt(block, "hf_quant_config.json: quantization")
        if q.get("quant_algo"):
            return _modelopt(q, "config.json: quantization_config")
        raise PlannerInputError(
            "hf_quant_config.json",
            "a ModelOpt checkpoint needs its "
            "hf_quant_config.json next to config.json (quant_algo is there)",
        )
    if method == "compressed-tensors" or (not method and "config_groups" in q):
        return _compressed_tensors(q)
    if method in READABLE_METHODS:
        return _hf_method(q, method)
    raise PlannerInputError(
        _field("quant_method"),
        f"'{method or '?'}' is not supported; supported: {', '.join(READABLE_METHODS)}",
    )
