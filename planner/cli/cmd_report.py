"""`planner report`: spreadsheet, HTML page and CSV of a plan file."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from planner.cli.common import add_format
from planner.cli.output import print_json
from planner.errors import PlannerInputError
from planner.reports.csv_report import render_csv
from planner.reports.html import render_html
from planner.reports.plan_view import load_plan
from planner.reports.write import check_out_path, write_all
from planner.reports.xlsx import render_xlsx


def register(sub: Any, groups: dict[str, Any]) -> None:
    p = sub.add_parser(
        "report",
        help="xlsx / HTML / CSV report of a plan file",
        description="Write the reports of a plan file (the JSON of `planner plan --format json`).",
    )
    p.add_argument(
        "--plan", required=True, help="plan file written by `planner plan --format json`"
    )
    p.add_argument("--xlsx", default=None, help="spreadsheet to write (native charts)")
    p.add_argument("--html", default=None, help="self-contained HTML page to write (plotly charts)")
    p.add_argument("--csv", default=None, help="CSV of the Pareto front / candidates to write")
    p.add_argument("--force", action="store_true", help="replace files that already exist")
    add_format(p)
    p.set_defaults(func=cmd_report)


def cmd_report(args: argparse.Namespace) -> int:
    """Check every output folder, build every file in memory, then write them all."""
    wanted = {flag: getattr(args, flag) for flag in ("xlsx", "html", "csv") if getattr(args, flag)}
    if not wanted:
        raise PlannerInputError("report", "give at least one of --xlsx, --html, --csv")
    paths = {flag: check_out_path(f"--{flag}", path) for flag, path in wanted.items()}
    if len(set(paths.values())) != len(paths):
        raise PlannerInputError("report", "--xlsx, --html and --csv must name different files")
    view = load_plan(args.plan)
    builders = {
        "xlsx": lambda: render_xlsx(view),
        "html": lambda: render_html(view).encode(),
        "csv": lambda: render_csv(view).encode(),
    }
    outputs: dict[Path, bytes] = {paths[flag]: builders[flag]() for flag in paths}
    write_all(outputs, args.force, {paths[f]: f"--{f}" for f in paths})
    written = [
        {"kind": flag, "path": str(paths[flag]), "bytes": len(outputs[paths[flag]])}
        for flag in paths
    ]
    if args.format == "json":
        print_json({"written": written})
    else:
        for w in written:
            print(f"wrote {w['path']} ({w['bytes']:,} bytes)")
    return 0
