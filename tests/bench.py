"""`make bench`: speed targets, printed as figures (never asserted by unit tests).

Each ``tests/bench_*.py`` module exposes ``bench() -> dict[str, float]``; this runner calls them
and prints one table with each figure next to its target.
"""

from __future__ import annotations

import importlib
import sys

BENCH_MODULES = (
    "tests.bench_kernels",
    "tests.bench_serving",
    "tests.bench_solvers",
    "tests.bench_ui",
    "tests.bench_capacity",
    "tests.bench_prefix",
    "tests.bench_heldout",
)

TARGETS: dict[str, str] = {
    "gemm_lookup_100k_s": "<= 0.5 s",
    "estimate_one_ms": "<= 5 ms",
    "evaluate_10k_configs_s": "<= 0.5 s",
    "plan_search_seconds": "<= 1.0 s",
    "fleet_milp_s": "<= 2 s",
    "plan_4096_gpus_s": "<= 5 s",
    "plan_4096_gpus_peak_mb": "<= 1536 MB",
    "ui_plan_s": "<= 2 s",
    "capacity_1m_requests_24h_s": "<= 10 s",
    "capacity_mooncake_prefix_s": "<= 5 s",
    "prefix_replay_mooncake_s": "<= 0.5 s",
    "heldout_gpu_e2e_s": "<= 300 s",
    "heldout_gpu_agg_ttft_pct": "<= 22 %",
    "heldout_gpu_agg_tpot_pct": "<= 12 %",
    "heldout_gpu_disagg_ttft_pct": "<= 28 %",
    "heldout_gpu_disagg_tpot_pct": "<= 12 %",
    "heldout_gpu_off_by_3x_pct": "<= 5 %",
    "heldout_gpu_decisions_within5_pct": ">= 75 %",
}


def main() -> int:
    results: dict[str, float] = {}
    for name in BENCH_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                print(f"{name}: not present", file=sys.stderr)
                continue
            raise
        print(f"running {name} ...", file=sys.stderr, flush=True)
        results.update(module.bench())
    width = max((len(k) for k in results), default=10)
    print(f"{'benchmark'.ljust(width)}  {'value':>12}  target")
    for key, val in results.items():
        print(f"{key.ljust(width)}  {val:12.4g}  {TARGETS.get(key, '')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
