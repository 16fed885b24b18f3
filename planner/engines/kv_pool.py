"""Engines' default KV pools, for replaying measured launches (``batch_eval.RecordedLaunch``).

The planner's budget is the one ``memory_batch.kv_budget_per_gpu`` takes: KV =
gpu_memory_utilization x device - weights - activations - reserve. A measured row that does not
record its engine's memory flag ran at that engine's default, which sizes the pool differently;
:func:`default_pool_util` expresses each default as the equivalent utilization, so the rest of
the memory model is shared.
"""

from __future__ import annotations

import numpy as np

from hardware.spec import GpuSpec
from planner.engines.base import KvPool
from planner.engines.sglang.memory import mem_fraction, mem_fraction_052
from planner.engines.trtllm.memory import FREE_FRACTION
from planner.model.spec import ModelSpec
from planner.perf.memory import (
    CUDA_GRAPH_BYTES,
    activation_bytes,
    reserved_bytes,
    weights_per_gpu,
)
from planner.perf.opgraph import ParallelArrays


def default_pool_util(
    pool: np.ndarray,
    m: ModelSpec,
    gpu: GpuSpec,
    p: ParallelArrays,
    chunk: np.ndarray,
    max_num_seqs: np.ndarray,
    util: float | np.ndarray = 0.9,
    flag: np.ndarray | None = None,
) -> np.ndarray:
    """The ``gpu_memory_utilization`` (vLLM's meaning, as ``kv_budget_per_gpu`` takes it) that
    gives each candidate the KV pool its engine (``pool``: ``KvPool`` values) sizes at its memory
    flag: the engine's default, or ``flag`` where finite (the engine's own flag as a launch set it:
    vLLM ``--gpu-memory-utilization``, TensorRT-LLM ``free_gpu_memory_fraction``, SGLang
    ``--mem-fraction-static``); ``util`` for vLLM otherwise. TensorRT-LLM: util = f + (1 - f) x
    non-KV / device, so KV = f x (device - non-KV). SGLang: util = fraction + (activations + CUDA
    graphs) / device, so KV = fraction x device - weights - CUDA context and NCCL (SGLang reserves
    the rest for activations and graphs; its weights are loaded before it reads free memory)."""
    device = gpu.memory_bytes
    act = activation_bytes(m, p, chunk, max_num_seqs)
    non_kv = weights_per_gpu(m, p) + act + reserved_bytes(p.tp * p.pp * p.dp)
    given = np.full(np.shape(pool), np.nan) if flag is None else np.asarray(flag, dtype=float)
    set_ = np.isfinite(given)
    f_trt = np.where(set_, given, FREE_FRACTION)
    trt = f_trt + (1.0 - f_trt) * non_kv / device
    sgl_extra = (act + CUDA_GRAPH_BYTES) / device
    sgl = np.where(set_, given, mem_fraction(device, p.tp, p.pp, p.dp)) + sgl_extra
    sgl_052 = np.where(set_, given, mem_fraction_052(device, p.tp, p.pp, p.dp)) + sgl_extra
    util = np.where(set_, given, util)
    return np.asarray(
        np.select(
            [pool == KvPool.TRTLLM, pool == KvPool.SGLANG, pool == KvPool.SGLANG_052],
            [trt, sgl, sgl_052],
            default=np.broadcast_to(util, np.shape(pool)),
        ),
        dtype=float,
    )
