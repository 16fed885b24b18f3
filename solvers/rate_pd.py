"""Size a disaggregated deployment for an open-loop request rate with the P/D MILP.

Prefill option capacity = mu_p x rho_max, where rho_max is the highest per-worker utilization whose
TTFT percentile (own service + KV transfer + M/M/1 waiting tail) meets the SLO; decode options are
(worker, batch) points within the TPOT SLO with capacity b / (osl x T_dec).
"""

from __future__ import annotations

import numpy as np

from hardware.spec import GpuSpec
from solvers.candidates import Block, Load
from solvers.disagg import PhaseSet, Units
from solvers.pd_milp import PdSolution, PhaseOptions, solve_pd
from solvers.perf import PERCENTILES, Engine, LatencyArrays, _ttft

RHO_GRID = np.linspace(0.01, 0.99, 99)


def ttft_at(pre: PhaseSet, idx: np.ndarray, rho: np.ndarray, t_extra: np.ndarray) -> np.ndarray:
    """(4, K) TTFT seconds of prefill workers ``idx`` at per-worker utilization ``rho`` (M/M/1 tail)."""
    assert pre.prefill is not None
    service = pre.prefill.service_s[idx]
    mean_wait = rho / (1.0 - rho) / pre.prefill.capacity_per_s[idx]
    return _ttft(service, mean_wait, rho, t_extra)


def max_utilization(pre: PhaseSet, extra_s: np.ndarray, slo_ttft_ms: float, percentile: str) -> np.ndarray:
    """Largest grid utilization per prefill worker whose TTFT percentile meets the SLO (0 if none)."""
    assert pre.prefill is not None
    k = pre.workers.size
    pidx = PERCENTILES.index(percentile)
    idx = np.tile(np.arange(k), RHO_GRID.size)
    rho = np.repeat(RHO_GRID, k)
    ttft = ttft_at(pre, idx, rho, extra_s[idx])[pidx].reshape(RHO_GRID.size, k)
    ok = ttft * 1e3 <= slo_ttft_ms
    return np.where(ok.any(axis=0), RHO_GRID[np.argmax(np.where(ok, RHO_GRID[:, None], -1), axis=0)], 0.0)


def _extra_s(gpu: GpuSpec, eng: Engine, pre: PhaseSet, isl: int, max_gpus: int) -> np.ndarray:
    bw = gpu.scale_up.bandwidth_bytes_per_s if max_gpus <= gpu.scale_up.domain_size else gpu.scale_out_bandwidth_bytes_per_s
    return isl * pre.transfer_kv_per_token / bw + eng.request_overhead_s


def rate_disagg_block(gpu: GpuSpec, eng: Engine, pre: PhaseSet, dec: PhaseSet, load: Load, slo_ttft_ms: float,
                      slo_tpot_ms: float, percentile: str, max_gpus: int, node_gpus: int | None,
                      price: float) -> tuple[Block | None, PdSolution | None]:
    """Solve the P/D MILP for one GPU type and wrap the answer as a one-candidate block."""
    assert pre.prefill is not None and dec.decode is not None and load.rate_per_s is not None
    extra = _extra_s(gpu, eng, pre, load.isl, max_gpus)
    rho_max = max_utilization(pre, extra, slo_ttft_ms, percentile)
    p_ok = np.flatnonzero(rho_max > 0)
    d_ok = np.flatnonzero(dec.decode.step_s * 1e3 <= slo_tpot_ms)
    if p_ok.size == 0 or d_ok.size == 0:
        return None, None
    wp, wd = pre.workers, dec.workers
    popt = PhaseOptions(wp.quant[p_ok] * 10 + wp.kv[p_ok], wp.gpus_per_worker[p_ok],
                        pre.prefill.capacity_per_s[p_ok] * rho_max[p_ok], np.full(p_ok.size, price))
    dopt = PhaseOptions(wd.quant[d_ok] * 10 + wd.kv[d_ok], wd.gpus_per_worker[d_ok],
                        dec.decode.capacity_per_s[d_ok], np.full(d_ok.size, price))
    sol = solve_pd(popt, dopt, load.rate_per_s, max_gpus, node_gpus=node_gpus)
    if sol is None:
        return None, None
    p, d = p_ok[sol.prefill], d_ok[sol.decode]
    rho = np.array([load.rate_per_s / (sol.x * pre.prefill.capacity_per_s[p])])
    ttft = ttft_at(pre, np.array([p]), rho, extra[[p]])
    t_dec = dec.decode.step_s[[d]]
    met = LatencyArrays(ttft * 1e3, np.broadcast_to(t_dec * 1e3, (len(PERCENTILES), 1)),
                        np.array([load.rate_per_s]), np.array([load.rate_per_s * load.osl / sol.gpus]),
                        1.0 / t_dec, dec.decode.running[[d]] * sol.y)
    units = Units(np.array([p]), np.array([d]), np.array([sol.x]), np.array([sol.y]), met)
    block = Block("disagg", gpu, met, dec.clients[[d]], np.array([sol.gpus]), np.array([1]), units=units,
                  prefill=pre, decode=dec, evaluated=int(p_ok.size + d_ok.size))
    return block, sol
