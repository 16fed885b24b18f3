"""Board power of a serving deployment, and what a power cap does to its clock.

Power of one GPU (docs/energy.md):

    P = P_idle + busy_fraction * P_tdp * u_busy + e_flop * FLOP/s + e_byte * HBM bytes/s

where, per second of the run, ``u_busy`` is the share of time the GPU runs priced kernels (clocks
up, SMs issuing: a power that grows with the board, so a fraction of its TDP) and FLOP/s and
bytes/s are the op graph's work it executes (``Activity``); e_flop and e_byte are energies per
operation (pJ, device physics: Horowitz, ISSCC 2014, tabulates both per op and per byte moved).
``P_tdp`` is the spec's ``power_watts``; ``P_idle`` its ``idle_power_w``, else ``idle_fraction *
P_tdp``. The four parameters are fitted by ``python -m lab.fit_power`` into
``planner/calibration/power.yaml``; GPUs without measured power use them as transferred.

A board limit ``cap`` (``power_cap_w``, ``--power-cap``; default the TDP) bounds P. Where the
demand exceeds it the GPU lowers its clock: dynamic power ~ C V^2 f and, in the DVFS range, V
grows about linearly with f, so P_dyn ~ f^3 (``CLOCK_LAW_SOURCE``); the clock ratio the cap
allows is ((cap - P_idle) / (P_demand - P_idle))^(1/3), and compute-bound kernel times grow by
its inverse (``clocked_gpu`` scales the GPU's FLOP/s; HBM bandwidth keeps its own clock).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from hardware.errors import PlannerInputError
from hardware.input_files import read_packaged_yaml
from hardware.spec import GpuSpec
from planner.engines.calibration import EngineCalibration
from planner.model.spec import ModelSpec
from planner.perf.batch import KvDtype, WeightQuant, parallel_arrays
from planner.perf.deployment import WorkerConfig
from planner.perf.opgraph import ParallelArrays, StepMix, step_ops
from planner.perf.pricer import default_pricer
from planner.perf.serving import free_chunk, prompt_chunks
from planner.perf.step import StepCost, price_steps
from planner.workload.spec import Workload

POWER_FILE = Path(__file__).resolve().parents[1] / "calibration" / "power.yaml"
"""Fitted power parameters (written by ``python -m lab.fit_power``)."""
CLOCK_LAW_SOURCE = (
    "dynamic CMOS power P = a C V^2 f with V roughly proportional to f in the DVFS range, so "
    "P_dyn ~ f^3: Horowitz, 'Computing's energy problem (and what we can do about it)', ISSCC "
    "2014; Le Sueur and Heiser, 'Dynamic voltage and frequency scaling: the laws of diminishing "
    "returns', HotPower 2010"
)
CLOCK_EXPONENT = 3.0
"""P_dyn ~ f^CLOCK_EXPONENT (``CLOCK_LAW_SOURCE``)."""
MIN_CLOCK_RATIO = 0.3
"""Lowest clock ratio a cap is allowed to force (GPUs throttle to roughly a third of boost at
their minimum power limit; below it the law above no longer holds)."""


@dataclass(frozen=True)
class PowerParams:
    """Dimensionless power-model parameters and where they came from."""

    idle_fraction: float
    """Idle board power / TDP (used where the spec has no ``idle_power_w``)."""
    busy_fraction: float
    """Power of a GPU busy on kernels, beyond idle and the work's own energy / TDP."""
    pj_per_flop: float
    """Energy of one tensor-core FLOP, pJ."""
    pj_per_byte: float
    """Energy of one byte read or written in HBM, pJ."""
    source: str

    def with_values(self, values: Mapping[str, float], source: str) -> PowerParams:
        """These parameters with ``values`` replacing the named ones."""
        cur = {k: getattr(self, k) for k in PARAM_NAMES}
        cur.update({k: float(v) for k, v in values.items()})
        return PowerParams(**cur, source=source)


PARAM_NAMES: tuple[str, ...] = ("idle_fraction", "busy_fraction", "pj_per_flop", "pj_per_byte")
PARAM_BOUNDS: dict[str, tuple[float, float]] = {
    "idle_fraction": (0.05, 0.5),
    "busy_fraction": (0.0, 1.0),
    "pj_per_flop": (0.0, 10.0),
    "pj_per_byte": (0.0, 500.0),
}
"""Bounds of each parameter (fractions of the TDP; pJ per FLOP; pJ per HBM byte: HBM3 reads cost
about 3.9 pJ/bit = 31 pJ/byte in the DRAM alone, O'Connor et al., MICRO 2017, plus the on-chip
movement to the SMs)."""


@lru_cache(maxsize=4)
def load_params(path: Path = POWER_FILE) -> PowerParams:
    """The fitted parameters of ``path`` (each in its bounds)."""
    try:
        raw = read_packaged_yaml(path)
    except OSError as exc:
        raise PlannerInputError(str(path), f"cannot read power parameters: {exc}") from exc
    if not isinstance(raw, dict):
        raise PlannerInputError(str(path), "cannot read power parameters: not a mapping")
    vals = {}
    for name in PARAM_NAMES:
        entry = raw.get("params", {}).get(name)
        if not isinstance(entry, dict) or not isinstance(entry.get("value"), int | float):
            raise PlannerInputError(f"{path}:params.{name}", "needs a numeric 'value'")
        lo, hi = PARAM_BOUNDS[name]
        if not lo <= float(entry["value"]) <= hi:
            raise PlannerInputError(f"{path}:params.{name}", f"must lie in [{lo}, {hi}]")
        vals[name] = float(entry["value"])
    return PowerParams(**vals, source=str(raw.get("source", path.name)))


def idle_power_w(gpu: GpuSpec, prm: PowerParams) -> float:
    """Idle board power, W: the spec's ``idle_power_w`` when cited, else the transferred
    ``idle_fraction`` of its TDP."""
    return gpu.idle_power_w if gpu.idle_power_w is not None else prm.idle_fraction * gpu.power_watts


def idle_source(gpu: GpuSpec, prm: PowerParams) -> str:
    """Where ``idle_power_w`` came from."""
    if gpu.idle_power_w is not None:
        return f"spec idle_power_w: {gpu.sources.get('idle_power_w', '')}"
    return f"transferred: idle_fraction {prm.idle_fraction:.3g} x TDP ({prm.source})"


def board_limit_w(gpu: GpuSpec, cap_w: float | None = None) -> float:
    """Board power limit, W: the smallest of TDP, the spec's ``power_cap_w`` and ``cap_w``."""
    limits = [gpu.power_watts, gpu.power_cap_w, cap_w]
    return float(min(v for v in limits if v is not None))


@dataclass(frozen=True)
class Activity:
    """Per second of the run on one GPU: kernel-busy share, FLOPs and HBM bytes executed."""

    busy: np.ndarray
    flops_per_s: np.ndarray
    bytes_per_s: np.ndarray


def step_work(m: ModelSpec, par: ParallelArrays, mix: StepMix) -> tuple[np.ndarray, np.ndarray]:
    """(FLOPs, HBM bytes) of one step on one GPU: count x per-instance work summed over its ops
    (collectives move link bytes, not HBM: left out)."""
    k = np.shape(mix.decode_reqs)[0]
    flops, nbytes = np.zeros(k), np.zeros(k)
    for op in step_ops(m, par, mix):
        if op.family != "comm":
            flops = flops + op.count * op.flops
            nbytes = nbytes + op.count * op.nbytes
    return flops, nbytes


def demand_w(gpu: GpuSpec, act: Activity, prm: PowerParams) -> np.ndarray:
    """Board power the activity would draw at full clock, W (may exceed the TDP: a limit then
    throttles the clock)."""
    busy = np.clip(act.busy, 0.0, 1.0)
    dynamic = (
        prm.busy_fraction * gpu.power_watts * busy
        + prm.pj_per_flop * 1e-12 * np.maximum(act.flops_per_s, 0.0)
        + prm.pj_per_byte * 1e-12 * np.maximum(act.bytes_per_s, 0.0)
    )
    return idle_power_w(gpu, prm) + dynamic


def board_power_w(
    gpu: GpuSpec, act: Activity, prm: PowerParams, cap_w: float | None = None
) -> np.ndarray:
    """Average board power per GPU, W: the demand, never below idle, never above the limit."""
    idle = idle_power_w(gpu, prm)
    return np.clip(demand_w(gpu, act, prm), idle, max(board_limit_w(gpu, cap_w), idle))


def clock_ratio(
    gpu: GpuSpec, act: Activity, prm: PowerParams, cap_w: float | None = None
) -> np.ndarray:
    """Clock the board limit allows over full clock (1 where the demand fits), by
    P_dyn ~ f^3 (``CLOCK_LAW_SOURCE``), at least ``MIN_CLOCK_RATIO``."""
    idle = idle_power_w(gpu, prm)
    dyn = np.maximum(demand_w(gpu, act, prm) - idle, 1e-9)
    room = max(board_limit_w(gpu, cap_w) - idle, 0.0)
    ratio = np.minimum((room / dyn) ** (1.0 / CLOCK_EXPONENT), 1.0)
    return np.maximum(ratio, MIN_CLOCK_RATIO)


def clocked_gpu(gpu: GpuSpec, ratio: float) -> GpuSpec:
    """``gpu`` at ``ratio`` of its clock: peak and measured matmul FLOP/s scaled (compute-bound
    kernel times grow by 1 / ratio; HBM bandwidth has its own clock and is kept)."""
    if ratio >= 1.0:
        return gpu
    ceil = gpu.matmul_ceiling_flops_per_s
    return gpu.model_copy(
        update={
            "peak_flops_per_s": {k: v * ratio for k, v in gpu.peak_flops_per_s.items()},
            "matmul_ceiling_flops_per_s": (
                {k: v * ratio for k, v in ceil.items()} if ceil is not None else None
            ),
        }
    )


def parse_power_caps(values: list[str] | None) -> dict[str, float]:
    """``--power-cap GPU=W`` (repeatable) -> {gpu key or alias: watts}."""
    caps: dict[str, float] = {}
    for v in values or []:
        name, sep, watts = v.partition("=")
        try:
            w = float(watts)
        except ValueError:
            w = float("nan")
        if not sep or not name.strip() or not np.isfinite(w) or w <= 0:
            raise PlannerInputError("--power-cap", f"'{v}': give GPU=WATTS, e.g. h100_nvl=350")
        caps[name.strip().lower()] = w
    return caps


def cap_for(gpu: GpuSpec, caps: Mapping[str, float]) -> float | None:
    """The ``--power-cap`` given for ``gpu`` (by key, name or alias), None if none."""
    names = {gpu.key.lower(), gpu.name.lower(), *(a.lower() for a in gpu.aliases)}
    hits = [w for n, w in caps.items() if n in names]
    return min(hits) if hits else None


@dataclass(frozen=True)
class RoleLoad:
    """GPUs of one role (aggregated workers, or the prefill / decode workers) and the activity
    of each of its GPUs."""

    gpus: int
    activity: Activity
    gpu: GpuSpec | None = None
    """The role's GPU type where it differs from the deployment's (prefill of a two-type pair)."""


@dataclass(frozen=True)
class RoleSteps:
    """One role's GPUs and the steps one request costs one of its workers (priced on ``gpu``
    with ``par``)."""

    gpus: int
    workers: int
    gpu: GpuSpec
    par: ParallelArrays
    steps: tuple[tuple[StepMix, float], ...]
    """(mix, times per request) of each step."""
    other_type: GpuSpec | None = None
    """``RoleLoad.gpu``: the role's type where it differs from the deployment's."""


def role_steps(
    gpu: GpuSpec,
    wl: Workload,
    main: WorkerConfig,
    pre: WorkerConfig | None,
    decode_batch: float,
    pre_gpu: GpuSpec | None = None,
) -> list[RoleSteps]:
    """Per role, its GPUs and a request's steps: its prompt's prefill chunks, and osl / batch of
    the decode steps at the running batch; ``pre``: the prefill worker when disaggregated, on
    ``pre_gpu`` where that differs from ``gpu``."""
    z, one = np.zeros(1), np.ones(1)
    b = max(decode_batch, 1.0)
    decode = StepMix(b * one, np.array([wl.isl.mean + wl.osl.mean / 2]), z, z, z)
    isl_c = np.array([max(wl.isl.mean * (1 - wl.prefix_hit), 1.0)])
    chunk_worker = pre or main
    free = chunk_worker.max_num_batched_tokens * one
    chunks, own, prior = prompt_chunks(isl_c, free if pre else free_chunk(free, b * one))
    prefill = (StepMix(z, z, own, own, prior), float(chunks[0]))
    dec = (decode, wl.osl.mean / b)
    main_role = (main.parallel.gpus * main.workers, main.workers, gpu, worker_par(gpu, main))
    if pre is None:
        return [RoleSteps(*main_role, (prefill, dec))]
    pg = pre_gpu or gpu
    return [
        RoleSteps(
            pre.parallel.gpus * pre.workers,
            pre.workers,
            pg,
            worker_par(pg, pre),
            (prefill,),
            pre_gpu if pg.key != gpu.key else None,
        ),
        RoleSteps(*main_role, (dec,)),
    ]


def role_load(
    m: ModelSpec, role: RoleSteps, priced: Sequence[StepCost], requests_per_s: float
) -> RoleLoad:
    """The role's GPUs and the activity of each at ``requests_per_s`` (the deployment's), its
    steps priced as ``priced`` (``price_steps`` of ``role.steps`` on ``role.gpu`` with the
    engine's constants)."""
    # the steps' rows end to end: one op graph for all of them
    par = ParallelArrays.concat([role.par] * len(role.steps))
    f, b = step_work(m, par, StepMix.concat([mix for mix, _ in role.steps]))
    times = np.array([t for _, t in role.steps])
    busy = sum(t * float(c.by_kind_s[:-1, 0].sum()) for t, c in zip(times, priced, strict=True))
    flops, nbytes = float(times @ f), float(times @ b)
    r = requests_per_s / role.workers
    act = Activity(np.array([r * busy]), np.array([r * flops]), np.array([r * nbytes]))
    return RoleLoad(role.gpus, act, role.other_type)


def role_loads(
    m: ModelSpec,
    gpu: GpuSpec,
    wl: Workload,
    main: WorkerConfig,
    pre: WorkerConfig | None,
    cal: EngineCalibration,
    requests_per_s: float,
    decode_batch: float,
    pre_gpu: GpuSpec | None = None,
) -> list[RoleLoad]:
    """Per role (``role_steps``), its GPUs and their activity at ``requests_per_s``, each role's
    steps priced on its GPU type with the engine's constants ``cal``."""
    return [
        role_load(
            m,
            role,
            price_steps(
                m,
                [(role.par, s) for s, _ in role.steps],
                default_pricer(role.gpu),
                **cal.step_kwargs(),
            ),
            requests_per_s,
        )
        for role in role_steps(gpu, wl, main, pre, decode_batch, pre_gpu)
    ]


def worker_par(gpu: GpuSpec, w: WorkerConfig) -> ParallelArrays:
    """The parallelism arrays (one candidate) of worker ``w`` on ``gpu``."""
    p = w.parallel
    one = [np.array([float(v)]) for v in (p.tp, p.pp, p.dp, p.ep)]
    wq = np.array([float(WeightQuant.of(w.weight_quant))])
    kv = np.array([float(KvDtype.of(w.kv_dtype))])
    return parallel_arrays(gpu, one[0], one[1], one[2], one[3], wq, kv)


ELECTRICITY_PRICE_USD_PER_KWH = 0.08
ELECTRICITY_PRICE_SOURCE = (
    "ASSUMPTION, editable (--electricity-price): about the US average retail price of electricity "
    "to industrial customers in 2024, 8 cents/kWh (US EIA, Electric Power Monthly, Table 5.6.A)"
)
PUE = 1.56
PUE_SOURCE = (
    "ASSUMPTION, editable (--pue): industry-average annual power usage effectiveness of data "
    "centres, 1.56 (Uptime Institute Global Data Center Survey 2024)"
)
ELECTRICITY_PRICE_HELP = "Electricity price, USD per kWh, of the GPUs' energy."
PUE_HELP = (
    "Power usage effectiveness: facility power / IT power (the GPUs' energy is scaled by it)."
)
HOURS_PER_DAY = 24.0
J_PER_KWH = 3.6e6


class PowerSummary(BaseModel):
    """Power and energy of a deployment at its load (GPU boards only: host CPUs, NICs and
    switches are not counted; the facility overhead enters through the PUE)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    avg_power_w_per_gpu: float = Field(description="Average board power per GPU, W.")
    idle_power_w_per_gpu: float = Field(description="Idle board power per GPU, W.")
    board_limit_w: float = Field(description="Board power limit per GPU (TDP or cap), W.")
    clock_ratio: float = Field(description="Clock the limit allows / full clock (1: unthrottled).")
    deployment_kw: float = Field(description="Board power of all GPUs of the deployment, kW.")
    facility_kw: float = Field(description="deployment_kw x PUE, kW.")
    j_per_output_token: float = Field(description="Board energy per output token, J.")
    j_per_total_token: float = Field(description="Board energy per prompt + output token, J.")
    kwh_per_day: float = Field(description="Facility energy per day at this load (x PUE), kWh.")
    energy_cost_usd_per_day: float = Field(description="kwh_per_day x electricity price, USD.")
    gpu_cost_usd_per_hour: float = Field(description="GPU-hours of the deployment, USD/hour.")
    total_cost_usd_per_hour: float = Field(description="GPUs plus energy, USD/hour.")
    electricity_price_usd_per_kwh: float = Field(description="Electricity price used, USD/kWh.")
    pue: float = Field(description="Power usage effectiveness used (facility / IT power).")
    provenance: dict[str, str] = Field(description="Where each number came from.")


def power_summary(
    gpu: GpuSpec,
    loads: list[RoleLoad],
    *,
    output_tok_s: float,
    total_tok_s: float,
    price_per_gpu_hour: float,
    electricity_price: float = ELECTRICITY_PRICE_USD_PER_KWH,
    pue: float = PUE,
    cap_w: float | None = None,
    prm: PowerParams | None = None,
) -> PowerSummary:
    """Power and energy of the GPUs of ``loads`` serving ``output_tok_s`` output tokens/s
    (``total_tok_s`` prompt + output) of the whole deployment; each role on its own GPU type
    (``RoleLoad.gpu``, else ``gpu``); ``cap_w`` caps ``gpu``'s roles; ``price_per_gpu_hour``:
    the mean over the deployment's GPUs."""
    prm = prm or load_params()
    gpus = sum(r.gpus for r in loads)
    typed = [(r, r.gpu or gpu, cap_w if r.gpu is None else None) for r in loads]
    watts = sum(r.gpus * float(board_power_w(g, r.activity, prm, c)[0]) for r, g, c in typed)
    clock = min(float(clock_ratio(g, r.activity, prm, c)[0]) for r, g, c in typed)
    idle = sum(r.gpus * idle_power_w(g, prm) for r, g, _ in typed) / max(gpus, 1)
    kw = watts / 1e3
    kwh_day = kw * pue * HOURS_PER_DAY
    gpu_cost = gpus * price_per_gpu_hour
    return PowerSummary(
        avg_power_w_per_gpu=watts / gpus,
        idle_power_w_per_gpu=idle,
        board_limit_w=board_limit_w(gpu, cap_w),
        clock_ratio=clock,
        deployment_kw=kw,
        facility_kw=kw * pue,
        j_per_output_token=watts / max(output_tok_s, 1e-12),
        j_per_total_token=watts / max(total_tok_s, 1e-12),
        kwh_per_day=kwh_day,
        energy_cost_usd_per_day=kwh_day * electricity_price,
        gpu_cost_usd_per_hour=gpu_cost,
        total_cost_usd_per_hour=gpu_cost + kw * pue * electricity_price,
        electricity_price_usd_per_kwh=electricity_price,
        pue=pue,
        provenance={
            "power_model": f"planner/perf/power.py; parameters: {prm.source}",
            "idle_power": idle_source(gpu, prm),
            "board_limit": "TDP (spec power_watts), spec power_cap_w or --power-cap: the smallest",
            "clock_law": CLOCK_LAW_SOURCE,
            "electricity_price": ELECTRICITY_PRICE_SOURCE,
            "pue": PUE_SOURCE,
        },
    )
