"""The calibration runner: op names, device choice, shape grids (GPU grids built without a GPU),
a small CPU run written in the schema and read back, and planner importing without torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

torch = pytest.importorskip(
    "torch", reason="kernels_db.bench needs torch (pip install -e .[bench])"
)

from hardware.errors import PlannerInputError  # noqa: E402
from kernels_db.bench import runner, sweeps  # noqa: E402
from kernels_db.bench.timing import CpuTimer  # noqa: E402
from kernels_db.schema import OP_KEYS  # noqa: E402


def test_ops_aliases_expand_in_sweep_order() -> None:
    assert runner.resolve_ops(["attention"]) == ("attention_decode", "attention_prefill")
    assert runner.resolve_ops([]) == runner.SUPPORTED_OPS
    assert runner.resolve_ops(["memcpy", " gemm", ""]) == ("gemm", "memcpy")


def test_unknown_op_names_the_field_and_the_choices() -> None:
    with pytest.raises(PlannerInputError, match="--ops.*mla_decode.*gemm"):
        runner.resolve_ops(["mla_decode"])


def test_cpu_device_and_gpu_without_cuda() -> None:
    assert runner.resolve_device("cpu")[:2] == ("cpu", "cpu")
    if not torch.cuda.is_available():
        assert runner.resolve_device("auto")[:2] == ("cpu", "cpu")
        with pytest.raises(PlannerInputError, match="--gpu"):
            runner.resolve_device("h200")


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("quick", [True, False])
@pytest.mark.parametrize("op", list(sweeps.ITEMS))
def test_grids_have_schema_keys_and_no_duplicates(op: str, device: str, quick: bool) -> None:
    ctx = sweeps.SweepContext(device, CpuTimer(), quick, fp8=device == "cuda")
    keys = [k for k, _ in sweeps.ITEMS[op](ctx)]
    assert keys, "empty grid"
    assert all(tuple(k) == OP_KEYS[op] for k in keys)
    assert len({tuple(k.values()) for k in keys}) == len(keys)


def test_cpu_run_writes_readable_tables_and_meta(tmp_path: Path) -> None:
    out = runner.run("cpu", ["gemm", "memcpy"], True, tmp_path / "tables")
    assert sorted(p.name for p in out.iterdir()) == ["gemm.csv", "memcpy.csv", "meta.yaml"]
    assert not (tmp_path / "tables-triton").exists(), "no Triton tables on the CPU path"
    meta = yaml.safe_load((out / "meta.yaml").read_text())
    for field in (
        "gpu",
        "driver",
        "torch",
        "triton",
        "cuda",
        "date",
        "tool",
        "git_sha",
        "kernel_source",
    ):
        assert field in meta, field
    assert meta["gpu"] == "cpu"
    assert meta["tables"]["gemm.csv"]["kernel_source"] == "torch.matmul"
    tables = pytest.importorskip("kernels_db.tables", reason="table reader not built yet")
    gemm = tables.read_table(out / "gemm.csv", "cpu")
    assert len(gemm) == meta["tables"]["gemm.csv"]["rows"] > 10
    assert set(gemm.keys["dtype"]) == {"fp32"}
    assert (gemm.latency_s > 0).all()
    big = gemm.keys["m"] * gemm.keys["n"] * gemm.keys["k"]
    assert gemm.latency_s[big.argmax()] > gemm.latency_s[big.argmin()]


def test_planner_imports_without_torch_or_the_bench() -> None:
    code = (
        "import sys; import planner.cli.main as m; m.build_parser(); "
        "bad = [n for n in sys.modules "
        "if n in ('torch', 'triton') or n.startswith('kernels_db.bench')]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[3])
