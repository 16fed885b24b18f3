"""GEMM terms of the roofline model: the single-row matrix-vector path (``roofline.gemv_time``) and
the fitted L2 residency cliff of a benchmark's working set (``cache_cliff_power``)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from hardware.catalog import get_gpu
from kernels_db import costs
from kernels_db import fit as fit_module
from kernels_db import roofline as rf
from kernels_db.fit import N_PARAMS, PARAM_ORDER, _as_model_array, fit_roofline_params
from kernels_db.fitted import RooflineParams
from kernels_db.lookup import KernelDB

GEMM = RooflineParams(
    launch_s=3e-6,
    compute_eff=0.7,
    compute_half_flops=5e8,
    memory_eff=0.75,
    memory_half_bytes=1e6,
    pad_rows=40.0,
    cache_speedup=4.0,
    gemv_memory_eff=0.9,
    gemv_launch_s=2.5e-6,
    cache_cliff_power=14.0,
)


def _gemm_counts(m: np.ndarray, n: np.ndarray, k: np.ndarray, ws: np.ndarray | None = None):
    spec = get_gpu("l40s")
    cols: dict = {"m": m, "n": n, "k": k, "dtype": "bf16"}
    if ws is not None:
        cols[costs.WORKING_SET] = ws
    return costs.counts("gemm", cols, spec), spec


def test_fit_vector_keeps_the_model_array_layout() -> None:
    """The fit's parameter vector (``PARAM_ORDER`` + split flag) maps onto ``as_array``: split_kv
    stays at row 8 (``costs.model_time``), the GEMV and cliff rows follow."""
    prm = GEMM.model_copy(update={"split_kv": True, "tile_s": 1e-9, "parallel_half_units": 3.0})
    v = np.array([getattr(prm, name) for name in PARAM_ORDER] + [1.0])
    assert v.size == N_PARAMS + 1
    np.testing.assert_array_equal(_as_model_array(v), prm.as_array())


def test_gemv_time_is_a_bandwidth_stream_and_off_at_zero() -> None:
    t = rf.gemv_time(np.array([1e9, 0.0]), 1e12, 0.5, 2e-6)
    assert t[0] == pytest.approx(2e-6 + 1e9 / 0.5e12)
    assert t[1] == pytest.approx(2e-6)
    assert np.all(np.isinf(rf.gemv_time(np.array([1e9, 0.0]), 1e12, 0.0, 2e-6)))


def test_single_row_takes_the_faster_path_and_other_rows_the_tiled_one() -> None:
    """A single row is priced at the faster of the tiled GEMM and the matrix-vector kernel, so it
    is never slower than without the GEMV path and never slower than two rows; two or more rows
    price as before."""
    m = np.array([1.0, 1.0, 2.0, 2.0])
    n = np.array([16384.0, 1024.0, 16384.0, 1024.0])
    k = np.array([16384.0, 1024.0, 16384.0, 1024.0])
    cnt, spec = _gemm_counts(m, n, k)
    bw = spec.hbm_bandwidth_bytes_per_s
    with_gemv = costs.model_time(cnt, GEMM.as_array(), bw, GEMM.pad_rows)
    off = GEMM.model_copy(update={"gemv_memory_eff": 0.0, "gemv_launch_s": 0.0})
    tiled = costs.model_time(cnt, off.as_array(), bw, off.pad_rows)
    assert np.all(with_gemv <= tiled)
    np.testing.assert_array_equal(with_gemv[2:], tiled[2:])
    # the large single row streams its 512 MiB of weights at 90% of the DRAM bandwidth
    weights = 16384.0 * 16384.0 * 2.0
    assert with_gemv[0] == pytest.approx(2.5e-6 + cnt.nbytes[0] / (0.9 * bw))
    assert with_gemv[0] < tiled[0] and weights / with_gemv[0] > 0.85 * bw
    assert with_gemv[0] <= with_gemv[2] and with_gemv[1] <= with_gemv[3]


def test_committed_gemv_fits_are_monotone_from_one_to_two_rows() -> None:
    """Every committed fit with a GEMV path prices m = 1 no slower than m = 2 (serving reading)."""
    sizes = (256, 1024, 4096, 8192, 16384, 65536)
    for gpu in ("a100", "b200", "h100", "h200", "l40s"):
        db = KernelDB.for_gpu(get_gpu(gpu))
        for dtype, n, k in itertools.product(("bf16", "fp8"), sizes, sizes):
            one = db.gemm(m=1, n=n, k=k, dtype=dtype).seconds
            assert one <= db.gemm(m=2, n=n, k=k, dtype=dtype).seconds, (gpu, dtype, n, k)


def test_l40s_bf16_single_row_runs_the_matrix_vector_kernel() -> None:
    """The step the L40S bf16 tables show (16384 x 16384: 677 us at m = 1, 779 us at m = 2): the
    committed fit prices a large single row faster than two rows, at most at the spec DRAM rate."""
    spec = get_gpu("l40s")
    db = KernelDB.for_gpu(spec)
    one = db.gemm(m=1, n=16384, k=16384, dtype="bf16").seconds
    two = db.gemm(m=2, n=16384, k=16384, dtype="bf16").seconds
    assert one < 0.95 * two
    assert 16384 * 16384 * 2 / one <= spec.hbm_bandwidth_bytes_per_s


def test_cliff_power_sets_the_harness_residency_and_leaves_serving_alone() -> None:
    """``cache_cliff_power`` recomputes the resident share of a harness's working set (0.5 at the
    L2 size for any power, steeper around it); serving GEMMs (no working set) stay uncached."""
    spec = get_gpu("l40s")
    l2 = float(spec.l2_cache_bytes or 0.0)
    ratios = np.array([0.5, 1.0, 1.33, 2.0])
    m, n, k = np.full(4, 2.0), np.full(4, 8192.0), np.full(4, 8192.0)
    cnt, _ = _gemm_counts(m, n, k, ratios * l2)
    np.testing.assert_allclose(cnt.cache_ratio, ratios)
    bw = spec.hbm_bandwidth_bytes_per_s
    steep = costs.model_time(cnt, GEMM.as_array(), bw, GEMM.pad_rows)
    shared = GEMM.model_copy(update={"cache_cliff_power": 0.0})  # CACHE_RESIDENCY_POWER
    gradual = costs.model_time(cnt, shared.as_array(), bw, shared.pad_rows)
    assert steep[0] < gradual[0] and steep[1] == pytest.approx(gradual[1])
    assert steep[2] > gradual[2] and np.all(np.diff(steep) > 0.0)
    share = rf.resident_share(ratios, 14.0)
    assert share[1] == pytest.approx(0.5) and share[2] < 0.02 and share[0] > 0.99
    serving, _ = _gemm_counts(m, n, k)
    assert np.all(serving.resident == 0.0) and np.all(serving.cache_ratio == 0.0)


def test_fit_recovers_a_gemv_bandwidth() -> None:
    """Synthetic rows priced with a known GEMV path: the GEMM fit finds its bandwidth again."""
    ms = np.array([1.0, 2.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0])
    shapes = np.array([1024.0, 4096.0, 8192.0, 16384.0])
    mm, nn = np.meshgrid(ms, shapes, indexing="ij")
    m, n = mm.ravel(), nn.ravel()
    cnt, spec = _gemm_counts(m, n, n.copy())
    bw = spec.hbm_bandwidth_bytes_per_s
    truth = GEMM.model_copy(update={"cache_speedup": 1.0, "cache_cliff_power": 0.0})
    latency = costs.model_time(cnt, truth.as_array(), bw, truth.pad_rows)
    got = fit_roofline_params("gemm", cnt, np.asarray(latency), bw)
    assert got.gemv_memory_eff == pytest.approx(truth.gemv_memory_eff, rel=0.05)
    assert got.gemv_launch_s == pytest.approx(truth.gemv_launch_s, rel=0.1)
    single = m == 1
    priced = costs.model_time(cnt, got.as_array(), bw, got.pad_rows)
    np.testing.assert_allclose(priced[single], np.asarray(latency)[single], rtol=0.02)


def test_gemm_terms_leave_the_base_fit_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """The GEMV path and the cliff are fitted after the other GEMM parameters, which stay what the
    fit without them gives: fitted jointly, a term with no effect on a GPU moved H200 fp8's fixed
    cost from ``launch_s`` into the half terms and priced shapes outside the tables differently."""
    ms = np.array([1.0, 2.0, 8.0, 64.0, 512.0, 4096.0])
    shapes = np.array([1024.0, 4096.0, 16384.0])
    mm, nn = np.meshgrid(ms, shapes, indexing="ij")
    m, n = mm.ravel(), nn.ravel()
    spec = get_gpu("l40s")
    l2 = float(spec.l2_cache_bytes or 0.0)
    ws = rf.gemm_bytes(m, n, n, 2.0) * 1.2 + 0.5 * l2  # harness rows around the L2 size
    cnt, _ = _gemm_counts(m, n, n.copy(), ws)
    bw = spec.hbm_bandwidth_bytes_per_s
    latency = np.asarray(costs.model_time(cnt, GEMM.as_array(), bw, GEMM.pad_rows))
    with_terms = fit_roofline_params("gemm", cnt, latency, bw)
    monkeypatch.setattr(fit_module, "GEMV", frozenset())
    monkeypatch.setattr(fit_module, "CLIFF", frozenset())
    without = fit_roofline_params("gemm", cnt, latency, bw)
    assert without.gemv_memory_eff is None and without.cache_cliff_power is None
    assert (with_terms.gemv_memory_eff or 0.0) > 0.0 and (with_terms.cache_cliff_power or 0.0) > 0.0
    for name in PARAM_ORDER[: len(PARAM_ORDER) - 3]:
        assert getattr(with_terms, name) == getattr(without, name), name


def test_a_path_no_row_shows_is_not_shipped() -> None:
    """Rows priced by the tiled GEMM alone (no faster single-row kernel, nothing cached): the fit
    ships no GEMV path and no cliff (None), since the tables do not identify their values, and
    the single rows stay priced as the tiled GEMM prices them."""
    ms = np.array([1.0, 2.0, 4.0, 16.0, 64.0, 256.0, 1024.0])
    shapes = np.array([1024.0, 4096.0, 8192.0, 16384.0])
    mm, nn = np.meshgrid(ms, shapes, indexing="ij")
    m, n = mm.ravel(), nn.ravel()
    cnt, spec = _gemm_counts(m, n, n.copy())
    bw = spec.hbm_bandwidth_bytes_per_s
    truth = GEMM.model_copy(
        update={"cache_speedup": 1.0, "gemv_memory_eff": None, "cache_cliff_power": None}
    )
    latency = np.asarray(costs.model_time(cnt, truth.as_array(), bw, truth.pad_rows))
    got = fit_roofline_params("gemm", cnt, latency, bw)
    assert got.gemv_memory_eff is None and got.gemv_launch_s is None
    assert got.cache_cliff_power is None
    priced = costs.model_time(cnt, got.as_array(), bw, got.pad_rows)
    np.testing.assert_allclose(priced, latency, rtol=0.05)


def test_row_constants_name_the_parameter_array() -> None:
    """The rows the pricing reads (``roofline.GEMV_EFF_ROW``, ``GEMV_LAUNCH_ROW``, ``CLIFF_ROW``)
    hold those fields of ``RooflineParams.as_array``, and the fit's indices name them too."""
    arr = GEMM.as_array()
    assert arr[rf.GEMV_EFF_ROW] == GEMM.gemv_memory_eff
    assert arr[rf.GEMV_LAUNCH_ROW] == GEMM.gemv_launch_s
    assert arr[rf.CLIFF_ROW] == GEMM.cache_cliff_power
    names = [PARAM_ORDER[i] for i in (*fit_module.GEMV_TERM, *fit_module.CLIFF_TERM)]
    assert names == ["gemv_memory_eff", "gemv_launch_s", "cache_cliff_power"]
