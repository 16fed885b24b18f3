"""Per-role times (``planner.perf.roles``) are the ones ``solve_disagg`` prices the deployment with
(its docstring's promise): the prefill worker's batch size and chunk budget, the decode worker's
KV capacity."""

from __future__ import annotations

import numpy as np
import pytest

from hardware.catalog import get_gpu
from planner.model.bundled import load_model
from planner.perf.batch import CandidateArrays, DeployMode, evaluate_batch
from planner.perf.roles import decode_role, prefill_role
from planner.workload.spec import fixed

H100 = get_gpu("h100_sxm")


def _disagg(prefill_seqs: float, chunk: float) -> CandidateArrays:
    one = [1.0]
    return CandidateArrays.from_lists(
        tp=[2.0],
        prefill_tp=[2.0],
        prefill_workers=one,
        workers=[2.0],
        mode=[float(DeployMode.DISAGG)],
        max_num_seqs=[64.0],
        prefill_max_num_seqs=[prefill_seqs],
        prefill_max_num_batched_tokens=[chunk],
        concurrency=[32.0],
    )


@pytest.mark.parametrize(("prefill_seqs", "chunk"), [(1.0, 8192.0), (4.0, 8192.0), (64.0, 2048.0)])
def test_prefill_role_work_is_the_deployments(prefill_seqs: float, chunk: float) -> None:
    """Busy seconds per prompt of the role = the deployment's prefill utilization / throughput."""
    m, w = load_model("llama-3.1-8b-instruct"), fixed(1024, 256, concurrency=32)
    c = _disagg(prefill_seqs, chunk)
    role = prefill_role(m, H100, c, w)
    res = evaluate_batch(m, H100, c, w)
    expect = res.prefill_utilization / res.requests_per_s * c.prefill_workers
    np.testing.assert_allclose(role.work_s, expect, rtol=1e-9)


def test_prefill_batch_size_caps_the_prompts_of_a_step() -> None:
    """A prefill worker of batch size 1 runs one 1,024-token prompt per step even with an
    8,192-token budget: its capacity is one prompt per step, not eight prompts per 8,192-token
    step (which would cost less per prompt)."""
    m, w = load_model("llama-3.1-8b-instruct"), fixed(1024, 256, concurrency=32)
    one, eight = (prefill_role(m, H100, _disagg(s, 8192.0), w) for s in (1.0, 8.0))
    np.testing.assert_allclose(one.work_s, one.alone_s, rtol=1e-9)
    assert eight.work_s[0] < one.work_s[0]


def test_decode_role_capacity_is_the_deployments() -> None:
    m, w = load_model("llama-3.1-8b-instruct"), fixed(4000, 2000, concurrency=32)
    c = _disagg(1.0, 8192.0)
    role = decode_role(m, H100, c, w, np.array([32.0]))
    res = evaluate_batch(m, H100, c, w)
    np.testing.assert_allclose(role.seq_capacity, res.seq_capacity, rtol=1e-12)
