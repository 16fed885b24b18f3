"""`planner sweep`: one plan per scenario of a spec, on Dask (a LocalCluster or --scheduler)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from planner.cli.common import positive_int
from planner.cli.output import print_json, render_kv, render_table
from planner.emitters.capabilities import shape_rules
from planner.errors import PlannerInputError
from planner.perf.deployment import ShapeRules

SCHEDULER_RE = re.compile(r"^(tcp|tls|inproc|ucx|ws|wss)://[A-Za-z0-9._\-\[\]:]+$")


def register(sub: Any, groups: dict[str, Any]) -> None:
    p = sub.add_parser(
        "sweep",
        help="plan every scenario of a spec (models x GPU sets x workloads x "
        "SLOs x objectives) on Dask",
    )
    p.add_argument("--spec", required=True, help="sweep YAML (see solvers/examples/sweep.yaml)")
    p.add_argument("--out", required=True, metavar="FILE", help="results file, .csv or .parquet")
    p.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="existing Dask scheduler, e.g. tcp://10.0.0.5:8786 (default: a LocalCluster)",
    )
    p.add_argument(
        "--workers",
        type=positive_int,
        default=None,
        help="LocalCluster worker processes (default: this machine's cores)",
    )
    p.add_argument(
        "--resume", action="store_true", help="skip scenarios already in --out or its journal"
    )
    p.add_argument("--force", action="store_true", help="replace an existing --out")
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.set_defaults(func=cmd_sweep)


def _check_names(spec: Any) -> None:
    """Unknown models, GPUs or backends are input errors before any scenario runs."""
    from hardware.catalog import get_gpu
    from planner.engines.calibration import engine
    from planner.model.bundled import load_model

    try:
        engine(spec.backend)
    except PlannerInputError as exc:
        raise PlannerInputError("--spec", f"backend: {exc.message}") from None

    for m in spec.models:
        try:
            load_model(m)
        except (PlannerInputError, ValueError, OSError) as exc:
            raise PlannerInputError(
                "--spec", f"models: {m!r}: {getattr(exc, 'message', exc)}"
            ) from None
    for gs in spec.gpu_sets:
        for g in gs.gpus:
            try:
                get_gpu(g)
            except (PlannerInputError, ValueError, KeyError) as exc:
                raise PlannerInputError(
                    "--spec", f"gpu_sets.{gs.name}: {getattr(exc, 'message', exc)}"
                ) from None


def _shape_rules(path: str, backend: str) -> ShapeRules:
    """The worker shapes the spec's backend can launch (an unknown backend: an input error)."""
    try:
        return shape_rules(backend)
    except PlannerInputError as exc:
        raise PlannerInputError("--spec", f"{path}: backend: {exc.message}") from None


def cmd_sweep(args: argparse.Namespace) -> int:
    from solvers.sweep import load_spec, scenarios
    from solvers.sweep_run import check_paths, run_sweep

    if args.scheduler is not None and not SCHEDULER_RE.match(args.scheduler):
        raise PlannerInputError(
            "--scheduler", f"{args.scheduler!r}: expected an address like tcp://HOST:8786"
        )
    if args.scheduler is not None and args.workers is not None:
        raise PlannerInputError(
            "--workers",
            "sizes a LocalCluster; with --scheduler the cluster's workers run the sweep",
        )
    spec = load_spec(args.spec)
    rules = _shape_rules(args.spec, spec.backend)
    _check_names(spec)
    out = check_paths(args.out, args.resume, args.force)  # last: --force removes the old results
    summary = run_sweep(
        scenarios(spec, rules),
        out,
        scheduler=args.scheduler,
        workers=args.workers,
        resume=args.resume,
    )
    if args.format == "json":
        print_json(summary | {"out": str(out)})
    else:
        print(render_kv(summary | {"results": str(out)}, "Sweep"))
        table = money_and_energy(out)
        if table:
            print("\nCost and energy per scenario (energy: GPU boards x PUE)")
            print(render_table(table))
    return 0


def money_and_energy(out: Path) -> list[dict[str, Any]]:
    """Per planned scenario of the results ``out``: GPU type, $ and kWh per 1M total tokens side
    by side, board W per GPU and J per total token."""
    from planner.reports.present import gpu_name
    from solvers.sweep_run import finished_rows

    rows = sorted(finished_rows(out).values(), key=lambda r: int(str(r["index"])))
    return [
        {
            "scenario": f"{r['gpu_set']}/{r['workload']}/{r['slo']}/{r['objective']}",
            "GPU type": gpu_name(str(r["gpu"])),
            "GPUs": r["gpus"],
            "$ per 1M total tokens (GPUs)": _num(r["cost_per_million_total_tokens_usd"]),
            "kWh per 1M total tokens": _num(r["kwh_per_million_total_tokens"]),
            "$ per 1M total tokens (energy)": _num(r["energy_cost_per_million_total_tokens_usd"]),
            "W per GPU (mean)": _num(r["avg_power_w_per_gpu"]),
            "J per total token": _num(r["j_per_total_token"]),
        }
        for r in rows
        if r.get("status") == "ok"
    ]


def _num(v: object) -> float | None:
    """A results cell as a number (CSV cells come back as text; empty ones as None)."""
    try:
        return float(str(v)) if v not in (None, "") else None
    except ValueError:
        return None
