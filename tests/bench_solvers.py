"""Solver speed figures for `make bench` (tests/bench.py calls ``bench()``).

* ``plan_search_seconds``: the acceptance plan (llama-3.1-70b on 8 H200).
* ``plan_{N}_gpus_s`` / ``plan_{N}_gpus_peak_mb``: ``planner plan --model deepseek-r1 --gpu
  h200,b200,gb200 --max-gpus N --rate 200 --isl 1000 --osl 1000 --ttft-ms 2000 --tpot-ms 50`` for
  N = 8, 64, 512, 4096, each in a fresh process: seconds of the plan call (an infeasible answer
  counts: 8 GPUs cannot serve the rate), its CPU seconds (the figure to read on a shared machine)
  and the process's peak resident memory (interpreter and imports included).
* ``plan_4096_gpus_noload_*``: the same plan without a rate (every closed-loop client level).
* ``sweep_{1,2}_workers_scenarios_per_s``: a 200-scenario sweep (10 models x 5 GPU sets x 4
  workloads) on a LocalCluster of 1 and 2 workers.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from solvers.fleet import load_spec, solve_fleet
from solvers.plan import PlanRequest, plan

ROOT = Path(__file__).resolve().parents[1]
BUDGETS = (8, 64, 512, 4096)
_CHILD = """
import json, resource, sys, time
from hardware.errors import InfeasibleError
from solvers.plan import PlanRequest, plan
rate = None if sys.argv[2:] == ["noload"] else 200
req = PlanRequest(model="deepseek-r1", gpus=("h200", "b200", "gb200"), max_gpus=int(sys.argv[1]),
                  rate_per_s=rate, isl=1000, osl=1000, ttft_ms=2000, tpot_ms=50)
t0, c0 = time.perf_counter(), time.process_time()
try:
    r = plan(req)
    best = f"{r.best.gpus} x {r.best.gpu} {r.best.config}"
except InfeasibleError as exc:
    best = f"infeasible: {exc}"
s, cpu = time.perf_counter() - t0, time.process_time() - c0
peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"s": s, "cpu_s": cpu, "peak_mb": peak_mb, "best": best}))
"""
SWEEP_MODELS = (
    "llama-3.1-8b",
    "qwen3-8b",
    "qwen3-32b",
    "qwen3-30b-a3b",
    "llama-3.1-70b",
    "llama-3.3-70b",
    "mixtral-8x7b",
    "gpt-oss-20b",
    "gpt-oss-120b",
    "llama-4-scout",
)
SWEEP_SPEC = {
    "mode": "auto",
    "models": list(SWEEP_MODELS),
    "gpu_sets": [
        {"name": n, "gpus": g, "max_gpus": 8}
        for n, g in (
            ("h100", ["h100"]),
            ("h200", ["h200"]),
            ("b200", ["b200"]),
            ("a100", ["a100"]),
            ("hopper", ["h100", "h200"]),
        )
    ],
    "workloads": [
        {"name": "chat", "isl": 1000, "osl": 300, "rate_per_s": 5},
        {"name": "rag", "isl": 8000, "osl": 200, "rate_per_s": 1},
        {"name": "agents", "isl": 4000, "osl": 500, "concurrency": 32},
        {"name": "batch", "isl": 2000, "osl": 1000},
    ],
    "slos": [{"name": "std", "ttft_ms": 2000, "tpot_ms": 50, "percentile": "p90"}],
}


def _child(n: int, *extra: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, str(n), *extra],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
        check=True,
    )
    res: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    print(
        f"plan --max-gpus {n} {' '.join(extra)}: {res['s']:.2f} s ({res['cpu_s']:.2f} s CPU), "
        f"{res['peak_mb']:.0f} MB, {res['best']}",
        file=sys.stderr,
    )
    return res


def plan_at_scale() -> dict[str, float]:
    """Time and peak memory of the deepseek-r1 rate plan at each budget (fresh process each),
    and of the no-load plan (closed-loop client levels) at the largest budget."""
    out: dict[str, float] = {}
    for n in BUDGETS:
        res = _child(n)
        out[f"plan_{n}_gpus_s"] = res["s"]
        out[f"plan_{n}_gpus_cpu_s"] = res["cpu_s"]
        out[f"plan_{n}_gpus_peak_mb"] = res["peak_mb"]
    n = BUDGETS[-1]
    res = _child(n, "noload")
    out[f"plan_{n}_gpus_noload_s"] = res["s"]
    out[f"plan_{n}_gpus_noload_cpu_s"] = res["cpu_s"]
    out[f"plan_{n}_gpus_noload_peak_mb"] = res["peak_mb"]
    return out


def sweep_rate() -> dict[str, float]:
    """Scenarios per second of the 200-scenario sweep on 1 and 2 LocalCluster workers."""
    import yaml

    from planner.emitters.capabilities import shape_rules
    from solvers.sweep import load_spec as load_sweep
    from solvers.sweep import scenarios
    from solvers.sweep_run import run_sweep

    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "sweep.yaml"
        spec.write_text(yaml.safe_dump(SWEEP_SPEC))
        sweep = load_sweep(spec)
        todo = scenarios(sweep, shape_rules(sweep.backend))
        for workers in (1, 2):
            t0 = time.perf_counter()
            summary = run_sweep(todo, Path(tmp) / f"w{workers}.csv", workers=workers)
            seconds = time.perf_counter() - t0
            out[f"sweep_{workers}_workers_scenarios_per_s"] = len(todo) / seconds
            print(f"sweep on {workers} worker(s): {summary}", file=sys.stderr)
    out["sweep_scenarios"] = float(len(todo))
    return out


def bench() -> dict[str, float]:
    """Acceptance plan search time, plans at scale, the fleet MILP and the sweep rate."""
    req = PlanRequest(
        model="llama-3.1-70b",
        gpus=("h200",),
        max_gpus=8,
        isl=4000,
        osl=500,
        ttft_ms=1000,
        tpot_ms=30,
    )
    plan(req)  # warm caches (model parsing, imports)
    result = plan(req)
    t0 = time.perf_counter()
    fleet = solve_fleet(load_spec("solvers/examples/fleet.yaml"))
    return {
        "plan_search_seconds": result.search_seconds,
        "plan_candidates": float(result.candidates_evaluated),
        "fleet_milp_s": fleet.solve_seconds,
        "fleet_total_s": time.perf_counter() - t0,
        **plan_at_scale(),
        **sweep_rate(),
    }
