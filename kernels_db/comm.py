"""Alpha-beta model of collectives: time = latency + bytes·algo_factor / bus_bandwidth.

Algorithm factors are the nccl-tests bus-bandwidth factors (NVIDIA nccl-tests doc/PERFORMANCE.md):
ring all-reduce 2(n-1)/n; all-gather, reduce-scatter and all-to-all (n-1)/n; send/recv 1. One GPU
costs nothing. NVLS (NVLink SHARP) all-reduce moves each byte about once: factor 1.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hardware.spec import GpuSpec
from kernels_db.fitted import DEFAULT_COMM_BW_EFF, DEFAULT_COMM_LATENCY_S, CommFamilyFit, CommParams
from kernels_db.ops import Size

CUSTOM_ALL_REDUCE = "custom_all_reduce"
"""The engines' own one-/two-shot all-reduce kernels (NCCL for large messages); priced as the
faster of it and NCCL's all-reduce (``kernels_db.lookup.StepPricer``, ``kernels_db.validate``), as
the engines switch between the two."""
ALL_REDUCE_LIKE = ("all_reduce", CUSTOM_ALL_REDUCE)


def algo_factor(collective: str, n_gpus: np.ndarray, nvls: bool = False) -> np.ndarray:
    """Bytes on the busiest link per byte of message, for ``n_gpus`` ranks."""
    n = np.asarray(n_gpus, dtype=float)
    frac = np.where(n > 1, (n - 1.0) / np.maximum(n, 1.0), 0.0)
    if collective in ALL_REDUCE_LIKE:
        return np.asarray(np.where(n > 1, 1.0, 0.0)) if nvls else 2.0 * frac
    if collective == "send_recv":
        return np.asarray(np.where(n > 1, 1.0, 0.0))
    return frac


def alpha_beta(
    nbytes: Size,
    factor: Size,
    latency_s: Size,
    bus_bandwidth_bytes_per_s: Size,
    extra: Sequence[tuple[Size, Size]] = (),
) -> np.ndarray:
    """Seconds of one collective; zero where the factor is zero (one GPU). ``extra`` = (latency,
    bus bandwidth) of latency-optimised protocols: the fastest line is taken (``CommParams``)."""
    wire = np.asarray(nbytes, dtype=float) * factor
    t = latency_s + wire / bus_bandwidth_bytes_per_s
    for lat, bw in extra:
        t = np.minimum(t, lat + wire / bw)
    return np.asarray(np.where(np.asarray(factor) > 0, t, 0.0))


def params_time(nbytes: Size, factor: Size, prm: CommParams) -> np.ndarray:
    """``alpha_beta`` under one parameter set (all of its lines)."""
    return alpha_beta(
        nbytes, factor, prm.latency_s, prm.bus_bandwidth_bytes_per_s, prm.extra_lines()
    )


def scale_up_link(spec: GpuSpec) -> str:
    """Our link name (``schema.LINKS``) for the GPU's scale-up fabric."""
    name = spec.scale_up.name.lower()
    if "shared memory" in name:
        return "local"  # ranks on one host (the CPU spec) talk through shared memory
    if "pcie" in name:
        return "pcie"
    if "infinity" in name or "xgmi" in name:
        return "xgmi"
    return "nvlink"


def default_params(spec: GpuSpec, n_gpus: int, link: str) -> CommParams:
    """Uncalibrated parameters: link bandwidth x default efficiency;
    NIC beyond the scale-up domain."""
    if link == "ib" or n_gpus > spec.scale_up.domain_size:
        bw = spec.scale_out_bandwidth_bytes_per_s
        lat = 2 * DEFAULT_COMM_LATENCY_S
    elif link == "pcie":
        bw, lat = spec.pcie_bandwidth_bytes_per_s, DEFAULT_COMM_LATENCY_S
    else:
        bw, lat = (
            spec.scale_up.bandwidth_bytes_per_s,
            max(DEFAULT_COMM_LATENCY_S, spec.scale_up.latency_s),
        )
    return CommParams(latency_s=lat, bus_bandwidth_bytes_per_s=bw * DEFAULT_COMM_BW_EFF)


def fitted_params(
    fit: CommFamilyFit | None, collective: str, n_gpus: int, spec: GpuSpec
) -> CommParams | None:
    """Fitted parameters for (collective, n) inside the scale-up domain;
    nearest fitted GPU count."""
    if fit is None or n_gpus > spec.scale_up.domain_size:
        return None
    by_n = fit.params.get(collective)
    if not by_n:
        return None
    nearest = min(by_n, key=lambda n: (abs(np.log(n) - np.log(n_gpus)), -n))
    return by_n[nearest]
