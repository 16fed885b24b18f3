"""Which FP8 GEMMs of a serving step run a whole-tensor activation scale or block scales
(``planner.perf.opgraph.tensor_scale_passes`` / ``block_scaled``, priced by
``kernels_db.fp8_scale``)."""

from __future__ import annotations

import numpy as np
import pytest

from planner.model.bundled import load_model
from planner.perf.opgraph import (
    ParallelArrays,
    StepMix,
    block_scaled,
    step_ops,
    tensor_scale_passes,
)


def _a(x: float) -> np.ndarray:
    return np.array([x])


def _par(dtype: str) -> ParallelArrays:
    wb = {"bf16": 2.0, "fp8": 1.0}[dtype]
    return ParallelArrays(_a(1), _a(1), _a(1), _a(1), _a(wb), _a(2.0), _a(1e15), np.array([dtype]))


@pytest.mark.parametrize(
    ("model", "dtype", "tensor", "block"),
    [
        ("llama-3.1-8b-instruct", "fp8", 1.0, 0.0),  # a 16-bit checkpoint quantized on load
        ("llama-3.1-8b-instruct", "bf16", 0.0, 0.0),
        ("llama-3.1-8b-fp8", "fp8", 0.0, 0.0),  # ModelOpt FP8: static input scales
        ("Qwen/Qwen3-235B-A22B-FP8", "fp8", 0.0, 1.0),  # 128 x 128 blocks
    ],
)
def test_which_gemms_scale_how(model: str, dtype: str, tensor: float, block: float) -> None:
    m, p = load_model(model), _par(dtype)
    assert tensor_scale_passes(m, p)[0] == tensor and block_scaled(m, p)[0] == block


def test_the_step_carries_one_pass_per_gemm_input() -> None:
    m = load_model("llama-3.1-8b-instruct")
    s = StepMix(_a(8), _a(512), _a(0), _a(0), _a(0))
    shapes = {op.name: op.shape for op in step_ops(m, _par("fp8"), s) if op.family == "gemm"}
    assert float(shapes["attn_proj"].tensor_scale[0]) == 2.0  # QKV input and O input
    assert float(shapes["mlp"].tensor_scale[0]) == 2.0  # gate-up input and down input
    assert float(np.asarray(shapes["lm_head"].tensor_scale)) == 0.0  # 16-bit LM head
