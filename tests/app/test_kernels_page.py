"""Kernels page: the curve shown equals kernels_db's lookup; measured rows appear;
bad folders are one line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from app import kernel_inputs as ki
from hardware.catalog import get_gpu
from kernels_db.folder import read_folder
from kernels_db.lookup import KernelDB
from planner.reports.present import num
from tests.app.conftest import no_errors, page, widget

N = K = 4096


@pytest.fixture
def table_dir(tmp_path: Path) -> Path:
    """A small measured GEMM table for h200_sxm in our schema (m sweep at n=k=4096)."""
    folder = tmp_path / "tables" / "h200_sxm"
    folder.mkdir(parents=True)
    m = np.array([16, 64, 256, 1024, 4096])
    lat = 2 * m * N * K / 700e12 + 8e-6  # a plausible measured curve
    pd.DataFrame({"m": m, "n": N, "k": K, "dtype": "bf16", "latency_s": lat}).to_csv(
        folder / "gemm.csv", index=False
    )
    return folder.parent


def test_gemm_curve_equals_lookup_with_measured_points(table_dir: Path) -> None:
    at = page("kernels")
    widget(at.text_input, "kernels_folder").set_value(str(table_dir)).run()
    widget(at.selectbox, "kernels_gemm_n_sel").set_value(N).run()
    widget(at.selectbox, "kernels_gemm_k_sel").set_value(K).run()
    widget(at.number_input, "kernels_gemm_lo").set_value(16).run()
    widget(at.number_input, "kernels_gemm_hi").set_value(4096).run()
    no_errors(at)
    shown = at.session_state["kernels_curve"]
    table = at.dataframe[0].value
    assert list(table["Planner lookup (us)"]) == [num(v) for v in shown["lookup_us"]]
    spec = get_gpu("h200_sxm")
    base = KernelDB.for_gpu(spec)
    db = KernelDB(spec, read_folder(table_dir).tables["h200_sxm"], base.fit)
    sizes = ki.sweep_sizes(16, 4096)
    want = db.gemm(sizes, N, K, "bf16")
    np.testing.assert_array_equal(shown["m"].to_numpy(), sizes)
    np.testing.assert_allclose(shown["lookup_us"].to_numpy(), want.seconds * 1e6, rtol=1e-12)
    assert list(shown["provenance"]) == list(want.provenance)
    assert set(want.provenance) >= {"measured", "interpolated"}
    model = KernelDB(spec, {}, base.fit).gemm(sizes, N, K, "bf16")
    np.testing.assert_allclose(shown["model_us"].to_numpy(), model.seconds * 1e6, rtol=1e-12)
    assert any("5 in this slice" in c.value for c in at.caption)


def test_uncalibrated_gpu_decode_attention_is_flagged() -> None:
    at = page("kernels")
    widget(at.text_input, "kernels_folder").set_value("").run()
    widget(at.selectbox, "kernels_gpu").set_value("mi300x").run()
    widget(at.selectbox, "kernels_op").set_value("attention_decode").run()
    no_errors(at)
    shown = at.session_state["kernels_curve"]
    sizes = ki.sweep_sizes(*ki.SWEEP["attention_decode"][1:])
    want = KernelDB.for_gpu(get_gpu("mi300x")).attention_decode(32, sizes, 32, 8, 128, "bf16")
    np.testing.assert_allclose(shown["lookup_us"].to_numpy(), want.seconds * 1e6, rtol=1e-12)
    assert set(shown["provenance"]) == {"roofline_uncalibrated"}
    assert all(shown["roofline_bound_us"] <= shown["lookup_us"])
    assert any("†" in w.value and "MI300X" in w.value for w in at.warning)


def test_gpu_without_rows_in_the_folder_falls_back_to_the_model(table_dir: Path) -> None:
    at = page("kernels")
    widget(at.text_input, "kernels_folder").set_value(str(table_dir)).run()
    widget(at.selectbox, "kernels_gpu").set_value("mi300x").run()
    no_errors(at)  # not an error: the model's curve, marked
    shown = at.session_state["kernels_curve"]
    np.testing.assert_allclose(shown["lookup_us"], shown["model_us"], rtol=1e-12)
    warning = next(w.value for w in at.warning if "†" in w.value)
    assert "the curve is the model's alone" in warning and "roofline_uncalibrated" in warning


def test_bad_folder_and_range_are_one_line_errors(tmp_path: Path) -> None:
    at = page("kernels")
    widget(at.text_input, "kernels_folder").set_value(str(tmp_path / "nope")).run()
    assert not at.exception
    assert "is not a folder" in at.error[0].value
    widget(at.text_input, "kernels_folder").set_value("").run()
    widget(at.number_input, "kernels_gemm_lo").set_value(5000).run()
    widget(at.number_input, "kernels_gemm_hi").set_value(100).run()
    assert not at.exception
    assert "sweep" in at.error[0].value
    widget(at.number_input, "kernels_gemm_hi").set_value(10000).run()
    no_errors(at)
