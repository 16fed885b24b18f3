"""`planner validate mlperf | splitwise | blogs`: replay the MLPerf, Splitwise and blog tables."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from planner.cli.output import print_json, render_kv, render_table


def cmd_validate_mlperf(args: argparse.Namespace) -> int:
    from planner.validation.mlperf import validate_mlperf

    return _print(validate_mlperf(args.data, args.predictions_out), args.format)


def cmd_validate_splitwise(args: argparse.Namespace) -> int:
    from planner.validation.static_batch import validate_splitwise

    return _print(validate_splitwise(args.data), args.format)


def cmd_validate_blogs(args: argparse.Namespace) -> int:
    from planner.validation.static_batch import validate_blogs

    return _print(validate_blogs(args.data), args.format)


def _print(report: dict[str, Any], fmt: str) -> int:
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
    for verb, func, text in (
        (
            "splitwise",
            cmd_validate_splitwise,
            "replay Splitwise prompt/token times (static batches)",
        ),
        ("blogs", cmd_validate_blogs, "replay blog-report fixed-batch latency tests"),
    ):
        b = groups["validate"].add_parser(verb, help=text)
        b.add_argument("--data", type=Path, required=True, help="the table (CSV).")
        b.add_argument("--format", choices=("table", "json"), default="table")
        b.set_defaults(func=func)
