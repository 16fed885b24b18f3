"""The kernels of a fused-MoE layer besides its grouped GEMMs (``planner.opgraph.moe_aux_ops``):
routing and combine on every MoE layer, two activation quantizations where the experts take 8-bit
inputs; priced as memory-bound kernels (a fixed cost each)."""

from __future__ import annotations

import numpy as np
import pytest

from hardware.catalog import get_gpu
from planner.kernels_adapter import default_pricer
from planner.models import load_model
from planner.opgraph import (
    MOE_QUANT_KERNELS,
    MOE_ROUTING_KERNELS,
    Op,
    ParallelArrays,
    StepMix,
    step_ops,
)


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
