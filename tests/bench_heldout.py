"""GPU-held-out accuracy of both shared e2e files and its wall time (``make bench``): ``planner
validate e2e --holdout gpu`` and ``validate decisions --holdout gpu``, printed beside issue 46's
targets. The suite guards the e2e figures (tests/lab/test_holdout_gpu.py, ``heldout`` marker);
the decisions run, a second minute or two, is measured here."""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from planner.replay_e2e.e2e import validate_e2e
from solvers.decisions import validate_decisions
from tests.lab import SILICON_MEASURED, SILICON_MEASURED_B200, prepared_file


def bench() -> dict[str, float]:
    files = (SILICON_MEASURED, SILICON_MEASURED_B200)
    if not all(f.is_file() for f in files):
        print("bench_heldout: ../shared/validation/e2e absent, skipped", file=sys.stderr)
        return {}
    with tempfile.TemporaryDirectory() as tmp:
        rows = [prepared_file(f, Path(tmp) / f.name) for f in files]
        t0 = time.perf_counter()
        r = validate_e2e(rows, progress=False, holdout="gpu")
        t1 = time.perf_counter()
        d = validate_decisions(rows, holdout="gpu")
        t2 = time.perf_counter()
    groups = {(g["by"], g["key"]): g for g in r["groups"]}  # type: ignore[attr-defined]
    out = {"heldout_gpu_e2e_s": t1 - t0, "heldout_gpu_decisions_s": t2 - t1}
    for mode in ("agg", "disagg"):
        for m in ("ttft", "tpot"):
            out[f"heldout_gpu_{mode}_{m}_pct"] = groups[("mode", mode)][m]["median_ape_pct"]
    out["heldout_gpu_off_by_3x_pct"] = float(r["off_by_3x"]["share_pct"])  # type: ignore[index]
    out["heldout_gpu_decisions_within5_pct"] = float(d["within5_pct"])  # type: ignore[arg-type]
    return out
