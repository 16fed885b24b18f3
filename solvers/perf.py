"""Vectorized serving metrics for worker candidates, built on planner's step model.

This is the solvers' thin adapter over the serving model: one forward step is priced by
:func:`planner.step_model.step_time` (op graph x kernel pricer, engine calibration), queueing uses
:mod:`planner.queueing`; what is composed here is how a worker runs a closed loop of clients:

* **Aggregated** worker with chunked prefill: ``b = min(clients, max_num_seqs, KV capacity)``
  requests run; a step carries the decode tokens of the running requests and, in a fraction ``f``
  of steps, a prefill chunk of ``chunk - b`` tokens. Little's law: X = b / (R + osl·T) with R the
  prefill-stage response (Schweitzer MVA, :func:`planner.queueing.closed_loop_response`) and T the
  mean step time; f = X·isl·T_mix / (chunk - b) closes the fixed point (a few iterations).
  TPOT of one request: T_dec + (T_mix - T_dec)·k/osl with k ~ Binomial(osl, f) prefill steps met,
  so larger chunks cut TTFT (fewer prefill steps) and raise the TPOT tail (heavier mixed steps).
* **Prefill worker** (disaggregated): service time alone S = ceil(isl/chunk) steps; capacity
  mu = chunk / (isl · T_chunk) requests/s.
* **Decode worker**: T_dec at ``b`` running requests; mu = b / (osl · T_dec).
All functions take one GPU type and arrays of K candidates and return arrays of shape (K,).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hardware.spec import GpuSpec
from planner.memory import KV_BYTES, WEIGHT_BYTES
from planner.model_spec import ModelSpec
from planner.opgraph import ParallelArrays, StepMix
from planner.queueing import QUANTILES, Z_SCORES, closed_loop_response, wait_quantile
from planner.step_model import RooflinePricer, step_time
from solvers.space import KV_DTYPES, QUANTS, Workers

PERCENTILES: tuple[str, ...] = ("mean", "p50", "p90", "p99")
FIXED_POINT_ITERATIONS = 4
"""Iterations of the prefill-fraction fixed point (converges to <1% in 3-4 on the acceptance case)."""
MAX_PREFILL_UTILIZATION = 0.98
"""Cap on the fraction of steps that carry prefill before the queue is called saturated."""


@dataclass(frozen=True)
class Engine:
    """Engine calibration the composition needs (from planner.engine_calibration when available)."""

    name: str = "vllm"
    step_overhead_s: float = 0.0025
    kernel_scale: float = 1.0
    request_overhead_s: float = 0.010
    source: str = "planner/calibration/engines.yaml"


def engine_for(backend: str) -> Engine:
    """Calibration of ``backend`` read through planner.engine_calibration."""
    from planner.engine_calibration import engine

    cal = engine(backend)
    return Engine(backend, cal.step_overhead_s.value, cal.kernel_scale.value, cal.request_overhead_s.value)


@dataclass(frozen=True)
class LatencyArrays:
    """Latency statistics in ms, shape (4, K) in the order of PERCENTILES, plus rates."""

    ttft_ms: np.ndarray
    tpot_ms: np.ndarray
    requests_per_s: np.ndarray  # one worker (agg) or one unit (disagg)
    output_tok_s_per_gpu: np.ndarray
    output_tok_s_per_user: np.ndarray
    running: np.ndarray  # requests in the engine(s)


def parallel_arrays(gpu: GpuSpec, w: Workers) -> ParallelArrays:
    """planner.opgraph's parallelism + precision arrays for the workers."""
    wb = np.array([WEIGHT_BYTES[q] for q in QUANTS])[w.quant]
    kvb = np.array([KV_BYTES[k] for k in KV_DTYPES])[w.kv]
    peak = np.array([gpu.peak_flops(q) for q in QUANTS])[w.quant]
    f = lambda a: a.astype(float)  # noqa: E731
    return ParallelArrays(tp=f(w.tp), pp=f(w.pp), dp=f(w.dp), ep=f(w.ep), weight_bytes=wb, kv_bytes=kvb,
                          gemm_peak_flops_per_s=peak)


def step_seconds(m: ModelSpec, gpu: GpuSpec, eng: Engine, par: ParallelArrays, decode: np.ndarray,
                 ctx: float, prefill: np.ndarray, chunk: np.ndarray, prior: np.ndarray) -> np.ndarray:
    """One step with ``decode`` requests at context ``ctx`` and ``prefill`` tokens in chunks of ``chunk``."""
    k = decode.shape[0]
    mix = StepMix(decode_reqs=decode.astype(float), decode_ctx=np.full(k, float(ctx)),
                  prefill_tokens=prefill.astype(float), prefill_chunk=chunk.astype(float),
                  prefill_prior=prior.astype(float))
    return step_time(m, par, mix, RooflinePricer(gpu), kernel_scale=eng.kernel_scale,
                     overhead_s=eng.step_overhead_s)


def _binomial_tpot(t_dec: np.ndarray, t_mix: np.ndarray, f: np.ndarray, osl: int) -> np.ndarray:
    """(4, K) TPOT seconds: mean and quantiles of T_dec + (T_mix-T_dec)·Binomial(osl, f)/osl."""
    extra = t_mix - t_dec
    std = np.sqrt(f * (1.0 - f) / max(osl, 1))
    rows = [t_dec + extra * f] + [t_dec + extra * np.clip(f + Z_SCORES[p] * std, 0.0, 1.0) for p in PERCENTILES[1:]]
    return np.stack(rows)


def _ttft(own: np.ndarray, mean_wait: np.ndarray, rho: np.ndarray, extra: np.ndarray) -> np.ndarray:
    """(4, K) TTFT seconds: own service + queueing (exponential tail) + fixed extras."""
    rows = [own + mean_wait + extra]
    rows += [own + wait_quantile(mean_wait, rho, QUANTILES[p]) + extra for p in PERCENTILES[1:]]
    return np.stack(rows)


def agg_metrics(m: ModelSpec, gpu: GpuSpec, eng: Engine, w: Workers, cap: np.ndarray,
                clients: np.ndarray, isl: int, osl: int) -> LatencyArrays:
    """Closed loop of ``clients`` per aggregated worker (see the module docstring)."""
    par = parallel_arrays(gpu, w)
    b = np.maximum(np.minimum(np.minimum(clients, w.max_num_seqs), cap), 1).astype(float)
    room = np.maximum(w.chunk - b, 1.0)
    piece = np.minimum(room, float(isl))
    ctx = isl + osl / 2.0
    prior = np.maximum(isl - piece, 0.0) / 2.0
    t_dec = step_seconds(m, gpu, eng, par, b, ctx, np.zeros_like(b), piece, prior)
    t_mix = step_seconds(m, gpu, eng, par, b, ctx, piece, piece, prior)
    steps = np.ceil(isl / piece)
    own = steps * t_mix
    f = np.minimum(b * isl / osl / piece, MAX_PREFILL_UTILIZATION)
    for _ in range(FIXED_POINT_ITERATIONS):
        t = f * t_mix + (1.0 - f) * t_dec
        r = closed_loop_response(own, own, osl * t, b)
        x = b / (r + osl * t)
        f = np.minimum(x * steps * t_mix, MAX_PREFILL_UTILIZATION)
    t = f * t_mix + (1.0 - f) * t_dec
    slot_wait = np.maximum(clients - b, 0.0) / x
    ttft = _ttft(own, np.maximum(r - own, 0.0), f, slot_wait + eng.request_overhead_s)
    tpot = _binomial_tpot(t_dec, t_mix, f, osl)
    gpw = w.gpus_per_worker.astype(float)
    return LatencyArrays(ttft * 1e3, tpot * 1e3, x, x * osl / gpw, 1.0 / tpot[0], b)


@dataclass(frozen=True)
class PrefillArrays:
    """Prefill worker: service time of one prompt alone (s) and capacity (requests/s)."""

    service_s: np.ndarray
    capacity_per_s: np.ndarray


def prefill_metrics(m: ModelSpec, gpu: GpuSpec, eng: Engine, w: Workers, isl: int) -> PrefillArrays:
    """A prefill-only worker running chunks of ``chunk`` tokens."""
    par = parallel_arrays(gpu, w)
    zero = np.zeros(w.size)
    piece = np.minimum(w.chunk, isl).astype(float)
    prior = np.maximum(isl - piece, 0.0) / 2.0
    t_piece = step_seconds(m, gpu, eng, par, zero, 1.0, piece, piece, prior)
    full = w.chunk.astype(float)
    t_full = step_seconds(m, gpu, eng, par, zero, 1.0, full, piece, prior)
    return PrefillArrays(np.ceil(isl / piece) * t_piece, full / (isl * t_full))


@dataclass(frozen=True)
class DecodeArrays:
    """Decode worker at ``running`` requests: step time (s) and capacity (requests/s)."""

    running: np.ndarray
    step_s: np.ndarray
    capacity_per_s: np.ndarray


def decode_metrics(m: ModelSpec, gpu: GpuSpec, eng: Engine, w: Workers, cap: np.ndarray,
                   clients: np.ndarray, isl: int, osl: int) -> DecodeArrays:
    """A decode-only worker holding ``min(clients, max_num_seqs, KV capacity)`` requests."""
    par = parallel_arrays(gpu, w)
    b = np.maximum(np.minimum(np.minimum(clients, w.max_num_seqs), cap), 1).astype(float)
    zero = np.zeros(w.size)
    t = step_seconds(m, gpu, eng, par, b, isl + osl / 2.0, zero, np.ones(w.size), zero)
    return DecodeArrays(b, t, b / (osl * t))
