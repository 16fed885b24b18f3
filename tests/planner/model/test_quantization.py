"""Reading a checkpoint's quantization from its own config (HF, ModelOpt, compressed-tensors)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planner.errors import PlannerInputError
from planner.model.quantization import read_quantization

SHARED = Path(__file__).parents[3].parent / "shared" / "model_configs"


def test_unquantized_is_bf16() -> None:
    q = read_quantization({})
    assert (q.method, q.weight_format, q.pricing_dtype) == ("none", "bf16", "bf16")


def test_hf_fp8_blocks() -> None:
    q = read_quantization(
        {
            "quantization_config": {
                "quant_method": "fp8",
                "activation_scheme": "dynamic",
                "weight_block_size": [128, 128],
            }
        }
    )
    assert (q.weight_format, q.activation_bits, q.group_size) == ("fp8", 8, 128)


def test_mxfp4_is_weight_only_fp4() -> None:
    q = read_quantization(
        {
            "quantization_config": {
                "quant_method": "mxfp4",
                "modules_to_not_convert": ["model.layers.*.self_attn"],
            }
        }
    )
    assert (q.weight_format, q.activation_bits, q.pricing_dtype) == ("mxfp4", 16, "fp4")
    assert q.ignored == ("model.layers.*.self_attn",)


def test_modelopt_from_hf_quant_config() -> None:
    hq = {
        "producer": {"name": "modelopt"},
        "quantization": {
            "quant_algo": "NVFP4",
            "kv_cache_quant_algo": "FP8",
            "group_size": 16,
            "exclude_modules": ["lm_head"],
        },
    }
    q = read_quantization({}, hq)
    assert (q.method, q.weight_format, q.kv_cache, q.group_size) == ("modelopt", "nvfp4", "fp8", 16)
    assert q.source.startswith("hf_quant_config.json")


def test_compressed_tensors_int4_and_nvfp4() -> None:
    int4 = {
        "quant_method": "compressed-tensors",
        "config_groups": {
            "g": {
                "weights": {"num_bits": 4, "type": "int", "group_size": 32},
                "input_activations": None,
            }
        },
    }
    q = read_quantization({"quantization_config": int4})
    assert (q.weight_format, q.activation_bits, q.group_size) == ("int4", 16, 32)
    fp4 = {
        "config_groups": {
            "g": {
                "weights": {"num_bits": 4, "type": "float", "group_size": 16},
                "input_activations": {"num_bits": 4, "type": "float"},
            }
        }
    }
    assert read_quantization({"quantization_config": fp4}).weight_format == "nvfp4"


@pytest.mark.parametrize(
    ("q", "field"),
    [
        ({"quant_method": "bitsandbytes"}, "quant_method"),
        ({"quant_method": "gptq", "bits": 3}, "bits"),
        ("fp8", "quantization_config"),
        ({"quant_method": "compressed-tensors", "config_groups": {}}, "config_groups"),
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {"g": {"weights": {"num_bits": 2, "type": "int"}}},
            },
            "config_groups.g.weights",
        ),
        ({"quant_method": "gptq", "bits": 4, "group_size": "wide"}, "group_size"),
        ({"quant_method": "fp8", "weight_block_size": [[128]]}, "weight_block_size"),
        ({"quant_method": "fp8", "activation_scheme": "statics"}, "activation_scheme"),
    ],
)
def test_unreadable_quantization_is_refused_by_field(q: object, field: str) -> None:
    with pytest.raises(PlannerInputError, match=field):
        read_quantization({"quantization_config": q})


@pytest.mark.skipif(not SHARED.is_dir(), reason=f"needs the public configs in {SHARED}")
def test_every_public_config_reads() -> None:
    """Every config.json (with its hf_quant_config.json) we hold has a readable quantization."""
    seen = set()
    for path in sorted(SHARED.glob("*_config.json")):
        if path.name.endswith("_hf_quant_config.json"):
            continue
        raw = json.loads(path.read_text())
        cfg = {**raw, **(raw.get("text_config") or {})}
        hq_path = path.with_name(path.name.replace("_config.json", "_hf_quant_config.json"))
        hq = json.loads(hq_path.read_text()) if hq_path.exists() else None
        seen.add(read_quantization(cfg, hq).weight_format)
    assert {"bf16", "fp8", "nvfp4", "mxfp4", "int4"} <= seen


def test_fp8_checkpoint_is_planned_with_fp8_weights() -> None:
    """The bundled FP8 Llama-3.1-70B weighs ~36 GB per GPU at TP2 (it was priced as bf16: 70.6)."""
    from hardware.catalog import get_gpu
    from planner.model.bundled import load_model
    from planner.perf.deployment import Parallelism
    from planner.perf.memory_plan import plan_memory

    m = load_model("nvidia/Llama-3.1-70B-Instruct-FP8")
    mem = plan_memory(m, get_gpu("h100"), Parallelism(tp=2), isl=1000, osl=100)
    assert mem.weight_quant == "fp8"
    assert 33e9 < mem.weights_bytes_per_gpu < 38e9


@pytest.mark.parametrize(
    ("qc", "scale"),
    [
        ({"quant_method": "fp8", "weight_block_size": [128, 128]}, "block"),
        ({"quant_method": "fp8", "activation_scheme": "static"}, "static"),
        ({"quant_method": "fp8", "activation_scheme": "dynamic"}, "tensor"),
        ({"quant_method": "fbgemm_fp8"}, "token"),
        ({"quant_method": "modelopt", "quant_algo": "FP8"}, "static"),
        ({"quant_method": "modelopt", "quant_algo": "FP8_BLOCK_SCALES"}, "block"),
        ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, "token"),
        ({"quant_method": "awq", "bits": 4, "group_size": 128}, "none"),
    ],
)
def test_how_activations_are_scaled(qc: dict[str, object], scale: str) -> None:
    assert read_quantization({"quantization_config": qc}).activation_scale == scale


@pytest.mark.parametrize(
    ("acts", "weights", "scale"),
    [
        (None, {}, "none"),
        ({"num_bits": 8, "dynamic": False}, {}, "static"),
        ({"num_bits": 8, "dynamic": True, "strategy": "tensor"}, {}, "tensor"),
        ({"num_bits": 8, "dynamic": True, "strategy": "token"}, {}, "token"),
        ({"num_bits": 8, "dynamic": True, "strategy": "group"}, {"strategy": "block"}, "block"),
    ],
)
def test_compressed_tensors_activation_scales(
    acts: dict[str, object] | None, weights: dict[str, object], scale: str
) -> None:
    group: dict[str, object] = {"weights": {"num_bits": 8, "type": "float", **weights}}
    if acts is not None:
        group["input_activations"] = acts
    qc = {"quant_method": "compressed-tensors", "config_groups": {"g": group}}
    assert read_quantization({"quantization_config": qc}).activation_scale == scale
