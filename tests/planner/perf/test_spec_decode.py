"""Speculative decoding priced as the engines run it (planner/perf/spec_decode.py)."""

from __future__ import annotations

import numpy as np
import pytest

from hardware.catalog import get_gpu
from planner.model.bundled import load_model
from planner.model.params import active_params
from planner.perf.batch import op_pricer, parallel_arrays
from planner.perf.memory import seq_capacity as plain_capacity
from planner.perf.opgraph import StepMix
from planner.perf.spec_decode import draft_cost_ratio, seq_capacity
from planner.perf.step import step_time
from planner.workload.spec import SpecDecode


def test_expected_tokens_per_step() -> None:
    """E = 1 + sum_i prod_{j<=i} a_j; one value repeats for every position."""
    sd = SpecDecode(draft_len=2, acceptance=(0.8, 0.5))
    assert sd.tokens_per_step == pytest.approx(1 + 0.8 + 0.8 * 0.5)
    flat = SpecDecode(draft_len=3, acceptance=(0.5,))
    assert flat.tokens_per_step == pytest.approx(1 + 0.5 + 0.25 + 0.125)
    assert SpecDecode(draft_len=4, acceptance=(1.0,)).tokens_per_step == 5
    assert SpecDecode(draft_len=1, acceptance=(0.9, 0.1)).tokens_per_step == pytest.approx(1.9)


def test_mtp_head_is_one_layer_and_the_lm_head() -> None:
    """DeepSeek-V3: 37B active, the MTP module ~ one MoE layer's active share (~0.6B) plus the
    shared 0.9B LM head and a 2h x h projection: a few percent of a target step."""
    m = load_model("deepseek-v3")
    assert active_params(m) == pytest.approx(37e9, rel=0.1)
    assert 0.02 < draft_cost_ratio(m, "mtp") < 0.08


def _verify_over_plain(batch: float, v: float) -> float:
    m, gpu = load_model("llama-3.1-8b"), get_gpu("h100")
    one = np.ones(1)
    par = parallel_arrays(gpu, one, one, one, one, np.zeros(1), np.zeros(1))
    ctx, zero = np.full(1, 256.0), np.zeros(1)

    def t(rows: float, c: np.ndarray) -> float:
        return float(
            step_time(m, par, StepMix(np.full(1, rows), c, zero, zero, zero), op_pricer(gpu))[0]
        )

    return t(batch * v, ctx / v) / t(batch, ctx)


def test_verify_step_is_nearly_free_at_low_batch_and_not_at_high() -> None:
    """4 tokens per sequence: weight-bound at batch 1 (the step barely grows), compute-bound at
    batch 1024 (it grows towards 4x)."""
    low, high = _verify_over_plain(1, 4), _verify_over_plain(1024, 4)
    assert low < 1.2
    assert high > 2.0 and high > low


def test_the_draft_takes_memory_from_the_kv_pool() -> None:
    m, gpu = load_model("llama-3.1-70b"), get_gpu("h100")
    one = np.ones(1)
    par = parallel_arrays(gpu, 4 * one, one, one, one, np.zeros(1), np.zeros(1))
    role = (np.full(1, 8192.0), np.full(1, 256.0), np.full(1, 4096.0))
    base = plain_capacity(m, gpu, par, *role, 0.9)[0]
    head = SpecDecode(method="eagle3", draft_len=3, acceptance=(0.7,))
    draft = SpecDecode(method="draft", draft_len=3, acceptance=(0.7,), draft_model="llama-3.1-8b")
    with_head = seq_capacity(m, gpu, par, role, 0.9, head)[0]
    with_draft = seq_capacity(m, gpu, par, role, 0.9, draft)[0]
    assert base > with_head > with_draft > 0
