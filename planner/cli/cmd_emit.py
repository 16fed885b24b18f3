"""``planner emit``: turn a plan file into ready-to-run engine configs."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from planner.cli.common import add_hardware_dir
from planner.cli.output import print_json
from planner.cli.recipe_args import add_listen_host
from planner.emitters import build_bundle, write_files
from planner.emitters.k8s import build_k8s, write_k8s
from planner.emitters.plan_file import load_plan
from planner.engines import engine_names


def register(sub: Any, groups: dict[str, Any]) -> None:
    """Add the ``emit`` sub-command."""
    p = sub.add_parser(
        "emit", help="write engine launch configs, benchmark.sh and PLAN.md from a plan"
    )
    p.add_argument(
        "--plan", required=True, help="plan file (the JSON of `planner plan --format json`)"
    )
    p.add_argument("--backend", required=True, choices=engine_names(), help="serving engine")
    p.add_argument(
        "--engine-version",
        default=None,
        help="engine release to target (default: the newest in the flag table)",
    )
    p.add_argument(
        "--out", required=True, help="directory to write the files into (must be empty or new)"
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="write into a non-empty DIR (or through a link), replacing its files",
    )
    p.add_argument(
        "--target",
        choices=("bundle", "k8s"),
        default="bundle",
        help="bundle: launch.sh, configs, benchmark.sh, PLAN.md; k8s: k8s/dynamo.yaml (NVIDIA "
        "Dynamo) and k8s/plain.yaml (Deployment/LeaderWorkerSet + Service) (default: bundle)",
    )
    add_hardware_dir(p)
    add_listen_host(p)
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.set_defaults(func=handler)


def handler(args: argparse.Namespace) -> int:
    """Build every file in memory first (errors leave ``--out`` untouched), then write them."""
    plan = load_plan(args.plan)
    hw = tuple(args.hardware_dir)
    if args.target == "k8s":
        files = build_k8s(plan, args.backend, args.engine_version, hw)
        written = [str(p) for p in write_k8s(files, args.out, args.force)]
    else:
        files = build_bundle(plan, args.backend, args.engine_version, hw, host=args.host)
        written = [str(p) for p in write_files(files, args.out, args.force)]
    if args.format == "json":
        print_json({"backend": args.backend, "files": written})
    else:
        sys.stdout.write("\n".join(written) + "\n")
    return 0
