"""Turn one scored candidate back into a :class:`planner.perf.deployment.Deployment` and its
predictions."""

from __future__ import annotations

import numpy as np

from hardware.spec import GpuSpec
from planner.engines.calibration import EngineCalibration, EnginePolicy
from planner.model.spec import ModelSpec
from planner.perf.batch import (
    KV_DTYPES,
    WEIGHT_QUANTS,
    ResultArrays,
    op_pricer,
    parallel_arrays,
)
from planner.perf.deployment import Deployment, Parallelism, WorkerConfig
from planner.perf.memory_plan import plan_memory
from planner.perf.opgraph import StepMix
from planner.perf.step import KINDS_WITH_OVERHEAD, price_step
from solvers.candidates import PERCENTILE_FIELDS, Block, percentile_ms
from solvers.space import Workers


def worker_config(w: Workers, i: int, workers: int, mem_frac: float | None = None) -> WorkerConfig:
    """The engine settings of worker candidate ``i`` (``mem_frac`` overrides its memory
    fraction)."""
    return WorkerConfig(
        parallel=Parallelism(tp=int(w.tp[i]), pp=int(w.pp[i]), dp=int(w.dp[i]), ep=int(w.ep[i])),
        max_num_seqs=int(w.max_num_seqs[i]),
        max_num_batched_tokens=int(w.chunk[i]),
        gpu_memory_utilization=float(w.mem_frac[i] if mem_frac is None else mem_frac),
        kv_dtype=KV_DTYPES[int(w.kv[i])],
        weight_quant=WEIGHT_QUANTS[int(w.quant[i])],
        workers=workers,  # type: ignore[arg-type]
    )


def deployment(
    m: ModelSpec, b: Block, i: int, isl: int, osl: int, max_len: int | None = None
) -> Deployment:
    """The deployment of candidate ``i`` of block ``b`` (replicas folded into worker counts);
    ``max_len``: the longest request it must accept (default ``isl + osl``)."""
    common: dict[str, object] = {
        "model": m.name,
        "hf_id": m.hf_id,
        "gpu": b.gpu.key,
        "checkpoint_quant": m.quant.weight_format,
        "max_model_len": max_len or isl + osl,
    }
    if b.mode == "agg":
        assert b.workers is not None
        wc = worker_config(b.workers, i, int(b.replicas[i]))
        return Deployment(mode="agg", agg=wc, cuda_graph_max_batch=wc.max_num_seqs, **common)
    assert b.units is not None and b.prefill is not None and b.decode is not None
    u = b.units
    p, d = int(u.p[i]), int(u.d[i])
    dec = worker_config(b.decode, d, int(u.y[i]))
    # the serving model runs both roles at the decode role's memory fraction (one engine setting)
    pre = worker_config(b.prefill, p, int(u.x[i]), mem_frac=dec.gpu_memory_utilization)
    if b.mixed:
        common["prefill_gpu"] = b.pre_gpu.key
    return Deployment(
        mode="disagg", prefill=pre, decode=dec, cuda_graph_max_batch=dec.max_num_seqs, **common
    )


def kv_link(b: Block) -> str:
    """The link the KV cache of a pair of two GPU types crosses, in words with its source."""
    slow = min((b.pre_gpu, b.gpu), key=lambda g: g.scale_out_bandwidth_bytes_per_s)
    gb = slow.scale_out_bandwidth_bytes_per_s / 1e9
    src = slow.sources.get("scale_out_bandwidth_bytes_per_s", "")
    return (
        f"KV cache from prefill to decode over the scale-out NIC of {slow.name}, the slower of "
        f"the pair: {gb:.3g} GB/s per GPU ({src})"
    )


def stats(res: ResultArrays, metric: str, i: int) -> dict[str, float]:
    """mean/p50/p90/p99 of ``metric`` (ttft or tpot) of candidate ``i``, ms."""
    return {p: float(percentile_ms(res, metric, p)[i]) for p in PERCENTILE_FIELDS}


def step_breakdown(
    m: ModelSpec, gpu: GpuSpec, cal: EngineCalibration, wc: WorkerConfig, running: float, ctx: float
) -> dict[str, float]:
    """Milliseconds by op kind of one decode step of worker ``wc`` at ``running`` requests, with
    the engine constants ``cal``."""
    p = wc.parallel
    one = [
        np.array([float(v)])
        for v in (
            p.tp,
            p.pp,
            p.dp,
            p.ep,
            WEIGHT_QUANTS.index(wc.weight_quant),
            KV_DTYPES.index(wc.kv_dtype),
        )
    ]
    z = np.zeros(1)
    mix = StepMix(np.array([max(running, 1.0)]), np.array([ctx]), z, z, z)
    cost = price_step(m, parallel_arrays(gpu, *one), mix, op_pricer(gpu), **cal.step_kwargs())
    return {k: float(cost.by_kind_s[n, 0] * 1e3) for n, k in enumerate(KINDS_WITH_OVERHEAD)}


def memory_summary(
    m: ModelSpec, gpu: GpuSpec, wc: WorkerConfig, isl: int, osl: int
) -> dict[str, object]:
    """planner.perf.memory_plan's plan of one worker, as JSON-ready values."""
    plan = plan_memory(
        m,
        gpu,
        wc.parallel,
        weight_quant=wc.weight_quant,
        kv_dtype=wc.kv_dtype,
        max_num_batched_tokens=wc.max_num_batched_tokens,
        max_num_seqs=wc.max_num_seqs,
        gpu_memory_utilization=wc.gpu_memory_utilization,
        isl=isl,
        osl=osl,
    )
    return plan.model_dump(mode="json")


def predicted(
    m: ModelSpec, b: Block, i: int, isl: int, osl: int, policy: EnginePolicy
) -> dict[str, object]:
    """The ``predicted`` object of the plan file for candidate ``i``
    (``evaluate_batch``'s numbers)."""
    r = b.res
    dep = deployment(m, b, i, isl, osl)
    main = dep.agg if dep.agg is not None else dep.decode
    assert main is not None
    if dep.agg is not None:
        mem = {"agg": memory_summary(m, b.gpu, dep.agg, isl, osl)}
    else:
        assert dep.prefill is not None and dep.decode is not None
        mem = {
            "prefill": memory_summary(m, b.pre_gpu, dep.prefill, isl, osl),
            "decode": memory_summary(m, b.gpu, dep.decode, isl, osl),
        }
    running = float(r.decode_batch[i])
    return {
        "ttft_ms": stats(r, "ttft", i),
        "tpot_ms": stats(r, "tpot", i),
        "output_tok_s_per_gpu": float(r.output_tok_s_per_gpu[i]),
        "output_tok_s_per_user": float(r.output_tok_s_per_user[i]),
        "requests_per_s": float(r.requests_per_s[i]),
        "running_requests_per_worker": running,
        "clients_per_worker": int(np.ceil(b.clients[i])) if np.isfinite(b.clients[i]) else 0,
        "kv_transfer_ms": float(r.kv_transfer_s[i]) * 1e3,
        "prefill_utilization": float(r.prefill_utilization[i]),
        "step_breakdown": {
            "decode_step_ms": step_breakdown(
                m, b.gpu, policy.calibration, main, running, isl + osl / 2.0
            )
        },
        "memory": mem,
        "provenance": {
            "step_model": (
                "planner.perf.step (op graph priced through planner.perf.batch.op_pricer)"
            ),
            "engine_calibration": f"{policy.name}: {policy.label}",
            "serving": "planner.perf.batch.evaluate_batch (the model behind planner estimate)",
            **({"kv_link": kv_link(b)} if b.mixed else {}),
        },
    }
