"""CLI contract of ``planner capacity``, ``planner gen-trace``, ``simulate --trace --deployment``
and ``estimate --trace`` with timed and BurstGPT files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planner.cli.main import main
from tests.planner.workload.test_traces import burstgpt_file


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        rc = main(list(argv))
    except SystemExit as exc:
        rc = int(exc.code or 0)
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two hours with one burst, written by gen-trace."""
    path = tmp_path_factory.mktemp("trace") / "t.csv"
    rc = main(
        [
            "gen-trace",
            "--out",
            str(path),
            "--hours",
            "2",
            "--peak-rate",
            "6",
            "--bursts-per-day",
            "12",
            "--isl-mean",
            "1000",
            "--osl-mean",
            "200",
            "--seed",
            "4",
            "--format",
            "json",
        ]
    )
    assert rc == 0
    return path


CAP = (
    "--model",
    "llama-3.1-8b",
    "--gpu",
    "h100",
    "--ttft-ms",
    "500",
    "--tpot-ms",
    "25",
    "--worker-max-gpus",
    "1",
)


def test_capacity_json_shape_and_replay(
    capsys: pytest.CaptureFixture[str], small: Path, tmp_path: Path
) -> None:
    capsys.readouterr()
    out_json = tmp_path / "cap.json"
    rc, out, err = run(
        capsys,
        "capacity",
        "--trace",
        str(small),
        *CAP,
        "--window",
        "15m",
        "--scale-up-s",
        "2m",
        "--out",
        str(out_json),
        "--format",
        "json",
    )
    assert rc == 0, err
    data = json.loads(out)
    assert json.loads(out_json.read_text()) == data
    assert len(data["windows"]) == 8
    for w in data["windows"]:
        for key in (
            "start_s",
            "requests",
            "rate",
            "arrival_cv",
            "isl_mean",
            "osl_mean",
            "gpus",
            "config",
            "meets_slo",
        ):
            assert key in w
        assert set(w["ttft_ms"]) >= {"p90"} and set(w["tpot_ms"]) >= {"p90"}
    for key in ("gpu_hours", "cost"):
        assert data["autoscaled"][key] > 0 and data["static_peak"][key] > 0
    assert "windows_violating" in data["static_mean"]
    assert data["autoscaled"]["gpu_hours"] <= data["static_peak"]["gpu_hours"]
    rc, out, err = run(
        capsys,
        "simulate",
        "--trace",
        str(small),
        "--deployment",
        str(out_json),
        "--windows",
        "0,3-4",
        "--format",
        "json",
    )
    assert rc == 0, err
    rep = json.loads(out)
    assert [w["index"] for w in rep["windows"]] == [0, 3, 4]
    assert rep["overall"]["requests"] == sum(w["requests"] for w in rep["windows"])
    assert rep["windows"][0]["ttft_ms"]["p90"] > 0 and isinstance(
        rep["windows"][0]["meets_slo"], bool
    )
    rc, out, err = run(
        capsys,
        "simulate",
        "--trace",
        str(small),
        "--deployment",
        str(out_json),
        "--model",
        "llama-3.1-70b",
    )
    assert rc == 2 and "--model" in err and err.count("\n") == 1


def test_capacity_table_with_burstgpt(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    f = burstgpt_file(tmp_path / "burst.csv", rows=400)
    rc, out, err = run(capsys, "capacity", "--trace", str(f), *CAP, "--window", "5m")
    assert rc == 0, err
    assert "autoscaled" in out and "static mean" in out
    rc, out, err = run(
        capsys,
        "capacity",
        "--trace",
        str(f),
        *CAP,
        "--window",
        "5m",
        "--trace-where",
        "Log Type=API log",
        "--format",
        "json",
    )
    assert rc == 0, err
    assert json.loads(out)["trace"]["requests"] == 200  # every other row is an API log
    rc, _, err = run(capsys, "capacity", "--trace", str(f), *CAP, "--trace-where", "Kind=API")
    assert rc == 2 and "--trace-where" in err and "Log Type" in err and err.count("\n") == 1
    rc, _, err = run(capsys, "capacity", "--trace", str(f), *CAP, "--trace-where", "Model=Claude")
    assert rc == 2 and "no row" in err


def test_estimate_accepts_timed_and_burstgpt(
    capsys: pytest.CaptureFixture[str], small: Path, tmp_path: Path
) -> None:
    f = burstgpt_file(tmp_path / "burst.csv")
    for trace in (small, f):
        rc, out, err = run(
            capsys,
            "estimate",
            "--model",
            "llama-3.1-8b",
            "--gpu",
            "h100",
            "--rate",
            "2",
            "--trace",
            str(trace),
            "--format",
            "json",
        )
        assert rc == 0, err
        assert json.loads(out)["ttft_ms"]["p90"] > 0


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ("arrival_s,isl,osl\n5,10,5\n1,10,5\n", "bad.csv:3:arrival_s"),
        ("arrival_s,isl,osl\n0,-1,5\n", "bad.csv:2:isl"),
        ("arrival_s,isl,osl\n", "no requests"),
    ],
)
def test_bad_trace_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, body: str, needle: str
) -> None:
    f = tmp_path / "bad.csv"
    f.write_text(body)
    rc, _, err = run(capsys, "capacity", "--trace", str(f), *CAP)
    assert rc == 2 and needle in err and err.count("\n") == 1 and "Traceback" not in err
    rc, _, err = run(
        capsys,
        "estimate",
        "--model",
        "llama-3.1-8b",
        "--gpu",
        "h100",
        "--rate",
        "1",
        "--trace",
        str(f),
    )
    if "arrival_s" in needle:
        assert rc == 0  # estimate reads lengths only; the times are ignored
    else:
        assert rc == 2 and needle in err and err.count("\n") == 1


def test_flag_errors_exit_2(
    capsys: pytest.CaptureFixture[str], small: Path, tmp_path: Path
) -> None:
    rc, _, err = run(capsys, "capacity", "--trace", str(small), *CAP, "--window", "15 minutes")
    assert rc == 2 and "--window" in err
    rc, _, err = run(capsys, "gen-trace", "--out", str(small))
    assert rc == 2 and "--force" in err
    rc, _, err = run(capsys, "simulate", "--rate", "1")
    assert rc == 2 and "--model" in err
    rc, _, err = run(capsys, "simulate", "--trace", str(small), "--deployment", str(small))
    assert rc == 2 and "--deployment" in err


def test_simulate_replays_a_plan_json(
    capsys: pytest.CaptureFixture[str], small: Path, tmp_path: Path
) -> None:
    """A static plan from ``planner plan`` replays with its replicas in every window."""
    rc, out, err = run(
        capsys,
        "plan",
        "--model",
        "llama-3.1-8b",
        "--gpu",
        "h100",
        "--max-gpus",
        "4",
        "--isl",
        "1000",
        "--osl",
        "200",
        "--rate",
        "8",
        "--ttft-ms",
        "500",
        "--tpot-ms",
        "25",
        "--mode",
        "agg",
        "--format",
        "json",
    )
    assert rc == 0, err
    plan_json = tmp_path / "plan.json"
    plan_json.write_text(out)
    workers = json.loads(out)["best"]["deployment"]["agg"]["workers"]
    rc, out, err = run(
        capsys,
        "simulate",
        "--trace",
        str(small),
        "--deployment",
        str(plan_json),
        "--window",
        "30m",
        "--windows",
        "0-1",
        "--format",
        "json",
    )
    assert rc == 0, err
    rep = json.loads(out)
    assert [w["replicas"] for w in rep["windows"]] == [workers, workers]
    assert rep["slo"]["ttft_ms"] == 500 and rep["overall"]["requests"] > 0


def test_capacity_decides_speculative_decoding(
    capsys: pytest.CaptureFixture[str], small: Path
) -> None:
    """At a TPOT SLO one H100 cannot meet for Llama 3.1 8B without drafting, capacity sizes the
    fleet with EAGLE-3 and says why; with the default SLO it declines (no cheaper fleet)."""
    capsys.readouterr()
    tight = [a if a != "25" else "8" for a in CAP]
    args = ("--window", "15m", "--spec-method", "eagle3", "--format", "json")
    rc, out, err = run(capsys, "capacity", "--trace", str(small), *tight, *args)
    assert rc == 0, err
    d = json.loads(out)["speculative_decision"]
    assert d["chosen"].startswith("eagle3") and "without" in d["why"]
    assert d["options"][0] == {"setting": "none", "feasible": False}
    rc, out, err = run(capsys, "capacity", "--trace", str(small), *CAP, *args)
    assert rc == 0, err
    assert json.loads(out)["speculative_decision"]["chosen"] == "none"
