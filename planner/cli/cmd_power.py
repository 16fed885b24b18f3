"""``planner validate power``: replay measured-power runs (docs/energy.md "Validation data")."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from planner.cli.common import float_in
from planner.perf.power import (
    ELECTRICITY_PRICE_HELP,
    ELECTRICITY_PRICE_SOURCE,
    ELECTRICITY_PRICE_USD_PER_KWH,
    PUE,
    PUE_HELP,
    PUE_SOURCE,
    PowerSummary,
)


def cmd_validate_power(args: argparse.Namespace) -> int:
    # the replay reads measurement files and fits (pandas, scipy.optimize): imported when run, so
    # that other commands do not pay for loading them
    from planner.replay_e2e.power import replay, summary

    err, skipped, prm_of = replay(args.data, args.model, args.holdout == "gpu")
    table = summary(err) if len(err) else None
    if args.format == "json":
        out = {
            "holdout": args.holdout,
            "summary": table.to_dict(orient="records") if table is not None else [],
            "skipped": skipped,
            "params": {g: p.source for g, p in prm_of.items()},
            "runs": err.to_dict(orient="records"),
        }
        print(json.dumps(out, indent=2))
        return 0
    print(f"power replay of {args.data} ({len(err)} runs priced, held out: {args.holdout})")
    if table is not None:
        print(table.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    for g, p in prm_of.items():
        print(f"  {g}: parameters {p.source}")
    for reason, n in sorted(skipped.items()):
        print(f"  skipped {n} runs: {reason}")
    return 0


def register(sub: Any, groups: dict[str, Any]) -> None:
    v = groups["validate"].add_parser(
        "power", help="replay measured-power runs: power per GPU, J per output token"
    )
    v.add_argument("--data", type=Path, required=True, help="measured-power runs (CSV).")
    v.add_argument(
        "--holdout",
        choices=("none", "gpu"),
        default="none",
        help="gpu: price each GPU's runs with power parameters fitted on the other GPUs' runs "
        "(default: none, the packaged parameters)",
    )
    v.add_argument(
        "--model",
        default=None,
        help="bundled checkpoint the runs served, where the file's model column names none "
        "(default: the model column)",
    )
    v.add_argument("--format", choices=("table", "json"), default="table")
    v.set_defaults(func=cmd_validate_power)


def add_power_args(p: argparse.ArgumentParser) -> None:
    """``--power-cap``, ``--electricity-price`` and ``--pue`` (defaults and sources in
    planner/perf/power.py)."""
    p.add_argument(
        "--power-cap",
        action="append",
        metavar="GPU=W",
        default=None,
        help="board power limit of a GPU, watts (repeatable); a capped GPU runs at the clock the "
        "limit allows (default: the spec's power_cap_w, else its TDP)",
    )
    add_energy_args(p)


def add_energy_args(p: argparse.ArgumentParser) -> None:
    """``--electricity-price`` and ``--pue`` (defaults and sources in planner/perf/power.py)."""
    p.add_argument(
        "--electricity-price",
        type=float_in(0.0, 10.0),
        default=ELECTRICITY_PRICE_USD_PER_KWH,
        help=f"{ELECTRICITY_PRICE_HELP} (default: {ELECTRICITY_PRICE_USD_PER_KWH}, "
        f"{ELECTRICITY_PRICE_SOURCE})",
    )
    p.add_argument(
        "--pue",
        type=float_in(1.0, 5.0),
        default=PUE,
        help=f"{PUE_HELP} (default: {PUE}, {PUE_SOURCE})",
    )


def power_rows(p: PowerSummary) -> dict[str, str]:
    """The power summary as labelled, rounded text."""
    rows = {
        "average power per GPU": f"{p.avg_power_w_per_gpu:.4g} W (idle "
        f"{p.idle_power_w_per_gpu:.3g} W, limit {p.board_limit_w:.4g} W)",
        "deployment power": f"{p.deployment_kw:.4g} kW ({p.facility_kw:.4g} kW facility at "
        f"PUE {p.pue:.3g})",
        "energy per output token": f"{p.j_per_output_token:.4g} J",
        "energy per total token": f"{p.j_per_total_token:.4g} J",
        "energy per day": f"{p.kwh_per_day:.4g} kWh, ${p.energy_cost_usd_per_day:,.4g} "
        f"at ${p.electricity_price_usd_per_kwh:.3g}/kWh",
        "cost per hour": f"${p.total_cost_usd_per_hour:,.4g} (GPUs ${p.gpu_cost_usd_per_hour:,.4g} "
        "+ energy)",
    }
    if p.clock_ratio < 1.0:
        rows["clock (power-limited)"] = f"{p.clock_ratio:.3g} x full clock"
    return rows
