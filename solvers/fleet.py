"""Fleet MILP: replicas per workload class, configuration and GPU type at minimum $/hour.

``solve_fleet(spec) -> FleetResult``. For every (class, GPU type) the planner's search gives the
SLO-meeting aggregated operating points; per worker size only the highest-throughput point can be
optimal, so those become the options o with requests/s ``r_o``, GPUs ``g_o`` and price ``c_o``
(Mélange-style, joined with the parallelism choice)::

    min  sum_t c_t u_t U_t   (c_t $/GPU-hour of type t; U_t whole purchase units of u_t GPUs:
                             u_t U_t >= sum_{o on t} g_o n_o; with u_t = 1, sum_o c_o g_o n_o)
    s.t. sum_{o of class k} r_o n_o >= R_k           for every class k
         sum_{o on GPU type t} g_o n_o <= available_t for every GPU type t,   n_o integer >= 0

With ``disagg: true`` a class may also be served by one disaggregated unit sized for its whole
rate by ``planner plan --mode disagg`` over the pools' types: its prefill and decode workers on
one type or on two (a pair of types), each role's GPUs counted on its own pool (g_o on the decode
type, gp_o on the prefill type) and bought at that pool's price.
"""

from __future__ import annotations

import itertools
import time
from pathlib import Path
from typing import Literal

import numpy as np
import pulp
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hardware.catalog import get_gpu
from hardware.errors import InfeasibleError, PlannerInputError
from hardware.input_files import read_yaml
from planner.engines import DEFAULT_ENGINE
from planner.perf.power import ELECTRICITY_PRICE_USD_PER_KWH, PUE
from solvers.counts import MAX_BUDGET_GPUS
from solvers.milp import MilpOutcome, solve
from solvers.plan_core import evaluate_request
from solvers.plan_models import (
    CONFIDENCE_HELP,
    DEFAULT_CONFIDENCE,
    Objective,
    PlanRequest,
    SpecConfidence,
)
from solvers.power_plan import FleetPower, energy_score, fleet_power, replica_watts
from solvers.purchase import role_gpus_bought

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class WorkloadClass(BaseModel):
    """One class of traffic with its own lengths and SLOs."""

    model_config = _FROZEN
    name: str = Field(description="Name of the class.")
    model: str = Field(description="Model name, HF id or config.json path.")
    rate_per_s: float = Field(gt=0, le=1e9, description="Requests/s to serve.")
    isl: int = Field(ge=1, le=10_000_000, description="Input tokens per request.")
    osl: int = Field(ge=1, le=10_000_000, description="Output tokens per request.")
    ttft_ms: float = Field(gt=0, le=1e9, description="TTFT SLO, ms.")
    tpot_ms: float = Field(gt=0, le=1e9, description="TPOT SLO, ms.")
    percentile: str = Field(
        default="p90",
        pattern="^p(50|90|99)$",
        description="Percentile the SLOs apply to (p50, p90 or p99).",
    )


class GpuPool(BaseModel):
    """A GPU type the fleet may use."""

    model_config = _FROZEN
    gpu: str = Field(description="GPU name.")
    available: int = Field(ge=0, le=100_000, description="GPUs of this type that can be rented.")
    price_per_gpu_hour: float | None = Field(
        default=None, gt=0, le=1e6, description="Default: the GPU spec's price."
    )
    purchase_unit_gpus: int | None = Field(
        default=None,
        ge=1,
        le=1_024,
        description="GPUs bought together; the pool's GPUs are bought in whole units (default: "
        "the GPU spec's purchase_unit_gpus, e.g. 4 for an NVL72 tray).",
    )


class FleetSpec(BaseModel):
    """``planner fleet --spec fleet.yaml``."""

    model_config = _FROZEN
    classes: tuple[WorkloadClass, ...] = Field(
        min_length=1, description="Workload classes to serve."
    )
    gpus: tuple[GpuPool, ...] = Field(min_length=1, description="GPU pools to draw from.")
    max_gpus_per_replica: int = Field(
        default=8, ge=1, le=1_024, description="Largest replica considered, GPUs."
    )
    backend: str = Field(default=DEFAULT_ENGINE, description="Engine whose calibration to use.")
    objective: Objective = Field(
        default="cost",
        description="cost: the lowest $/hour of the fleet's GPUs (ties: fewer GPUs); gpus and "
        "throughput-per-gpu: the fewest GPUs (at the classes' fixed rates the most output "
        "tokens/s per GPU); energy: the least board power at the classes' rates (fewest joules "
        "per total token), each replica at its most energy-efficient SLO-meeting point.",
    )
    confidence: SpecConfidence = Field(
        default=DEFAULT_CONFIDENCE, ge=0, le=1, description=CONFIDENCE_HELP + " Every class."
    )
    electricity_price: float = Field(
        default=ELECTRICITY_PRICE_USD_PER_KWH, ge=0, le=10, description="USD per kWh."
    )
    pue: float = Field(default=PUE, ge=1, le=5, description="Facility power / IT power.")
    disagg: bool = Field(
        default=False,
        description="Also serve a class with one disaggregated unit sized for its whole rate, its "
        "prefill and decode workers on one pool's GPU type or on two pools' (per role).",
    )


class Options(BaseModel):
    """MILP options as plain arrays (one entry per option)."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)
    klass: tuple[int, ...] = Field(description="Workload class index of each option.")
    gtype: tuple[int, ...] = Field(description="GPU pool index of each option.")
    gpus: tuple[int, ...] = Field(description="GPUs per replica of each option.")
    rps: tuple[float, ...] = Field(description="Requests/s one replica serves within the SLOs.")
    price: tuple[float, ...] = Field(description="USD per hour of one replica.")
    config: tuple[str, ...] = Field(description="Short description of each option.")
    watts: tuple[float, ...] = Field(
        default=(),
        description="Board watts of one replica at its operating point (solvers.power_plan); "
        "the energy objective needs one per option.",
    )
    ttft_ms: tuple[float, ...] = Field(
        default=(),
        description="TTFT at the class's percentile as checked against its SLO (band edge at the "
        "spec's confidence), ms, at the option's rate.",
    )
    tpot_ms: tuple[float, ...] = Field(default=(), description="TPOT, as ``ttft_ms``, ms.")
    pre_gtype: tuple[int, ...] = Field(
        default=(),
        description="Pool index of each option's prefill workers (disaggregated units; empty "
        "when every option is aggregated).",
    )
    pre_gpus: tuple[int, ...] = Field(
        default=(),
        description="GPUs of each option's prefill workers on pool ``pre_gtype`` (0: "
        "aggregated; ``gpus`` then holds all its GPUs).",
    )

    def on_pool(self, o: int, t: int) -> int:
        """GPUs option ``o`` uses on pool ``t`` per replica."""
        pre = self.pre_gpus[o] if self.pre_gpus else 0
        on_pre = pre if self.pre_gtype and self.pre_gtype[o] == t else 0
        return (self.gpus[o] if self.gtype[o] == t else 0) + on_pre


OPTION_COLUMNS = ("klass", "gtype", "gpus", "rps", "price", "config", "watts", "ttft_ms", "tpot_ms")
"""The columns every option fills (``pre_gtype`` / ``pre_gpus`` only with disaggregated units)."""


class Assignment(BaseModel):
    """Replicas of one configuration serving one class."""

    model_config = _FROZEN
    workload_class: str = Field(description="Workload class served.")
    gpu: str = Field(description="GPU name (of the decode workers of a disaggregated unit).")
    prefill_gpu: str = Field(
        default="", description="GPU of a disaggregated unit's prefill workers (else empty)."
    )
    prefill_gpus_per_replica: int = Field(
        default=0, description="GPUs of a disaggregated unit's prefill workers (else 0)."
    )
    config: str = Field(description="Short description of one replica.")
    replicas: int = Field(description="Replicas assigned.")
    gpus_per_replica: int = Field(description="GPUs of one replica.")
    requests_per_s_per_replica: float = Field(
        description="Requests/s one replica serves within the SLOs."
    )
    cost_per_hour_usd: float = Field(description="USD per hour of these replicas.")
    board_kw: float = Field(
        default=0.0, description="Board power of these replicas at their operating point, kW."
    )
    ttft_ms: float | None = Field(
        default=None,
        description="TTFT at the class's percentile as checked against its SLO, ms (at the "
        "rate of requests_per_s_per_replica).",
    )
    tpot_ms: float | None = Field(default=None, description="TPOT, as ttft_ms, ms.")


class FleetResult(BaseModel):
    """Optimal fleet and the proof the solver gave."""

    model_config = _FROZEN
    assignments: tuple[Assignment, ...] = Field(
        description="Replicas per workload class and GPU type."
    )
    cost_per_hour_usd: float = Field(description="USD per hour of the whole fleet.")
    gpus_by_type: dict[str, int] = Field(description="GPUs used per GPU type.")
    gpus_bought_by_type: dict[str, int] = Field(
        default_factory=dict,
        description="GPUs bought per GPU type (whole purchase units; the cost is of these).",
    )
    solver: str = Field(description="MILP solver used.")
    status: str = Field(description="Solver status.")
    solution_status: str = Field(description="Status of the returned solution.")
    optimal: bool = Field(description="The solver proved the fleet optimal.")
    solve_seconds: float = Field(description="Solver wall time, s.")
    options: int = Field(description="Replica options the MILP chose from.")
    binding_constraint: str = Field(
        description="What limits the fleet: pools used up, or cost (each class at its cheapest).",
    )
    power: FleetPower | None = Field(
        default=None, description="Board power and energy of the fleet (solvers.power_plan)."
    )


def load_spec(path: str | Path) -> FleetSpec:
    """Read a fleet YAML; problems become one PlannerInputError naming the field."""
    raw = read_yaml(path, "fleet YAML", "--spec")
    try:
        return FleetSpec.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"]).lstrip(".")
        raise PlannerInputError(f"--spec {path}: {where or 'spec'}", err["msg"]) from None


def class_request(
    spec: FleetSpec,
    c: WorkloadClass,
    gpus: tuple[str, ...],
    max_gpus: int,
    mode: Literal["agg", "disagg"],
    rate_per_s: float | None = None,
) -> PlanRequest:
    """The plan request of class ``c`` on ``gpus`` (``rate_per_s``: sized for that rate; None:
    a replica at its best throughput). One replica's GPUs are counted (``node_gpus`` 1): the MILP
    buys each pool's whole purchase units."""
    return PlanRequest(
        model=c.model,
        gpus=gpus,
        max_gpus=max_gpus,
        node_gpus=1,
        rate_per_s=rate_per_s,
        isl=c.isl,
        osl=c.osl,
        ttft_ms=c.ttft_ms,
        tpot_ms=c.tpot_ms,
        percentile=c.percentile,
        mode=mode,
        backend=spec.backend,
        confidence=spec.confidence,
    )


def build_options(spec: FleetSpec) -> Options:
    """Best SLO-meeting agg operating point per (class, GPU type, worker size)."""
    rows: dict[str, list[object]] = {k: [] for k in OPTION_COLUMNS}
    for k, c in enumerate(spec.classes):
        for t, pool in enumerate(spec.gpus):
            req = class_request(spec, c, (pool.gpu,), spec.max_gpus_per_replica, "agg")
            ev = evaluate_request(req)
            ok = ev.feasible()
            if not ok.any():
                continue
            per_rep = ev.rps / np.maximum(ev.blocks[0].replicas[ev.local], 1)
            unit = ev.gpus // np.maximum(ev.blocks[0].replicas[ev.local], 1)
            price = pool.price_per_gpu_hour or get_gpu(pool.gpu).price_per_gpu_hour_usd
            best = energy_score(ev) if spec.objective == "energy" else per_rep
            for g in np.unique(unit[ok]):
                sel = np.flatnonzero(ok & (unit == g))
                i = int(sel[np.argmax(best[sel])])
                for key, val in zip(
                    rows,
                    (
                        k,
                        t,
                        int(g),
                        float(per_rep[i]),
                        price,
                        ev.summary(i).replace(
                            " x" + str(int(ev.blocks[0].replicas[ev.local[i]])), " x1"
                        ),
                        replica_watts(ev, i),
                        float(ev.ttft_edge[i]),
                        float(ev.tpot_edge[i]),
                    ),
                    strict=True,
                ):
                    rows[key].append(val)
    if spec.disagg:
        return _with_disagg(spec, rows)
    return Options.model_validate({k: tuple(v) for k, v in rows.items()})


def _pool_price(pool: GpuPool) -> float:
    return pool.price_per_gpu_hour or get_gpu(pool.gpu).price_per_gpu_hour_usd


def _with_disagg(spec: FleetSpec, rows: dict[str, list[object]]) -> Options:
    """The aggregated options plus, per class and per (prefill pool, decode pool), the cheapest
    disaggregated unit meeting the class's SLOs at its whole rate (one search per class over every
    pool's type, pairs of two types included)."""
    pre_t: list[object] = list(rows["gtype"])  # aggregated: all on its own pool, gpus holds all
    pre_g: list[object] = [0] * len(pre_t)
    keys = [get_gpu(p.gpu).key for p in spec.gpus]
    for k, c in enumerate(spec.classes):
        budget = max(1, min(MAX_BUDGET_GPUS, sum(p.available for p in spec.gpus)))
        pools = tuple(p.gpu for p in spec.gpus)
        req = class_request(spec, c, pools, budget, "disagg", c.rate_per_s)
        ev = evaluate_request(req)
        ok = ev.feasible()
        used = [role_gpus_bought(b, 1) for b in ev.blocks]
        pre = np.concatenate([p for p, _ in used])
        dec = np.concatenate([d for _, d in used])
        pre_key = np.array([ev.prefill_gpu_of(i) for i in range(ok.size)])
        dec_key = np.array([ev.gpu_of(i) for i in range(ok.size)])
        for tp, tdec in itertools.product(range(len(keys)), repeat=2):
            mine = np.flatnonzero(ok & (pre_key == keys[tp]) & (dec_key == keys[tdec]))
            if mine.size == 0:
                continue
            cost = pre[mine] * _pool_price(spec.gpus[tp]) + dec[mine] * _pool_price(spec.gpus[tdec])
            if spec.objective == "energy":
                cost = -energy_score(ev)[mine]
            i = int(mine[np.argmin(cost)])
            pre_gpus = int(pre[i]) if tp != tdec else 0
            for key, val in zip(
                rows,
                (
                    k,
                    tdec,
                    int(dec[i]) + int(pre[i]) - pre_gpus,
                    c.rate_per_s,
                    _pool_price(spec.gpus[tdec]),
                    ev.summary(i),
                    replica_watts(ev, i),
                    float(ev.ttft_edge[i]),
                    float(ev.tpot_edge[i]),
                ),
                strict=True,
            ):
                rows[key].append(val)
            pre_t.append(tp)
            pre_g.append(pre_gpus)
    return Options.model_validate(
        {k: tuple(v) for k, v in rows.items()}
        | {"pre_gtype": tuple(pre_t), "pre_gpus": tuple(pre_g)}
    )


def _price_on(spec: FleetSpec, opt: Options, t: int) -> float:
    """$/GPU-hour on pool ``t``: its options' price (each option carries its pool's), else the
    pool's own."""
    return next((opt.price[o] for o in range(len(opt.gpus)) if opt.gtype[o] == t), None) or (
        _pool_price(spec.gpus[t])
    )


def purchase_unit_of(pool: GpuPool) -> int:
    """GPUs per purchase unit of ``pool``: its own figure, else its GPU spec's."""
    return pool.purchase_unit_gpus or get_gpu(pool.gpu).purchase_unit_gpus


TIE_USD_PER_GPU_HOUR = 1e-4
"""$/hour added per GPU in the cost objective so equal-cost fleets go to fewer GPUs (far below any
price's precision)."""


TIE_W_PER_GPU = 1e-3
"""Watts added per GPU in the energy objective so equal-power fleets go to fewer GPUs."""


def solve_options(spec: FleetSpec, opt: Options) -> tuple[list[int], MilpOutcome]:
    """The fleet MILP on prepared options: replicas per option and the solver outcome."""
    assert spec.objective != "energy" or len(opt.watts) == len(opt.gpus), "watts per option"
    prob = pulp.LpProblem("fleet", pulp.LpMinimize)
    n = [pulp.LpVariable(f"n_{o}", 0, None, cat="Integer") for o in range(len(opt.gpus))]
    cost = []
    for t, pool in enumerate(spec.gpus):  # each pool pays for whole purchase units
        mine = [o for o in range(len(n)) if opt.on_pool(o, t)]
        used = pulp.lpSum(opt.on_pool(o, t) * n[o] for o in mine)
        if spec.objective == "energy":  # the least board power (ties: fewer GPUs)
            watts = pulp.lpSum(opt.watts[o] * n[o] for o in mine if opt.gtype[o] == t)
            cost.append(watts + TIE_W_PER_GPU * used)
            continue
        if spec.objective != "cost":  # the fewest GPUs
            cost.append(used)
            continue
        # ties in $/hour go to fewer GPUs: GPUs weigh less than a cent per hour
        tie = TIE_USD_PER_GPU_HOUR * used
        unit, price = purchase_unit_of(pool), _price_on(spec, opt, t)
        if unit == 1 or not mine:
            cost.append(price * used + tie)
            continue
        units = pulp.LpVariable(f"units_{t}", 0, pool.available // unit, cat="Integer")
        prob += unit * units >= used, f"bought_{t}"
        cost.append(price * unit * units + tie)
    prob += pulp.lpSum(cost)
    for k, c in enumerate(spec.classes):
        prob += (
            pulp.lpSum(opt.rps[o] * n[o] for o in range(len(n)) if opt.klass[o] == k)
            >= c.rate_per_s,
            f"rate_{k}",
        )
    for t, pool in enumerate(spec.gpus):
        prob += (
            pulp.lpSum(opt.on_pool(o, t) * n[o] for o in range(len(n))) <= pool.available,
            f"avail_{t}",
        )
    out = solve(prob)
    return [round(v.value() or 0) for v in n], out


def _power(spec: FleetSpec, rows: list[Assignment], gpu_cost: float) -> FleetPower:
    """Board power of the assignments, each replica at its operating point."""
    tokens = {c.name: c.isl + c.osl for c in spec.classes}
    tok_s = sum(a.replicas * a.requests_per_s_per_replica * tokens[a.workload_class] for a in rows)
    watts = sum(a.board_kw * 1e3 for a in rows)
    return fleet_power(watts, tok_s, gpu_cost, spec.electricity_price, spec.pue)


def solve_fleet(spec: FleetSpec) -> FleetResult:
    """Plan every class on every GPU type, then solve the fleet MILP (raises InfeasibleError)."""
    opt = build_options(spec)
    missing = [c.name for k, c in enumerate(spec.classes) if k not in opt.klass]
    if missing:
        raise InfeasibleError(
            "TPOT",
            f"class(es) {', '.join(missing)} meet their SLOs on none of the GPU types",
            binding_constraint="SLO",
        )
    t0 = time.perf_counter()
    reps, out = solve_options(spec, opt)
    seconds = time.perf_counter() - t0
    if not out.optimal:
        raise InfeasibleError(
            "GPU budget",
            f"no fleet serves all classes within the available GPUs (solver: "
            f"{out.status}/{out.solution_status})",
            binding_constraint="GPU budget",
        )
    used = {p.gpu: 0 for p in spec.gpus}
    rows = []
    for o, r in enumerate(reps):
        if r <= 0:
            continue
        for t, pool in enumerate(spec.gpus):
            used[pool.gpu] += r * opt.on_pool(o, t)
        pre_g = opt.pre_gpus[o] if opt.pre_gpus else 0
        pre_pool = spec.gpus[opt.pre_gtype[o]] if pre_g else None
        pre_cost = pre_g * _pool_price(pre_pool) if pre_pool is not None else 0.0
        rows.append(
            Assignment(
                workload_class=spec.classes[opt.klass[o]].name,
                gpu=spec.gpus[opt.gtype[o]].gpu,
                prefill_gpu=pre_pool.gpu if pre_pool is not None else "",
                prefill_gpus_per_replica=pre_g,
                config=opt.config[o],
                replicas=r,
                gpus_per_replica=opt.gpus[o] + pre_g,
                requests_per_s_per_replica=opt.rps[o],
                cost_per_hour_usd=r * (opt.gpus[o] * opt.price[o] + pre_cost),
                board_kw=r * opt.watts[o] / 1e3 if opt.watts else 0.0,
                ttft_ms=opt.ttft_ms[o] if opt.ttft_ms else None,
                tpot_ms=opt.tpot_ms[o] if opt.tpot_ms else None,
            )
        )
    full = [p.gpu for p in spec.gpus if p.available and used[p.gpu] >= p.available]
    bind = (
        f"GPU budget ({', '.join(full)} fully used)"
        if full
        else "energy (every class at its least-power SLO-meeting option)"
        if spec.objective == "energy"
        else "cost (every class at its cheapest SLO-meeting option)"
    )
    bought = {
        p.gpu: -(-used[p.gpu] // purchase_unit_of(p)) * purchase_unit_of(p) for p in spec.gpus
    }
    price_of = {p.gpu: _pool_price(p) for p in spec.gpus}
    # the GPUs bought: whole purchase units of each pool
    cost = float(sum(price_of.get(g, 0.0) * n for g, n in bought.items()))
    return FleetResult(
        assignments=tuple(rows),
        cost_per_hour_usd=cost,
        power=_power(spec, rows, cost),
        gpus_by_type=used,
        gpus_bought_by_type=bought,
        solver=out.solver,
        status=out.status,
        solution_status=out.solution_status,
        optimal=out.optimal,
        solve_seconds=round(seconds, 4),
        options=len(opt.gpus),
        binding_constraint=bind,
    )
