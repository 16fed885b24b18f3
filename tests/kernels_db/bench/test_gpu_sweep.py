"""On a CUDA machine: a quick compiled (not interpreted) sweep through ``run_all`` writes both the
reference tables and the Triton tables. Skipped without a GPU."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip(
    "torch", reason="kernels_db.bench needs torch (pip install -e .[bench])"
)

pytestmark = pytest.mark.gpu


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_quick_gpu_sweep_writes_reference_and_triton_tables(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # compile for the GPU
    cmd = [
        sys.executable,
        "-m",
        "kernels_db.bench.run_all",
        "--quick",
        "--budget-s",
        "150",
        "--ops",
        "gemm,attention,moe,memcpy",
        "--out",
        str(tmp_path),
    ]
    subprocess.run(cmd, check=True, env=env, cwd=Path(__file__).parents[3], timeout=600)
    for folder in ("tables", "tables-triton"):
        for op in ("gemm", "attention_prefill", "attention_decode", "moe", "memcpy"):
            assert (tmp_path / folder / f"{op}.csv").is_file(), f"{folder}/{op}"
        assert (tmp_path / folder / "meta.yaml").is_file()
    assert (tmp_path / "run.log").read_text().strip()
