"""`planner validate mlperf`: replay the MLPerf Inference LLM table. (The Splitwise and blog tables
are lab data sets: ``python -m lab.static_batch splitwise|blogs --data CSV``.)"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from planner.cli.output import print_json, render_kv, render_table


def cmd_validate_mlperf(args: argparse.Namespace) -> int:
    from planner.replay_e2e.mlperf import validate_mlperf

    return print_report(validate_mlperf(args.data, args.predictions_out), args.format)


def print_report(report: dict[str, Any], fmt: str) -> int:
    """Print a replay report (rows, skips, error groups of one metric) as JSON or tables."""
    if fmt == "json":
        print_json(report)
        return 0
    skipped = {f"skipped {k}": v for k, v in report["skipped"].items()}
    print(render_kv({"rows": report["rows"], "modelled": report["modelled"], **skipped}))
    metric = next(k for k in report["groups"][0] if k not in ("by", "key", "n"))
    rows = [
        {
            "by": g["by"],
            "key": g["key"],
            "n": g["n"],
            **{
                f"{metric} {s}": g[metric][s]
                for s in ("median_ape_pct", "p90_ape_pct", "median_signed_pct")
            },
        }
        for g in report["groups"]
    ]
    print(render_table(rows))
    return 0


def register(sub: Any, groups: dict[str, Any]) -> None:
    v = groups["validate"].add_parser(
        "mlperf", help="replay MLPerf Inference LLM rows (Offline saturation, Server p99 limits)"
    )
    v.add_argument("--data", type=Path, required=True, help="MLPerf result table (CSV).")
    v.add_argument(
        "--predictions-out", type=Path, default=None, help="write per-row predictions (CSV)."
    )
    v.add_argument("--format", choices=("table", "json"), default="table")
    v.set_defaults(func=cmd_validate_mlperf)
