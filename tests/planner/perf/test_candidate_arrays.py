"""``CandidateArrays``: named codes (IntEnums with the numbers other code still passes), an explicit
closed-loop mask instead of NaN tests, and every column K long after construction."""

from __future__ import annotations

import numpy as np

from hardware.catalog import get_gpu
from planner.model.bundled import load_model
from planner.perf.batch import (
    KV_DTYPES,
    REASONS,
    WEIGHT_QUANTS,
    CandidateArrays,
    DeployMode,
    KvDtype,
    Reason,
    WeightQuant,
    evaluate_batch,
)
from planner.workload.spec import fixed


def test_enum_values_are_the_old_codes() -> None:
    assert (DeployMode.AGG, DeployMode.DISAGG) == (0, 1)
    assert WEIGHT_QUANTS == ("bf16", "fp8", "fp4", "int4")
    assert [WeightQuant.of(q) for q in WEIGHT_QUANTS] == [0, 1, 2, 3]
    assert KV_DTYPES == ("bf16", "fp8") and KvDtype.of("fp8") == 1
    assert REASONS == ("ok", "out_of_memory", "saturated") and Reason.SATURATED == 2
    assert WeightQuant.INT4.label == "int4" and DeployMode.of("disagg") is DeployMode.DISAGG


def test_left_out_columns_are_filled_to_length_k() -> None:
    k = 3
    tp, seqs = np.array([1.0, 2, 4]), np.full(k, 64.0)
    c = CandidateArrays(
        tp=tp,
        pp=np.ones(k),
        dp=np.ones(k),
        ep=np.ones(k),
        max_num_seqs=seqs,
        max_num_batched_tokens=np.full(k, 2048.0),
        weight_quant=np.full(k, float(WeightQuant.FP8)),
        kv_dtype=np.zeros(k),
        concurrency=np.array([8.0, np.nan, 16.0]),
    )
    for f in CandidateArrays.__dataclass_fields__:
        assert getattr(c, f).shape == (k,), f
    assert not c.disagg.any() and (c.mode == DeployMode.AGG).all()
    assert np.array_equal(c.prefill_tp, tp) and np.array_equal(c.prefill_max_num_seqs, seqs)
    assert c.own_concurrency.tolist() == [True, False, True]
    again = CandidateArrays.from_lists(tp=tp, concurrency=[8, np.nan, 16], mode=[0, 1, np.nan])
    assert again.own_concurrency.tolist() == [True, False, True]
    assert again.disagg.tolist() == [False, True, False]


def test_open_loop_rows_take_the_workloads_load() -> None:
    """A row without its own concurrency is priced under the workload's load: with a closed-loop
    workload of 16 clients it equals a row that names 16 clients itself."""
    m, gpu = load_model("llama-3.1-8b"), get_gpu("h100")
    c = CandidateArrays.from_lists(tp=[1, 1], concurrency=[np.nan, 16])
    r = evaluate_batch(m, gpu, c, fixed(1000, 200, concurrency=16))
    assert r.tpot_mean_s[0] == r.tpot_mean_s[1] and r.ttft_mean_s[0] == r.ttft_mean_s[1]
    assert (r.infeasible_reason == Reason.OK).all()
