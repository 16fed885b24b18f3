"""Memory model against hand-computed reference figures (DESIGN.md table)."""

from __future__ import annotations

import pytest

from hardware.catalog import get_gpu
from hardware.errors import InfeasibleError, PlannerInputError
from planner.deployment import Parallelism
from planner.memory import kv_bytes_per_token, plan_memory, seq_kv_bytes
from planner.models import load_model
from planner.params import total_params


def _kv_per_token(name: str, tp: int = 1, kv: str = "bf16") -> float:
    m = load_model(name)
    return sum(kv_bytes_per_token(m, layer, tp, kv) for layer in m.layers)


@pytest.mark.parametrize(
    ("name", "expected"),
    [("llama-3.1-8b", 131_072), ("llama-3.1-70b", 327_680), ("llama-3.1-405b", 516_096), ("deepseek-v3", 70_272)],
)
def test_kv_bytes_per_token_reference(name: str, expected: int) -> None:
    assert _kv_per_token(name) == expected


def test_llama70b_tp4_h200() -> None:
    m = load_model("llama-3.1-70b")
    plan = plan_memory(m, get_gpu("h200"), Parallelism(tp=4), isl=4000, osl=500)
    assert plan.weights_bytes_per_gpu == pytest.approx(total_params(m) * 2 / 4, rel=0.01)
    assert plan.weights_bytes_per_gpu == pytest.approx(35.3e9, rel=0.01)
    assert plan.kv_bytes_per_token_per_gpu == 81_920
    assert plan.max_concurrency is not None and plan.max_concurrency > 100
    assert plan.kv_capacity_tokens == int(plan.kv_budget_bytes_per_gpu / 81_920)


def test_deepseek_mla_kv_not_divided_by_tp() -> None:
    m = load_model("deepseek-v3")
    h200 = get_gpu("h200")
    bf16 = plan_memory(m, h200, Parallelism(tp=8), weight_quant="fp8")
    fp8 = plan_memory(m, h200, Parallelism(tp=8), weight_quant="fp8", kv_dtype="fp8")
    assert bf16.kv_bytes_per_token_per_gpu == 70_272
    assert fp8.kv_bytes_per_token_per_gpu == 35_136
    dp = plan_memory(m, h200, Parallelism(tp=1, dp=8, ep=8), weight_quant="fp8")
    # each DP rank holds its own requests (minus the larger replicated attention weights)
    assert dp.kv_capacity_tokens > 4 * bf16.kv_capacity_tokens


def test_kv_heads_replicated_when_tp_exceeds_kv_heads() -> None:
    m = load_model("qwen3-235b-a22b")  # 4 KV heads
    assert kv_bytes_per_token(m, m.layers[0], 8, "bf16") == kv_bytes_per_token(m, m.layers[0], 4, "bf16")


def test_405b_bf16_does_not_fit_on_8_h100_but_fp8_fits_on_h200() -> None:
    m = load_model("llama-3.1-405b")
    with pytest.raises(InfeasibleError, match="out of memory"):
        plan_memory(m, get_gpu("h100"), Parallelism(tp=8))
    plan = plan_memory(m, get_gpu("h200"), Parallelism(tp=8), weight_quant="fp8")
    assert plan.kv_capacity_tokens > 0


def test_sliding_window_caps_kv() -> None:
    m = load_model("gpt-oss-120b")
    short = seq_kv_bytes(m, m.layers, 1, "bf16", 128)
    long = seq_kv_bytes(m, m.layers, 1, "bf16", 128 * 65)
    full_layers = sum(1 for x in m.layers if not x.window)
    # growth past the window comes only from the full-attention layers
    per_tok = kv_bytes_per_token(m, m.layers[1], 1, "bf16")
    assert long - short == pytest.approx(full_layers * per_tok * 128 * 64)


def test_pp_and_quant_reduce_weights() -> None:
    m = load_model("llama-3.1-70b")
    h200 = get_gpu("h200")
    base = plan_memory(m, h200, Parallelism(tp=2)).weights_bytes_per_gpu
    assert plan_memory(m, h200, Parallelism(tp=2, pp=2)).weights_bytes_per_gpu < 0.6 * base
    assert plan_memory(m, h200, Parallelism(tp=2), weight_quant="fp8").weights_bytes_per_gpu < 0.55 * base


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"p": Parallelism(tp=3)}, "--tp"),
        ({"p": Parallelism(tp=1, ep=2)}, "--ep"),
        ({"p": Parallelism(tp=1), "max_num_seqs": 0}, "--max-num-seqs"),
        ({"p": Parallelism(tp=1), "isl": -5}, "--isl"),
        ({"p": Parallelism(tp=1), "gpu_memory_utilization": 1.5}, "--gpu-memory-utilization"),
    ],
)
def test_bad_inputs(kwargs: dict, field: str) -> None:
    p = kwargs.pop("p")
    with pytest.raises(PlannerInputError) as err:
        plan_memory(load_model("llama-3.1-8b"), get_gpu("h100"), p, **kwargs)
    assert field in str(err.value)
