"""Comm fit choices (kernels_db.fit): the custom all-reduce is fitted on the small messages the
engines run it for, and (collective, GPU count) groups with an implausibly low bus bandwidth are
left out of the fit (pricing falls back to the nearest fitted GPU count)."""

from __future__ import annotations

import numpy as np

from hardware.catalog import get_gpu
from kernels_db import comm as cm
from kernels_db.fit import (
    CUSTOM_ALL_REDUCE_MAX_BYTES,
    MIN_BUS_FRACTION,
    fit_comm,
    implausible_comm_rows,
)
from kernels_db.lookup import KernelDB
from kernels_db.tables import KernelTable

LINK = 450e9


def _rows(
    collective: str, n: int, bus_bw: float, latency_s: float, sizes: np.ndarray
) -> dict[str, np.ndarray]:
    f = cm.algo_factor(collective, np.full(sizes.size, n))
    return {
        "collective": np.full(sizes.size, collective),
        "n_gpus": np.full(sizes.size, n),
        "bytes": sizes.astype(np.int64),
        "latency_s": latency_s + sizes * f / bus_bw,
    }


def _table(parts: list[dict[str, np.ndarray]]) -> KernelTable:
    cols = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    lat = cols.pop("latency_s")
    cols["link"] = np.full(lat.size, "nvlink")
    return KernelTable(
        op="comm",
        gpu="h100_sxm",
        keys=cols,
        latency_s=lat,
        source="synthetic.csv",
        lines=np.arange(lat.size),
    )


def test_custom_all_reduce_fitted_on_small_messages_only() -> None:
    small = 2.0 ** np.arange(10, 21)  # 1 KiB .. 1 MiB
    big = 2.0 ** np.arange(21, 28)
    custom_small = _rows("custom_all_reduce", 8, 80e9, 3e-6, small)
    custom_big = _rows("custom_all_reduce", 8, 350e9, 20e-6, big)  # what AUTO hands to NCCL
    nccl = _rows("all_reduce", 8, 350e9, 20e-6, np.concatenate([small, big]))
    fit = fit_comm(_table([custom_small, custom_big, nccl]), link_bytes_per_s=LINK)
    prm = fit.params["custom_all_reduce"][8]
    assert (
        abs(prm.bus_bandwidth_bytes_per_s / 80e9 - 1) < 0.02
        and abs(prm.latency_s / 3e-6 - 1) < 0.05
    )
    assert fit.fitted_to.rows == small.size + small.size + big.size
    assert CUSTOM_ALL_REDUCE_MAX_BYTES == 2.0**20


def test_implausible_bus_bandwidth_groups_are_left_out() -> None:
    sizes = 2.0 ** np.arange(10, 28)
    ok = _rows("all_reduce", 2, 0.6 * LINK, 7e-6, sizes)
    bad = _rows("all_reduce", 8, 0.5 * MIN_BUS_FRACTION * LINK, 20e-6, sizes)
    table = _table([ok, bad])
    assert implausible_comm_rows(table, LINK).sum() == sizes.size
    assert not implausible_comm_rows(table, None).any()
    fit = fit_comm(table, link_bytes_per_s=LINK)
    assert set(fit.params["all_reduce"]) == {2}
    assert set(fit_comm(table).params["all_reduce"]) == {2, 8}


def test_engine_all_reduce_price_is_continuous_and_monotone_in_bytes() -> None:
    """The planner prices an in-domain all-reduce as min(custom, NCCL):
    no step at the fit boundary."""
    for gpu in ("h100_sxm", "a100_sxm", "b200_sxm", "l40s"):
        db = KernelDB.for_gpu(get_gpu(gpu))
        b = np.geomspace(1e3, 1e9, 2000)
        for n in (2, 4, 8):
            t = np.minimum(
                db.comm("all_reduce", np.full(b.size, n), b).seconds,
                db.comm("custom_all_reduce", np.full(b.size, n), b).seconds,
            )
            assert np.all(np.diff(t) >= 0), (gpu, n)
            assert np.max(t[1:] / t[:-1]) < 1.02, (gpu, n)
