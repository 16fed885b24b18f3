"""The fast pricing paths give the same numbers as the plain ones (speed work must not move
predictions).

``StepPricer.price_ops`` prices a whole step with one kernels_db lookup per op family; it must
equal ``price`` called op by op (each op in a lookup of its own), in seconds (to 1e-12) and
provenance tags, and so must every prediction of ``evaluate_batch`` and ``estimate`` made through
it. kernels_db's lookup of many rows with mixed labels (cached parameter gathers) must equal the
same lookup called one row at a time.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from hardware.catalog import get_gpu
from kernels_db import costs
from kernels_db.lookup import KernelDB
from kernels_db.ops import Column, shape_of
from planner.model.bundled import load_model
from planner.perf.batch import CandidateArrays, evaluate_batch, parallel_arrays
from planner.perf.opgraph import Op, StepMix, step_ops
from planner.perf.pricer import default_pricer
from planner.perf.step import price_step
from planner.workload.spec import fixed

CASES = [
    ("llama-3.1-70b", "h200"),
    ("qwen3-235b-a22b", "h200"),
    ("deepseek-v3", "b200"),
    ("gpt-oss-120b", "h100"),
    ("qwen3.5-397b-a17b", "a100"),
    ("llama-3.1-8b", "mi300x"),
]
RTOL = 1e-12


class PerOpPricer:
    """The plain path: ``StepPricer.price``, one op per lookup."""

    def __init__(self, gpu_key: str) -> None:
        self.inner = default_pricer(get_gpu(gpu_key))

    def price_ops(self, ops: Sequence[Op]) -> list[tuple[np.ndarray, str]]:
        return [self.inner.price(op) for op in ops]


def _candidates(k: int, seed: int) -> CandidateArrays:
    rng = np.random.default_rng(seed)
    tp = rng.choice([1, 2, 4, 8], k)
    dp = rng.choice([1, 1, 2], k)
    return CandidateArrays.from_lists(
        tp=tp,
        dp=dp,
        ep=np.where(rng.random(k) < 0.5, tp * dp, 1),
        pp=rng.choice([1, 1, 2], k),
        max_num_seqs=rng.choice([64, 256, 1024], k),
        max_num_batched_tokens=rng.choice([2048, 8192], k),
        weight_quant=rng.choice([0, 1, 2], k),
        kv_dtype=rng.choice([0, 1], k),
        concurrency=rng.choice([1, 16, 64, 256, np.nan], k),
        mode=rng.choice([0, 1], k),
        workers=rng.choice([1, 2], k),
        prefill_tp=rng.choice([1, 2, 4], k),
        prefill_workers=rng.choice([1, 3], k),
    )


@pytest.mark.parametrize(("model", "gpu"), CASES)
def test_price_ops_equals_price_op_by_op(model: str, gpu: str) -> None:
    m, g = load_model(model), get_gpu(gpu)
    rng = np.random.default_rng(3)
    k = 64
    one = np.ones(k)
    par = parallel_arrays(
        g,
        rng.choice([1, 2, 4, 8, 16], k) * one,
        rng.choice([1, 2], k) * one,
        rng.choice([1, 2], k) * one,
        rng.choice([1, 8], k) * one,
        rng.choice([0, 1, 2, 3], k) * one,
        rng.choice([0, 1], k) * one,
    )
    mix = StepMix(
        rng.choice([0.0, 1, 7, 300], k),
        rng.uniform(100, 9000, k),
        rng.choice([0.0, 1, 2048], k),
        rng.choice([0.0, 512, 2048], k),
        rng.choice([0.0, 1000], k),
    )
    ops = step_ops(m, par, mix)
    pricer = default_pricer(g)
    for op, (t, tag) in zip(ops, pricer.price_ops(ops), strict=True):
        t_ref, tag_ref = pricer.price(op)
        assert tag == tag_ref, op.name
        np.testing.assert_allclose(t, t_ref, rtol=RTOL, atol=0.0, err_msg=op.name)


@pytest.mark.parametrize(("model", "gpu"), CASES[:4])
def test_predictions_equal_the_op_by_op_path(model: str, gpu: str) -> None:
    m, g = load_model(model), get_gpu(gpu)
    c = _candidates(48, 7)
    for wl in (fixed(2000, 500, concurrency=64), fixed(1000, 300, rate_per_s=2.0)):
        fast = evaluate_batch(m, g, c, wl)
        plain = evaluate_batch(m, g, c, wl, pricer=PerOpPricer(gpu))
        for f in fast.__dataclass_fields__:
            np.testing.assert_allclose(
                getattr(fast, f), getattr(plain, f), rtol=1e-9, atol=0.0, err_msg=f
            )


def test_step_breakdown_and_provenance_equal_the_op_by_op_path() -> None:
    m, g = load_model("qwen3-235b-a22b"), get_gpu("h200")
    one = np.ones(4)
    par = parallel_arrays(
        g,
        4 * one,
        one,
        np.array([1.0, 2, 1, 2]),
        np.array([1.0, 8, 4, 8]),
        np.array([0.0, 1, 2, 1]),
        np.array([0.0, 1, 0, 1]),
    )
    mix = StepMix(
        np.array([1.0, 64, 256, 0]),
        np.full(4, 3000.0),
        np.array([0.0, 512, 8192, 2048]),
        np.full(4, 512.0),
        np.zeros(4),
    )
    fast = price_step(m, par, mix, default_pricer(g), kernel_scale=1.1, overhead_s=1e-3)
    plain = price_step(m, par, mix, PerOpPricer("h200"), kernel_scale=1.1, overhead_s=1e-3)
    assert fast.provenance == plain.provenance
    np.testing.assert_allclose(fast.by_kind_s, plain.by_kind_s, rtol=RTOL, atol=0.0)


def _row_by_row(db: KernelDB, op: str, kw: dict[str, Column]) -> tuple[np.ndarray, list[str]]:
    """``db.price`` of each row alone (scalar columns: one parameter set, no gather)."""
    n = int(np.broadcast_shapes(*(np.shape(v) for v in kw.values()))[0])
    seconds, tags = np.empty(n), []
    for i in range(n):
        row = {k: (v if np.ndim(v) == 0 else np.asarray(v)[i].item()) for k, v in kw.items()}
        cost = db.price(shape_of(op, row))
        seconds[i] = float(cost.seconds)
        tags.append(str(cost.provenance))
    return seconds, tags


@pytest.mark.parametrize("gpu", ["h200", "a100", "mi300x"])
def test_kernel_lookup_with_mixed_labels_equals_row_by_row(gpu: str) -> None:
    db = KernelDB.for_gpu(get_gpu(gpu))
    rng = np.random.default_rng(5)
    k = 200
    dtypes = rng.choice(["bf16", "fp8", "fp4", "fp16"], k)
    kv = rng.choice(["bf16", "fp8"], k)
    heads = rng.choice([8.0, 16, 64], k)
    calls: list[tuple[str, dict[str, Column]]] = [
        (
            "gemm",
            {
                "m": rng.integers(1, 9000, k).astype(float),
                "n": 8192.0,
                "k": rng.choice([1024.0, 8192], k),
                "dtype": dtypes,
            },
        ),
        (
            "attention_decode",
            {
                "batch": rng.integers(1, 300, k).astype(float),
                "kv_len": rng.uniform(10, 9000, k),
                "heads": heads,
                "kv_heads": rng.choice([8.0, 16], k),
                "head_dim": 128.0,
                "kv_dtype": kv,
            },
        ),
        (
            "attention_prefill",
            {
                "batch": 2.0,
                "seq": rng.choice([128.0, 2048], k),
                "prior": rng.choice([0.0, 1000], k),
                "heads": heads,
                "kv_heads": 8.0,
                "head_dim": 128.0,
                "dtype": "bf16",
                "kv_dtype": kv,
                "window": 0.0,
            },
        ),
        (
            "moe",
            {
                "tokens": rng.integers(1, 5000, k).astype(float),
                "hidden": 4096.0,
                "inter": 1536.0,
                "topk": 8.0,
                "experts": 128.0,
                "ep": rng.choice([1.0, 8], k),
                "dtype": dtypes,
            },
        ),
        ("memcpy", {"bytes": rng.uniform(0, 1e8, k)}),
    ]
    for op, kw in calls:
        cost = db.price(shape_of(op, kw))
        seconds, tags = _row_by_row(db, op, kw)
        np.testing.assert_allclose(cost.seconds, seconds, rtol=RTOL, atol=0.0, err_msg=op)
        assert cost.provenance.tolist() == tags, op


def test_distinct_matches_unique() -> None:
    rng = np.random.default_rng(0)
    for n, pool in ((5, 2), (100, 3), (5000, 4), (5000, 40), (0, 1)):
        arr = rng.choice([f"d{i}" for i in range(pool)], n) if n else np.array([], dtype=str)
        names, inverse = costs.distinct(arr)
        assert len(set(names)) == len(names) == np.unique(arr).size
        assert np.array_equal(np.asarray(names, dtype=str)[inverse] if n else arr, arr)


def test_source_shares_equal_provenance_mix() -> None:
    from planner.perf.estimate import provenance_mix, source_shares

    m, g = load_model("deepseek-v3"), get_gpu("h200")
    one = np.ones(1)
    par = parallel_arrays(g, 8 * one, one, one, 8 * one, one, one)
    mix = StepMix(np.array([48.0]), np.array([3000.0]), np.zeros(1), np.zeros(1), np.zeros(1))
    cost = price_step(m, par, mix, default_pricer(g), kernel_scale=1.2, overhead_s=1e-3)
    assert source_shares(cost) == provenance_mix(m, par, mix, default_pricer(g))
