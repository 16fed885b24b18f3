"""`planner sweep` on Dask: rows, kill + --resume, an external scheduler and worker, bad input."""

from __future__ import annotations

import csv
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from planner.cli.main import main
from planner.emitters.capabilities import shape_rules
from planner.perf.deployment import Parallelism, ShapeRules
from solvers.plan_core import evaluate_request
from solvers.sweep import COLUMNS, Scenario, load_spec, run_scenario, scenario_request, scenarios
from solvers.sweep_run import journal_path

pytest.importorskip("distributed", reason="needs the [sweep] extra (dask[distributed])")

ROOT = Path(__file__).resolve().parents[2]
# 2 models x 2 GPU sets x 5 workloads x 1 SLO = 20 scenarios, small enough to plan in well under a
# second each (one GPU, agg); the 100k-token prompt misses the TTFT SLO on purpose (a reason row)
SPEC = """
mode: agg
objectives: [gpus]
models: [llama-3.1-8b, qwen3-8b]
gpu_sets:
  - {name: h100, gpus: [h100], max_gpus: 1}
  - {name: h200, gpus: [h200, h200_sxm], max_gpus: 1}
workloads:
  - {name: r1, isl: 500, osl: 100, rate_per_s: 1}
  - {name: r2, isl: 1000, osl: 200, rate_per_s: 2}
  - {name: r4, isl: 2000, osl: 100, rate_per_s: 4}
  - {name: c8, isl: 1000, osl: 100, concurrency: 8}
  - {name: long, isl: 100000, osl: 100, rate_per_s: 1}
slos:
  - {name: std, ttft_ms: 1000, tpot_ms: 40, percentile: p90}
"""
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _spec(tmp: Path, text: str = SPEC) -> Path:
    p = tmp / "sweep.yaml"
    p.write_text(text)
    return p


def _scenarios(path: Path) -> list[Scenario]:
    """The spec's scenarios limited to its backend's shapes, as ``planner sweep`` runs them."""
    spec = load_spec(path)
    return scenarios(spec, shape_rules(spec.backend))


def _rows(path: Path) -> dict[str, dict[str, str]]:
    with path.open() as fh:
        return {
            r["scenario_id"]: {k: v for k, v in r.items() if k != "seconds"}
            for r in csv.DictReader(fh)
        }


def _sweep(*args: str, **kw: object) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "planner", "sweep", *args]
    return subprocess.Popen(
        cmd, cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw
    )  # type: ignore[call-overload]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str]]:
    """Rows of an uninterrupted run: every scenario planned here, one after another, written as the
    sweep writes them (Dask must change nothing but the order they finish in)."""
    from solvers.sweep_run import results_bytes

    tmp = tmp_path_factory.mktemp("ref")
    out = tmp / "ref.csv"
    out.write_bytes(results_bytes([run_scenario(s) for s in _scenarios(_spec(tmp))], ".csv"))
    return _rows(out)


def test_uninterrupted_sweep_rows(reference: dict[str, dict[str, str]]) -> None:
    assert len(reference) == 20
    rows = list(reference.values())
    assert set(rows[0]) == set(COLUMNS) - {"seconds"}
    assert sorted(int(r["index"]) for r in rows) == list(range(20))
    ok = [r for r in rows if r["status"] == "ok"]
    assert ok and all(float(r["tpot_at_percentile_ms"]) <= 40 and int(r["gpus"]) == 1 for r in ok)
    assert all(r["reason"] for r in rows if r["status"] != "ok")


def test_killed_halfway_then_resumed_gives_the_same_rows(
    reference: dict[str, dict[str, str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run.csv"
    spec = _spec(tmp_path)
    proc = _sweep(
        "--spec",
        str(spec),
        "--out",
        str(out),
        "--workers",
        "2",
        "--format",
        "json",
        start_new_session=True,
    )
    journal, deadline = journal_path(out), time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if journal.exists() and len(journal.read_text().splitlines()) >= 6:
            break
        # warm scenarios finish in tens of ms each: a coarse poll can see the 6th row only after
        # the 20th (seen once under make test's load), and then there is nothing left to resume
        time.sleep(0.01)
    assert proc.poll() is None, "the sweep finished before it could be interrupted"
    os.killpg(proc.pid, signal.SIGKILL)  # the sweep and its LocalCluster (same new session)
    proc.wait(timeout=60)
    done = len(journal.read_text().splitlines())
    assert not out.exists() and 6 <= done < 20
    capsys.readouterr()
    # refused without --resume/--force (in this process: a new interpreter per step is slow)
    assert main(["sweep", "--spec", str(spec), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--resume" in err and len(err.strip().splitlines()) == 1
    args = [
        "--spec",
        str(spec),
        "--out",
        str(out),
        "--workers",
        "2",
        "--resume",
        "--format",
        "json",
    ]
    assert main(["sweep", *args]) == 0
    cap = capsys.readouterr()
    assert "ETA" in cap.err  # the progress line
    assert json.loads(cap.out)["skipped"] == done
    assert _rows(out) == reference and not journal.exists()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for_worker(address: str, deadline: float) -> None:
    from distributed import Client

    with Client(address, timeout="30s") as c:
        c.wait_for_workers(1, timeout=max(deadline - time.monotonic(), 1.0))


def test_sweep_through_an_external_scheduler(
    reference: dict[str, dict[str, str]], tmp_path: Path
) -> None:
    """`dask scheduler` and `dask worker` as separate processes, the sweep through --scheduler."""
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    dask = [sys.executable, "-m", "dask"]
    procs = [
        subprocess.Popen(
            [*dask, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
            env=ENV,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    ]
    try:
        procs.append(
            subprocess.Popen(
                [
                    *dask,
                    "worker",
                    address,
                    "--nworkers",
                    "1",
                    "--nthreads",
                    "1",
                    "--no-dashboard",
                    "--host",
                    "127.0.0.1",
                ],
                env=ENV,
                cwd=tmp_path,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        _wait_for_worker(address, time.monotonic() + 120)
        small = SPEC.replace("models: [llama-3.1-8b, qwen3-8b]", "models: [qwen3-8b]").replace(
            "  - {name: h200, gpus: [h200, h200_sxm], max_gpus: 1}\n", ""
        )
        out = tmp_path / "ext.csv"
        spec = str(_spec(tmp_path, small))
        assert main(["sweep", "--spec", spec, "--out", str(out), "--scheduler", address]) == 0
        rows = _rows(out)
        assert len(rows) == 5
        for sid, row in rows.items():
            assert {k: v for k, v in row.items() if k != "index"} == {
                k: v for k, v in reference[sid].items() if k != "index"
            }
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()


def test_failing_scenario_is_a_row() -> None:
    req = {
        "model": "llama-3.1-8b",
        "gpus": ["h100"],
        "max_gpus": 1,
        "isl": 100,
        "osl": 10,
        "rate_per_s": 1.0,
        "concurrency": None,
        "ttft_ms": 500,
        "tpot_ms": 30,
        "percentile": "p90",
        "mode": "agg",
        "backend": "no-such-engine",
        "objective": "gpus",
    }
    row = run_scenario(
        Scenario(
            index=0,
            scenario_id="x",
            gpu_set="a",
            workload="b",
            slo="c",
            request=req,
            shape_rules=ShapeRules(),
        )
    )
    assert (
        row["status"] == "error" and "no-such-engine" in row["reason"] and set(row) == set(COLUMNS)
    )


def test_scenario_ids_are_stable_and_distinct(tmp_path: Path) -> None:
    a, b = _scenarios(_spec(tmp_path)), _scenarios(_spec(tmp_path))
    assert [s.scenario_id for s in a] == [s.scenario_id for s in b]
    assert len({s.scenario_id for s in a}) == 20


@pytest.mark.parametrize(
    ("text", "args", "needle"),
    [
        ("models: [llama-3.1-8b]\n", (), "gpu_sets"),
        (SPEC.replace("max_gpus: 1}", "max_gpus: 100001}", 1), (), "100000"),
        (SPEC.replace("qwen3-8b]", "no-such-model]"), (), "no-such-model"),
        (SPEC, ("--scheduler", "http://x;rm"), "--scheduler"),
        (SPEC, ("--workers", "0"), "--workers"),
        (SPEC + "backend: tgi\n", (), "backend"),
    ],
)
def test_bad_input_is_one_line_exit_2(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    text: str,
    args: tuple[str, ...],
    needle: str,
) -> None:
    out = tmp_path / "o.csv"
    try:
        rc = main(["sweep", "--spec", str(_spec(tmp_path, text)), "--out", str(out), *args])
    except SystemExit as exc:  # argparse's own checks (--workers 0)
        rc = int(exc.code or 0)
    err = capsys.readouterr().err
    assert rc == 2 and needle in err and len(err.strip().splitlines()) == 1
    assert not out.exists() and not journal_path(out).exists()


@pytest.mark.parametrize("backend", ["vllm", "trtllm"])
def test_scenarios_search_only_shapes_their_backend_launches(tmp_path: Path, backend: str) -> None:
    """A scenario plans as `planner plan --backend B`: the engine's shape rules limit the search
    (vLLM: EP over all tp*dp ranks or none; TensorRT-LLM: attention DP at TP 1)."""
    text = (
        "mode: agg\nobjectives: [gpus]\nmodels: [qwen3-30b-a3b]\n"
        "gpu_sets: [{name: h200, gpus: [h200], max_gpus: 8}]\n"
        "workloads: [{name: c64, isl: 1000, osl: 200, concurrency: 64}]\n"
        "slos: [{name: std, ttft_ms: 2000, tpot_ms: 50}]\n"
        f"backend: {backend}\n"
    )
    (s,) = _scenarios(_spec(tmp_path, text))
    assert scenario_request(s).shape_rules == shape_rules(backend)
    assert run_scenario(s)["status"] == "ok"
    rules = shape_rules(backend)
    for b in evaluate_request(scenario_request(s)).blocks:
        w = b.workers
        assert w is not None and w.size
        shapes = {(int(t), int(d), int(e)) for t, d, e in zip(w.tp, w.dp, w.ep, strict=True)}
        assert any(d > 1 for _, d, _ in shapes)  # attention DP was searched
        for tp, dp, ep in shapes:
            assert rules.problem(Parallelism(tp=tp, dp=dp, ep=ep)) is None
