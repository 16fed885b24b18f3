"""Power and energy of a plan's candidates (``planner.perf.power`` over a search block).

The same load ``planner.perf.power.role_steps`` defines for ``planner estimate`` (a request: its
prompt's prefill chunks and osl / batch decode steps at the running batch; disaggregated
deployments price the prefill and decode GPUs apart), computed for many candidates at once so
``--objective energy`` can rank every candidate by joules per total token.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from hardware.errors import InfeasibleError
from hardware.spec import GpuSpec
from planner.engines.calibration import EngineCalibration
from planner.model.spec import ModelSpec
from planner.perf.batch import parallel_arrays
from planner.perf.deployment import WorkerConfig
from planner.perf.estimate import estimate
from planner.perf.opgraph import StepMix
from planner.perf.power import (
    HOURS_PER_DAY,
    J_PER_KWH,
    Activity,
    PowerParams,
    PowerSummary,
    RoleLoad,
    board_power_w,
    load_params,
    power_summary,
    step_work,
)
from planner.perf.pricer import default_pricer
from planner.perf.serving import free_chunk, prompt_chunks
from planner.perf.step import price_steps
from planner.workload.spec import Workload
from solvers.candidates import Block
from solvers.plan_models import PlanRequest
from solvers.space import Workers


class Evaluated(Protocol):
    """What this module reads of ``solvers.plan_core.Evaluated`` (every candidate of a request,
    flattened, with a way back to its block)."""

    req: PlanRequest
    model: ModelSpec
    blocks: list[Block]
    prices: list[float]
    block_of: np.ndarray
    local: np.ndarray
    gpus: np.ndarray
    predicted_ok: np.ndarray
    cost_per_hour: np.ndarray


Steps = list[tuple[StepMix, np.ndarray]]
"""(step mix of K candidates, times each request runs it) of one role."""


def _activity(
    m: ModelSpec,
    gpu: GpuSpec,
    w: Workers,
    rows: np.ndarray,
    steps: Steps,
    cal: EngineCalibration,
    rps_per_worker: np.ndarray,
) -> Activity:
    """Activity of one GPU of workers ``w[rows]`` serving ``rps_per_worker`` requests/s each
    (pipeline sizes priced apart: a step's hops count its rows' largest pp)."""
    busy, flops, nbytes = (np.zeros(rows.size) for _ in range(3))
    for pp in np.unique(w.pp[rows]):
        g = np.flatnonzero(w.pp[rows] == pp)
        r = rows[g]
        par = parallel_arrays(gpu, w.tp[r], w.pp[r], w.dp[r], w.ep[r], w.quant[r], w.kv[r])
        sub = [(_take(mix, g), times[g]) for mix, times in steps]
        priced = price_steps(
            m, [(par, s) for s, _ in sub], default_pricer(gpu), **cal.step_kwargs()
        )
        for (mix, times), cost in zip(sub, priced, strict=True):
            f, b = step_work(m, par, mix)
            busy[g] += times * cost.by_kind_s[:-1].sum(axis=0)
            flops[g] += times * f
            nbytes[g] += times * b
    return Activity(rps_per_worker * busy, rps_per_worker * flops, rps_per_worker * nbytes)


def _take(mix: StepMix, g: np.ndarray) -> StepMix:
    return StepMix(*(np.asarray(getattr(mix, f))[g] for f in StepMix.__dataclass_fields__))


def _prefill_steps(isl_c: np.ndarray, free: np.ndarray) -> tuple[StepMix, np.ndarray]:
    z = np.zeros(isl_c.size)
    chunks, own, prior = prompt_chunks(isl_c, free)
    return StepMix(z, z, own, own, prior), chunks


def block_loads(
    m: ModelSpec,
    b: Block,
    idx: np.ndarray,
    isl: float,
    osl: float,
    prefix_hit: float,
    cal: EngineCalibration,
) -> list[tuple[GpuSpec, np.ndarray, Activity]]:
    """Per role of candidates ``idx`` of ``b``: (its GPU type, GPUs of the role, activity of
    each GPU)."""
    k, r = idx.size, b.res
    batch = np.maximum(r.decode_batch[idx], 1.0)
    z = np.zeros(k)
    decode = (StepMix(batch, np.full(k, isl + osl / 2), z, z, z), osl / batch)
    isl_c = np.full(k, max(isl * (1 - prefix_hit), 1.0))
    rps = r.requests_per_s[idx]
    if b.mode == "agg":
        w = b.workers
        assert w is not None
        reps = b.replicas[idx].astype(float)
        pre = _prefill_steps(isl_c, free_chunk(w.chunk[idx].astype(float), batch))
        act = _activity(m, b.gpu, w, idx, [pre, decode], cal, rps / reps)
        return [(b.gpu, w.gpus_per_worker[idx] * reps, act)]
    assert b.units is not None and b.prefill is not None and b.decode is not None
    u = b.units
    p, d = u.p[idx], u.d[idx]
    x, y = u.x[idx].astype(float), u.y[idx].astype(float)
    pre = _prefill_steps(isl_c, b.prefill.chunk[p].astype(float))
    pg = b.pre_gpu
    return [
        (pg, b.prefill.gpus_per_worker[p] * x, _activity(m, pg, b.prefill, p, [pre], cal, rps / x)),
        (
            b.gpu,
            b.decode.gpus_per_worker[d] * y,
            _activity(m, b.gpu, b.decode, d, [decode], cal, rps / y),
        ),
    ]


def j_per_total_token(
    ev: Evaluated, rows: np.ndarray, prm: PowerParams | None = None
) -> np.ndarray:
    """Board joules per prompt + output token of candidates ``rows`` of ``ev`` (inf where the
    candidate serves nothing)."""
    prm = prm or load_params()
    out = np.full(rows.size, np.inf)
    cal, hit = ev.req.engine().calibration, ev.req.prefix_hit
    for k, b in enumerate(ev.blocks):
        sel = np.flatnonzero(ev.block_of[rows] == k)
        if sel.size == 0:
            continue
        idx = ev.local[rows[sel]]
        watts = np.zeros(sel.size)
        for g, gpus, act in block_loads(ev.model, b, idx, ev.req.isl, ev.req.osl, hit, cal):
            watts += gpus * board_power_w(g, act, prm)
        tok_s = _total_tok_s(b, idx, ev.req.isl)
        out[sel] = np.where(tok_s > 0, watts / np.maximum(tok_s, 1e-12), np.inf)
    return out


def energy_score(ev: Evaluated) -> np.ndarray:
    """Minus joules per total token of every candidate predicted to serve (-inf for the rest);
    what ``--objective energy`` maximises (``Evaluated.score`` applies the budget). Computed once
    per ``ev``."""
    cached = ev.__dict__.get(_CACHE)
    if cached is None:
        cached = np.full(ev.gpus.size, -np.inf)
        rows = np.flatnonzero(ev.predicted_ok)
        if rows.size:
            cached[rows] = -j_per_total_token(ev, rows)
        cached = np.where(np.isfinite(cached), cached, -np.inf)
        ev.__dict__[_CACHE] = cached
    return np.asarray(cached).copy()


_CACHE = "_energy_score"


def choice_power(ev: Evaluated, i: int) -> PowerSummary:
    """The ``power`` object of candidate ``i`` (``planner estimate``'s, at the request's
    electricity price and PUE)."""
    b, j = ev.blocks[ev.block_of[i]], np.array([int(ev.local[i])])
    cal = ev.req.engine().calibration
    loads = [
        RoleLoad(
            int(round(float(gpus[0]))),
            Activity(a.busy, a.flops_per_s, a.bytes_per_s),
            g if g.key != b.gpu.key else None,
        )
        for g, gpus, a in block_loads(
            ev.model, b, j, ev.req.isl, ev.req.osl, ev.req.prefix_hit, cal
        )
    ]
    r = b.res
    p = power_summary(
        b.gpu,
        loads,
        output_tok_s=float(r.output_tok_s_per_gpu[j[0]] * r.gpus[j[0]]),
        total_tok_s=float(_total_tok_s(b, j, ev.req.isl)[0]),
        price_per_gpu_hour=ev.prices[int(ev.block_of[i])],
        electricity_price=ev.req.electricity_price,
        pue=ev.req.pue,
    )
    # the GPUs paid for are the plan's (whole purchase units), as its cost_per_hour_usd
    gpu_cost = float(ev.cost_per_hour[i])
    energy = p.facility_kw * p.electricity_price_usd_per_kwh
    prov = dict(p.provenance)
    if p.clock_ratio < 1.0:
        prov["clock"] = (
            f"the demand exceeds the board limit: the GPU runs at {p.clock_ratio:.3g} of its "
            "clock; the plan's latencies and throughput are priced at full clock (`planner "
            "estimate` of this deployment prices the lower clock)"
        )
    return p.model_copy(
        update={
            "gpu_cost_usd_per_hour": gpu_cost,
            "total_cost_usd_per_hour": gpu_cost + energy,
            "provenance": prov,
        }
    )


def _total_tok_s(b: Block, idx: np.ndarray, isl: float) -> np.ndarray:
    """Prompt + output tokens/s of the whole deployment (``planner estimate``'s count)."""
    r = b.res
    return r.output_tok_s_per_gpu[idx] * r.gpus[idx] + r.requests_per_s[idx] * isl


ENERGY_COLUMNS: tuple[str, ...] = (
    "kwh_per_million_total_tokens",
    "energy_cost_per_million_total_tokens_usd",
    "avg_power_w_per_gpu",
    "deployment_kw",
    "j_per_output_token",
    "j_per_total_token",
    "kwh_per_day",
    "energy_cost_usd_per_day",
    "gpus_and_energy_cost_per_hour_usd",
)
"""Energy columns of sweep and fleet results (facility kWh: board energy x PUE)."""


def energy_fields(p: PowerSummary | None) -> dict[str, float | None]:
    """``ENERGY_COLUMNS`` of a power summary (None throughout when there is none)."""
    if p is None:
        return dict.fromkeys(ENERGY_COLUMNS)
    kwh_per_mtok = p.j_per_total_token * 1e6 * p.pue / J_PER_KWH
    return {
        "kwh_per_million_total_tokens": kwh_per_mtok,
        "energy_cost_per_million_total_tokens_usd": kwh_per_mtok * p.electricity_price_usd_per_kwh,
        "avg_power_w_per_gpu": p.avg_power_w_per_gpu,
        "deployment_kw": p.deployment_kw,
        "j_per_output_token": p.j_per_output_token,
        "j_per_total_token": p.j_per_total_token,
        "kwh_per_day": p.kwh_per_day,
        "energy_cost_usd_per_day": p.energy_cost_usd_per_day,
        "gpus_and_energy_cost_per_hour_usd": p.total_cost_usd_per_hour,
    }


def energy_settings(electricity_price: float | None, pue: float | None) -> dict[str, float]:
    """The plan-request keys of a spec's ``electricity_price`` / ``pue`` (only those given)."""
    out = {"electricity_price": electricity_price, "pue": pue}
    return {k: v for k, v in out.items() if v is not None}


def mean_load_power(
    m: ModelSpec,
    gpu: GpuSpec,
    agg: WorkerConfig,
    wl: Workload,
    backend: str,
    gpus_bought: int,
    price_per_gpu_hour: float,
    electricity_price: float,
    pue: float,
) -> PowerSummary | None:
    """The ``power`` object of ``planner capacity``: ``agg`` (its replicas as workers) serving
    ``wl``, as ``planner estimate`` prices it (a load above the replicas' capacity: at their
    capacity); GPU cost of ``gpus_bought``. None when the shape does not fit in memory."""
    try:
        est = estimate(
            m, gpu, wl, backend=backend, agg=agg, electricity_price=electricity_price, pue=pue
        )
    except InfeasibleError:
        return None
    p = est.power
    if p is None:
        return None
    gpu_cost = gpus_bought * price_per_gpu_hour
    energy = p.facility_kw * p.electricity_price_usd_per_kwh
    return p.model_copy(
        update={"gpu_cost_usd_per_hour": gpu_cost, "total_cost_usd_per_hour": gpu_cost + energy}
    )


def replica_watts(ev: Evaluated, i: int) -> float:
    """Board watts of one replica of candidate ``i`` (an aggregated deployment of replicas) at
    its operating point."""
    b = ev.blocks[ev.block_of[i]]
    reps = max(float(b.replicas[ev.local[i]]), 1.0)
    return choice_power(ev, i).deployment_kw * 1e3 / reps


class FleetPower(BaseModel):
    """Board power and energy of a fleet, each replica at its operating point (the requests/s it
    is sized for; an upper bound where the classes' rates leave replicas slack)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    board_kw: float = Field(description="Board power of all replicas, kW.")
    facility_kw: float = Field(description="board_kw x PUE, kW.")
    j_per_total_token: float = Field(
        description="Board joules per prompt + output token at the replicas' operating points."
    )
    kwh_per_day: float = Field(description="Facility energy per day, kWh.")
    energy_cost_usd_per_day: float = Field(description="kwh_per_day x electricity price, USD.")
    gpus_and_energy_cost_per_hour_usd: float = Field(description="GPUs bought plus energy, USD.")
    electricity_price_usd_per_kwh: float = Field(description="Electricity price used, USD/kWh.")
    pue: float = Field(description="Power usage effectiveness used.")


def fleet_power(
    watts: float, total_tok_s: float, gpu_cost_per_hour: float, electricity_price: float, pue: float
) -> FleetPower:
    """``FleetPower`` of replicas drawing ``watts`` while processing ``total_tok_s`` tokens/s."""
    kw = watts / 1e3
    kwh_day = kw * pue * HOURS_PER_DAY
    return FleetPower(
        board_kw=kw,
        facility_kw=kw * pue,
        j_per_total_token=watts / max(total_tok_s, 1e-12),
        kwh_per_day=kwh_day,
        energy_cost_usd_per_day=kwh_day * electricity_price,
        gpus_and_energy_cost_per_hour_usd=gpu_cost_per_hour + kw * pue * electricity_price,
        electricity_price_usd_per_kwh=electricity_price,
        pue=pue,
    )
