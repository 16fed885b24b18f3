"""The kernels of a fused-MoE layer besides its grouped GEMMs
(``planner.perf.opgraph.moe_aux_ops``):
routing and combine on every MoE layer, two activation quantizations where the experts take 8-bit
inputs; priced as memory-bound kernels (a fixed cost each)."""

from __future__ import annotations

import numpy as np
import pytest

from hardware.catalog import get_gpu
from planner.model.bundled import load_model
from planner.perf.opgraph import (
    MOE_QUANT_KERNELS,
    MOE_ROUTING_KERNELS,
    Op,
    ParallelArrays,
    StepMix,
    moe_imbalance,
    step_ops,
)
from planner.perf.pricer import default_pricer


def _a(x: float) -> np.ndarray:
    return np.array([x])


def _par(dtype: str, tp: float = 8.0, ep: float = 8.0) -> ParallelArrays:
    wb = {"bf16": 2.0, "fp8": 1.0}[dtype]
    return ParallelArrays(
        _a(tp), _a(1), _a(1), _a(ep), _a(wb), _a(2.0), _a(1e15), np.array([dtype])
    )


DECODE = StepMix(_a(16), _a(1024), _a(0), _a(0), _a(0))


def _aux(model: str, dtype: str) -> dict[str, Op]:
    m = load_model(model)
    return {op.name: op for op in step_ops(m, _par(dtype), DECODE) if op.name.startswith("moe_")}


@pytest.mark.parametrize(
    ("model", "dtype", "quantized"),
    [("qwen3-235b-a22b-fp8", "fp8", True), ("qwen3-235b-a22b", "bf16", False)],
)
def test_every_moe_layer_routes_and_quantizes_where_its_inputs_are_8_bit(
    model: str, dtype: str, quantized: bool
) -> None:
    m = load_model(model)
    moe_layers = sum(1 for layer in m.layers if layer.moe)
    ops = _aux(model, dtype)
    routing, quant = ops["moe_routing"], ops["moe_quant"]
    assert routing.count == quant.count == moe_layers
    assert routing.kernels == MOE_ROUTING_KERNELS
    assert quant.kernels == MOE_QUANT_KERNELS
    assert float(routing.nbytes[0]) > 0.0
    assert (float(quant.nbytes[0]) > 0.0) is quantized


def test_dense_models_have_no_moe_kernels() -> None:
    assert _aux("llama-3.1-8b-instruct", "bf16") == {}


def test_each_kernel_pays_its_fixed_cost() -> None:
    """A decode step's routing and quantize kernels cost at least one memory-bound kernel's fixed
    cost each (a few us), per MoE layer; a 16-bit MoE model's quantize op costs nothing."""
    pricer = default_pricer(get_gpu("h200"))
    for model, dtype, kernels in (
        ("qwen3-235b-a22b-fp8", "fp8", MOE_ROUTING_KERNELS + MOE_QUANT_KERNELS),
        ("qwen3-235b-a22b", "bf16", MOE_ROUTING_KERNELS),
    ):
        ops = list(_aux(model, dtype).values())
        priced = pricer.price_ops(ops)
        per_layer = sum(float(t[0]) for t, _ in priced)
        assert 1e-6 * kernels <= per_layer <= 1e-5 * kernels, (model, per_layer)
        quant = dict(zip([op.name for op in ops], priced, strict=True))["moe_quant"][0]
        assert (float(quant[0]) > 0.0) is (dtype == "fp8")


@pytest.mark.parametrize(("dp", "ep", "rows"), [(4.0, 1.0, 16.0), (4.0, 4.0, 4.0)])
def test_the_gate_up_input_is_quantized_where_the_experts_read_it(
    dp: float, ep: float, rows: float
) -> None:
    """With attention DP the experts of an expert-parallel layer read tokens each rank quantized
    before the dispatch (its own 16 / 4); with ep 1 every GPU's experts take the whole batch, so
    all 16 tokens are quantized there. The down input is the GPU's routed pairs either way."""
    m = load_model("qwen3-235b-a22b-fp8")
    e = m.moe
    assert e is not None
    par = ParallelArrays(
        _a(1), _a(1), _a(dp), _a(ep), _a(1.0), _a(2.0), _a(1e15), np.array(["fp8"])
    )
    quant = next(op for op in step_ops(m, par, DECODE) if op.name == "moe_quant")
    pairs = 16.0 * e.top_k / ep
    inter = e.expert_intermediate * ep / dp
    expected = (rows * m.hidden_size + pairs * inter) * 3.0
    assert float(quant.nbytes[0]) == pytest.approx(expected)


def test_weight_only_8_bit_experts_keep_16_bit_inputs() -> None:
    """An int8 weight-only checkpoint is priced at the fp8 GEMM rate but runs no quantize kernel."""
    from planner.model.quantization import CheckpointQuant

    m = load_model("qwen3-235b-a22b")
    w8a16 = m.model_copy(
        update={"quant": CheckpointQuant(method="gptq", weight_format="int8", activation_bits=16)}
    )
    quant = next(op for op in step_ops(w8a16, _par("fp8"), DECODE) if op.name == "moe_quant")
    assert float(quant.nbytes[0]) == 0.0


def _experts(mix: StepMix, ep: float) -> Op:
    m = load_model("qwen3-235b-a22b-fp8")
    return next(op for op in step_ops(m, _par("fp8", tp=8.0, ep=ep), mix) if op.name == "experts")


PREFILL = StepMix(_a(0), _a(0), _a(8192), _a(8192), _a(0))


@pytest.mark.parametrize("mix", [DECODE, PREFILL])
def test_the_grouped_gemms_run_at_the_busiest_ranks_load(mix: StepMix) -> None:
    """The step waits for the busiest EP rank: its experts are priced as a balanced layer at that
    rank's load (tokens x ``moe_imbalance``): the time grows by at most the load factor, and a
    weight-bound decode layer by much less (``kernels_db.moe_load`` checks the same against
    measured fused-MoE tables)."""
    m = load_model("qwen3-235b-a22b-fp8")
    assert m.moe is not None
    tokens = float(mix.decode_reqs[0] + mix.prefill_tokens[0])
    f = float(moe_imbalance(np.array([tokens * m.moe.top_k]), np.array([8.0]))[0])
    busy, flat = _experts(mix, 8.0), _experts(mix, 1.0)
    assert busy.shape is not None and flat.shape is not None
    assert float(busy.shape.columns()["tokens"][0]) == pytest.approx(tokens * f)
    assert float(flat.shape.columns()["tokens"][0]) == pytest.approx(tokens)
    pricer = default_pricer(get_gpu("h200"))
    ((t_busy, _),) = pricer.price_ops([busy])
    db = pricer.db
    balanced = db.moe(
        np.array([tokens]),
        float(m.hidden_size),
        m.moe.expert_intermediate,
        m.moe.top_k,
        m.moe.num_experts,
        8.0,
        "fp8",
    ).seconds[0]
    growth = float(t_busy[0]) / float(balanced)
    assert 1.0 <= growth <= f * (1.0 + 1e-9)  # never above the load factor
    if mix is DECODE:  # 16 tokens: f = 1.23, the weights dominate
        assert growth < 1.0 + (f - 1.0) / 2
