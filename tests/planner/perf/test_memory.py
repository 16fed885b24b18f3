"""Memory model against hand-computed figures (docs/architecture.md "Reference figures")."""

from __future__ import annotations

import numpy as np
import pytest

from hardware.catalog import get_gpu
from hardware.errors import InfeasibleError, PlannerInputError
from planner.model.bundled import load_model
from planner.model.params import total_params
from planner.perf.deployment import Parallelism
from planner.perf.memory_plan import (
    activation_bytes,
    kv_bytes_per_token,
    plan_memory,
    seq_kv_bytes,
    weight_bytes_per_gpu,
)


def _kv_per_token(name: str, tp: int = 1, kv: str = "bf16") -> float:
    m = load_model(name)
    return sum(kv_bytes_per_token(m, layer, tp, kv) for layer in m.layers)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("llama-3.1-8b", 131_072),
        ("llama-3.1-70b", 327_680),
        ("llama-3.1-405b", 516_096),
        ("deepseek-v3", 70_272),
    ],
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
    assert kv_bytes_per_token(m, m.layers[0], 8, "bf16") == kv_bytes_per_token(
        m, m.layers[0], 4, "bf16"
    )


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
    assert (
        plan_memory(m, h200, Parallelism(tp=2), weight_quant="fp8").weights_bytes_per_gpu
        < 0.55 * base
    )


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


@pytest.mark.parametrize(
    "name", ["llama-3.1-70b", "qwen3-235b-a22b", "deepseek-v3", "qwen3.5-397b-a17b", "gpt-oss-120b"]
)
def test_vectorized_memory_equals_plan_memory(name: str) -> None:
    """The solvers' vectorized memory (planner.perf.memory) agrees with plan_memory at pp = 1."""
    from planner.perf import memory as memory_batch
    from planner.perf.batch import KV_DTYPES, WEIGHT_QUANTS, parallel_arrays

    m, gpu = load_model(name), get_gpu("h200")
    tps = [t for t in (1, 2, 4, 8) if m.num_heads % t == 0]
    quant = WEIGHT_QUANTS.index("fp8")
    p = parallel_arrays(
        gpu,
        np.array(tps, float),
        np.ones(len(tps)),
        np.ones(len(tps)),
        np.ones(len(tps)),
        np.full(len(tps), quant),
        np.full(len(tps), KV_DTYPES.index("bf16")),
    )
    weights = memory_batch.weights_per_gpu(m, p)
    seq = memory_batch.seq_bytes_per_gpu(m, p, np.full(len(tps), 4500.0))
    act = memory_batch.activation_bytes(m, p, np.full(len(tps), 8192.0), np.full(len(tps), 256.0))
    for i, tp in enumerate(tps):
        par = Parallelism(tp=tp)
        assert weights[i] == pytest.approx(
            weight_bytes_per_gpu(m, par, "fp8", m.layers, with_embed=True), rel=1e-9
        )
        assert seq[i] == pytest.approx(seq_kv_bytes(m, m.layers, tp, "bf16", 4500), rel=1e-9)
        assert act[i] == pytest.approx(activation_bytes(m, par, 8192, 256), rel=1e-9)


@pytest.mark.parametrize("name", ["deepseek-r1", "llama-3.1-70b", "qwen3-32b"])
def test_the_stage_terms_over_k_candidates_are_the_one_deployment_plans(name: str) -> None:
    """``memory_batch``'s exact stage terms over K candidates (arrays of tp) equal
    ``plan_memory`` of each candidate alone (K = 1): one implementation."""
    from planner.perf import memory as mb

    m, g = load_model(name), get_gpu("b200")
    tps = np.array([1.0, 2.0, 4.0, 8.0])
    for pp in (1, 3, 4):
        w = mb.stage_weight_bytes(m, pp, tps, 1.0, mb.WEIGHT_BYTES["fp8"])
        kv, _ = mb.stage_kv_per_token(m, pp, tps, mb.KV_BYTES["bf16"])
        seq = mb.stage_seq_bytes(m, pp, tps, mb.KV_BYTES["bf16"], 3700.0)
        for i, tp in enumerate(tps):
            p = Parallelism(tp=int(tp), pp=pp)
            try:
                one = plan_memory(m, g, p, weight_quant="fp8", isl=3000, osl=700)
            except (InfeasibleError, PlannerInputError):
                continue
            assert (w[i], kv[i]) == (one.weights_bytes_per_gpu, one.kv_bytes_per_token_per_gpu)
            assert one.max_concurrency == int(one.kv_budget_bytes_per_gpu // seq[i])
