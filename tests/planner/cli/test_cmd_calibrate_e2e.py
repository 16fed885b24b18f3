"""``planner calibrate e2e`` round trip: emit -> native result files -> profile -> estimate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from planner.cli.main import main
from planner.engines.calibration import load_engines
from tests.planner.calibration.fixtures import (
    NAMED_RUN_SHARES,
    OSL,
    SHIFT,
    shifted_constants,
    small_plan,
    write_profile,
    write_results,
)


def _bundle(tmp_path: Path, backend: str) -> Path:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(small_plan()))
    out = tmp_path / "bundle"
    assert main(["emit", "--plan", str(plan), "--backend", backend, "--out", str(out)]) == 0
    return out


@pytest.mark.parametrize("backend", ["vllm", "sglang"])
def test_round_trip_recovers_shifted_constants(
    tmp_path: Path, backend: str, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = _bundle(tmp_path, backend)
    script = (bundle / "benchmark.sh").read_text()
    assert "results/latest" in script and "planner calibrate e2e --data $PWD/results" in script
    meas = write_results(bundle, backend)
    prof_path = tmp_path / "profile.yaml"
    capsys.readouterr()
    assert (
        main(["calibrate", "e2e", "--data", str(bundle / "results"), "--out", str(prof_path)]) == 0
    )
    assert "wrote" in capsys.readouterr().out
    fit = yaml.safe_load(prof_path.read_text())["engines"][backend]["all_gpus"]
    recover = [k for k in SHIFT if k not in NAMED_RUN_SHARES]
    assert fit["rows_used"] == len(meas) and set(recover) <= set(fit["fitted"])
    for name, want in shifted_constants(backend).items():
        if name in recover:
            assert fit["constants"][name] == pytest.approx(want, rel=0.10), name
    packaged = load_engines()[backend]
    for name in NAMED_RUN_SHARES:  # the results name their runs: the share is N/P, not fitted
        assert name in fit["kept_packaged"]
        assert fit["constants"][name] == pytest.approx(getattr(packaged, name).value)
    assert (
        fit["residuals_after"]["agg_ttft_median_ape_pct"]
        < fit["residuals_before"]["agg_ttft_median_ape_pct"]
    )
    for _, row in meas.iterrows():  # estimate reproduces every synthetic measurement
        capsys.readouterr()
        # the run each native result names: N clients, P requests (estimate --bench-requests P)
        runs = str(int(row["bench_requests"]))
        argv = [
            "estimate",
            "--model",
            "llama-3.1-8b-instruct",
            "--gpu",
            "h100_sxm",
            "--backend",
            backend,
            "--isl",
            str(int(row["isl"])),
            "--osl",
            str(OSL),
            "--concurrency",
            str(int(row["c_concurrency"])),
            "--bench-requests",
            runs,
            "--calibration",
            str(prof_path),
            "--format",
            "json",
        ]
        assert main(argv) == 0
        est = json.loads(capsys.readouterr().out)
        assert est["ttft_ms"]["mean"] == pytest.approx(row["pred_ttft_ms"], rel=0.10)
        assert est["tpot_ms"]["mean"] == pytest.approx(row["pred_tpot_ms"], rel=0.10)
        assert str(prof_path) in est["provenance"][f"{backend}.kernel_scale"]


def test_profile_is_not_overwritten_without_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prof = tmp_path / "p.yaml"
    prof.write_text("keep")
    data = tmp_path / "none"
    data.mkdir()
    assert main(["calibrate", "e2e", "--data", str(data), "--out", str(prof)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --out") and "--force" in err and err.count("\n") == 1
    assert prof.read_text() == "keep"


def test_profile_never_goes_into_the_package(capsys: pytest.CaptureFixture[str]) -> None:
    import planner

    target = Path(planner.__file__).parent / "calibration" / "mine.yaml"
    assert main(["calibrate", "e2e", "--data", ".", "--out", str(target)]) == 2
    assert "inside the planner package" in capsys.readouterr().err
    assert not target.exists()


def test_bad_profile_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("format: planner-calibration-profile/1\n")
    argv = [
        "estimate",
        "--model",
        "llama-3.1-8b-instruct",
        "--gpu",
        "h100_sxm",
        "--concurrency",
        "4",
        "--calibration",
        str(bad),
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --calibration") and str(bad) in err and err.count("\n") == 1


def _json_of(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    capsys.readouterr()
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert isinstance(out, dict)
    return out


def test_simulate_and_plan_name_the_profile(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    factors = {"kernel_scale": 1.5, "step_overhead_s": 2.0}
    prof = write_profile(tmp_path / "p.yaml", "vllm", factors)
    sim = [
        "simulate",
        "--model",
        "llama-3.1-8b-instruct",
        "--gpu",
        "h100_sxm",
        "--concurrency",
        "8",
        "--requests",
        "200",
        "--format",
        "json",
    ]
    plain, calibrated = _json_of(sim, capsys), _json_of([*sim, "--calibration", str(prof)], capsys)
    assert plain["engine_calibration"] == "planner/engines/vllm/constants.yaml"
    assert str(prof) in str(calibrated["engine_calibration"])
    assert calibrated["tpot_ms"]["mean"] > 1.3 * plain["tpot_ms"]["mean"]  # type: ignore[index]
    plan = [
        "plan",
        "--model",
        "llama-3.1-8b-instruct",
        "--gpu",
        "h100_sxm",
        "--max-gpus",
        "1",
        "--isl",
        "1000",
        "--osl",
        "200",
        "--ttft-ms",
        "2000",
        "--tpot-ms",
        "100",
        "--concurrency",
        "8",
        "--format",
        "json",
        "--calibration",
        str(prof),
    ]
    best = _json_of(plan, capsys)["best"]
    assert str(prof) in best["predicted"]["provenance"]["engine_calibration"]  # type: ignore[index]


FAKE_VLLM = '''#!{python}
"""Stands in for `vllm bench serve`: writes a --save-result file where the flags say."""
import json, os, sys
sys.path.insert(0, {root!r})
from tests.planner.calibration.fixtures import native_result
args = sys.argv[1:]
val = {{a: args[i + 1] for i, a in enumerate(args[:-1]) if a.startswith("--")}}
res = native_result("vllm", val["--model"], int(val["--random-input-len"]),
                    int(val["--max-concurrency"]), 150.0, 14.0)
os.makedirs(val["--result-dir"], exist_ok=True)
with open(os.path.join(val["--result-dir"], val["--result-filename"]), "w") as fh:
    json.dump(res, fh)
'''


def test_benchmark_sh_leaves_the_layout_calibrate_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import subprocess
    import sys

    bundle = _bundle(tmp_path, "vllm")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "vllm"
    root = str(Path(__file__).resolve().parents[3])
    fake.write_text(FAKE_VLLM.format(python=sys.executable, root=root))
    fake.chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path)}
    for _ in range(2):  # two runs: two run folders (renamed by time, so one second apart)
        done = subprocess.run(
            ["bash", str(bundle / "benchmark.sh")],
            env=env,
            text=True,
            capture_output=True,
            check=True,
            cwd=tmp_path,
        )
        assert "next: planner calibrate e2e --data" in done.stdout
        subprocess.run(["sleep", "1.1"], check=True)
    runs = sorted((bundle / "results").iterdir())
    assert len(runs) == 2 and all(r.name.startswith("run-") for r in runs)
    assert all(
        sorted(p.name for p in r.iterdir()) == ["client0.json", "deployment.json"] for r in runs
    )
    prof = tmp_path / "p.yaml"
    assert main(["calibrate", "e2e", "--data", str(bundle / "results"), "--out", str(prof)]) == 0
    fit = yaml.safe_load(prof.read_text())["engines"]["vllm"]["all_gpus"]
    assert fit["rows_used"] == 2 and fit["load_points"] == 1
    assert fit["fitted"] == ["kernel_scale", "request_overhead_s"]
