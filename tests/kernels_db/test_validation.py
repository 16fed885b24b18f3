"""Against ../shared/validation/kernels: leave-one-out and fitted accuracy of every target family on
every GPU (committed fits), and that refitting reproduces the committed parameters."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hardware.catalog import get_gpu
from kernels_db import fitted
from kernels_db.fit import (
    COMM_LATENCY_BOUNDS_S,
    MIN_BUS_EFFICIENCY,
    PARAM_BOUNDS,
    fit_gpu,
)
from kernels_db.folder import read_folder
from kernels_db.lookup import KernelDB
from kernels_db.schema import COLLECTIVES
from kernels_db.validate import evaluate_gpu
from planner.cli.main import main

pytestmark = pytest.mark.validation
TARGET_FAMILIES = ("gemm", "attention_prefill", "attention_decode", "comm_all_reduce")
GPUS = ("h100_sxm", "h200_sxm", "b200_sxm", "a100_sxm", "l40s")
LOO_MEDIAN_PCT, LOO_P90_PCT, FITTED_MEDIAN_PCT = 5.0, 15.0, 15.0
# Known misses, each with a ceiling just above today's value that catches regressions (median, p90
# of the LOO error, %); every other (family, GPU) must meet the targets above.
# Decode attention: the measured grid is coarse (KV length x4-x8 per step, batch x4-x8) and TRT-LLM
# switches kernels in between (single-block vs multi-block split-KV: +5 us from KV 128 to 1024 at
# batch 1), so the residuals of the fitted model are uncorrelated between neighbours: interpolating
# along batch, along KV, along constant batch x KV (only 32 nodes have such neighbours) or in
# log(bytes) all stay at 7-13% median. The L2 term (working sets under ``l2_cache_bytes`` read
# faster) took L40S from 15.6/97 to 8.9/29.
DECODE_SWITCHES = "decode: kernel switches between coarse grid points"
# L40S GEMM: the measured latencies at m <= 128 are not monotone in m (n=k=4096 bf16: m=1 44 us,
# m=2 24 us, m=64 42 us, m=128 29 us; 12288x4096 bf16: m=32 79 us, m=64 54 us, m=128 100 us), so the
# LOO estimate between two neighbours misses by up to 2x (see
# test_l40s_gemm_measurements_are_not_monotone). L40S all-reduce: ../shared/validation/README.md
# flags the L40S NCCL numbers as suspicious; at 8 GPUs doubling the message triples the time twice
# (1 -> 2 MB: 0.86 -> 2.6 ms; 64 -> 128 MB: 55 -> 162 ms). L40S prefill: p90 16.3% at kernel
# switches of the fallback (non-Hopper) FMHA, not yet explained.
KNOWN_LOO_MISSES: dict[tuple[str, str], tuple[float, float, str]] = {
    ("attention_decode", "h100_sxm"): (10.5, 24.5, DECODE_SWITCHES),
    ("attention_decode", "h200_sxm"): (11.5, 25.5, DECODE_SWITCHES),
    ("attention_decode", "b200_sxm"): (7.5, 17.5, DECODE_SWITCHES),
    ("attention_decode", "a100_sxm"): (13.0, 28.0, DECODE_SWITCHES),
    ("attention_decode", "l40s"): (9.5, 30.0, DECODE_SWITCHES),
    ("gemm", "l40s"): (LOO_MEDIAN_PCT, 21.0, "measured latencies not monotone in m at small m"),
    ("attention_prefill", "l40s"): (LOO_MEDIAN_PCT, 17.0, "fallback FMHA kernel switches"),
    ("comm_all_reduce", "l40s"): (LOO_MEDIAN_PCT, 19.0, "README: L40S NCCL numbers suspicious"),
}


@pytest.fixture(scope="module")
def all_groups(validation_kernels: Path) -> dict[tuple[str, str, str], dict]:
    ts = read_folder(validation_kernels)
    groups = [
        g for gpu in GPUS for g in evaluate_gpu(get_gpu(gpu), ts.tables[gpu], fitted.load(gpu))
    ]
    return {(g["op"], g["gpu"], g["method"]): g for g in groups}


@pytest.mark.parametrize("gpu", GPUS)
@pytest.mark.parametrize("op", TARGET_FAMILIES)
def test_loo_and_fitted_targets(all_groups: dict, op: str, gpu: str) -> None:
    loo, fit = all_groups[(op, gpu, "loo_interpolation")], all_groups[(op, gpu, "fitted")]
    assert loo["n"] > 40, loo
    assert fit["median_ape_pct"] <= FITTED_MEDIAN_PCT, fit
    median, p90, reason = KNOWN_LOO_MISSES.get((op, gpu), (LOO_MEDIAN_PCT, LOO_P90_PCT, ""))
    assert loo["median_ape_pct"] <= median and loo["p90_ape_pct"] <= p90, (reason, loo)


FITTED_P90_PCT = 20.0
# Fitted-only p90 misses (issue 16), each with a ceiling just above the committed fit's value.
# L40S GEMM: latencies not monotone in m at small m (test below), and the harness's working set
# lands exactly on the 96 MiB L2 for three of eight shapes, where the cached share swings row to row
# (lab/notes/kernels.md); 23.24% with the GEMV path and the fitted cache cliff.
KNOWN_FITTED_MISSES: dict[tuple[str, str], tuple[float, str]] = {
    ("gemm", "l40s"): (22.8, "L40S GEMM not monotone; working sets on the L2 size (cliff)"),
}
# (op, gpu) groups whose rows the fit may leave out as implausible (fit.implausible_*_rows): the
# L40S 4- and 8-GPU collectives (bus bandwidth 5-18% of PCIe) only. The A100 decode rows that read
# faster than the HBM spec are priced as their harness measured them (kernels_db.harness).
IMPLAUSIBLE_ALLOWED = {*((f"comm_{c}", "l40s") for c in COLLECTIVES if c != "send_recv")}


def test_fitted_p90_of_every_group(all_groups: dict) -> None:
    """Fitted-only p90 <= 20% for every (op family or collective, GPU) of the shared tables, with
    the
    committed fits; the implausible-data groups are the stated ones only."""
    fitted_groups = [g for k, g in all_groups.items() if k[2] == "fitted"]
    assert len(fitted_groups) == 5 * 8  # 3 compute families and 5 collectives on 5 GPUs
    for g in fitted_groups:
        ceiling, reason = KNOWN_FITTED_MISSES.get((g["op"], g["gpu"]), (FITTED_P90_PCT, ""))
        assert g["n"] > 20 and g["p90_ape_pct"] <= ceiling, (reason, g)
    implausible = {(k[0], k[1]) for k in all_groups if k[2] == "fitted_implausible_data"}
    assert implausible <= IMPLAUSIBLE_ALLOWED, implausible - IMPLAUSIBLE_ALLOWED


def test_committed_parameters_within_bounds() -> None:
    """Every committed parameter lies within the bounds the fit applies (efficiencies 1-100%)."""
    for gpu in GPUS:
        fit = fitted.load(gpu)
        assert fit is not None
        for fam in fit.families.values():
            for prm in fam.params.values():
                for name, (low, high, _) in PARAM_BOUNDS.items():
                    value = getattr(prm, name)
                    assert value is None or value == 0.0 or low * 0.999 <= value <= high * 1.001, (
                        gpu,
                        name,
                    )
        assert fit.comm is not None
        link = get_gpu(gpu).scale_up.bandwidth_bytes_per_s
        for by_n in fit.comm.params.values():
            for n, prm in by_n.items():
                for line in (prm, *prm.small_lines):
                    bw = line.bus_bandwidth_bytes_per_s / link
                    assert MIN_BUS_EFFICIENCY * 0.999 <= bw <= 2 * (n - 1) / n * 1.001, (gpu, n)
                    assert COMM_LATENCY_BOUNDS_S[0] <= line.latency_s <= COMM_LATENCY_BOUNDS_S[1]


def test_l40s_gemm_measurements_are_not_monotone(validation_kernels: Path) -> None:
    """The data defect behind the L40S GEMM exception: among rows of one (n, k, dtype), the latency
    often falls by > 25% when m doubles at m <= 128 on L40S, and almost never on H100."""

    def drops(gpu: str) -> int:
        t = read_folder(validation_kernels).tables[gpu]["gemm"]
        k = t.keys
        order = np.lexsort((k["m"], k["k"], k["n"], k["dtype"]))
        m, lat = k["m"][order], t.latency_s[order]
        same = (
            (k["n"][order][1:] == k["n"][order][:-1])
            & (k["k"][order][1:] == k["k"][order][:-1])
            & (k["dtype"][order][1:] == k["dtype"][order][:-1])
            & (m[1:] <= 128)
        )
        return int(np.sum(same & (lat[1:] < 0.75 * lat[:-1])))

    assert drops("l40s") >= 8 and drops("h100_sxm") <= 1


@pytest.mark.parametrize("gpu", ["h200", "a100"])
def test_refit_reproduces_committed_parameters(validation_kernels: Path, gpu: str) -> None:
    spec = get_gpu(gpu)
    tables = read_folder(validation_kernels).tables[spec.key]
    new = fit_gpu(tables, spec, command="test")
    old = fitted.load(spec.key)
    assert old is not None
    for op, fam in old.families.items():
        assert new.families[op].fit_error.median_ape_pct == pytest.approx(
            fam.fit_error.median_ape_pct, abs=1.0
        )
        for dtype, prm in fam.params.items():
            assert new.families[op].params[dtype].compute_eff == pytest.approx(
                prm.compute_eff, rel=0.05
            )
            assert new.families[op].params[dtype].memory_eff == pytest.approx(
                prm.memory_eff, rel=0.05
            )
    assert old.comm is not None and new.comm is not None
    assert new.comm.params["all_reduce"][8].bus_bandwidth_bytes_per_s == pytest.approx(
        old.comm.params["all_reduce"][8].bus_bandwidth_bytes_per_s, rel=0.05
    )


def test_cli_validate_json_on_one_file(
    validation_kernels: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "c.csv").symlink_to(validation_kernels / "aiconfigurator_custom_allreduce_full.csv")
    assert main(["validate", "kernels", "--data", str(tmp_path), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    methods = {(g["op"], g["gpu"], g["method"]) for g in out["groups"]}
    assert ("comm_custom_all_reduce", "h100_sxm", "loo_interpolation") in methods
    assert ("comm_custom_all_reduce", "l40s", "fitted") in methods


def test_committed_all_reduce_prices_at_mid_sizes(validation_kernels: Path) -> None:
    """The engine all-reduce (min of the custom and NCCL fits) at 0.25-4 MB on 8 H100 stays within
    30% of aiconfigurator's custom_allreduce_perf: today 0.73-0.94x; 0.38-0.55x when the custom fit
    ran through all sizes (NCCL's own fit is still ~25% cheap at 4 MB)."""
    t = read_folder(validation_kernels).tables["h100_sxm"]["comm"]
    k = t.keys
    sel = (
        (k["collective"] == "custom_all_reduce")
        & (k["n_gpus"] == 8)
        & (k["bytes"] >= 2**18)
        & (k["bytes"] <= 2**22)
    )
    db = KernelDB.for_gpu(get_gpu("h100_sxm"))
    n, b = k["n_gpus"][sel], k["bytes"][sel].astype(float)
    pred = np.minimum(
        db.comm("all_reduce", n, b).seconds, db.comm("custom_all_reduce", n, b).seconds
    )
    assert sel.sum() >= 5
    assert np.all(np.abs(pred / t.latency_s[sel] - 1) < 0.3), pred / t.latency_s[sel]
