"""Disaggregated (xPyD) units: pair prefill and decode workers with worker counts, vectorized.

A unit is x prefill workers + y decode workers of the same weight and KV dtypes. Closed loop of
N = y·b clients (b running per decode worker): each request queues for prefill (the x workers act as
one station of capacity x·mu_p, Schweitzer MVA), moves its KV (isl · KV bytes/token over NVLink
inside one scale-up domain, else the NIC), then decodes for osl·T_dec seconds:
X = N / (R + osl·T_dec), TTFT = R + KV transfer + request overhead.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hardware.spec import GpuSpec
from planner.queueing import closed_loop_response
from solvers.pareto import group_pareto
from solvers.perf import PERCENTILES, DecodeArrays, Engine, LatencyArrays, PrefillArrays, _ttft
from solvers.space import Workers


@dataclass(frozen=True)
class PhaseSet:
    """Candidates of one phase after memory pruning, with their metrics and shard terms."""

    workers: Workers
    clients: np.ndarray  # decode: clients per worker; prefill: unused zeros
    transfer_kv_per_token: np.ndarray
    prefill: PrefillArrays | None = None
    decode: DecodeArrays | None = None


@dataclass(frozen=True)
class Units:
    """Disaggregated unit candidates: indices into the prefill / decode sets and worker counts."""

    p: np.ndarray
    d: np.ndarray
    x: np.ndarray
    y: np.ndarray
    metrics: LatencyArrays

    @property
    def size(self) -> int:
        return int(self.p.size)


def prune_prefill(s: PhaseSet) -> np.ndarray:
    """Indices of prefill workers on the (fast alone, high capacity per GPU) front per dtype pair and size."""
    assert s.prefill is not None
    w = s.workers
    keys = (w.quant * 10 + w.kv) * 1000 + w.gpus_per_worker
    per_gpu = s.prefill.capacity_per_s / w.gpus_per_worker
    return np.flatnonzero(group_pareto(keys, per_gpu, -s.prefill.service_s))


def prune_decode(s: PhaseSet, tpot_slo_ms: float, per_level: bool = False) -> np.ndarray:
    """Indices of decode points within the TPOT SLO on the (tok/s/GPU, tok/s/user) front per group."""
    assert s.decode is not None
    w, dec = s.workers, s.decode
    ok = dec.step_s * 1e3 <= tpot_slo_ms
    keys = (w.quant * 10 + w.kv) * 1000 + w.gpus_per_worker + (s.clients * 100_000 if per_level else 0)
    per_gpu = dec.running / dec.step_s / w.gpus_per_worker
    sel = np.flatnonzero(ok)
    return sel[group_pareto(keys[sel], per_gpu[sel], 1.0 / dec.step_s[sel])]


def _pairs(pre: PhaseSet, dec: PhaseSet, pi: np.ndarray, di: np.ndarray, max_gpus: int) -> tuple[np.ndarray, ...]:
    """All (prefill, decode, x, y) with equal dtypes and x·gp + y·gd <= max_gpus."""
    PP, DD = np.meshgrid(pi, di, indexing="ij")
    P, D = PP.ravel(), DD.ravel()
    same = (pre.workers.quant[P] == dec.workers.quant[D]) & (pre.workers.kv[P] == dec.workers.kv[D])
    P, D = P[same], D[same]
    gp, gd = pre.workers.gpus_per_worker[P], dec.workers.gpus_per_worker[D]
    counts = np.arange(1, max_gpus + 1)
    XX, YY = np.meshgrid(counts, counts, indexing="ij")
    xs, ys = XX.ravel(), YY.ravel()
    n = P.size
    Pr, Dr = np.repeat(P, xs.size), np.repeat(D, xs.size)
    Xr, Yr = np.tile(xs, n), np.tile(ys, n)
    keep = Xr * np.repeat(gp, xs.size) + Yr * np.repeat(gd, xs.size) <= max_gpus
    return Pr[keep], Dr[keep], Xr[keep], Yr[keep]


def unit_metrics(gpu: GpuSpec, eng: Engine, pre: PhaseSet, dec: PhaseSet, p: np.ndarray, d: np.ndarray,
                 x: np.ndarray, y: np.ndarray, isl: int, osl: int) -> LatencyArrays:
    """Closed-loop metrics of each unit (see the module docstring)."""
    assert pre.prefill is not None and dec.decode is not None
    gpus = x * pre.workers.gpus_per_worker[p] + y * dec.workers.gpus_per_worker[d]
    bw = np.where(gpus <= gpu.scale_up.domain_size, gpu.scale_up.bandwidth_bytes_per_s,
                  gpu.scale_out_bandwidth_bytes_per_s)
    t_kv = isl * pre.transfer_kv_per_token[p] / bw
    service = pre.prefill.service_s[p]
    cap = x * pre.prefill.capacity_per_s[p]
    t_dec = dec.decode.step_s[d]
    n = y * dec.decode.running[d]
    z = osl * t_dec
    r = closed_loop_response(service, 1.0 / cap, z, n)
    xput = n / (r + z)
    rho = np.minimum(xput / cap, 0.999)
    ttft = _ttft(service, np.maximum(r - service, 0.0), rho, t_kv + eng.request_overhead_s)
    tpot = np.broadcast_to(t_dec, (len(PERCENTILES), t_dec.size))
    return LatencyArrays(ttft * 1e3, tpot * 1e3, xput, xput * osl / gpus, 1.0 / t_dec, n)


def build_units(gpu: GpuSpec, eng: Engine, pre: PhaseSet, dec: PhaseSet, tpot_slo_ms: float,
                max_gpus: int, isl: int, osl: int, total_clients: int | None = None) -> Units:
    """Prune each phase to its front, pair them with every worker count that fits, evaluate.

    With ``total_clients`` N, only units whose decode workers share N clients (ceil(N/y) each) stay.
    """
    p, d, x, y = _pairs(pre, dec, prune_prefill(pre), prune_decode(dec, tpot_slo_ms, total_clients is not None),
                        max_gpus)
    if total_clients is not None:
        keep = dec.clients[d] == np.ceil(total_clients / y)
        p, d, x, y = p[keep], d[keep], x[keep], y[keep]
    return Units(p, d, x, y, unit_metrics(gpu, eng, pre, dec, p, d, x, y, isl, osl))
