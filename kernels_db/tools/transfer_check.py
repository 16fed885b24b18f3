"""Held-out check of the kernel-fit transfer rule (``kernels_db.transfer``): each measured GPU
predicted from its same-architecture sibling's fit alone, against its own fit and the defaults.

    python -m kernels_db.tools.transfer_check --data FOLDER

A developer tool beside the runtime (the runtime never imports it).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from hardware.catalog import all_gpus
from kernels_db import fitted, paths
from kernels_db.fitted import FittedGpu
from kernels_db.folder import read_folder
from kernels_db.transfer import donor_for, provenance_tag, transferred
from kernels_db.validate import evaluate_gpu


def held_out_check(folder: Path, fitted_dir: Path = paths.FITTED_DIR) -> list[dict[str, object]]:
    """How well the rule predicts a GPU that *has* measured tables, from its sibling's fit alone:
    per GPU of ``folder`` with a fitted same-architecture sibling, op group and method
    ('transferred:<donor>', the GPU's own in-sample 'fitted', the default 'roofline_uncalibrated'),
    n and median / p90 APE."""
    out: list[dict[str, object]] = []
    specs = all_gpus()
    for key, tables in sorted(read_folder(folder).tables.items()):
        spec = specs.get(key)
        donor = donor_for(spec, fitted_dir) if spec is not None else None
        donor_fit = fitted.load(donor.key, fitted_dir) if donor is not None else None
        if spec is None or donor is None or donor_fit is None:
            continue
        none = FittedGpu(gpu=key, date="-", command="defaults", spec_used={})
        for tag, fit in (
            (provenance_tag(donor.key), transferred(spec, donor, donor_fit)),
            ("fitted", fitted.load(key, fitted_dir)),
            ("roofline_uncalibrated", none),
        ):
            out += [
                {**row, "method": tag}
                for row in evaluate_gpu(spec, tables, fit)
                if row["method"] == "fitted"
            ]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Print ``held_out_check`` of ``--data`` as JSON."""
    parser = argparse.ArgumentParser(
        prog="python -m kernels_db.tools.transfer_check",
        description="held-out check of the kernel-fit transfer rule",
    )
    parser.add_argument("--data", type=Path, required=True, help="folder of measured kernel tables")
    print(json.dumps(held_out_check(parser.parse_args(argv).data), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
