"""Engines' default KV pools (``planner.engines.kv_pool.default_pool_util``) on synthetic
deployments: each engine's rule, worked by hand from its source, against the memory model."""

from __future__ import annotations

import numpy as np
import pytest

from hardware.catalog import get_gpu
from planner.engines.kv_pool import KvPool, default_pool_util
from planner.engines.sglang import memory as sglang_memory
from planner.model.bundled import load_model
from planner.perf import memory as mb
from planner.perf.batch import CandidateArrays, RecordedLaunch, evaluate_batch, parallel_arrays
from planner.perf.opgraph import ParallelArrays
from planner.workload.spec import fixed

GIB = 1024**3
MIB = 1024**2
CHUNK = np.array([8192.0])
SEQS = np.array([256.0])


def _par(gpu_name: str, tp: float, dp: float = 1.0, wq: int = 0) -> ParallelArrays:
    one = np.array([1.0])
    return parallel_arrays(
        get_gpu(gpu_name), np.array([tp]), one, np.array([dp]), one, np.array([wq]), np.array([0])
    )


def _util(pool: KvPool, model: str, gpu_name: str, p: ParallelArrays) -> float:
    m, gpu = load_model(model), get_gpu(gpu_name)
    return float(default_pool_util(np.array([int(pool)]), m, gpu, p, CHUNK, SEQS)[0])


def test_vllm_keeps_the_given_utilization() -> None:
    p = _par("h200", 1)
    m, gpu = load_model("llama-3.1-8b"), get_gpu("h200")
    pools = np.array([int(KvPool.VLLM)] * 2)
    got = default_pool_util(pools, m, gpu, p, CHUNK, SEQS, np.array([0.9, 0.85]))
    assert got.tolist() == [0.9, 0.85]


def test_a_recorded_memory_flag_replaces_each_engines_default() -> None:
    """A launch's own flag, in each engine's meaning: vLLM's utilization as given, TensorRT-LLM's
    fraction of the memory left after the model, SGLang's static fraction of the device; NaN
    keeps the default rule."""
    m, gpu = load_model("llama-3.1-70b"), get_gpu("h200")
    p = _par("h200", 2)
    pools = np.array([int(KvPool.VLLM), int(KvPool.TRTLLM), int(KvPool.SGLANG), int(KvPool.TRTLLM)])
    par = parallel_arrays(
        gpu, np.full(4, 2.0), np.ones(4), np.ones(4), np.ones(4), np.zeros(4), np.zeros(4)
    )
    flags = np.array([0.95, 0.75, 0.8, np.nan])
    chunk, seqs = np.full(4, 8192.0), np.full(4, 256.0)
    got = default_pool_util(pools, m, gpu, par, chunk, seqs, 0.9, flags)
    assert got[0] == 0.95
    kv = mb.kv_budget_per_gpu(m, gpu, p, CHUNK, SEQS, got[1])[0]
    assert kv == pytest.approx(0.75 * mb.kv_budget_per_gpu(m, gpu, p, CHUNK, SEQS, 1.0)[0])
    assert got[2] > 0.8  # plus activations and CUDA graphs, which SGLang keeps outside
    assert got[3] == pytest.approx(_util(KvPool.TRTLLM, "llama-3.1-70b", "h200", p), rel=1e-12)


def test_trtllm_takes_its_fraction_of_the_memory_left_after_the_model() -> None:
    """KV = 0.9 x (device - weights - activations - reserve): the budget at the equivalent
    utilization is 90 % of what vLLM's meaning would leave at utilization 1."""
    m, gpu = load_model("llama-3.1-70b"), get_gpu("h200")
    p = _par("h200", 2)
    util = _util(KvPool.TRTLLM, "llama-3.1-70b", "h200", p)
    kv = mb.kv_budget_per_gpu(m, gpu, p, CHUNK, SEQS, util)[0]
    free = mb.kv_budget_per_gpu(m, gpu, p, CHUNK, SEQS, 1.0)[0]
    assert kv == pytest.approx(0.9 * free, rel=1e-12)
    # 70B bf16 over 2 GPUs leaves ~0.5 of an H200 free: more KV than 0.9 of the whole device
    assert kv > mb.kv_budget_per_gpu(m, gpu, p, CHUNK, SEQS, 0.9)[0] * 1.05


@pytest.mark.parametrize(
    ("memory_mib", "tp", "dp", "expected"),
    [
        # 80 GiB, tp 1: 512 + 1.5 x 8192 + 2 x 256 + 1024 / 8 = 13,440 MiB
        (81920, 1, 1, round((81920 - 13440) / 81920, 3)),
        # 189,471 MiB (GB200), attention DP 4 at TP 1 (SGLang tp_size 4): 512 + 1.5 x 16384
        # + 2 x 512 + 1024 x 4 / 8 + 512 x 4 x (3 + 1.5) = 35,840 MiB
        (189471, 1, 4, round((189471 - 35840) / 189471, 3)),
        # 24 GiB, tp 1: 512 + 1.5 x 2048 + 2 x 24 + 128 = 3,760 MiB (no 10 GiB floor under 60 GiB)
        (24576, 1, 1, round((24576 - 3760) / 24576, 3)),
        # 141 GiB, tp 8: 512 + 12,288 + 1,024 + 1,024 = 14,848 MiB
        (144384, 8, 1, round((144384 - 14848) / 144384, 3)),
    ],
)
def test_sglang_default_fraction_on_a_gpu_of_given_memory(
    memory_mib: int, tp: int, dp: int, expected: float
) -> None:
    got = sglang_memory.mem_fraction(memory_mib * MIB, np.array([tp]), 1, np.array([dp]))
    assert got.tolist() == [expected]


def test_sglang_before_053_reserves_by_table() -> None:
    """0.5.2 and earlier: (12 + GPUs / 2) GiB under 160 GiB, 32 GiB above, + 4 GiB DP attention."""
    h200 = 144384 * MIB
    got = sglang_memory.mem_fraction_052(h200, np.array([8]), 1, np.array([1]))
    assert got.tolist() == [round((144384 - 16 * 1024) / 144384, 3)]
    big = sglang_memory.mem_fraction_052(189471 * MIB, np.array([1]), 1, np.array([4]))
    assert big.tolist() == [round((189471 - 36 * 1024) / 189471, 3)]


def test_sglang_pool_is_its_static_fraction_less_the_weights() -> None:
    """KV = fraction x device - weights - CUDA context and NCCL: SGLang's reserve covers the
    activations and CUDA graphs, so our own estimates of those do not shrink its pool."""
    m, gpu = load_model("llama-3.1-8b"), get_gpu("h100")
    p = _par("h100", 1)
    util = _util(KvPool.SGLANG, "llama-3.1-8b", "h100", p)
    frac = sglang_memory.mem_fraction(gpu.memory_bytes, p.tp, p.pp, p.dp)[0]
    kv = mb.kv_budget_per_gpu(m, gpu, p, CHUNK, SEQS, util)[0]
    expected = frac * gpu.memory_bytes - mb.weights_per_gpu(m, p)[0] - mb.CUDA_CONTEXT_BYTES
    assert kv == pytest.approx(expected, rel=1e-12)


def test_sglang_default_does_not_hold_deepseek_fp8_on_four_gb200() -> None:
    """The cfg227 layout (DeepSeek-V3 FP8, attention DP 4, MoE over the 4 GB200): SGLang's
    default fraction (0.811 here) is below the weights' share of the GPU (~0.91), so at its
    default the engine could not have started; such a measured row ran with its
    ``--mem-fraction-static`` raised, which the row does not record. TensorRT-LLM's default
    (0.9 of the memory left free) still leaves KV on the same layout."""
    m, gpu = load_model("deepseek-v3"), get_gpu("gb200")
    one = np.array([1.0])
    p = parallel_arrays(gpu, one, one, np.array([4.0]), one, np.array([1]), np.array([0]))
    frac = sglang_memory.mem_fraction(gpu.memory_bytes, p.tp, p.pp, p.dp)[0]
    assert frac == pytest.approx(0.811)
    assert mb.weights_per_gpu(m, p)[0] > frac * gpu.memory_bytes
    sgl = default_pool_util(np.array([int(KvPool.SGLANG)]), m, gpu, p, CHUNK, SEQS)
    assert mb.seq_capacity(m, gpu, p, CHUNK, SEQS, np.array([2048.0]), sgl)[0] == 0
    trt = default_pool_util(np.array([int(KvPool.TRTLLM)]), m, gpu, p, CHUNK, SEQS)
    assert mb.seq_capacity(m, gpu, p, CHUNK, SEQS, np.array([2048.0]), trt)[0] > 0


def test_evaluate_batch_without_pools_is_unchanged_and_pools_are_per_candidate() -> None:
    """Plans keep ``gpu_memory_utilization`` (no ``kv_pool``); with pools, each candidate gets
    its own engine's default: TensorRT-LLM's holds more sequences of a weight-heavy deployment."""
    m, gpu = load_model("llama-3.1-70b"), get_gpu("h200")
    c = CandidateArrays.from_lists(tp=[2, 2], concurrency=[64, 64])
    w = fixed(4000, 500, concurrency=64)
    plain = evaluate_batch(m, gpu, c, w)
    vllm = evaluate_batch(
        m, gpu, c, w, recorded=RecordedLaunch(kv_pool=np.array([int(KvPool.VLLM)] * 2))
    )
    assert np.array_equal(plain.seq_capacity, vllm.seq_capacity)
    mixed = evaluate_batch(
        m,
        gpu,
        c,
        w,
        recorded=RecordedLaunch(kv_pool=np.array([int(KvPool.VLLM), int(KvPool.TRTLLM)])),
    )
    assert mixed.seq_capacity[0] == plain.seq_capacity[0]
    assert mixed.seq_capacity[1] > plain.seq_capacity[1]
