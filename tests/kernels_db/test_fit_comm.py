"""Comm fit choices (kernels_db.fit): a collective is the fastest of up to three alpha-beta lines
(protocols), each bounded; the custom all-reduce follows its own kernel at small sizes and NCCL at
large ones; (collective, GPU count) groups with an implausibly low bus bandwidth are left out of the
fit (pricing falls back to the nearest fitted GPU count)."""

from __future__ import annotations

import numpy as np
import pytest

from hardware.catalog import get_gpu
from kernels_db import comm as cm
from kernels_db.fit import (
    COMM_LATENCY_BOUNDS_S,
    MIN_BUS_EFFICIENCY,
    MIN_BUS_FRACTION,
    fit_comm,
    fit_comm_params,
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


def test_custom_all_reduce_follows_its_kernel_then_nccl() -> None:
    """The engine's all-reduce table: its one-shot kernel below ~1 MiB, NCCL above. Both lines are
    recovered; one line through all sizes was 2-3x too cheap at 0.25-4 MB."""
    small = 2.0 ** np.arange(10, 21)  # 1 KiB .. 1 MiB
    big = 2.0 ** np.arange(21, 28)
    custom_small = _rows("custom_all_reduce", 8, 80e9, 3e-6, small)
    custom_big = _rows("custom_all_reduce", 8, 350e9, 20e-6, big)  # what AUTO hands to NCCL
    nccl = _rows("all_reduce", 8, 350e9, 20e-6, np.concatenate([small, big]))
    fit = fit_comm(_table([custom_small, custom_big, nccl]), link_bytes_per_s=LINK)
    prm = fit.params["custom_all_reduce"][8]
    assert abs(prm.bus_bandwidth_bytes_per_s / 350e9 - 1) < 0.03
    assert abs(prm.latency_s / 20e-6 - 1) < 0.05
    assert len(prm.small_lines) == 1
    line = prm.small_lines[0]
    assert abs(line.bus_bandwidth_bytes_per_s / 80e9 - 1) < 0.03
    assert abs(line.latency_s / 3e-6 - 1) < 0.05
    one = fit.params["all_reduce"][8]  # a single protocol needs a single line
    assert not one.small_lines and abs(one.bus_bandwidth_bytes_per_s / 350e9 - 1) < 0.02
    assert fit.fitted_to.rows == 2 * small.size + 2 * big.size


def test_comm_fit_respects_its_bounds() -> None:
    """Data faster than the link allows (here 3x the link) are fitted at the bound (100% of the
    link for all-gather), never above it; latencies stay within their bounds."""
    sizes = 2.0 ** np.arange(10, 30)
    f = cm.algo_factor("all_gather", np.full(sizes.size, 8))
    lat = 1e-6 + sizes * f / (3 * LINK)
    prm = fit_comm_params(sizes, f, lat, (MIN_BUS_EFFICIENCY * LINK, LINK))
    for line in (prm, *prm.small_lines):
        assert MIN_BUS_EFFICIENCY * LINK <= line.bus_bandwidth_bytes_per_s <= LINK
        assert COMM_LATENCY_BOUNDS_S[0] <= line.latency_s <= COMM_LATENCY_BOUNDS_S[1]
    assert prm.bus_bandwidth_bytes_per_s == pytest.approx(LINK, rel=1e-3)


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
