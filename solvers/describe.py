"""Turn one scored candidate back into a :class:`planner.deployment.Deployment` and its predictions."""

from __future__ import annotations

from typing import Any

import numpy as np

from hardware.spec import GpuSpec
from planner.deployment import Deployment, Parallelism, WorkerConfig
from planner.memory import plan_memory
from planner.model_spec import ModelSpec
from planner.opgraph import StepMix
from planner.step_model import KINDS_WITH_OVERHEAD, RooflinePricer, price_step
from solvers.candidates import Block
from solvers.perf import PERCENTILES, Engine, LatencyArrays, parallel_arrays
from solvers.space import KV_DTYPES, QUANTS, Workers


def worker_config(w: Workers, i: int, workers: int) -> WorkerConfig:
    """The engine settings of worker candidate ``i``."""
    return WorkerConfig(
        parallel=Parallelism(tp=int(w.tp[i]), pp=int(w.pp[i]), dp=int(w.dp[i]), ep=int(w.ep[i])),
        max_num_seqs=int(w.max_num_seqs[i]), max_num_batched_tokens=int(w.chunk[i]),
        gpu_memory_utilization=float(w.mem_frac[i]), kv_dtype=KV_DTYPES[int(w.kv[i])],  # type: ignore[arg-type]
        weight_quant=QUANTS[int(w.quant[i])], workers=workers,  # type: ignore[arg-type]
    )


def deployment(m: ModelSpec, b: Block, i: int, isl: int, osl: int) -> Deployment:
    """The deployment of candidate ``i`` of block ``b`` (replicas folded into worker counts)."""
    reps = int(b.replicas[i])
    common: dict[str, Any] = {"model": m.name, "hf_id": m.hf_id, "gpu": b.gpu.key, "max_model_len": isl + osl}
    if b.mode == "agg":
        assert b.workers is not None
        wc = worker_config(b.workers, i, reps)
        return Deployment(mode="agg", agg=wc, cuda_graph_max_batch=wc.max_num_seqs, **common)
    assert b.units is not None and b.prefill is not None and b.decode is not None
    u = b.units
    p, d = int(u.p[i]), int(u.d[i])
    pre = worker_config(b.prefill.workers, p, int(u.x[i]) * reps)
    dec = worker_config(b.decode.workers, d, int(u.y[i]) * reps)
    return Deployment(mode="disagg", prefill=pre, decode=dec, cuda_graph_max_batch=dec.max_num_seqs, **common)


def stats(a: np.ndarray, i: int) -> dict[str, float]:
    """mean/p50/p90/p99 of column ``i`` of a (4, K) array."""
    return {p: float(a[k, i]) for k, p in enumerate(PERCENTILES)}


def step_breakdown(m: ModelSpec, gpu: GpuSpec, eng: Engine, w: Workers, i: int, running: float,
                   ctx: float) -> dict[str, float]:
    """Milliseconds by op kind of one decode step of worker ``i`` at ``running`` requests."""
    one = w.take(np.array([i]))
    mix = StepMix(decode_reqs=np.array([running]), decode_ctx=np.array([ctx]), prefill_tokens=np.zeros(1),
                  prefill_chunk=np.ones(1), prefill_prior=np.zeros(1))
    cost = price_step(m, parallel_arrays(gpu, one), mix, RooflinePricer(gpu), kernel_scale=eng.kernel_scale,
                      overhead_s=eng.step_overhead_s)
    return {k: float(cost.by_kind_s[n, 0] * 1e3) for n, k in enumerate(KINDS_WITH_OVERHEAD)}


def memory_summary(m: ModelSpec, gpu: GpuSpec, wc: WorkerConfig, isl: int, osl: int) -> dict[str, Any]:
    """planner.memory's plan of one worker, as JSON-ready values."""
    plan = plan_memory(m, gpu, wc.parallel, weight_quant=wc.weight_quant, kv_dtype=wc.kv_dtype,
                       max_num_batched_tokens=wc.max_num_batched_tokens, max_num_seqs=wc.max_num_seqs,
                       gpu_memory_utilization=wc.gpu_memory_utilization, isl=isl, osl=osl)
    return plan.model_dump(mode="json")


def predicted(m: ModelSpec, b: Block, i: int, eng: Engine, isl: int, osl: int, deployment_rps: float,
              tok_per_gpu: float) -> dict[str, Any]:
    """The ``predicted`` object of the plan file for candidate ``i``."""
    met: LatencyArrays = b.metrics
    dep = deployment(m, b, i, isl, osl)
    if b.mode == "agg":
        assert b.workers is not None and dep.agg is not None
        w, wi, mem = b.workers, i, {"agg": memory_summary(m, b.gpu, dep.agg, isl, osl)}
        running = float(met.running[i])
    else:
        assert b.units is not None and b.decode is not None and dep.prefill and dep.decode
        w, wi = b.decode.workers, int(b.units.d[i])
        mem = {"prefill": memory_summary(m, b.gpu, dep.prefill, isl, osl),
               "decode": memory_summary(m, b.gpu, dep.decode, isl, osl)}
        running = float(b.decode.decode.running[wi]) if b.decode.decode is not None else 1.0
    return {
        "ttft_ms": stats(met.ttft_ms, i), "tpot_ms": stats(met.tpot_ms, i),
        "output_tok_s_per_gpu": tok_per_gpu, "output_tok_s_per_user": float(met.output_tok_s_per_user[i]),
        "requests_per_s": deployment_rps, "running_requests_per_worker": running,
        "clients_per_worker": int(b.clients[i]),
        "step_breakdown": {"decode_step_ms": step_breakdown(m, b.gpu, eng, w, wi, running, isl + osl / 2.0)},
        "memory": mem,
        "provenance": {"step_model": "planner.step_model (op graph priced by roofline, uncalibrated)",
                       "engine_calibration": f"{eng.name}: {eng.source}",
                       "serving": "solvers.perf closed-loop composition (Schweitzer MVA prefill queue)"},
    }
