"""Full calibration sweep on a GPU machine, everything under one folder.

    python -m kernels_db.bench.run_all [--out bench_out] [--budget-s 450] [--quick]

Writes ``OUT/tables/`` (production reference kernels: cuBLAS, SDPA, grouped_mm, copy_, NCCL),
``OUT/tables-triton/`` (our Triton kernels on the same shapes) and ``OUT/run.log``. The full grid is
sized to finish on one H200 in under 8 minutes; ``--budget-s`` stops sweeping new shapes after that
many seconds as a safety net (meta.yaml notes what was cut). Collectives run when >1 GPU is visible.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

DEFAULT_BUDGET_S = 420.0  # leaves headroom under 8 minutes for start-up, compiles and writing


class _Tee:
    """Write stderr to the terminal and to a log file."""

    def __init__(self, *streams: object) -> None:
        self.streams = streams

    def write(self, text: str) -> int:
        for s in self.streams:
            s.write(text)  # type: ignore[attr-defined]
            s.flush()  # type: ignore[attr-defined]
        return len(text)

    def flush(self) -> None:
        for s in self.streams:
            s.flush()  # type: ignore[attr-defined]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kernels_db.bench.run_all",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--out", type=Path, default=Path("bench_out"), help="output folder")
    parser.add_argument("--gpu", default="auto", help="auto, cpu or a catalog GPU key")
    parser.add_argument("--ops", default="all", help="comma-separated op families (default all)")
    parser.add_argument("--quick", action="store_true", help="small grid (a smoke test)")
    parser.add_argument(
        "--budget-s",
        type=float,
        default=DEFAULT_BUDGET_S,
        help="stop starting new shapes after this many seconds",
    )
    args = parser.parse_args(argv)
    from kernels_db.bench.runner import run

    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    with (args.out / "run.log").open("w") as log:
        sys.stderr = _Tee(sys.__stderr__, log)  # type: ignore[assignment]
        try:
            run(
                args.gpu,
                args.ops.split(","),
                args.quick,
                args.out / "tables",
                budget_s=args.budget_s,
            )
            print(f"done in {time.monotonic() - t0:.0f} s -> {args.out}", file=sys.stderr)
        finally:
            sys.stderr = sys.__stderr__
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
