"""`planner validate mlperf`: replay MLPerf Inference LLM result tables."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from planner.cli.output import print_json, render_kv, render_table


def cmd_validate_mlperf(args: argparse.Namespace) -> int:
    from planner.validation.mlperf import validate_mlperf

    report = validate_mlperf(args.data, args.predictions_out)
    if args.format == "json":
        print_json(report)
        return 0
    skipped = {f"skipped {k}": v for k, v in report["skipped"].items()}  # type: ignore[attr-defined]
    print(render_kv({"rows": report["rows"], "modelled": report["modelled"], **skipped}))
    rows = [{"by": g["by"], "key": g["key"], "n": g["n"],
             **{f"throughput {s}": g["throughput"][s]
                for s in ("median_ape_pct", "p90_ape_pct", "median_signed_pct")}}
            for g in report["groups"]]  # type: ignore[attr-defined]
    print(render_table(rows))
    return 0


def register(sub: Any, groups: dict[str, Any]) -> None:
    v = groups["validate"].add_parser(
        "mlperf", help="replay MLPerf Inference LLM rows (Offline saturation, Server p99 limits)")
    v.add_argument("--data", type=Path, required=True, help="MLPerf result table (CSV).")
    v.add_argument("--predictions-out", type=Path, default=None, help="write per-row predictions (CSV).")
    v.add_argument("--format", choices=("table", "json"), default="table")
    v.set_defaults(func=cmd_validate_mlperf)
