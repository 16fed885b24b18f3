"""Solver speed figures for `make bench` (tests/bench.py calls ``bench()``)."""

from __future__ import annotations

import time

from solvers.fleet import load_spec, solve_fleet
from solvers.plan import PlanRequest, plan


def bench() -> dict[str, float]:
    """Acceptance plan search time and candidates, and the example fleet MILP solve time."""
    req = PlanRequest(model="llama-3.1-70b", gpus=("h200",), max_gpus=8, isl=4000, osl=500, ttft_ms=1000, tpot_ms=30)
    plan(req)  # warm caches (model parsing, imports)
    result = plan(req)
    t0 = time.perf_counter()
    fleet = solve_fleet(load_spec("solvers/examples/fleet.yaml"))
    return {"plan_search_seconds": result.search_seconds, "plan_candidates": float(result.candidates_evaluated),
            "fleet_milp_s": fleet.solve_seconds, "fleet_total_s": time.perf_counter() - t0}
