"""``Estimate.step_breakdown``: the priced mixed step, one prompt's prefill and a decode step."""

from __future__ import annotations

from hardware.catalog import get_gpu
from planner.model.bundled import load_model
from planner.perf.deployment import Parallelism, WorkerConfig
from planner.perf.estimate import estimate
from planner.workload.spec import fixed


def test_aggregated_breakdown_shows_the_mixed_step_and_the_prefill() -> None:
    w = WorkerConfig(parallel=Parallelism(tp=4))
    est = estimate(
        load_model("llama-3.1-70b"), get_gpu("h200"), fixed(4000, 500, concurrency=32), agg=w
    )
    bd = est.step_breakdown
    assert set(bd) == {"mixed_step_ms", "prefill_ms", "decode_step_ms"}
    total = {role: sum(kinds.values()) for role, kinds in bd.items()}
    assert all(v > 0 for kinds in bd.values() for v in kinds.values())  # no empty kinds
    # a step with a prefill chunk costs more than a decode-only step, and TPOT lies between them
    assert total["mixed_step_ms"] > total["decode_step_ms"]
    assert total["decode_step_ms"] <= est.tpot_ms.mean <= total["mixed_step_ms"]
    # the prompt's own prefill is part of its TTFT
    assert total["prefill_ms"] <= est.ttft_ms.mean
    assert "attention" in bd["prefill_ms"] and "gemm" in bd["mixed_step_ms"]


def test_disaggregated_breakdown_has_no_mixed_step() -> None:
    pre = WorkerConfig(parallel=Parallelism(tp=2))
    dec = WorkerConfig(parallel=Parallelism(tp=4))
    est = estimate(
        load_model("llama-3.1-70b"),
        get_gpu("h200"),
        fixed(2000, 300, concurrency=16),
        prefill=pre,
        decode=dec,
    )
    assert set(est.step_breakdown) == {"prefill_ms", "decode_step_ms"}
