"""End to end on this machine's CPU: ``planner calibrate run --gpu cpu --quick`` ->
``calibrate fit`` -> ``validate kernels`` through the CLI, as CI runs it (the acceptance budget is
2 minutes)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="kernels_db.bench needs torch (pip install -e .[bench])")

from planner.cli.main import main  # noqa: E402

PIPELINE_BUDGET_S = 120.0


def test_calibrate_run_fit_validate_on_cpu(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    out = tmp_path / "cpu_tables"
    t0 = time.monotonic()
    # --ops all: every family the CPU path measures goes through fit and validate
    assert (
        main(["calibrate", "run", "--gpu", "cpu", "--quick", "--ops", "all", "--out", str(out)])
        == 0
    )
    for op in ("gemm", "attention_prefill", "attention_decode", "moe", "memcpy", "comm"):
        assert (out / f"{op}.csv").is_file(), op
    assert (out / "meta.yaml").is_file()
    fit_dir = tmp_path / "fitted"  # not the packaged kernels_db/fitted
    assert (
        main(["calibrate", "fit", "--gpu", "cpu", "--tables", str(out), "--out", str(fit_dir)]) == 0
    )
    assert (fit_dir / "cpu.yaml").is_file()
    capsys.readouterr()
    assert main(["validate", "kernels", "--data", str(out)]) == 0
    report = capsys.readouterr().out.lower()
    assert time.monotonic() - t0 < PIPELINE_BUDGET_S
    assert "gemm" in report
    assert "leave-one-out" in report or "loo" in report or "ape" in report
