"""Vectorized evaluation of many candidate configs at once (the solvers' entry point).

    from planner.perf.batch import CandidateArrays, evaluate_batch
    cands = CandidateArrays.from_lists(tp=[1, 2, 4], max_num_seqs=[256] * 3, concurrency=[64] * 3)
    load = fixed(4000, 500, concurrency=64)
    res = evaluate_batch(load_model("llama-3.1-70b"), get_gpu("h200"), cands, load)
    res.ttft_p99_s, res.tpot_mean_s, res.output_tok_s_per_gpu, res.feasible   # arrays, shape (K,)

``CandidateArrays`` holds one entry per candidate (shape (K,), every column): tp, pp, dp, ep,
max_num_seqs, max_num_batched_tokens, ``weight_quant`` and ``kv_dtype`` (``WeightQuant`` /
``KvDtype`` values), concurrency with the mask ``own_concurrency`` (True: the row is a closed loop
of that many clients; False: the workload's own load, its concurrency or its rate), ``mode``
(``DeployMode``), worker counts and the prefill worker's columns (``prefill_*``; the decode
worker's values when not given; aggregated rows ignore them).
``ResultArrays`` holds TTFT/TPOT mean and p50/p90/p99 (seconds), requests/s, output tok/s per GPU
and per user, decode batch, prefill utilization, KV capacity (sequences), ``feasible`` (fits in
memory and not saturated) and ``infeasible_reason`` (``Reason`` values). The same code
path serves ``planner.perf.estimate.estimate`` (K = 1), so the two always agree.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import IntEnum
from typing import Self

import numpy as np
from scipy import special

from hardware.spec import GpuSpec
from kernels_db.costs import peak_flops
from planner.engines import DEFAULT_ENGINE, Engine
from planner.engines.calibration import EngineCalibration, EnginePolicy, policy_of
from planner.model.spec import ModelSpec
from planner.perf import memory as memory_batch
from planner.perf import queueing
from planner.perf.memory_plan import KV_BYTES, WEIGHT_BYTES
from planner.perf.opgraph import ParallelArrays
from planner.perf.pricer import default_pricer
from planner.perf.serving import (
    LoadArrays,
    ServingArrays,
    WorkerArrays,
    kv_transfer_s,
    solve_agg,
    solve_disagg,
)
from planner.perf.step import OpPricer
from planner.perf.workers import (
    NOT_RECORDED,
    Constants,
    RecordedLaunch,
    RoleColumns,
    WorkerSetting,
    constant,
    prefill_kernels,
    worker_arrays,
)
from planner.workload.spec import Workload


class _Named(IntEnum):
    """An integer code with a lower-case name (the name users and configs spell)."""

    @property
    def label(self) -> str:
        """The lower-case name ('bf16', 'disagg', 'saturated')."""
        return self.name.lower()

    @classmethod
    def of(cls, label: str) -> Self:
        """The member named ``label`` (lower case)."""
        return cls[label.upper()]


class DeployMode(_Named):
    """``CandidateArrays.mode``: one aggregated worker type, or prefill and decode workers."""

    AGG = 0
    DISAGG = 1


class WeightQuant(_Named):
    """``CandidateArrays.weight_quant``: the weight format the engine runs."""

    BF16 = 0
    FP8 = 1
    FP4 = 2
    INT4 = 3


class KvDtype(_Named):
    """``CandidateArrays.kv_dtype``: the KV cache's data type."""

    BF16 = 0
    FP8 = 1


class Reason(_Named):
    """``ResultArrays.infeasible_reason``: why a candidate is not feasible (OK when it is)."""

    OK = 0
    OUT_OF_MEMORY = 1
    SATURATED = 2


WEIGHT_QUANTS: tuple[str, ...] = tuple(q.label for q in WeightQuant)
"""Weight format names in ``WeightQuant`` order."""
KV_DTYPES: tuple[str, ...] = tuple(q.label for q in KvDtype)
"""KV dtype names in ``KvDtype`` order."""
REASONS: tuple[str, ...] = tuple(r.label for r in Reason)
"""Reason names in ``Reason`` order."""


def kv_tokens_held(
    isl: np.ndarray | float, osl: np.ndarray | float, backend: str | EnginePolicy
) -> np.ndarray | float:
    """KV tokens one running request holds on average: ISL plus the engine's
    ``kv_held_osl_fraction`` of OSL (engines that allocate KV on demand hold half the answer on
    average, engines that reserve it on admission the whole; each engine's constants.yaml names
    its policy). The serving model's KV-capacity count, shared with the solvers' slot caps."""
    return isl + osl * policy_of(backend).calibration.kv_held_osl_fraction.value


GEMM_DTYPE: dict[str, str] = {"bf16": "bf16", "fp8": "fp8", "fp4": "fp4", "int4": "bf16"}
"""kernels_db GEMM dtype of the linear layers per weight format: the weights' storage dtype; a GPU
without that math runs it weight-only in ``GpuSpec.math_dtype`` (fp4 on Hopper: W4A16 in bf16).
int4 (W4A16 Marlin) is priced as a bf16 GEMM: pricing it at 4-bit bytes under-predicts the measured
Kimi-K2.5 int4 / H200 / vLLM TPOT by 25% (median; bf16 bytes: +26%), TTFT by 26% (bf16: 10%); the
dequantizing MoE kernels do not reach the bandwidth of the packed bytes."""


def _arr(x: object, k: int, fill: float) -> np.ndarray:
    v = fill if x is None else x
    if isinstance(v, (int, float)):  # a number (bools and enum members included): its float
        return np.full(k, float(v))
    return np.broadcast_to(np.asarray(v, dtype=float), (k,)).astype(float)


def _empty() -> np.ndarray:
    return np.zeros(0)


OPTIONAL_DEFAULTS: Mapping[str, float] = {
    "mode": DeployMode.AGG,
    "workers": 1,
    "prefill_workers": 1,
}
"""Defaults of the columns a direct construction may leave out (length 0); the ``prefill_*`` worker
columns default to the decode worker's (``PREFILL_OF``)."""
PREFILL_OF: Mapping[str, str] = {
    "prefill_tp": "tp",
    "prefill_pp": "pp",
    "prefill_dp": "dp",
    "prefill_ep": "ep",
    "prefill_max_num_batched_tokens": "max_num_batched_tokens",
    "prefill_max_num_seqs": "max_num_seqs",
}
"""Prefill worker column -> the decode worker's column it defaults to."""


@dataclass(frozen=True)
class CandidateArrays:
    """Candidate configs, arrays of shape (K,) (see module docstring). Every column has K entries
    after construction: left-out optional columns take ``OPTIONAL_DEFAULTS`` / ``PREFILL_OF``, a
    left-out ``own_concurrency`` is True where ``concurrency`` is a number."""

    tp: np.ndarray
    pp: np.ndarray
    dp: np.ndarray
    ep: np.ndarray
    max_num_seqs: np.ndarray
    max_num_batched_tokens: np.ndarray
    weight_quant: np.ndarray
    """``WeightQuant`` values."""
    kv_dtype: np.ndarray
    """``KvDtype`` values."""
    concurrency: np.ndarray
    """Closed-loop clients of the row (read where ``own_concurrency``)."""
    mode: np.ndarray = field(default_factory=_empty)
    """``DeployMode`` values."""
    workers: np.ndarray = field(default_factory=_empty)
    """Aggregated replicas / decode workers."""
    prefill_tp: np.ndarray = field(default_factory=_empty)
    prefill_pp: np.ndarray = field(default_factory=_empty)
    prefill_dp: np.ndarray = field(default_factory=_empty)
    prefill_ep: np.ndarray = field(default_factory=_empty)
    prefill_workers: np.ndarray = field(default_factory=_empty)
    prefill_max_num_batched_tokens: np.ndarray = field(default_factory=_empty)
    prefill_max_num_seqs: np.ndarray = field(default_factory=_empty)
    """Prompts per prefill step (per DP rank)."""
    own_concurrency: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    """True: the row is a closed loop of ``concurrency`` clients; False: the workload's load."""

    def __post_init__(self) -> None:
        k = len(self)
        fill: dict[str, np.ndarray] = {}
        for f, default in OPTIONAL_DEFAULTS.items():
            if not getattr(self, f).size:
                fill[f] = np.full(k, float(default))
        for f, src in PREFILL_OF.items():
            if not getattr(self, f).size:
                fill[f] = getattr(self, src)
        if not self.own_concurrency.size:
            fill["own_concurrency"] = np.isfinite(self.concurrency)
        for f, column in fill.items():
            object.__setattr__(self, f, column)

    @property
    def disagg(self) -> np.ndarray:
        """Rows with prefill and decode workers (``DeployMode.DISAGG``)."""
        return np.asarray(self.mode == DeployMode.DISAGG)

    @classmethod
    def from_lists(cls, **cols: object) -> CandidateArrays:
        """Build from lists/arrays/scalars; missing columns take defaults (tp 1, chunk 8192...);
        NaN in a given column means its default (e.g. agg rows of a mixed frame), in
        ``concurrency`` the workload's load (``own_concurrency`` False)."""
        k = max((np.size(np.asarray(v)) for v in cols.values()), default=1)
        d: dict[str, float] = {
            "tp": 1,
            "pp": 1,
            "dp": 1,
            "ep": 1,
            "max_num_seqs": 256,
            "max_num_batched_tokens": 8192,
            "weight_quant": WeightQuant.BF16,
            "kv_dtype": KvDtype.BF16,
            **OPTIONAL_DEFAULTS,
        }
        names = [f for f in cls.__dataclass_fields__ if f != "own_concurrency"]
        full = {f: _arr(cols.get(f), k, d.get(f, np.nan)) for f in names}
        for f, v in d.items():
            full[f] = np.where(np.isnan(full[f]), v, full[f])
        for f, src in PREFILL_OF.items():
            full[f] = np.where(np.isnan(full[f]), full[src], full[f])
        return cls(**full)

    def __len__(self) -> int:
        return int(self.tp.shape[0])


@dataclass(frozen=True)
class ResultArrays:
    """Per-candidate predictions (seconds, requests/s, tokens/s)."""

    ttft_mean_s: np.ndarray
    ttft_p50_s: np.ndarray
    ttft_p90_s: np.ndarray
    ttft_p99_s: np.ndarray
    tpot_mean_s: np.ndarray
    tpot_p50_s: np.ndarray
    tpot_p90_s: np.ndarray
    tpot_p99_s: np.ndarray
    requests_per_s: np.ndarray
    output_tok_s_per_gpu: np.ndarray
    output_tok_s_per_user: np.ndarray
    decode_batch: np.ndarray
    mixed_prefill_tokens: np.ndarray  # prompt tokens of an aggregated step that carries prefill
    prefill_utilization: np.ndarray
    kv_transfer_s: np.ndarray
    seq_capacity: np.ndarray
    gpus: np.ndarray
    feasible: np.ndarray
    infeasible_reason: np.ndarray
    """``Reason`` values."""


def parallel_arrays(
    gpu: GpuSpec,
    tp: np.ndarray,
    pp: np.ndarray,
    dp: np.ndarray,
    ep: np.ndarray,
    wq: np.ndarray,
    kvd: np.ndarray,
) -> ParallelArrays:
    """ParallelArrays with bytes and peaks looked up from the quant/KV codes."""
    wq_i, kv_i = wq.astype(int), kvd.astype(int)
    wbytes = np.array([WEIGHT_BYTES[q] for q in WEIGHT_QUANTS])[wq_i]
    kvbytes = np.array([KV_BYTES[q] for q in KV_DTYPES])[kv_i]
    peaks = np.array([peak_flops(gpu, GEMM_DTYPE[q]) for q in WEIGHT_QUANTS])[wq_i]
    dtypes = np.array([GEMM_DTYPE[q] for q in WEIGHT_QUANTS])[wq_i]
    return ParallelArrays(tp, pp, dp, ep, wbytes, kvbytes, peaks, dtypes)


def load_arrays(
    w: Workload, k: int, concurrency: np.ndarray, request_overhead_s: float | np.ndarray
) -> LoadArrays:
    """Workload summary as arrays (closed loop where ``concurrency`` is finite)."""
    isl, osl = w.isl.mean, w.osl.mean
    cs2 = w.isl.second_moment / isl**2 - 1.0
    osl_cs2 = w.osl.second_moment / osl**2 - 1.0
    sd = w.spec_decode
    closed = np.isfinite(concurrency)
    rate = np.where(closed, np.nan, w.rate_per_s if w.rate_per_s is not None else np.nan)
    return LoadArrays(
        isl=np.full(k, isl),
        osl=np.full(k, osl),
        isl_compute=np.full(k, max(isl * (1 - w.prefix_hit), 1.0)),
        concurrency=concurrency,
        rate_per_s=rate,
        ca2=np.full(k, w.arrival_cv2),
        cs2=np.full(k, max(cs2, 0.0)),
        osl_cs2=np.full(k, max(osl_cs2, 0.0)),
        tokens_per_step=np.full(k, sd.tokens_per_step if sd else 1.0),
        step_multiplier=np.full(k, 1.0 + sd.draft_len * sd.draft_cost_ratio if sd else 1.0),
        verify_tokens=np.full(k, float(sd.verify_tokens) if sd else 1.0),
        request_overhead_s=_arr(request_overhead_s, k, 0.0),
    )


def lockstep_share(
    w: Workload,
    concurrency: np.ndarray,
    cal: EngineCalibration,
    disagg: bool | np.ndarray = False,
    constants: Constants | None = None,
) -> np.ndarray:
    """Share of a closed loop's requests in the benchmark's first, lockstep wave: 0 for the steady
    state (the default), N/P when the workload names the run's request count P
    (``Workload.bench_requests``), the engine's fitted ``burst_fraction`` when it asks for the
    start-up wave of an unrecorded protocol (``Workload.startup_wave``; ``disagg_burst_fraction``
    where ``disagg``; the calibration data do not record their benchmark protocol)."""
    if w.bench_requests is not None:
        return np.clip(np.nan_to_num(concurrency / w.bench_requests, nan=0.0), 0.0, 1.0)
    if not w.startup_wave:
        return np.zeros(concurrency.shape)
    k = concurrency.shape[0]
    agg = constant(cal, "burst_fraction", k, constants)
    return np.where(disagg, constant(cal, "disagg_burst_fraction", k, constants), agg)


def fixed_lengths(w: Workload) -> bool:
    """Whether every request of ``w`` has the same ISL and OSL (zero variance)."""
    return bool(
        w.isl.second_moment <= w.isl.mean**2 * (1.0 + 1e-9)
        and w.osl.second_moment <= w.osl.mean**2 * (1.0 + 1e-9)
    )


def lasting_lockstep(w: Workload, eng: Engine) -> bool:
    """Whether an aggregated closed-loop benchmark of ``w`` on engine ``eng`` stays in lockstep
    for the whole run: its clients start together (a named run, ``bench_requests``), every request
    has the same lengths, and the engine stalls decodes while prompts wait
    (``Engine.prefill_first``), so the N requests of a wave start decoding in the same step,
    finish in the same step and come back together (``serving.lockstep_agg``). A workload that
    only asks for the start-up wave of an unrecorded protocol (``startup_wave``: the validation
    rows, whose length distribution is not recorded) keeps the fitted first-wave share. Whether
    real campaigns stay in lockstep, and the figures, are in that engine's notes
    (``planner/engines/<name>/``)."""
    return w.bench_requests is not None and fixed_lengths(w) and eng.prefill_first is not None


MIX_ATOMS = 64
"""Equal-probability atoms per component when a quantile of the steady-state / start-up-wave
mixture is taken (``mixture_quantiles``): quantiles within 1/64 of a probability."""


def steady_ttft_quantile(s: ServingArrays, load: LoadArrays, q: float) -> np.ndarray:
    """Steady-state TTFT q-quantile (s): the request's own time to first token
    (``queueing.own_quantiles``: the per-request overhead, where in the batch cycle it arrives,
    its own prefill scaled by its prompt length - lognormal with the ISL's CV - and the prompts
    that share its prefill step), plus the admission wait (near-deterministic, normal spread from
    OSL variability), plus the prefill queueing wait in steady state (the start-up wave excluded;
    exponential tail at the prefill utilization). The own part's quantile is that of its sum;
    the three parts' quantiles are added (exact when all but one are deterministic, an upper
    bound otherwise); every part is non-decreasing in q."""
    return steady_ttft_quantiles(s, load, [q])[0]


def steady_ttft_quantiles(
    s: ServingArrays, load: LoadArrays, qs: Iterable[float]
) -> list[np.ndarray]:
    """``steady_ttft_quantile`` at each of ``qs``, the parts that do not depend on the quantile
    computed once."""
    qs = [float(q) for q in qs]
    rho = np.clip(s.prefill_rho, 1e-9, 0.999)
    fixed_part = np.minimum(load.request_overhead_s, s.ttft_own_s)
    join = np.clip(s.join_s, 0.0, np.maximum(s.ttft_own_s - fixed_part, 0.0))
    cohort = np.clip(
        s.cohort_prompts * s.cohort_cost_s, 0.0, np.maximum(s.ttft_own_s - fixed_part - join, 0.0)
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        cost = np.where(s.cohort_prompts > 0.0, cohort / s.cohort_prompts, 0.0)
    prefill = np.maximum(s.ttft_own_s - fixed_part - join - cohort, 0.0)
    own = queueing.own_quantiles(fixed_part, join, prefill, load.cs2, s.cohort_prompts, cost, qs)
    b = np.clip(s.wave_share, 0.0, 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        steady_wait = np.where(b < 1.0, (s.wait_s - b * s.wave_wait_s) / (1.0 - b), 0.0)
    steady_wait = np.maximum(np.nan_to_num(steady_wait), 0.0)
    steady_wait = np.where(np.isfinite(s.wait_s), steady_wait, np.inf)
    out = []
    for q, own_q in zip(qs, own, strict=True):
        z = float(special.ndtri(q))
        admit = queueing.admission_wait_quantile(
            s.admission_wait_s, s.admission_ahead, s.hold_cs2, z
        )
        out.append(np.asarray(own_q + admit + queueing.wait_quantile(steady_wait, rho, q)))
    return out


def mixture_quantiles(
    steady: dict[str, np.ndarray],
    atoms_steady: np.ndarray,
    atoms_wave: np.ndarray,
    share: np.ndarray,
) -> dict[str, np.ndarray]:
    """Quantiles of a run whose requests are the steady state (atoms ``atoms_steady``, shape (A, K),
    equal weights) with probability 1 - ``share`` and the start-up wave (``atoms_wave``) with
    ``share``; candidates with no wave keep the steady-state quantiles ``steady``."""
    a = atoms_steady.shape[0]
    atoms = np.concatenate([atoms_steady, atoms_wave])
    w = np.concatenate(
        [
            np.broadcast_to((1.0 - share) / a, atoms_steady.shape),
            np.broadcast_to(share / a, atoms_wave.shape),
        ]
    )
    order = np.argsort(atoms, axis=0, kind="stable")
    xs, cw = np.take_along_axis(atoms, order, 0), np.cumsum(np.take_along_axis(w, order, 0), axis=0)
    out = {}
    for name, q in queueing.QUANTILES.items():
        idx = np.minimum((cw < q - 1e-12).sum(axis=0), xs.shape[0] - 1)
        mixed = np.take_along_axis(xs, idx[None, :], 0)[0]
        out[name] = np.where(share > 0.0, mixed, steady[name])
    return out


def ttft_quantiles(s: ServingArrays, load: LoadArrays) -> dict[str, np.ndarray]:
    """TTFT p50/p90/p99 (s): the steady state, or, when the run's lockstep start-up wave is priced
    (``ServingArrays.wave_share`` > 0), the mixture of the steady state and the wave, whose k-th
    of N requests waits for the prefills ahead of it (uniform over 0..2x its mean wait)."""
    quantiles = queueing.QUANTILES
    steady = dict(zip(quantiles, steady_ttft_quantiles(s, load, quantiles.values()), strict=True))
    if not (s.wave_share > 0).any():
        return steady
    grid = (np.arange(MIX_ATOMS) + 0.5) / MIX_ATOMS
    atoms_steady = np.stack(steady_ttft_quantiles(s, load, [float(q) for q in grid]))
    zero = np.zeros_like(s.wait_s)
    alone = replace(s, admission_wait_s=zero, wait_s=zero, wave_share=zero)
    own = np.stack(steady_ttft_quantiles(alone, load, [float(q) for q in grid]))
    atoms_wave = own + s.admission_wait_s + 2.0 * s.wave_wait_s * grid[:, None]
    return mixture_quantiles(steady, atoms_steady, atoms_wave, np.clip(s.wave_share, 0.0, 1.0))


def percentiles(s: ServingArrays, load: LoadArrays) -> dict[str, np.ndarray]:
    """TTFT and TPOT p50/p90/p99 (s), the one definition ``estimate``, ``plan`` and the solvers
    share: TTFT from ``ttft_quantiles``, TPOT from the prefill interference its steps meet
    (``queueing.tpot_quantile``). Every quantile is non-decreasing in the percentile."""
    out = {f"ttft_{name}_s": v for name, v in ttft_quantiles(s, load).items()}
    for name in queueing.QUANTILES:
        out[f"tpot_{name}_s"] = queueing.tpot_quantile(
            s.tpot_s, s.tpot_interference_s, s.interference_events, queueing.Z_SCORES[name]
        )
    return out


def op_pricer(gpu: GpuSpec, pricer: OpPricer | None = None) -> OpPricer:
    """The op pricer ``evaluate_batch`` uses on ``gpu``: ``pricer`` when given, else the default."""
    return pricer or default_pricer(gpu)


@dataclass(frozen=True)
class BatchRequest:
    """What to predict: candidates ``c`` of model ``m`` on ``gpu`` serving workload ``w``, at
    ``gpu_memory_utilization`` (one value, or one per candidate, shape (K,))."""

    m: ModelSpec
    gpu: GpuSpec
    c: CandidateArrays
    w: Workload
    gpu_memory_utilization: float | np.ndarray = 0.9
    prefill_gpu: GpuSpec | None = None
    """The GPU type of disaggregated candidates' prefill workers (None: ``gpu``, as decode)."""


def evaluate_batch(
    m: ModelSpec,
    gpu: GpuSpec,
    c: CandidateArrays,
    w: Workload,
    *,
    backend: str | EnginePolicy = DEFAULT_ENGINE,
    pricer: OpPricer | None = None,
    gpu_memory_utilization: float | np.ndarray = 0.9,
    recorded: RecordedLaunch = NOT_RECORDED,
    prefill_gpu: GpuSpec | None = None,
) -> ResultArrays:
    """:func:`predict` of the request made of ``m``, ``gpu``, ``c``, ``w`` and
    ``gpu_memory_utilization`` on engine ``backend`` (a name: its packaged constants);
    ``prefill_gpu``: disaggregated candidates' prefill GPU type (None: ``gpu``)."""
    req = BatchRequest(m, gpu, c, w, gpu_memory_utilization, prefill_gpu)
    return predict(req, policy_of(backend), pricer, recorded)


def predict(
    req: BatchRequest,
    policy: EnginePolicy,
    pricer: OpPricer | None = None,
    recorded: RecordedLaunch = NOT_RECORDED,
) -> ResultArrays:
    """Predict every candidate of the request in one vectorized pass on the engine of ``policy``
    (its constants and scheduling policy), pricing ops with ``pricer`` (None: the GPU's default);
    ``recorded``: the launch settings a replayed measurement recorded, see ``RecordedLaunch``."""
    m, gpu, c, w = req.m, req.gpu, req.c, req.w
    pricer = op_pricer(gpu, pricer)
    cal = policy.calibration
    k = len(c)
    consts = recorded.constants
    conc = np.where(c.own_concurrency, c.concurrency, w.concurrency if w.concurrency else np.nan)
    load = load_arrays(w, k, conc, constant(cal, "request_overhead_s", k, consts))
    setting = WorkerSetting(m, gpu, cal, req.gpu_memory_utilization, recorded, w.spec_decode)
    dec_par = parallel_arrays(gpu, c.tp, c.pp, c.dp, c.ep, c.weight_quant, c.kv_dtype)
    tokens = np.asarray(load.isl + load.osl * cal.kv_held_osl_fraction.value)
    dec_role = RoleColumns(dec_par, c.max_num_seqs, c.max_num_batched_tokens, c.workers, tokens)
    burst = lockstep_share(w, conc, cal, constants=consts)
    lasting = lasting_lockstep(w, policy.engine)
    overlap = policy.engine.overlap_scheduler is not None
    dec = worker_arrays(setting, dec_role, burst, lasting, recorded.holds, overlap)
    # replicas share the clients (closed loop) or the arrivals (open loop) evenly
    agg_load = LoadArrays(
        **{
            f: getattr(load, f) / (c.workers if f in ("concurrency", "rate_per_s") else 1.0)
            for f in LoadArrays.__dataclass_fields__
        }
    )
    disagg = c.disagg
    # disaggregated rows take nothing from the aggregated model: unsolved when every row is one
    only_disagg = bool(disagg.size) and bool(disagg.all())
    agg = None if only_disagg else solve_agg(m, pricer, dec, agg_load)
    gpus = c.tp * c.pp * c.dp * c.workers
    fits = dec.seq_capacity >= 1
    xs = agg.requests_per_s * c.workers if agg is not None else gpus * np.nan
    res = agg
    # a disaggregated request's time outside the steps: its mean and its percentiles take it
    d_overhead = constant(cal, "disagg_request_overhead_s", k, consts)
    if disagg.any():
        pre_gpu = req.prefill_gpu or gpu
        pre_setting = replace(setting, gpu=pre_gpu)
        pre_pricer = pricer if pre_gpu.key == gpu.key else default_pricer(pre_gpu)
        d = _disagg(setting, pre_setting, c, w, load, dec, (pricer, pre_pricer), d_overhead)
        res = (
            d.res
            if agg is None
            else ServingArrays(
                *(
                    np.where(disagg, getattr(d.res, f), getattr(agg, f))
                    for f in ServingArrays.__dataclass_fields__
                )
            )
        )
        gpus = np.where(disagg, d.gpus, gpus)
        fits = fits & (~disagg | d.fits)
        xs = np.where(disagg, res.requests_per_s, xs)
    assert res is not None  # every row is aggregated or disaggregated
    load = replace(load, request_overhead_s=np.where(disagg, d_overhead, load.request_overhead_s))
    return _results(res, load, xs, gpus, fits, dec.seq_capacity)


@dataclass(frozen=True)
class _Disagg:
    """The disaggregated prediction of every candidate, its GPUs and whether its prefill worker
    holds one prompt."""

    res: ServingArrays
    gpus: np.ndarray
    fits: np.ndarray


def kv_link_bandwidth(
    prefill_gpu: GpuSpec, decode_gpu: GpuSpec, total_gpus: np.ndarray
) -> np.ndarray:
    """Bytes/s per GPU of the link a prompt's KV cache crosses from its prefill to its decode
    worker: the scale-up link while the whole deployment fits one scale-up domain of one GPU type,
    else the scale-out NIC; between two GPU types (never one scale-up domain) the slower NIC of the
    two (``GpuSpec.scale_out_bandwidth_bytes_per_s``, each with its source in the spec)."""
    if prefill_gpu.key != decode_gpu.key:
        nic = min(
            prefill_gpu.scale_out_bandwidth_bytes_per_s, decode_gpu.scale_out_bandwidth_bytes_per_s
        )
        return np.full(np.shape(total_gpus), nic)
    return np.where(
        total_gpus <= decode_gpu.scale_up.domain_size,
        decode_gpu.scale_up.bandwidth_bytes_per_s,
        decode_gpu.scale_out_bandwidth_bytes_per_s,
    )


def _disagg(
    s: WorkerSetting,
    ps: WorkerSetting,
    c: CandidateArrays,
    w: Workload,
    load: LoadArrays,
    dec: WorkerArrays,
    pricers: tuple[OpPricer, OpPricer],
    d_overhead: np.ndarray,
) -> _Disagg:
    """``solve_disagg`` of every candidate: ``c``'s prefill columns on the prefill setting
    ``ps`` (its GPU type), decode worker ``dec``; ``pricers``: (decode, prefill) op pricers."""
    k, gpu, consts = len(c), ps.gpu, s.recorded.constants
    pre_par = parallel_arrays(
        gpu, c.prefill_tp, c.prefill_pp, c.prefill_dp, c.prefill_ep, c.weight_quant, c.kv_dtype
    )
    pre_role = RoleColumns(
        pre_par,
        c.prefill_max_num_seqs,
        c.prefill_max_num_batched_tokens,
        c.prefill_workers,
        load.isl + 1,
    )
    burst = lockstep_share(w, load.concurrency, s.cal, constants=consts)
    pre = prefill_kernels(worker_arrays(ps, pre_role, burst), s.cal, k, consts)
    total = (
        c.prefill_tp * c.prefill_pp * c.prefill_dp * c.prefill_workers
        + c.tp * c.pp * c.dp * c.workers
    )
    bw = kv_link_bandwidth(ps.gpu, s.gpu, total)
    t_kv = kv_transfer_s(memory_batch.kv_transfer_bytes_per_gpu(s.m, pre_par, load.isl), bw)
    dload = replace(load, request_overhead_s=d_overhead)
    dburst = lockstep_share(w, load.concurrency, s.cal, disagg=True, constants=consts)
    res = solve_disagg(
        s.m,
        pricers[0],
        replace(pre, burst_fraction=dburst),
        replace(dec, burst_fraction=dburst),
        dload,
        t_kv,
        s.recorded.decode_routers,
        pricers[1],
    )
    return _Disagg(res, total, pre.seq_capacity >= 1)


def _results(
    res: ServingArrays,
    load: LoadArrays,
    x: np.ndarray,
    gpus: np.ndarray,
    fits: np.ndarray,
    cap: np.ndarray,
) -> ResultArrays:
    pct = percentiles(res, load)
    feasible = fits & ~res.saturated
    reason = np.where(
        ~fits, Reason.OUT_OF_MEMORY, np.where(res.saturated, Reason.SATURATED, Reason.OK)
    )
    return ResultArrays(
        ttft_mean_s=res.ttft_s,
        tpot_mean_s=res.tpot_s,
        **pct,
        requests_per_s=x,
        output_tok_s_per_gpu=x * load.osl / gpus,
        output_tok_s_per_user=1.0 / res.tpot_s,
        decode_batch=res.decode_batch,
        mixed_prefill_tokens=res.mixed_prefill_tokens,
        prefill_utilization=res.prefill_rho,
        kv_transfer_s=res.kv_transfer_s,
        seq_capacity=cap,
        gpus=gpus,
        feasible=feasible,
        infeasible_reason=reason,
    )
