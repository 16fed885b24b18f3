"""Vectorized memory model: the formulas of :mod:`planner.memory`, evaluated for many workers at once.

The expensive per-layer sums depend only on the split and dtypes, so they run once per unique
(tp, pp, dp, ep, weight dtype, KV dtype) through planner.memory's own functions; the terms linear in
the engine knobs (activation workspace in chunk tokens and max running requests, the
``gpu_memory_utilization`` budget) are then broadcast as numpy arrays. A test checks this against
:func:`planner.memory.plan_memory` candidate by candidate.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hardware.spec import GpuSpec
from planner.deployment import Parallelism
from planner.memory import (
    WEIGHT_BYTES,
    activation_bytes,
    reserved_bytes,
    seq_kv_bytes,
    stage_layers,
    weight_bytes_per_gpu,
)
from planner.model_spec import ModelSpec
from planner.params import layer_params
from solvers.space import KV_DTYPES, QUANTS, Workers


@dataclass(frozen=True)
class ShardTerms:
    """Per-worker memory terms (arrays aligned with a :class:`Workers`), bytes per GPU."""

    weights: np.ndarray  # fullest pipeline stage
    expert_weights: np.ndarray  # routed-expert share of ``weights``
    reserve: np.ndarray
    act_per_chunk_token: np.ndarray
    act_per_seq: np.ndarray
    seq_kv: np.ndarray  # one sequence of isl+osl tokens
    ctx_kv_per_token: np.ndarray  # KV read per token of mean decode context (windows applied)
    transfer_kv_per_token: np.ndarray  # KV of one prompt token summed over all layers, whole model


@dataclass(frozen=True)
class MemoryArrays:
    """Memory outcome per worker."""

    kv_budget_bytes: np.ndarray  # per GPU, may be <= 0 (out of memory)
    max_concurrency: np.ndarray  # sequences of isl+osl the worker holds (0 when OOM)
    fits: np.ndarray  # bool


def _expert_bytes(m: ModelSpec, p: Parallelism, quant: str, pp: int) -> float:
    layers = max(stage_layers(m, pp), key=len)
    routed = sum(layer_params(m, x).routed_experts for x in layers)
    return routed * WEIGHT_BYTES[quant] / (p.tp * p.dp)


def _one_shard(m: ModelSpec, p: Parallelism, quant: str, kv: str, isl: int, osl: int) -> list[float]:
    stages = stage_layers(m, p.pp)
    weights = max(weight_bytes_per_gpu(m, p, quant, ls, with_embed=(s in (0, p.pp - 1)))
                  for s, ls in enumerate(stages))
    act_tok = activation_bytes(m, p, 1, 0) - activation_bytes(m, p, 0, 0)
    act_seq = activation_bytes(m, p, 0, 1)
    seq_kv = max(seq_kv_bytes(m, ls, p.tp, kv, isl + osl) for ls in stages)
    ctx = max(1, isl + osl // 2)
    ctx_kv = max(seq_kv_bytes(m, ls, p.tp, kv, ctx) for ls in stages) / ctx
    full = Parallelism()
    transfer = seq_kv_bytes(m, m.layers, full.tp, kv, isl) / isl
    return [weights, _expert_bytes(m, p, quant, p.pp), reserved_bytes(p), act_tok, act_seq, seq_kv,
            ctx_kv, transfer]


def shard_terms(m: ModelSpec, w: Workers, isl: int, osl: int) -> ShardTerms:
    """Memory terms for every worker, computed once per unique split and dtype pair."""
    keys = np.stack([w.tp, w.pp, w.dp, w.ep, w.quant, w.kv], axis=1)
    uniq, inv = np.unique(keys, axis=0, return_inverse=True)
    rows = [
        _one_shard(m, Parallelism(tp=int(t), pp=int(p), dp=int(d), ep=int(e)), QUANTS[int(q)],
                   KV_DTYPES[int(k)], isl, osl)
        for t, p, d, e, q, k in uniq
    ]
    table = np.array(rows, dtype=float).reshape(len(rows), 8)[inv.ravel()]
    return ShardTerms(*(table[:, i] for i in range(8)))


def memory_arrays(gpu_memory_bytes: np.ndarray, w: Workers, t: ShardTerms) -> MemoryArrays:
    """KV budget per GPU = fraction x memory - weights - activations - reserve; concurrency from it."""
    act = t.act_per_chunk_token * w.chunk + t.act_per_seq * w.max_num_seqs
    budget = gpu_memory_bytes * w.mem_frac - t.weights - act - t.reserve
    fits = budget > 0
    conc = np.where(fits, np.floor(np.maximum(budget, 0) / np.maximum(t.seq_kv, 1.0)) * w.dp, 0)
    return MemoryArrays(kv_budget_bytes=budget, max_concurrency=conc.astype(int), fits=fits & (conc >= 1))


def gpu_memory(gpus: list[GpuSpec], w: Workers) -> np.ndarray:
    """Device memory of each worker's GPU, bytes."""
    return np.array([g.memory_bytes for g in gpus], dtype=float)[w.gpu]
