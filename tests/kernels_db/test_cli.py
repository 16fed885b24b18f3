"""``planner kernel``, ``kernels import`` and ``calibrate fit`` on small inputs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from planner.cli.main import main


def test_kernel_json(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(
        [
            "kernel",
            "--gpu",
            "h200",
            "--op",
            "gemm",
            "--m",
            "4096",
            "--n",
            "8192",
            "--k",
            "8192",
            "--dtype",
            "bf16",
            "--format",
            "json",
        ]
    )
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["provenance"] == "fitted"
    assert out["roofline_bound_s"] < out["latency_s"]
    assert 500 < out["tflops"] < 989  # below the 989 TF dense peak


def test_kernel_missing_size_is_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kernel", "--gpu", "h200", "--op", "gemm", "--m", "4"]) == 2
    assert "--n" in capsys.readouterr().err


def test_import_then_lookup(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "aic_gemm.csv"
    pd.DataFrame(
        {
            "gemm_dtype": "bfloat16",
            "m": [16, 64, 256],
            "n": 4096,
            "k": 4096,
            "latency": [0.013, 0.014, 0.020],
        }
    ).to_csv(src, index=False)
    out = tmp_path / "data"
    assert (
        main(
            [
                "kernels",
                "import",
                "--format",
                "aiconfigurator",
                str(src),
                "--gpu",
                "h200",
                "--out",
                str(out),
                "--output",
                "json",
            ]
        )
        == 0
    )
    table = pd.read_csv(out / "h200_sxm" / "gemm.csv")
    assert table["latency_s"].tolist() == pytest.approx([13e-6, 14e-6, 20e-6])
    assert (out / "h200_sxm" / "meta.yaml").is_file()
    assert (
        main(
            [
                "calibrate",
                "fit",
                "--gpu",
                "h200",
                "--tables",
                str(out / "h200_sxm"),
                "--out",
                str(tmp_path / "fitted"),
                "--format",
                "json",
            ]
        )
        == 0
    )
    assert (tmp_path / "fitted" / "h200_sxm.yaml").is_file()


def test_bench_layout_fit_then_validate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """What ``planner calibrate run --gpu cpu`` writes (our schema + meta.yaml) fits and
    validates."""
    data = tmp_path / "run"
    data.mkdir()
    (data / "meta.yaml").write_text("gpu: cpu\ntool: kernels_db.bench\n")
    m = np.array([1, 4, 16, 64, 256, 1024])
    rows = [
        pd.DataFrame(
            {
                "m": m,
                "n": n,
                "k": 256,
                "dtype": "fp32",
                "latency_s": 5e-6 + m * n * 256 * 2 / 5e10,
                "kernel_source": "torch.matmul",
            }
        )
        for n in (256, 1024)
    ]
    pd.concat(rows).to_csv(data / "gemm.csv", index=False)
    assert (
        main(
            [
                "calibrate",
                "fit",
                "--gpu",
                "cpu",
                "--tables",
                str(data),
                "--out",
                str(tmp_path / "fit"),
                "--format",
                "json",
            ]
        )
        == 0
    )
    assert (tmp_path / "fit" / "cpu.yaml").is_file()
    capsys.readouterr()
    assert main(["validate", "kernels", "--data", str(data), "--format", "json"]) == 0
    groups = {(g["op"], g["method"]): g for g in json.loads(capsys.readouterr().out)["groups"]}
    assert groups[("gemm", "loo_interpolation")]["n"] == 8  # interior points of two 6-point lines
    assert groups[("gemm", "fitted")]["median_ape_pct"] < 5.0
