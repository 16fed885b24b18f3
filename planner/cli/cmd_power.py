"""``planner validate power``: replay measured-power runs (docs/energy.md "Validation data")."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from planner.replay_e2e.power import replay, summary


def cmd_validate_power(args: argparse.Namespace) -> int:
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
