"""Public ``estimate(...)``: one deployment + workload -> frozen :class:`Estimate`.

Runs the exact memory model per role (``plan_memory``: InfeasibleError when it does not fit), the
vectorized serving model with K = 1 (``batch_eval.evaluate_batch``, so single estimates and solver
sweeps agree), then prices the steady-state step once more with provenance for the breakdown.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from hardware.errors import InfeasibleError
from hardware.spec import GpuSpec
from planner.engines import DEFAULT_ENGINE
from planner.engines.calibration import EngineCalibration, EnginePolicy, policy_of
from planner.model.spec import ModelSpec
from planner.perf.batch import (
    CandidateArrays,
    DeployMode,
    KvDtype,
    Reason,
    ResultArrays,
    WeightQuant,
    evaluate_batch,
    kv_link_bandwidth,
)
from planner.perf.deployment import Parallelism, WorkerConfig
from planner.perf.memory_plan import MemoryPlan, plan_memory
from planner.perf.opgraph import ParallelArrays, StepMix, step_ops
from planner.perf.power import (
    ELECTRICITY_PRICE_USD_PER_KWH,
    PUE,
    PowerSummary,
    RoleLoad,
    RoleSteps,
    clocked_gpu,
    power_summary,
    role_load,
    role_steps,
    worker_par,
)
from planner.perf.pricer import default_pricer, kernel_source
from planner.perf.serving import free_chunk, prompt_chunks
from planner.perf.step import KINDS_WITH_OVERHEAD, OpPricer, StepCost, price_steps
from planner.uncertainty.bands import (
    Bands,
    LogBand,
    deployment_bands,
    packaged_bands,
    source_shares,
)
from planner.workload.spec import Workload

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class Interval(BaseModel):
    """Low and high edge of a band."""

    model_config = _FROZEN
    lo: float = Field(description="Low edge, in the unit of the number it bands.")
    hi: float = Field(description="High edge, in the unit of the number it bands.")


class PercentileBand(BaseModel):
    """Calibrated band (``planner.uncertainty.bands``) of the mean and of each percentile,
    milliseconds."""

    model_config = _FROZEN
    level: float = Field(description="Share of measured values the band is calibrated to hold.")
    mean: Interval = Field(description="Band of the mean, ms.")
    p50: Interval = Field(description="Band of the median, ms.")
    p90: Interval = Field(description="Band of the 90th percentile, ms.")
    p99: Interval = Field(description="Band of the 99th percentile, ms.")


class ValueBand(BaseModel):
    """Calibrated band of one number."""

    model_config = _FROZEN
    level: float = Field(description="Share of measured values the band is calibrated to hold.")
    lo: float = Field(description="Low edge of the band.")
    hi: float = Field(description="High edge of the band.")


class Percentiles(BaseModel):
    """Mean and percentiles, milliseconds, with their calibrated band."""

    model_config = _FROZEN
    mean: float = Field(description="Mean, ms.")
    p50: float = Field(description="Median, ms.")
    p90: float = Field(description="90th percentile, ms.")
    p99: float = Field(description="99th percentile, ms.")
    band: PercentileBand | None = Field(
        default=None,
        description="Calibrated band around each number; None where no band table applies.",
    )

    def with_band(self, b: LogBand, level: float) -> Percentiles:
        """These numbers with the band ``b`` (log quantiles of measured / predicted) around each."""

        def edge(v: float) -> Interval:
            lo, hi = b.apply(v)
            return Interval(lo=float(lo), hi=float(hi))

        band = PercentileBand(
            level=level,
            mean=edge(self.mean),
            p50=edge(self.p50),
            p90=edge(self.p90),
            p99=edge(self.p99),
        )
        return self.model_copy(update={"band": band})


class Estimate(BaseModel):
    """Predicted serving performance of one deployment under one workload."""

    model_config = _FROZEN
    model: str = Field(description="Model name.")
    model_id: str = Field(default="", description="The model's identity: HF id or weights path.")
    checkpoint_quant: str = Field(default="bf16", description="The checkpoint's weight format.")
    gpu: str = Field(description="GPU key (of the decode workers when disaggregated).")
    prefill_gpu: str = Field(
        default="",
        description="GPU of the prefill workers where it differs from ``gpu`` (disaggregated "
        "over two GPU types); empty when both roles run on ``gpu``.",
    )
    kv_link_gb_per_s: float = Field(
        default=0.0,
        description="Bandwidth per GPU of the link the KV cache crosses from prefill to decode "
        "workers, GB/s (disaggregated; between two GPU types the slower scale-out NIC).",
    )
    backend: str = Field(description="Engine whose calibration priced it.")
    mode: str = Field(description="agg or disagg.")
    gpus: int = Field(description="GPUs of the whole deployment.")
    ttft_ms: Percentiles = Field(description="Time to first token, ms.")
    tpot_ms: Percentiles = Field(description="Time per output token after the first, ms.")
    output_tok_s_per_gpu: float = Field(description="Output tokens/s of the deployment per GPU.")
    output_tok_s_per_gpu_band: ValueBand | None = Field(
        default=None,
        description="Band of output tok/s per GPU (from the TPOT band; an open "
        "loop's throughput is its offered rate).",
    )
    output_tok_s_per_user: float = Field(
        description="Output tokens/s one request sees while decoding (1 / mean TPOT)."
    )
    requests_per_s: float = Field(description="Requests completed per second by the deployment.")
    decode_batch: float = Field(description="Mean decode requests per step of one (decode) worker.")
    prefill_utilization: float = Field(description="Busy fraction of the prefill stage.")
    kv_transfer_ms: float = Field(description="KV transfer per request (disaggregated), ms.")
    step_breakdown: dict[str, dict[str, float]] = Field(
        description="Milliseconds per op kind of the mixed step (aggregated), one prompt's prefill "
        "and a decode-only step: mixed_step_ms, prefill_ms, decode_step_ms "
        "(see step_breakdowns)."
    )
    memory: MemoryPlan = Field(description="Memory plan of one (decode) worker GPU.")
    prefill_memory: MemoryPlan | None = Field(
        default=None, description="Memory plan of one prefill worker GPU (disaggregated)."
    )
    provenance: dict[str, str] = Field(description="Op or constant -> where its number came from.")
    provenance_mix: dict[str, float] = Field(
        default_factory=dict,
        description="Share of the decode-worker step's kernel time per provenance "
        "(measured / interpolated / fitted / roofline_uncalibrated).",
    )
    saturated: bool = Field(
        default=False,
        description="Open loop: the offered rate exceeds what the deployment can "
        "serve (queues grow without bound; TTFT/TPOT not finite).",
    )
    offered_requests_per_s: float | None = Field(
        default=None, description="Open loop: the offered arrival rate, requests/s."
    )
    capacity_requests_per_s: float | None = Field(
        default=None,
        description="Open loop, saturated: the highest arrival rate the deployment "
        "sustains, requests/s (3 significant figures).",
    )
    power: PowerSummary | None = Field(
        default=None,
        description="Board power and energy of the deployment at this load "
        "(planner/perf/power.py).",
    )


def _pct(mean: np.ndarray, p50: np.ndarray, p90: np.ndarray, p99: np.ndarray) -> Percentiles:
    return Percentiles(
        mean=float(mean[0]) * 1e3,
        p50=float(p50[0]) * 1e3,
        p90=float(p90[0]) * 1e3,
        p99=float(p99[0]) * 1e3,
    )


def _memory(m: ModelSpec, gpu: GpuSpec, w: WorkerConfig, wl: Workload) -> MemoryPlan:
    return plan_memory(
        m,
        gpu,
        w.parallel,
        weight_quant=w.weight_quant,
        kv_dtype=w.kv_dtype,
        max_num_batched_tokens=w.max_num_batched_tokens,
        max_num_seqs=w.max_num_seqs,
        gpu_memory_utilization=w.gpu_memory_utilization,
        isl=int(wl.isl.mean),
        osl=int(wl.osl.mean),
    )


def provenance_mix(
    m: ModelSpec, par: ParallelArrays, mix: StepMix, pricer: OpPricer
) -> dict[str, float]:
    """Share of one step's kernel time (candidate 0) priced from each provenance tier."""
    times: dict[str, float] = {}
    ops = step_ops(m, par, mix)
    for op, (t, tag) in zip(ops, pricer.price_ops(ops), strict=True):
        times[tag] = times.get(tag, 0.0) + float(t[0]) * op.count
    total = sum(times.values()) or 1.0
    return {tag: v / total for tag, v in sorted(times.items())}


def _kinds_ms(cost: StepCost, times: float = 1.0) -> dict[str, float]:
    """Milliseconds per op kind of candidate 0, times ``times``; kinds taking no time left out."""
    return {
        k: float(cost.by_kind_s[i, 0]) * 1e3 * times
        for i, k in enumerate(KINDS_WITH_OVERHEAD)
        if cost.by_kind_s[i, 0] > 0
    }


def _price_per_type(
    m: ModelSpec, steps: Sequence[tuple[GpuSpec, ParallelArrays, StepMix]], cal: EngineCalibration
) -> list[StepCost]:
    """Each (GPU type, parallelism, mix) step priced on its type with the engine's constants
    ``cal``: one ``price_steps`` call per type, each step's provenance kept apart."""
    by_type: dict[GpuSpec, list[int]] = {}
    for i, (gpu, _, _) in enumerate(steps):
        by_type.setdefault(gpu, []).append(i)
    out: dict[int, StepCost] = {}
    for gpu, idx in by_type.items():
        priced = price_steps(
            m, [steps[i][1:] for i in idx], default_pricer(gpu), **cal.step_kwargs()
        )
        out.update(zip(idx, priced, strict=True))
    return [out[i] for i in range(len(steps))]


def step_breakdowns(
    m: ModelSpec,
    gpu: GpuSpec,
    main: WorkerConfig,
    pre: WorkerConfig,
    cal: EngineCalibration,
    r: ResultArrays,
    wl: Workload,
    disagg: bool,
    prefill_gpu: GpuSpec | None = None,
    roles: Sequence[RoleSteps] = (),
) -> tuple[dict[str, dict[str, float]], StepCost, list[list[StepCost]]]:
    """Milliseconds by op kind of the answer's steps (docs/architecture.md "Step breakdowns"):
    ``mixed_step_ms`` (aggregated: the priced step that carries a prefill chunk next to the running
    decodes), ``prefill_ms`` (one prompt's whole prefill, all its chunks, on the prefill worker when
    disaggregated: what TTFT is made of) and ``decode_step_ms`` (a decode-only step at the running
    batch); the decode step's cost (for its provenance); and the steps of each of ``roles``
    (``planner.perf.power.role_steps``) priced in the same calls. ``cal``: the engine's constants;
    ``prefill_gpu``: the prefill worker's GPU type when it differs from ``gpu``."""
    z, one = np.zeros(1), np.ones(1)
    b = np.array([max(float(r.decode_batch[0]), 1.0)])
    ctx = np.array([wl.isl.mean + wl.osl.mean / 2])
    isl_c = np.array([max(wl.isl.mean * (1 - wl.prefix_hit), 1.0)])
    par = worker_par(gpu, main)
    steps = [(gpu, par, StepMix(b, ctx, z, z, z))]
    pre_gpu = prefill_gpu or gpu
    if not disagg:
        free = free_chunk(main.max_num_batched_tokens * one, b)
        _, own, prior = prompt_chunks(isl_c, free)
        p = np.maximum(r.mixed_prefill_tokens[:1], own)
        steps.append((gpu, par, StepMix(b, ctx, p, own, prior)))
    chunks, own, prior = prompt_chunks(isl_c, pre.max_num_batched_tokens * one)
    pre_par = par if pre is main else worker_par(pre_gpu, pre)
    steps.append((pre_gpu, pre_par, StepMix(z, z, own, own, prior)))
    mine = len(steps)
    steps += [(role.gpu, role.par, mix) for role in roles for mix, _ in role.steps]
    priced = _price_per_type(m, steps, cal)
    decode, *rest = priced[:mine]
    out = {}
    if not disagg:
        out["mixed_step_ms"] = _kinds_ms(rest[0])
    out["prefill_ms"] = _kinds_ms(rest[-1], float(chunks[0]))
    out["decode_step_ms"] = _kinds_ms(decode)
    per_role, at = [], mine
    for role in roles:
        per_role.append(priced[at : at + len(role.steps)])
        at += len(role.steps)
    return out, decode, per_role


def _spec_provenance(wl: Workload) -> dict[str, str]:
    """Where the speculative-decoding numbers came from (empty without it)."""
    sd = wl.spec_decode
    if sd is None:
        return {}
    acc = ",".join(f"{a:g}" for a in sd.acceptance)
    return {
        "speculative": f"{sd.method}, {sd.draft_len} drafted tokens, acceptance {acc} "
        f"-> {sd.tokens_per_step:.4g} tokens per step; draft step {sd.draft_cost_ratio:.3g} of a "
        "target step (parameters touched per token, planner.perf.spec_decode)",
        "speculative.acceptance": sd.source or "given",
    }


def _provenance(policy: EnginePolicy, cost: StepCost) -> dict[str, str]:
    cal = policy.calibration
    prov = {f"op:{name}": src for name, src in cost.provenance}
    for field in cal.model_constants():
        prov[f"{policy.name}.{field}"] = getattr(cal, field).source
    return prov


def estimate(
    m: ModelSpec,
    gpu: GpuSpec,
    wl: Workload,
    *,
    backend: str | EnginePolicy = DEFAULT_ENGINE,
    agg: WorkerConfig | None = None,
    prefill: WorkerConfig | None = None,
    decode: WorkerConfig | None = None,
    bands: Bands | None = None,
    power_cap_w: float | None = None,
    electricity_price: float = ELECTRICITY_PRICE_USD_PER_KWH,
    pue: float = PUE,
    prefill_gpu: GpuSpec | None = None,
) -> Estimate:
    """Aggregated when ``agg`` is given (default: one worker, tp 1),
    disaggregated with prefill+decode; ``backend``: the engine (a name: its packaged constants);
    ``bands``: the band table to state (default: the packaged one; a calibration profile's own
    bands replace it, ``planner.uncertainty.profile_bands``); ``power_cap_w``: a board limit
    below the GPU's own (``planner.perf.power``): where the load's power demand exceeds the limit,
    the deployment is priced again at the clock the limit allows; ``prefill_gpu``: the prefill
    workers' GPU type when it differs from ``gpu`` (decode's): each role's power on its own type,
    at full clock (``power_cap_w`` caps the decode type)."""
    kw: dict[str, object] = {
        "backend": backend,
        "agg": agg,
        "prefill": prefill,
        "decode": decode,
        "bands": bands,
    }
    cost = {"cap_w": power_cap_w, "electricity_price": electricity_price, "pue": pue}
    two_types = prefill_gpu is not None and prefill_gpu.key != gpu.key
    if two_types:
        kw["prefill_gpu"] = prefill_gpu
    est, loads = _estimate(m, gpu, wl, **kw)  # type: ignore[arg-type]
    power = _power(gpu, wl, est, loads, **cost)
    ratio = power.clock_ratio
    if ratio < 1.0 and not two_types:
        slow = clocked_gpu(gpu, ratio)
        est, loads = _estimate(m, slow, wl, **kw)  # type: ignore[arg-type]
        power = _power(slow, wl, est, loads, **cost)
        power = power.model_copy(update={"clock_ratio": ratio})
    elif ratio < 1.0:  # two types: each would run at its own clock; latencies stay at full clock
        prov = {**power.provenance, "clock": "latencies priced at full clock (two GPU types)"}
        power = power.model_copy(update={"provenance": prov})
    return est.model_copy(update={"power": power})


def _power(
    gpu: GpuSpec, wl: Workload, est: Estimate, loads: list[RoleLoad], **cost: float | None
) -> PowerSummary:
    """Power and energy of ``est``'s deployment at its load, its roles' GPUs and activity
    ``loads`` (``cost``: ``power_summary``'s cap_w, electricity_price and pue)."""
    out_tok_s = est.output_tok_s_per_gpu * est.gpus
    paid = sum(r.gpus * (r.gpu or gpu).price_per_gpu_hour_usd for r in loads)
    return power_summary(
        gpu,
        loads,
        output_tok_s=out_tok_s,
        total_tok_s=out_tok_s + est.requests_per_s * wl.isl.mean,
        price_per_gpu_hour=paid / max(sum(r.gpus for r in loads), 1),
        **cost,  # type: ignore[arg-type]
    )


def _estimate(
    m: ModelSpec,
    gpu: GpuSpec,
    wl: Workload,
    *,
    backend: str | EnginePolicy = DEFAULT_ENGINE,
    agg: WorkerConfig | None = None,
    prefill: WorkerConfig | None = None,
    decode: WorkerConfig | None = None,
    bands: Bands | None = None,
    prefill_gpu: GpuSpec | None = None,
) -> tuple[Estimate, list[RoleLoad]]:
    """``estimate`` at full clock, without power, and its roles' GPUs and activity (the load
    ``_power`` prices)."""
    pre_gpu = prefill_gpu or gpu
    band_set = bands or packaged_bands()
    policy = policy_of(backend)
    name = policy.name
    disagg = prefill is not None and decode is not None
    main = decode if disagg else (agg or WorkerConfig(parallel=Parallelism()))
    assert main is not None
    mem = _memory(m, gpu, main, wl)
    pmem = _memory(m, pre_gpu, prefill, wl) if disagg and prefill is not None else None
    pre = prefill or main
    c = CandidateArrays.from_lists(
        tp=main.parallel.tp,
        pp=main.parallel.pp,
        dp=main.parallel.dp,
        ep=main.parallel.ep,
        max_num_seqs=main.max_num_seqs,
        max_num_batched_tokens=main.max_num_batched_tokens,
        weight_quant=WeightQuant.of(main.weight_quant),
        kv_dtype=KvDtype.of(main.kv_dtype),
        mode=DeployMode.DISAGG if disagg else DeployMode.AGG,
        workers=main.workers,
        prefill_tp=pre.parallel.tp,
        prefill_pp=pre.parallel.pp,
        prefill_dp=pre.parallel.dp,
        prefill_ep=pre.parallel.ep,
        prefill_workers=pre.workers,
        prefill_max_num_batched_tokens=pre.max_num_batched_tokens,
    )
    util = main.gpu_memory_utilization
    r = evaluate_batch(
        m, gpu, c, wl, backend=policy, gpu_memory_utilization=util, prefill_gpu=pre_gpu
    )
    if r.infeasible_reason[0] == Reason.OUT_OF_MEMORY:
        raise InfeasibleError(
            "memory",
            f"{m.name} leaves no room for one sequence of KV on {gpu.name}",
            binding_constraint="memory",
        )
    capacity = None
    if r.infeasible_reason[0] == Reason.SATURATED and wl.rate_per_s is not None:
        capacity = saturation_capacity(m, gpu, c, wl, policy, util, pre_gpu)
        at_cap = evaluate_batch(
            m,
            gpu,
            c,
            wl.model_copy(update={"rate_per_s": capacity}),
            backend=policy,
            gpu_memory_utilization=util,
            prefill_gpu=pre_gpu,
        )
        # throughput at capacity; latencies stay those of the offered load (not finite)
        r = replace(
            at_cap,
            ttft_mean_s=r.ttft_mean_s,
            ttft_p50_s=r.ttft_p50_s,
            ttft_p90_s=r.ttft_p90_s,
            ttft_p99_s=r.ttft_p99_s,
            tpot_mean_s=r.tpot_mean_s,
            tpot_p50_s=r.tpot_p50_s,
            tpot_p90_s=r.tpot_p90_s,
            tpot_p99_s=r.tpot_p99_s,
        )
    cal = policy.calibration
    # the power load's steps (``planner.perf.power``) priced with the breakdown's, per GPU type
    roles = role_steps(
        gpu,
        wl,
        main,
        prefill if disagg else None,
        float(r.decode_batch[0]),
        prefill_gpu if disagg else None,
    )
    steps, decode_cost, role_costs = step_breakdowns(
        m, gpu, main, pre, cal, r, wl, disagg, pre_gpu, roles
    )
    rate = float(r.requests_per_s[0])
    loads = [role_load(m, g, c, rate) for g, c in zip(roles, role_costs, strict=True)]
    own, bands_source = deployment_bands(
        m,
        gpu,
        name,
        "disagg" if disagg else "agg",
        float(r.prefill_utilization[0]),
        main.weight_quant,
        main.kv_dtype,
        band_set,
    )
    est = Estimate(
        model=m.name,
        model_id=m.hf_id,
        checkpoint_quant=m.quant.weight_format,
        gpu=gpu.name,
        prefill_gpu=pre_gpu.name if pre_gpu.key != gpu.key else "",
        kv_link_gb_per_s=_kv_link_gb_per_s(pre_gpu, gpu, int(r.gpus[0])) if disagg else 0.0,
        backend=name,
        mode="disagg" if disagg else "agg",
        gpus=int(r.gpus[0]),
        ttft_ms=_pct(r.ttft_mean_s, r.ttft_p50_s, r.ttft_p90_s, r.ttft_p99_s),
        tpot_ms=_pct(r.tpot_mean_s, r.tpot_p50_s, r.tpot_p90_s, r.tpot_p99_s),
        output_tok_s_per_gpu=float(r.output_tok_s_per_gpu[0]),
        output_tok_s_per_user=float(r.output_tok_s_per_user[0]),
        requests_per_s=float(r.requests_per_s[0]),
        decode_batch=float(r.decode_batch[0]),
        prefill_utilization=float(r.prefill_utilization[0]),
        kv_transfer_ms=float(r.kv_transfer_s[0]) * 1e3,
        step_breakdown=steps,
        memory=mem,
        prefill_memory=pmem,
        provenance={
            **_provenance(policy, decode_cost),
            "kernels": kernel_source(gpu),
            "bands": bands_source,
            **_spec_provenance(wl),
        },
        provenance_mix=source_shares(decode_cost),
        saturated=capacity is not None,
        offered_requests_per_s=wl.rate_per_s,
        capacity_requests_per_s=capacity,
    )
    return with_bands(est, own, wl.closed_loop, band_set.table.level), loads


def _kv_link_gb_per_s(prefill_gpu: GpuSpec, gpu: GpuSpec, gpus: int) -> float:
    """GB/s per GPU of the prefill-to-decode KV link (``batch.kv_link_bandwidth``)."""
    return float(kv_link_bandwidth(prefill_gpu, gpu, np.array([gpus]))[0]) / 1e9


def with_bands(
    est: Estimate, bands: dict[str, LogBand], closed_loop: bool, level: float
) -> Estimate:
    """``est`` with calibrated bands (at ``level``, e.g. 0.8) on TTFT, TPOT and output tok/s per
    GPU. A closed loop's throughput moves inversely with the time per token (its band is the TPOT
    band inverted); an open loop's is the offered rate."""
    tok = est.output_tok_s_per_gpu
    tpot = bands["tpot"]
    lo, hi = (tok, tok)
    if closed_loop:
        lo, hi = tok * float(np.exp(-tpot.hi)), tok * float(np.exp(-tpot.lo))
    return est.model_copy(
        update={
            "ttft_ms": est.ttft_ms.with_band(bands["ttft"], level),
            "tpot_ms": est.tpot_ms.with_band(tpot, level),
            "output_tok_s_per_gpu_band": ValueBand(level=level, lo=lo, hi=hi),
        }
    )


SATURATION_STEPS = 40
"""Bisection steps of ``saturation_capacity`` (geometric: the rate to 3 significant figures)."""


def saturation_capacity(
    m: ModelSpec,
    gpu: GpuSpec,
    c: CandidateArrays,
    wl: Workload,
    backend: str | EnginePolicy,
    util: float,
    prefill_gpu: GpuSpec | None = None,
) -> float:
    """The highest open-loop arrival rate (requests/s, below ``wl.rate_per_s``) at which the serving
    model of candidate ``c`` is not saturated, by geometric bisection on the model itself."""

    def saturated(rate: float) -> bool:
        r = evaluate_batch(
            m,
            gpu,
            c,
            wl.model_copy(update={"rate_per_s": rate}),
            backend=backend,
            gpu_memory_utilization=util,
            prefill_gpu=prefill_gpu,
        )
        return bool(r.infeasible_reason[0] == Reason.SATURATED)

    hi = float(wl.rate_per_s or 0.0)
    lo = hi
    while lo > 1e-9 and saturated(lo):
        hi, lo = lo, lo / 8
    if lo <= 1e-9:
        return 0.0
    for _ in range(SATURATION_STEPS):
        if hi / lo < 1.0005:
            break
        mid = float(np.sqrt(lo * hi))
        lo, hi = (lo, mid) if saturated(mid) else (mid, hi)
    return float(f"{lo:.3g}") if not saturated(float(f"{lo:.3g}")) else lo
