"""The dynamic per-tensor FP8 activation scale and block-scaled FP8 GEMMs
(``kernels_db.fp8_scale``): the harness's fp8 GEMM rows carry the scale pass, serving pays it only
where it runs, and the constants are fitted, bounded and read from one file."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hardware.catalog import get_gpu
from hardware.errors import PlannerInputError
from kernels_db import costs, fitted, fp8_scale
from kernels_db.harness import fp8_scale_passes, measured_cols
from kernels_db.tables import table_from_frame
from kernels_db.tools import fp8_scale_fit

H200 = get_gpu("h200_sxm")
NEW = "github:ai-dynamo/aiconfigurator data/h200_sxm/gemm/trtllm/1.3.0rc20/gemm_perf.parquet"
OLD = "github:ai-dynamo/aiconfigurator data/a100_sxm/gemm/trtllm/1.0.0/gemm_perf.parquet"


def _gemm_rows(dtypes: list[str], sources: list[str]) -> pd.DataFrame:
    n = len(dtypes)
    return pd.DataFrame(
        {
            "m": [2**i for i in range(n)],  # distinct keys
            "n": [4096] * n,
            "k": [4096] * n,
            "dtype": dtypes,
            "latency_s": [1e-4] * n,
            "source": sources,
        }
    )


def test_packaged_constants_are_within_their_bounds() -> None:
    for key, sp in fp8_scale.measured().items():
        for name, (lo, hi, _) in fp8_scale.PARAM_BOUNDS.items():
            assert lo <= getattr(sp, name) <= hi, (key, name)
        assert fp8_scale.BLOCK_BOUNDS[0] <= sp.block_compute_share <= 1.0
        assert sp.rows > 1000 and sp.block_rows > 1000 and "1.3.0rc20" in sp.source


def test_a_gpu_without_constants_takes_its_siblings_or_the_median() -> None:
    own = fp8_scale.measured()
    assert fp8_scale.for_gpu("h200_sxm") == own["h200_sxm"]
    assert fp8_scale.for_gpu("gb200") == own["b200_sxm"]  # Blackwell sibling
    amd = fp8_scale.for_gpu("mi300x")  # no measured sibling: the median of the measured GPUs
    assert amd.fixed_s == pytest.approx(float(np.median([v.fixed_s for v in own.values()])))


def test_only_fp8_rows_of_the_dynamic_harness_carry_the_pass() -> None:
    t = table_from_frame(
        _gemm_rows(["fp8", "bf16", "fp8"], [NEW, NEW, OLD]), "gemm", "h200_sxm", "x.csv"
    )
    assert list(fp8_scale_passes(t)) == [1.0, 0.0, 0.0]
    cols = measured_cols(t, H200)
    with_pass = costs.counts("gemm", cols, H200)
    without = costs.counts("gemm", dict(t.keys), H200)  # serving: no harness column
    extra = np.asarray(with_pass.scale_s) - np.asarray(without.scale_s)
    want = fp8_scale.seconds(1.0, 4096.0, H200, fp8_scale.for_gpu("h200_sxm"))
    assert extra[0] == pytest.approx(float(want)) and extra[1] == extra[2] == 0.0


def test_seconds_grow_with_the_input_and_keep_the_fixed_cost() -> None:
    sp = fp8_scale.for_gpu("h200_sxm")
    t = fp8_scale.seconds(np.array([1.0, 1024.0, 65536.0]), 8192.0, H200, sp)
    assert t[0] == pytest.approx(sp.fixed_s, rel=1e-3)
    assert t[0] < t[1] < t[2]
    big = 2.0 * 65536 * 8192  # far beyond the L2: read at memory_eff of the spec bandwidth
    assert t[2] == pytest.approx(sp.fixed_s + big / (sp.memory_eff * 4.8e12), rel=0.01)


def test_the_fit_recovers_known_constants() -> None:
    truth = fp8_scale.ScalePass(fixed_s=6e-6, memory_eff=0.4, cache_speedup=2.0)
    m, k = np.meshgrid(2.0 ** np.arange(0, 16), 2.0 ** np.arange(7, 15))
    t = fp8_scale.seconds(m.ravel(), k.ravel(), H200, truth)
    got = fp8_scale_fit.fit(m.ravel(), k.ravel(), t, H200)
    assert got.fixed_s == pytest.approx(6e-6, rel=0.01)
    assert got.memory_eff == pytest.approx(0.4, rel=0.01)
    assert got.cache_speedup == pytest.approx(2.0, rel=0.05)


def test_block_scale_slows_compute_bound_gemms_only() -> None:
    share = fp8_scale.for_gpu("h200_sxm").block_compute_share
    prm = fitted.load("h200_sxm").families["gemm"].params["fp8"]

    def seconds(m: float, block: float) -> float:
        cols = {"m": m, "n": 8192.0, "k": 8192.0, "dtype": "fp8", fp8_scale.BLOCK_SCALE: block}
        cnt = costs.counts("gemm", cols, H200)
        return float(costs.model_time(cnt, prm.as_array(), 4.8e12, prm.pad_rows))

    assert seconds(1.0, 1.0) == pytest.approx(seconds(1.0, 0.0))  # decode: weight-read bound
    assert seconds(16384.0, 1.0) / seconds(16384.0, 0.0) == pytest.approx(1 / share, rel=0.02)


def test_the_block_fit_recovers_a_known_share(monkeypatch: pytest.MonkeyPatch) -> None:
    prm = fitted.load("h200_sxm").families["gemm"].params["fp8"]
    m = 2.0 ** np.arange(0, 16)
    n, k = np.full(m.size, 8192.0), np.full(m.size, 4096.0)
    cols = {"m": m, "n": n, "k": k, "dtype": np.full(m.size, "fp8")}
    cnt = costs.counts("gemm", cols, H200)
    import dataclasses

    slow = dataclasses.replace(cnt, peak_flops_per_s=cnt.peak_flops_per_s * 0.5)
    t = costs.model_time(slow, prm.as_array(), 4.8e12, prm.pad_rows)
    assert fp8_scale_fit.fit_block(m, n, k, t, H200) == pytest.approx(0.5, rel=0.01)


def _aic_tree(root: Path) -> None:
    q = root / "h200_sxm" / fp8_scale_fit.AIC_TABLE
    g = root / "h200_sxm" / fp8_scale_fit.AIC_GEMM_TABLE
    q.parent.mkdir(parents=True)
    g.parent.mkdir(parents=True)
    sp = fp8_scale.ScalePass(fixed_s=7e-6, memory_eff=0.3, cache_speedup=2.0)
    m, k = (a.ravel() for a in np.meshgrid(2.0 ** np.arange(0, 15), 2.0 ** np.arange(8, 15)))
    lat = fp8_scale.seconds(m, k, H200, sp) * 1e3
    pd.DataFrame(
        {"m": m, "k": k, "latency": lat, "op_name": "compute_scale", "quant_dtype": "fp8"}
    ).to_parquet(q)
    prm = fitted.load("h200_sxm").families["gemm"].params["fp8"]
    cols = {"m": m, "n": k, "k": k, "dtype": np.full(m.size, "fp8")}
    gl = costs.model_time(costs.counts("gemm", cols, H200), prm.as_array(), 4.8e12, prm.pad_rows)
    pd.DataFrame(
        {"m": m, "n": k, "k": k, "latency": gl * 1e3, "gemm_dtype": "fp8_block"}
    ).to_parquet(g)


def test_the_command_writes_once_and_refuses_to_overwrite(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    _aic_tree(tmp_path / "aic")
    out = tmp_path / "fp8_scale.yaml"
    assert (
        fp8_scale_fit.main(
            ["--aic-data", str(tmp_path / "aic"), "--out", str(out), "--gpus", "h200_sxm"]
        )
        == 0
    )
    text = out.read_text()
    assert "fixed_s: 7.0e-06" in text and "block_compute_share: 1.0" in text
    assert (
        fp8_scale_fit.main(
            ["--aic-data", str(tmp_path / "aic"), "--out", str(out), "--gpus", "h200_sxm"]
        )
        == 2
    )
    link = tmp_path / "link.yaml"
    os.symlink(out, link)
    with pytest.raises(PlannerInputError, match="symbolic link"):
        fp8_scale_fit.write(tmp_path / "aic", link, ["h200_sxm"], force=True)


def test_a_missing_or_malformed_table_is_one_input_error(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    with pytest.raises(PlannerInputError, match="--aic-data"):
        fp8_scale_fit.read_aic(tmp_path, "h200_sxm")
    bad = tmp_path / "h200_sxm" / fp8_scale_fit.AIC_TABLE
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"not parquet")
    with pytest.raises(PlannerInputError, match="parquet"):
        fp8_scale_fit.read_aic(tmp_path, "h200_sxm")
    pd.DataFrame(
        {
            "m": [1.0],
            "k": [-4.0],
            "latency": [math.inf],
            "op_name": "compute_scale",
            "quant_dtype": "fp8",
        }
    ).to_parquet(bad)
    with pytest.raises(PlannerInputError, match="positive"):
        fp8_scale_fit.read_aic(tmp_path, "h200_sxm")


def test_rows_of_no_time_are_left_out_of_the_fits() -> None:
    """The collector clips a pass at 0 ms: such rows have no log residual, so both fits drop them
    and say so in one input error when nothing is left."""
    m = 2.0 ** np.arange(0, 12)
    n, k = np.full(m.size, 8192.0), np.full(m.size, 4096.0)
    prm = fitted.load("h200_sxm").families["gemm"].params["fp8"]
    cols = {"m": m, "n": n, "k": k, "dtype": np.full(m.size, "fp8")}
    t = costs.model_time(costs.counts("gemm", cols, H200), prm.as_array(), 4.8e12, prm.pad_rows)
    t[:3] = 0.0
    assert fp8_scale_fit.fit_block(m, n, k, t, H200) == pytest.approx(1.0, rel=0.02)
    with pytest.raises(PlannerInputError, match="--aic-data"):
        fp8_scale_fit.fit_block(m, n, k, np.zeros(m.size), H200)
    with pytest.raises(PlannerInputError, match="--aic-data"):
        fp8_scale_fit.fit(m, k, np.zeros(m.size), H200)


def test_a_constant_out_of_range_names_its_gpu_field_and_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = fp8_scale.CONSTANTS_FILE.read_text().replace("memory_eff: 0.3898", "memory_eff: 3.898")
    assert "memory_eff: 3.898" in text
    bad = tmp_path / "fp8_scale.yaml"
    bad.write_text(text)
    line = next(i for i, s in enumerate(text.splitlines(), 1) if "memory_eff: 3.898" in s)
    monkeypatch.setattr(fp8_scale, "CONSTANTS_FILE", bad)
    fp8_scale.measured.cache_clear()
    try:
        with pytest.raises(PlannerInputError) as err:
            fp8_scale.measured()
        assert f"{bad}:{line}: gpus.b200_sxm.memory_eff" in str(err.value)
    finally:
        fp8_scale.measured.cache_clear()
