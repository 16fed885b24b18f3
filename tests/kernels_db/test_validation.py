"""Against ../shared/validation/kernels: leave-one-out and fitted accuracy of every target family on
every GPU (committed fits), and that refitting reproduces the committed parameters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hardware.catalog import get_gpu
from kernels_db import fitted
from kernels_db.fit import fit_gpu
from kernels_db.folder import read_folder
from kernels_db.validate import evaluate_gpu
from planner.cli.main import main

pytestmark = pytest.mark.validation
TARGET_FAMILIES = ("gemm", "attention_prefill", "attention_decode", "comm_all_reduce")
GPUS = ("h100_sxm", "h200_sxm", "b200_sxm", "a100_sxm", "l40s")
LOO_MEDIAN_PCT, LOO_P90_PCT, FITTED_MEDIAN_PCT = 5.0, 15.0, 15.0
# Known misses, each with a ceiling that catches regressions (median, p90 of the LOO error, %).
# Decode attention: the measured grid is coarse (KV length x4-x8 per step) with kernel switches and
# L2-resident working sets between points, so the fitted model's residuals are uncorrelated between
# neighbours and no interpolant beats the model itself by much. L40S: GEMM and prefill tails sit at
# kernel switches; its NCCL numbers are suspicious per ../shared/validation/README.md (PCIe, ~1.5 GB/s).
KNOWN_LOO_MISSES: dict[tuple[str, str], tuple[float, float]] = {
    **{("attention_decode", g): (13.0, 35.0) for g in ("h100_sxm", "h200_sxm", "b200_sxm", "a100_sxm")},
    ("attention_decode", "l40s"): (20.0, 110.0),
    ("gemm", "l40s"): (5.0, 21.0),
    ("attention_prefill", "l40s"): (5.0, 18.0),
    ("comm_all_reduce", "l40s"): (5.0, 19.0),
}


@pytest.fixture(scope="module")
def all_groups(validation_kernels: Path) -> dict[tuple[str, str, str], dict]:
    ts = read_folder(validation_kernels)
    groups = [g for gpu in GPUS for g in evaluate_gpu(get_gpu(gpu), ts.tables[gpu], fitted.load(gpu))]
    return {(g["op"], g["gpu"], g["method"]): g for g in groups}


@pytest.mark.parametrize("gpu", GPUS)
@pytest.mark.parametrize("op", TARGET_FAMILIES)
def test_loo_and_fitted_targets(all_groups: dict, op: str, gpu: str) -> None:
    loo, fit = all_groups[(op, gpu, "loo_interpolation")], all_groups[(op, gpu, "fitted")]
    assert loo["n"] > 40, loo
    assert fit["median_ape_pct"] <= FITTED_MEDIAN_PCT, fit
    median, p90 = KNOWN_LOO_MISSES.get((op, gpu), (LOO_MEDIAN_PCT, LOO_P90_PCT))
    assert loo["median_ape_pct"] <= median and loo["p90_ape_pct"] <= p90, loo


@pytest.mark.parametrize("gpu", ["h200", "a100"])
def test_refit_reproduces_committed_parameters(validation_kernels: Path, gpu: str) -> None:
    spec = get_gpu(gpu)
    tables = read_folder(validation_kernels).tables[spec.key]
    new = fit_gpu(tables, spec, command="test")
    old = fitted.load(spec.key)
    assert old is not None
    for op, fam in old.families.items():
        assert new.families[op].fit_error.median_ape_pct == pytest.approx(fam.fit_error.median_ape_pct, abs=1.0)
        for dtype, prm in fam.params.items():
            assert new.families[op].params[dtype].compute_eff == pytest.approx(prm.compute_eff, rel=0.05)
            assert new.families[op].params[dtype].memory_eff == pytest.approx(prm.memory_eff, rel=0.05)
    assert old.comm is not None and new.comm is not None
    assert new.comm.params["all_reduce"][8].bus_bandwidth_bytes_per_s == pytest.approx(
        old.comm.params["all_reduce"][8].bus_bandwidth_bytes_per_s, rel=0.05)


def test_cli_validate_json_on_one_file(validation_kernels: Path, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "c.csv").symlink_to(validation_kernels / "aiconfigurator_custom_allreduce_full.csv")
    assert main(["validate", "kernels", "--data", str(tmp_path), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    methods = {(g["op"], g["gpu"], g["method"]) for g in out["groups"]}
    assert ("comm_custom_all_reduce", "h100_sxm", "loo_interpolation") in methods
    assert ("comm_custom_all_reduce", "l40s", "fitted") in methods
