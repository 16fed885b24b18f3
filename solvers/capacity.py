"""GPUs per window for a timed trace: autoscaled against static peak and static mean.

Usage::

    from solvers.capacity import CapacityRequest, capacity
    res = capacity(trace, CapacityRequest(model="llama-3.1-8b", gpus=("h100",), ttft_ms=1000,
                                          tpot_ms=50, percentile="p90", window_s=900))
    res.windows[0].gpus, res.autoscaled.gpu_hours, res.static_mean.windows_violating

Steps: split the trace into windows (:mod:`planner.workload.windows`); pick the worker shape once
with
``planner plan`` (aggregated, cheapest per output token within the SLO at the trace's mean
lengths); then, per window, predict that worker replicated 1..R times in one vectorized
:func:`planner.perf.batch.evaluate_batch` call at the window's design rate (the rate its bursts
reach), its measured local gap CV (Kingman's G/G/1 wait, not Poisson) and its own length samples,
plus the wait for a running slot when the replicas' ``max_num_seqs`` fill (``slot_wait``), and
keep the fewest replicas meeting both SLOs at the percentile, each with probability at least
``confidence`` (the band table's one-sided quantile over the prediction). Replicas change only
between windows; a scale-up starts the new replicas ``scale_up_s`` before their window (billed
from then). Static peak: the most replicas any window needs, all day. Static mean: sized for the
trace's mean rate as Poisson traffic with its overall lengths (the constant-rate sizing), then
checked window by window against the same predictions.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from hardware.catalog import get_gpu
from hardware.errors import InfeasibleError, PlannerInputError
from planner.engines import DEFAULT_ENGINE
from planner.model.bundled import load_model
from planner.model.spec import ModelSpec
from planner.perf import queueing
from planner.perf.batch import KV_DTYPES, WEIGHT_QUANTS, CandidateArrays, evaluate_batch
from planner.perf.deployment import Deployment, WorkerConfig
from planner.perf.power import ELECTRICITY_PRICE_USD_PER_KWH, PUE, PowerSummary
from planner.perf.replay import Progress
from planner.uncertainty.bands import candidate_bands, packaged_bands, upper_factor
from planner.workload.spec import LengthSpec, SpecDecode, Workload, fixed
from planner.workload.traces import Trace
from planner.workload.windows import Window, split
from solvers.plan import PlanRequest, plan
from solvers.plan_core import check_confidence, meet_probability
from solvers.plan_models import CONFIDENCE_HELP, DEFAULT_CONFIDENCE, OBJECTIVE_HELP, Objective
from solvers.power_plan import mean_load_power
from solvers.purchase import purchase_unit, units_bought
from solvers.spec_choice import spec_label

_FROZEN = ConfigDict(frozen=True, extra="forbid")
SECONDS_PER_HOUR = 3600.0
QUANTILE = {"p50": 0.5, "p90": 0.9, "p99": 0.99}
METHOD = (
    "Each window is sized at its design rate (the one-minute arrival rate that all but the SLO "
    "percentile's share of its requests arrive under) with its measured gap CV (Kingman G/G/1 "
    "for the prefill queue) and the wait for a running slot (Erlang C with the Allen-Cunneen "
    "correction), each SLO met with probability >= the request's confidence (the band table's "
    "one-sided quantile over the prediction), on replicas of one aggregated worker shape; "
    "replicas change between windows, "
    "a scale-up is billed from scale_up_s before its window. Static peak: the most replicas of "
    "any window; static mean: sized for the mean rate as Poisson traffic."
)
"""How the answer was reached, carried in the JSON."""
SHAPE_MAX_GPUS = 16
"""Default largest worker shape searched (two 8-GPU nodes); the fleet grows by replicas of it."""
Bought = Callable[[int], int]
"""GPUs bought (whole purchase units) for a number of replicas of the worker."""
CV_RANGE = (0.05, 10.0)
"""Gap CVs are clipped to this range before queueing (Workload.arrival_cv's bounds)."""


class CapacityRequest(BaseModel):
    """What ``planner capacity`` is asked."""

    model_config = _FROZEN
    model: str = Field(description="Bundled model name, HF id or config.json path.")
    gpus: tuple[str, ...] = Field(min_length=1, description="GPU types the worker shape may use.")
    ttft_ms: float = Field(gt=0, description="TTFT SLO, ms.")
    tpot_ms: float = Field(gt=0, description="TPOT SLO, ms.")
    percentile: Literal["p50", "p90", "p99"] = Field(
        default="p90", description="Percentile the SLOs apply to."
    )
    window_s: float = Field(default=900.0, ge=60, le=86400, description="Window length, seconds.")
    scale_up_s: float = Field(
        default=0.0, ge=0, le=86400, description="Seconds a new replica needs before it serves."
    )
    max_gpus: int = Field(default=256, ge=1, le=100000, description="Most GPUs of any window.")
    worker_max_gpus: int = Field(
        default=SHAPE_MAX_GPUS, ge=1, le=1024, description="Most GPUs of one replica."
    )
    min_replicas: int = Field(
        default=1, ge=0, description="Replicas kept in every window, even idle ones."
    )
    backend: str = Field(default=DEFAULT_ENGINE, description="Engine calibration.")
    price_per_gpu_hour: float | None = Field(
        default=None, gt=0, description="Override of the GPU's $/hour."
    )
    hardware_dirs: tuple[str, ...] = Field(
        default=(), description="Extra folders of GPU spec files."
    )
    confidence: float = Field(
        default=DEFAULT_CONFIDENCE, ge=0, le=1, description=CONFIDENCE_HELP + " Per window."
    )
    node_gpus: int | None = Field(
        default=None,
        ge=1,
        description="GPUs per purchase unit: costs are of whole units (default: the GPU spec's "
        "purchase_unit_gpus).",
    )

    @field_validator("confidence")
    @classmethod
    def _confidence(cls, v: float) -> float:
        check_confidence(v)
        return v

    max_isl: int | None = Field(
        default=None, ge=1, description="Longest prompt to accept, tokens; None: the mean ISL."
    )
    max_osl: int | None = Field(
        default=None, ge=1, description="Longest answer to accept, tokens; None: the mean OSL."
    )
    too_long_requests: int = Field(
        default=0, ge=0, description="Trace requests left out: longer than the model allows."
    )
    objective: Objective = Field(
        default="cost",
        description="How the worker shape is chosen (planner plan's objective, without a load): "
        + OBJECTIVE_HELP,
    )
    electricity_price: float = Field(
        default=ELECTRICITY_PRICE_USD_PER_KWH, ge=0, description="USD per kWh."
    )
    pue: float = Field(default=PUE, ge=1, description="Facility power / IT power.")
    prefix_hit: float = Field(
        default=0.0,
        ge=0,
        lt=1,
        description="Share of prompt tokens served from a prefix cache: their prefill is skipped "
        "(solvers.prefix_tiers replays a trace's hash_ids to find it).",
    )
    prefix_load_ms: float = Field(
        default=0.0, ge=0, description="Time to load cached prefixes from host/SSD, added to TTFT."
    )
    spec_decode: SpecDecode | None = Field(
        default=None, description="Speculative decoding every replica runs (None: off)."
    )
    spec_options: tuple[SpecDecode, ...] = Field(
        default=(),
        description="Speculative decoding settings to decide among besides none, by the "
        "autoscaled fleet's cost (``solvers.spec_choice``); empty: not a decision.",
    )


class Stats(BaseModel):
    """Mean and percentiles, ms (null when not predicted)."""

    model_config = _FROZEN
    mean: float | None = Field(default=None, description="Mean, ms; None without requests.")
    p50: float | None = Field(default=None, description="Median, ms.")
    p90: float | None = Field(default=None, description="90th percentile, ms.")
    p99: float | None = Field(default=None, description="99th percentile, ms.")


class WindowPlan(BaseModel):
    """One window: its traffic and the deployment sized for it."""

    model_config = _FROZEN
    start_s: float = Field(description="Window start, seconds on the trace's clock.")
    duration_s: float = Field(description="Window length, seconds (the last may be shorter).")
    requests: int = Field(description="Requests arriving in the window.")
    rate: float = Field(description="Mean arrival rate, requests/s.")
    arrival_cv: float | None = Field(description="CV of inter-arrival gaps in the window.")
    local_cv: float | None = Field(
        description="CV of gaps scaled by their one-minute rate (used for queueing)."
    )
    design_rate: float = Field(
        description="Request-weighted one-minute rate at the SLO percentile, requests/s."
    )
    isl_mean: float | None = Field(description="Mean input tokens; None without requests.")
    osl_mean: float | None = Field(description="Mean output tokens; None without requests.")
    replicas: int = Field(description="Replicas the window needs.")
    gpus: int = Field(description="GPUs bought for those replicas (whole purchase units).")
    config: str = Field(description="Short description of one replica.")
    ttft_ms: Stats = Field(description="Predicted TTFT in the window, ms.")
    tpot_ms: Stats = Field(description="Predicted TPOT in the window, ms.")
    meets_slo: bool = Field(
        description="Predicted to meet both SLOs (false: even the most replicas do not)."
    )
    probability_met: dict[str, float] = Field(
        default_factory=dict,
        description="Per SLO (ttft, tpot), the probability the window's replicas meet it; "
        "empty for a window without requests.",
    )


class Fleet(BaseModel):
    """GPU-hours and cost of one way of running the trace."""

    model_config = _FROZEN
    replicas: int | None = Field(
        default=None, description="Constant replicas (static deployments)."
    )
    gpus: int = Field(description="Most GPUs bought at once.")
    gpu_hours: float = Field(description="GPU-hours bought over the trace.")
    cost: float = Field(description="USD.")
    windows_violating: int = Field(default=0, description="Windows predicted to miss the SLO.")
    violating_windows: tuple[int, ...] = Field(default=(), description="Their indices.")


class CapacityResult(BaseModel):
    """The answer of ``planner capacity``."""

    model_config = _FROZEN
    model: str = Field(description="Model name.")
    gpu: str = Field(description="GPU key.")
    backend: str = Field(description="Engine.")
    slo: dict[str, float | str] = Field(description="TTFT and TPOT targets and their percentile.")
    window_s: float = Field(description="Sizing window length, s.")
    scale_up_s: float = Field(description="Time a new replica takes to serve, s.")
    price_per_gpu_hour: float = Field(description="USD per GPU-hour used for the costs.")
    purchase_unit: dict[str, int | str] = Field(
        default_factory=dict,
        description="GPUs per purchase unit (``gpus``) and its source; GPUs are bought in them.",
    )
    trace: dict[str, float | int | str] = Field(
        description="The trace: source, layout, requests, duration."
    )
    deployment: Deployment = Field(description="One replica of the worker shape (workers = 1).")
    windows: tuple[WindowPlan, ...] = Field(description="One sizing per window.")
    autoscaled: Fleet = Field(description="Fleet that follows the windows.")
    static_peak: Fleet = Field(description="Fleet sized for the busiest window all the time.")
    static_mean: Fleet = Field(description="Fleet sized for the mean load all the time.")
    confidence: float = Field(
        default=0.0, description="Each window's SLOs are met with at least this probability."
    )
    method: str = Field(description="How the windows were sized.")
    seconds: float = Field(description="Wall time of the sizing, s.")
    prefix_cache: dict[str, Any] | None = Field(
        default=None,
        description="Prefix caching (hit rate per tier, GPU-hours with and without tiers; "
        "solvers.prefix_tiers); None when not priced.",
    )
    power: PowerSummary | None = Field(
        default=None,
        description="Board power and energy of the static-mean fleet at the trace's mean rate and "
        "lengths (planner estimate's power object); None when it cannot be priced.",
    )
    speculative_decision: dict[str, Any] | None = Field(
        default=None,
        description="Speculative decoding settings sized (none and each option's autoscaled "
        "cost) and why the chosen one won; None when it was not a decision.",
    )


def _shape(req: CapacityRequest, trace: Trace) -> tuple[Deployment, float]:
    """The aggregated worker shape (one replica) with the lowest cost per output token within the
    SLO at the trace's mean lengths (``planner plan`` without a load, up to ``worker_max_gpus``
    GPUs, over every GPU type given), and its GPU's $/hour."""
    isl, osl = int(round(float(np.mean(trace.isl)))), int(round(float(np.mean(trace.osl))))
    pr = PlanRequest(
        model=req.model,
        gpus=req.gpus,
        max_gpus=min(req.max_gpus, req.worker_max_gpus),
        # one replica's shape: its budget is GPUs used; the windows buy whole units
        node_gpus=1,
        isl=isl,
        osl=osl,
        ttft_ms=req.ttft_ms,
        tpot_ms=req.tpot_ms,
        percentile=req.percentile,
        mode="agg",
        backend=req.backend,
        objective=req.objective,
        electricity_price=req.electricity_price,
        pue=req.pue,
        price_per_gpu_hour=req.price_per_gpu_hour,
        hardware_dirs=req.hardware_dirs,
        confidence=req.confidence,
        max_isl=req.max_isl,
        max_osl=req.max_osl,
        spec_decode=req.spec_decode,
    )
    best = plan(pr).best
    assert best.deployment.agg is not None
    dep = best.deployment.model_copy(
        update={"agg": best.deployment.agg.model_copy(update={"workers": 1})}
    )
    gpu = get_gpu(best.gpu, req.hardware_dirs)
    return dep, req.price_per_gpu_hour or gpu.price_per_gpu_hour_usd


def _candidates(w: WorkerConfig, max_replicas: int) -> CandidateArrays:
    p = w.parallel
    return CandidateArrays.from_lists(
        tp=p.tp,
        pp=p.pp,
        dp=p.dp,
        ep=p.ep,
        max_num_seqs=w.max_num_seqs,
        max_num_batched_tokens=w.max_num_batched_tokens,
        weight_quant=WEIGHT_QUANTS.index(w.weight_quant),
        kv_dtype=KV_DTYPES.index(w.kv_dtype),
        workers=np.arange(1, max_replicas + 1, dtype=float),
    )


class _Predictor:
    """Predictions of 1..R replicas of one worker for a workload (one vectorized call)."""

    def __init__(
        self, m: ModelSpec, req: CapacityRequest, dep: Deployment, max_replicas: int
    ) -> None:
        assert dep.agg is not None
        self.m, self.req, self.worker = m, req, dep.agg
        self.gpu = get_gpu(dep.gpu, req.hardware_dirs)
        self.cands = _candidates(dep.agg, max_replicas)

    def __call__(
        self, isl: LengthSpec, osl: LengthSpec, rate: float, cv: float
    ) -> dict[str, np.ndarray]:
        cv = float(np.clip(cv if math.isfinite(cv) else 1.0, *CV_RANGE))
        wl = Workload(
            isl=isl,
            osl=osl,
            rate_per_s=max(rate, 1e-9),
            arrival="gamma",
            arrival_cv=cv,
            prefix_hit=self.req.prefix_hit,
            spec_decode=self.req.spec_decode,
        )
        r = evaluate_batch(
            self.m,
            self.gpu,
            self.cands,
            wl,
            backend=self.req.backend,
            gpu_memory_utilization=self.worker.gpu_memory_utilization,
        )
        p = self.req.percentile
        out: dict[str, np.ndarray] = {
            f"{k}_{s}": np.asarray(getattr(r, f"{k}_{s}_s")) * 1e3
            for k in ("ttft", "tpot")
            for s in ("mean", "p50", "p90", "p99")
        }
        slots = np.minimum(self.worker.max_num_seqs * self.worker.parallel.dp, r.seq_capacity)
        hold = r.ttft_mean_s + np.maximum(osl.mean - 1.0, 0.0) * r.tpot_mean_s
        osl_cs2 = osl.second_moment / osl.mean**2 - 1.0
        waits = slot_wait(rate / self.cands.workers, hold, slots, cv * cv, osl_cs2)
        for s, w in waits.items():
            out[f"ttft_{s}"] = out[f"ttft_{s}"] + w * 1e3 + self.req.prefix_load_ms
        f_ttft, f_tpot = (self._factor(r.prefill_utilization, k) for k in ("ttft", "tpot"))
        ok = (
            r.feasible
            & (out[f"ttft_{p}"] * f_ttft <= self.req.ttft_ms)
            & (out[f"tpot_{p}"] * f_tpot <= self.req.tpot_ms)
        )
        out["ok"] = np.asarray(ok, dtype=bool)
        out["prefill_utilization"] = np.asarray(r.prefill_utilization, dtype=float)
        return out

    def probability_met(self, pred: dict[str, np.ndarray], n: int) -> dict[str, float]:
        """Per SLO, the probability that ``n`` replicas meet it (the band's quantile inverted at
        SLO / prediction; ``solvers.plan_core.meet_probability``)."""
        p, out = self.req.percentile, {}
        util = float(pred["prefill_utilization"][n - 1])
        quant = WEIGHT_QUANTS.index(self.worker.weight_quant)
        kv = KV_DTYPES.index(self.worker.kv_dtype)
        bands = candidate_bands(self.m, self.gpu, self.req.backend, 0, util, quant, kv)
        level = packaged_bands().table.level
        for metric, slo in (("ttft", self.req.ttft_ms), ("tpot", self.req.tpot_ms)):
            value = float(pred[f"{metric}_{p}"][n - 1])
            if not math.isfinite(value) or value <= 0:
                out[metric] = 0.0 if not math.isfinite(value) else 1.0
                continue
            out[metric] = round(meet_probability(bands[metric], math.log(slo / value), level), 4)
        return out

    def _factor(self, utilization: np.ndarray, metric: str) -> np.ndarray | float:
        """What ``metric``'s prediction is multiplied by to be met with probability
        ``confidence`` (1 at confidence 0: the point prediction), per replica count."""
        c = self.req.confidence
        if c == 0:
            return 1.0
        n = np.size(utilization)
        quant = np.full(n, WEIGHT_QUANTS.index(self.worker.weight_quant))
        kv = np.full(n, KV_DTYPES.index(self.worker.kv_dtype))
        util = np.asarray(utilization, dtype=float)
        back = self.req.backend
        return upper_factor(self.m, self.gpu, back, np.zeros(n), util, quant, kv, metric, None, c)


def erlang_c(a: np.ndarray, c: int) -> np.ndarray:
    """Probability that an arrival waits in M/M/c with offered load ``a`` (Erlangs), by the Erlang B
    recursion B_k = a·B_{k-1} / (k + a·B_{k-1}) and C = c·B / (c - a·(1 - B)); 1 where
    a >= c."""
    b = np.ones_like(a)
    for k in range(1, c + 1):
        b = a * b / (k + a * b)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = c * b / (c - a * (1.0 - b))
    return np.where(a < c, np.clip(out, 0.0, 1.0), 1.0)


def slot_wait(
    rate: np.ndarray, hold_s: np.ndarray, slots: np.ndarray, ca2: float, cs2: float
) -> dict[str, np.ndarray]:
    """Wait for a running slot (s), mean and percentiles, of an open loop at ``rate`` per replica.

    The serving model prices the prefill queue; a replica also admits at most ``slots`` requests
    at once (max_num_seqs per DP rank, or KV capacity), each holding its slot ``hold_s``. Near that
    limit requests queue for slots: G/G/c by Allen-Cunneen, Erlang C's M/M/c wait scaled by
    (ca2 + cs2)/2 (Allen 1990, "Probability, Statistics and Queueing Theory", sec. 6.3), with the
    M/M/c tail P(W > w) = C·exp(-C·w / E[W]) for percentiles. ``slots`` is one value for all
    replicas.
    """
    c = int(max(np.min(slots), 1.0))
    a = np.nan_to_num(rate * hold_s, nan=np.inf, posinf=np.inf)
    a = np.where(np.isfinite(a), a, float(c))
    pw = erlang_c(a, c)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.where(a < c, pw * hold_s / (c - a) * (ca2 + max(cs2, 0.0)) / 2.0, np.inf)
    out = {"mean": mean}
    for name, q in queueing.QUANTILES.items():
        out[name] = np.where(
            a < c, queueing.wait_quantile(mean, np.clip(pw, 1e-12, 1.0), q), np.inf
        )
    return out


def _fewest(ok: np.ndarray, floor: int) -> tuple[int, bool]:
    """(fewest replicas meeting the SLO, at least ``floor``; met?); the most replicas when none
    does."""
    hit = np.flatnonzero(ok[max(floor, 1) - 1 :])
    if hit.size:
        return int(hit[0]) + max(floor, 1), True
    return ok.size, False


def _stats(pred: dict[str, np.ndarray], key: str, n: int) -> Stats:
    vals = {s: float(pred[f"{key}_{s}"][n - 1]) for s in ("mean", "p50", "p90", "p99")}
    return Stats(**{k: (v if math.isfinite(v) else None) for k, v in vals.items()})


def _config(w: WorkerConfig, n: int) -> str:
    p = w.parallel
    extra = (f" dp{p.dp}" if p.dp > 1 else "") + (f" ep{p.ep}" if p.ep > 1 else "")
    return (
        f"{n} x agg tp{p.tp} pp{p.pp}{extra}, seqs {w.max_num_seqs}, "
        f"chunk {w.max_num_batched_tokens}, "
        f"kv {w.kv_dtype}, {w.weight_quant}"
    )


def _nan_none(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _plan_window(
    win: Window, predict: _Predictor, req: CapacityRequest, bought: Bought
) -> tuple[WindowPlan, np.ndarray | None]:
    """The window's plan and its ok-by-replica-count array (None for an empty window)."""
    common = dict(
        start_s=win.start_s,
        duration_s=win.duration_s,
        requests=win.requests,
        rate=win.rate,
        arrival_cv=_nan_none(win.arrival_cv),
        local_cv=_nan_none(win.local_cv),
        design_rate=win.design_rate,
        isl_mean=_nan_none(win.isl_mean),
        osl_mean=_nan_none(win.osl_mean),
    )
    if win.requests == 0:
        n = req.min_replicas
        return WindowPlan(
            **common,
            replicas=n,
            gpus=bought(n),
            config=_config(predict.worker, n),
            ttft_ms=Stats(),
            tpot_ms=Stats(),
            meets_slo=True,
        ), None
    isl, osl = win.lengths()
    pred = predict(isl, osl, win.design_rate, win.local_cv)
    n, met = _fewest(pred["ok"], req.min_replicas)
    return WindowPlan(
        **common,
        replicas=n,
        gpus=bought(n),
        config=_config(predict.worker, n),
        ttft_ms=_stats(pred, "ttft", n),
        tpot_ms=_stats(pred, "tpot", n),
        meets_slo=met,
        probability_met=predict.probability_met(pred, n),
    ), pred["ok"]


def _autoscaled(plans: list[WindowPlan], bought: Bought, scale_up_s: float, price: float) -> Fleet:
    hours, prev = 0.0, plans[0].replicas
    for w in plans:
        hours += bought(w.replicas) * w.duration_s / SECONDS_PER_HOUR
        hours += max(bought(w.replicas) - bought(prev), 0) * scale_up_s / SECONDS_PER_HOUR
        prev = w.replicas
    bad = tuple(i for i, w in enumerate(plans) if not w.meets_slo)
    return Fleet(
        gpus=max(w.gpus for w in plans),
        gpu_hours=hours,
        cost=hours * price,
        windows_violating=len(bad),
        violating_windows=bad,
    )


def _static(
    n: int, plans: list[WindowPlan], oks: list[np.ndarray | None], bought: Bought, price: float
) -> Fleet:
    hours = bought(n) * sum(w.duration_s for w in plans) / SECONDS_PER_HOUR
    bad = tuple(
        i for i, ok in enumerate(oks) if ok is not None and (n < 1 or n > ok.size or not ok[n - 1])
    )
    return Fleet(
        replicas=n,
        gpus=bought(n),
        gpu_hours=hours,
        cost=hours * price,
        windows_violating=len(bad),
        violating_windows=bad,
    )


def _mean_replicas(trace: Trace, predict: _Predictor, floor: int) -> int:
    """Replicas sized for the trace's mean rate as Poisson arrivals with its overall lengths."""
    step = max(1, math.ceil(len(trace) / 4096))
    isl = LengthSpec(
        mean=float(np.mean(trace.isl)), samples=tuple(int(v) for v in trace.isl[::step])
    )
    osl = LengthSpec(
        mean=float(np.mean(trace.osl)), samples=tuple(int(v) for v in trace.osl[::step])
    )
    rate = len(trace) / max(trace.duration_s, 1e-9)
    return _fewest(predict(isl, osl, rate, 1.0)["ok"], floor)[0]


def _mean_power(
    trace: Trace, req: CapacityRequest, dep: Deployment, n: int, bought: Bought, price: float
) -> PowerSummary | None:
    """Power of ``n`` replicas of ``dep`` at the trace's mean rate and lengths."""
    assert dep.agg is not None
    isl, osl = (max(int(round(float(np.mean(x)))), 1) for x in (trace.isl, trace.osl))
    wl = fixed(isl, osl, rate_per_s=len(trace) / max(trace.duration_s, 1e-9))
    wl = wl.model_copy(update={"prefix_hit": req.prefix_hit})  # as the windows are sized
    agg = dep.agg.model_copy(update={"workers": n})
    gpu = get_gpu(dep.gpu, req.hardware_dirs)
    cost = (bought(n), price, req.electricity_price, req.pue)
    return mean_load_power(load_model(req.model), gpu, agg, wl, req.backend, *cost)


def capacity(trace: Trace, req: CapacityRequest) -> CapacityResult:
    """Size every window of ``trace`` (see module docstring); speculative decoding decided among
    ``req.spec_options`` where given (``_capacity_with_spec``)."""
    if req.spec_options:
        return _capacity_with_spec(trace, req, _capacity_one)
    return _capacity_one(trace, req)


def _capacity_one(trace: Trace, req: CapacityRequest) -> CapacityResult:
    """Size every window of ``trace`` with ``req.spec_decode``."""
    if not trace.timed:
        raise PlannerInputError(
            "--trace", "capacity needs arrival times (arrival_s or BurstGPT's Timestamp)"
        )
    t0 = time.perf_counter()
    wins = split(trace, req.window_s, QUANTILE[req.percentile])
    dep, price = _shape(req, trace)
    assert dep.agg is not None
    gpw = dep.agg.parallel.gpus
    max_replicas = max(req.max_gpus // gpw, 1)
    if max_replicas < req.min_replicas:
        raise InfeasibleError(
            "--max-gpus",
            f"{req.min_replicas} replicas of {gpw} GPUs exceed --max-gpus {req.max_gpus}",
        )
    predict = _Predictor(load_model(req.model), req, dep, max_replicas)
    unit, unit_source = purchase_unit(predict.gpu, req.node_gpus)

    def bought(n: int) -> int:
        return int(units_bought(np.array(gpw), np.array(n), unit)) * unit

    pairs, progress = [], Progress(lambda line: print(line, file=sys.stderr))
    for w in wins:
        pairs.append(_plan_window(w, predict, req, bought))
        progress(f"capacity: sized {w.index + 1}/{len(wins)} windows")
    plans, oks = [p for p, _ in pairs], [ok for _, ok in pairs]
    peak = max(p.replicas for p in plans)
    mean_n = _mean_replicas(trace, predict, req.min_replicas)
    return CapacityResult(
        model=dep.model,
        gpu=dep.gpu,
        backend=req.backend,
        slo={"ttft_ms": req.ttft_ms, "tpot_ms": req.tpot_ms, "percentile": req.percentile},
        window_s=req.window_s,
        scale_up_s=req.scale_up_s,
        price_per_gpu_hour=price,
        trace={
            "source": trace.source,
            "layout": trace.layout,
            "requests": len(trace),
            "duration_s": trace.duration_s,
            "zero_token_rows": trace.zero_token_rows,
            "max_isl": req.max_isl or 0,
            "max_osl": req.max_osl or 0,
            "too_long_requests": req.too_long_requests,
        },
        deployment=dep,
        windows=tuple(plans),
        autoscaled=_autoscaled(plans, bought, req.scale_up_s, price),
        static_peak=_static(peak, plans, oks, bought, price),
        static_mean=_static(mean_n, plans, oks, bought, price),
        power=_mean_power(trace, req, dep, max(mean_n, 1), bought, price),
        purchase_unit={"gpus": unit, "source": unit_source},
        confidence=req.confidence,
        method=METHOD,
        seconds=time.perf_counter() - t0,
    )


def _capacity_with_spec(
    trace: Trace, req: CapacityRequest, size: Callable[[Trace, CapacityRequest], CapacityResult]
) -> CapacityResult:
    """``size`` (one capacity sizing) without speculative decoding and with each of
    ``req.spec_options``; the autoscaled fleet with the fewest windows missing the SLO, then the
    lowest cost, wins (none on a tie)."""
    settings: list[SpecDecode | None] = [None, *req.spec_options]
    results: list[CapacityResult | None] = []
    errors: list[InfeasibleError] = []
    for sd in settings:
        try:
            one = req.model_copy(update={"spec_decode": sd, "spec_options": ()})
            results.append(size(trace, one))
        except InfeasibleError as exc:
            results.append(None)
            errors.append(exc)
    if all(r is None for r in results):
        raise errors[0]

    def key(i: int) -> tuple[int, float, int]:
        r = results[i]
        assert r is not None
        return (r.autoscaled.windows_violating, r.autoscaled.cost, i)

    best_i = min((i for i, r in enumerate(results) if r is not None), key=key)
    rows = [
        {"setting": spec_label(sd)}
        | (
            {"feasible": False}
            if r is None
            else {
                "feasible": True,
                "autoscaled_cost_usd": round(r.autoscaled.cost, 2),
                "windows_violating": r.autoscaled.windows_violating,
                "gpu_hours": round(r.autoscaled.gpu_hours, 1),
            }
        )
        for sd, r in zip(settings, results, strict=True)
    ]
    win, res = settings[best_i], results[best_i]
    assert res is not None
    base = results[0]
    if win is None:
        why = "declined: no speculative setting sizes a cheaper autoscaled fleet"
    elif base is None:
        why = f"{spec_label(win)}: nothing can be sized without speculative decoding"
    else:
        why = (
            f"{spec_label(win)} ({win.tokens_per_step:.4g} tokens per step): autoscaled fleet "
            f"${res.autoscaled.cost:.4g} against ${base.autoscaled.cost:.4g} without"
        )
    decision = {"chosen": spec_label(win), "why": why, "options": rows}
    return res.model_copy(update={"speculative_decision": decision})
