"""Check how ``planner.perf.opgraph`` prices the busiest expert-parallel rank of a fused-MoE layer
against AIConfigurator's balanced / skewed fused-MoE tables (``kernels_db.moe_load``):

    python -m kernels_db.tools.moe_load_check --aic-data DIR [--gpu h200_sxm] [--pairs 3000]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from hardware.catalog import get_gpu
from hardware.errors import PlannerInputError
from kernels_db.lookup import KernelDB
from kernels_db.moe_load import compare, read_pairs, summary


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m kernels_db.tools.moe_load_check", description=__doc__.splitlines()[0]
    )
    ap.add_argument(
        "--aic-data", required=True, type=Path, help="AIConfigurator systems/data folder"
    )
    ap.add_argument("--gpu", default="h200_sxm", help="GPU folder and catalog key")
    ap.add_argument("--pairs", type=int, default=3000, help="pairs sampled per table (seeded)")
    args = ap.parse_args(argv)
    try:
        if not 1 <= args.pairs <= 1_000_000:
            raise PlannerInputError("--pairs", "must be a whole number in [1, 1000000]")
        db = KernelDB.for_gpu(get_gpu(args.gpu))
        table = summary(compare(read_pairs(args.aic_data, args.gpu, args.pairs), db))
    except PlannerInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    with pd.option_context("display.width", 200, "display.max_rows", 200):
        print(
            "skewed / balanced latency of fused-MoE layers (ratio columns: median; err: median"
            " |ln(priced / measured)|; n: pairs)"
        )
        print(table.round(3).to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
