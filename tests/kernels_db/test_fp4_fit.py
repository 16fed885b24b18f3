"""FP4 GEMM in the fitted tier (``kernels_db.tools.fp4_fit``): B200 prices FP4 GEMMs from its own
fit, its Blackwell siblings by transfer, the harness's untuned K loop is priced on its rows only,
and the fit recovers known constants from a table in AIConfigurator's layout."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hardware.catalog import get_gpu
from hardware.errors import PlannerInputError
from kernels_db import costs, fitted, paths, transfer
from kernels_db.harness import measured_cols, untuned_gemm_rows
from kernels_db.lookup import KernelDB
from kernels_db.tables import table_from_frame
from kernels_db.tools import fp4_fit

B200 = get_gpu("b200_sxm")
AIC_DATA = os.environ.get("AIC_DATA", "")
"""AIConfigurator's ``aic-core/src/aiconfigurator_core/systems/data`` folder at
``fp4_fit.SOURCE_COMMIT`` (not bundled: the held-out check on the real tables skips without it)."""


def test_fp4_gemm_on_b200_is_priced_from_its_own_fit() -> None:
    db = KernelDB.for_gpu(B200)
    got = db.gemm(np.array([1, 64, 4096]), 8192, 8192, "fp4")
    assert set(got.provenance.tolist()) == {"fitted"}
    part = db.fit.families["gemm"].parts["fp4"]  # type: ignore[union-attr]
    assert part.fitted_to.sources[0].endswith(f"@{fp4_fit.SOURCE_COMMIT}")
    assert part.fitted_to.files == ("gemm_perf.parquet",) and part.fitted_to.rows >= 1000
    assert part.heldout_shapes_error.median_ape_pct <= 10.0
    assert "kernels_db.tools.fp4_fit" in part.command


@pytest.mark.parametrize("gpu", ["gb200", "b300_sxm"])
def test_blackwell_siblings_take_the_fp4_fit_by_transfer(gpu: str) -> None:
    spec = get_gpu(gpu)
    got = KernelDB.for_gpu(spec).gemm(4096, 8192, 8192, "fp4")
    assert str(got.provenance) == transfer.provenance_tag("b200_sxm")
    own = KernelDB.for_gpu(B200).gemm(4096, 8192, 8192, "fp4")
    # efficiencies are shares of each GPU's own peak: a higher fp4 peak prices a faster GEMM
    assert spec.peak_flops("fp4") > B200.peak_flops("fp4")
    assert float(got.seconds) < float(own.seconds)


def test_fp4_gemm_is_no_longer_faster_than_the_measured_ceiling() -> None:
    """The default efficiencies priced a large B200 FP4 GEMM at 6.75 PFLOP/s; the table's best
    shape reaches 4.5 (its 16384^3 row 3.2)."""
    got = KernelDB.for_gpu(B200).gemm(16384, 16384, 16384, "fp4")
    assert 2.5e3 < float(got.tflops) < 4.6e3


def _rows(dtype: str, source: str) -> pd.DataFrame:
    return pd.DataFrame(
        {"m": [8, 8], "n": [128, 128], "k": [1024, 8192], "dtype": dtype, "latency_s": 1e-5}
    ).assign(source=source)


def test_the_serial_k_loop_is_priced_on_untuned_harness_rows_only() -> None:
    src = fp4_fit.source_of("b200_sxm", fp4_fit.GEMM_TABLE, "c")
    fp4 = table_from_frame(_rows("fp4", src), "gemm", "b200_sxm", "t")
    fp8 = table_from_frame(_rows("fp8", src), "gemm", "b200_sxm", "t")
    assert untuned_gemm_rows(fp4).tolist() == [1.0, 1.0]  # type: ignore[union-attr]
    assert untuned_gemm_rows(fp8) is None
    prm = fitted.load("b200_sxm").families["gemm"].params["fp4"]  # type: ignore[union-attr]
    assert prm.tile_s > 0.0
    harness = costs.model_time(
        costs.counts("gemm", measured_cols(fp4, B200), B200), prm.as_array(), 8e12, prm.pad_rows
    )
    serving = costs.model_time(
        costs.counts("gemm", fp4.keys, B200), prm.as_array(), 8e12, prm.pad_rows
    )
    # the untuned kernel's K loop: 8x the K is over twice the time; the tuned one's is not
    assert harness[1] / harness[0] > 2.0
    assert np.all(serving <= harness) and serving[1] / serving[0] < 1.5


def _synthetic_tree(root: Path, prm: fitted.RooflineParams) -> None:
    """GEMM (nvfp4 + bf16 noise) and fused-MoE tables priced by ``prm`` as the harness ran them."""
    g = root / "b200_sxm" / fp4_fit.GEMM_TABLE
    g.parent.mkdir(parents=True)
    m, n, k = (
        a.ravel()
        for a in np.meshgrid(2.0 ** np.arange(0, 15, 2), 2.0 ** np.arange(9, 15), [1024, 8192])
    )
    src = fp4_fit.source_of("b200_sxm", fp4_fit.GEMM_TABLE, fp4_fit.SOURCE_COMMIT)
    ours = table_from_frame(
        pd.DataFrame({"m": m, "n": n, "k": k, "dtype": "fp4", "latency_s": 1.0, "source": src}),
        "gemm",
        "b200_sxm",
        "t",
    )
    cnt = costs.counts("gemm", measured_cols(ours, B200), B200)
    lat = costs.model_time(cnt, prm.as_array(), B200.hbm_bandwidth_bytes_per_s, prm.pad_rows)
    gemm = pd.DataFrame({"m": m, "n": n, "k": k, "latency": lat * 1e3, "gemm_dtype": "nvfp4"})
    pd.concat([gemm, gemm.assign(gemm_dtype="bfloat16", latency=1.0)]).to_parquet(g)
    moe = root / "b200_sxm" / fp4_fit.MOE_TABLE
    moe.parent.mkdir(parents=True)
    t = 2.0 ** np.arange(0, 12)
    rows = [
        {"num_tokens": x, "moe_ep_size": ep, "moe_dtype": d, "distribution": r, "latency": 0.05}
        for x in t
        for ep in (1, 8)
        for d in ("nvfp4", "w4a16_mxfp4")
        for r in ("balanced", "power_law_1.01")
    ]
    pd.concat([pd.DataFrame(rows).assign(hidden_size=h) for h in (2048, 4096)]).assign(
        inter_size=1536,
        topk=8,
        num_experts=128,
        moe_tp_size=1,
        kernel_source="moe_torch_flow_cutlass",
    ).to_parquet(moe)


def test_the_tool_recovers_known_constants_and_adds_only_the_gemm_set(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    true = fitted.RooflineParams(
        launch_s=7e-6,
        compute_eff=0.4,
        compute_half_flops=2e9,
        memory_eff=0.6,
        memory_half_bytes=1e4,
        pad_rows=0.1,
        parallel_half_units=90.0,
        tile_s=2e-7,
    )
    _synthetic_tree(tmp_path / "aic", true)
    out = tmp_path / "fitted"
    out.mkdir()
    (out / "b200_sxm.yaml").write_bytes(paths.fitted_path("b200_sxm").read_bytes())
    args = ["--aic-data", str(tmp_path / "aic"), "--fitted", str(out), "--rows", "200"]
    assert fp4_fit.main(args) == 0
    new = fitted.load("b200_sxm", out)
    old = fitted.load("b200_sxm")
    assert new is not None and old is not None
    got = new.families["gemm"].params["fp4"]
    assert got.compute_eff == pytest.approx(true.compute_eff, rel=0.1)
    assert got.tile_s == pytest.approx(true.tile_s, rel=0.1)
    assert new.families["gemm"].parts["fp4"].heldout_shapes_error.median_ape_pct < 2.0
    assert new.families["gemm"].params["fp8"] == old.families["gemm"].params["fp8"]
    assert "moe" not in new.families  # reported, not written (fp4_fit.MOE_NOT_SHIPPED)


def test_a_missing_table_is_one_input_error(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    with pytest.raises(PlannerInputError, match="--aic-data"):
        fp4_fit.run(tmp_path, "b200_sxm", paths.FITTED_DIR, 100, "c")


@pytest.mark.slow
@pytest.mark.skipif(
    not (AIC_DATA and (Path(AIC_DATA) / "b200_sxm" / fp4_fit.GEMM_TABLE).is_file()),
    reason="AIConfigurator systems/data not found (set AIC_DATA to a checkout's "
    "aic-core/src/aiconfigurator_core/systems/data)",
)
def test_the_fit_prices_shapes_it_never_saw_within_ten_percent() -> None:
    pytest.importorskip("pyarrow")
    root = Path(AIC_DATA) / "b200_sxm"
    src = fp4_fit.source_of("b200_sxm", fp4_fit.GEMM_TABLE, fp4_fit.SOURCE_COMMIT)
    path = root / fp4_fit.GEMM_TABLE
    df = fp4_fit.gemm_frame(fp4_fit.read_parquet(path, "--aic-data"), path, src)
    _, part = fp4_fit.fit_part(df, "gemm", B200, 1000, (src,), "test")
    assert part.heldout_shapes_error.n == len(df) > 20_000
    assert part.heldout_shapes_error.median_ape_pct <= 10.0
