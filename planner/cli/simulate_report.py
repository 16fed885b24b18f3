"""``planner simulate`` (one aggregated worker): run :func:`planner.perf.simulator.simulate` and
print
its TTFT/TPOT summary (the simulator itself prints nothing)."""

from __future__ import annotations

import argparse

import numpy as np

from planner.cli.output import print_json, render_table
from planner.engines.calibration import EnginePolicy
from planner.model.bundled import load_model
from planner.perf.deployment import WorkerConfig
from planner.perf.simulator import simulate
from planner.workload.spec import Workload


def simulate_cli(
    args: argparse.Namespace, w: Workload, workers: dict[str, WorkerConfig], policy: EnginePolicy
) -> int:
    """Simulate the deployment of ``args`` under ``w`` on engine ``policy`` and print the summary
    (json or table)."""
    worker = workers.get("agg") or workers["decode"]
    # with --bench-requests, the benchmark run itself: P requests, its first wave included
    run = (
        {"requests": w.bench_requests, "warmup_frac": 0.0}
        if w.bench_requests is not None
        else {"requests": args.requests}
    )
    res = simulate(
        load_model(args.model, getattr(args, "model_id", None) or ""),
        args.gpu,
        w,
        worker,
        backend=policy,
        seed=args.seed,
        **run,
    )
    summary = {
        f"{name}_ms": {
            "mean": float(np.mean(x)) * 1e3,
            **{f"p{q}": float(np.percentile(x, q)) * 1e3 for q in (50, 90, 99)},
        }
        for name, x in (("ttft", res.ttft_s), ("tpot", res.tpot_s))
        if x.size
    }
    out = {
        **summary,
        "requests_per_s": res.requests_per_s,
        "steps": res.steps,
        "engine_calibration": policy.label,
    }
    if args.format == "json":
        print_json(out)
    else:
        print(render_table([{"metric": k, **v} for k, v in summary.items()]))
        print(f"engine constants: {out['engine_calibration']}")
    return 0
