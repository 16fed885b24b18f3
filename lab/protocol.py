"""How much of the aggregated TTFT error is the benchmark protocol: a per-campaign lockstep share.

The rows of ``silicon_measured.csv`` come from measurement campaigns (``silicon_data_source``) whose
closed-loop protocol — requests per client, warm-up, whether the ISL/OSL were jittered — is not
recorded. The serving model sees it through one number, the share of a run's requests that arrive in
the first lockstep wave (``burst_fraction``, 1/W for a run of W waves; ``Workload.bench_requests``
sets it from a known request count). This diagnostic refits that one number per campaign, every
other constant fixed, and reports the aggregated TTFT error with the engines' single fitted values
and with one value per campaign: the gap between the two is what a recorded protocol would be worth.

    python -m lab.protocol --data ../shared/validation/e2e/silicon_measured.csv

It is a diagnostic, not a calibration: the campaign labels are not planner inputs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from lab.layouts import campaign
from lab.prepare_e2e import prepare_frame
from planner.engines.calibration import Sourced, load_engines
from planner.replay_e2e.candidates import prepare
from planner.replay_e2e.layout import read_measurements
from planner.replay_e2e.predict import predict

SHARES: tuple[float, ...] = (0.0, 0.05, 0.1, 0.2, 0.3, 0.45, 0.6, 0.8, 1.0)
"""Lockstep shares tried per campaign (1/W for W = inf, 20, 10, 5, ..., 1 waves)."""
SPLIT_SEED = 0
MIN_SPLIT_ROWS = 4
"""Held-out check: campaigns of at least this many rows are split in two random halves (seeded);
each half is priced with the share fitted on the other."""


def _best_share(err: pd.DataFrame, idx: np.ndarray) -> float:
    """The share (column of ``err``, log TTFT errors) with the least median |error| on rows
    ``idx``."""
    return float(err.loc[idx].abs().median().idxmin())


def _log_ttft_error(pred: pd.DataFrame) -> np.ndarray:
    return np.asarray(
        np.log(pred["pred_ttft_ms"].to_numpy(float) / pred["silicon_ttft_ms"].to_numpy(float))
    )


def _median_ape(log_err: np.ndarray) -> float:
    e = np.abs(np.exp(log_err) - 1.0)
    return float(np.median(e[np.isfinite(e)]) * 100)


def protocol_report(df: pd.DataFrame, progress: bool = True) -> dict[str, object]:
    """Aggregated TTFT median APE with the fitted lockstep shares and with one share per
    campaign, on raw ``silicon_measured.csv`` rows (prepared here, ``prepare_e2e``)."""
    rows = prepare(prepare_frame(df)).rows
    rows = rows[rows["mode"] == "agg"].reset_index(drop=True)
    base = load_engines()
    default = predict(rows, progress=False)
    log_err = {}
    for i, share in enumerate(SHARES):
        over = {
            b: e.model_copy(
                update={"burst_fraction": Sourced(value=share, source="protocol diagnostic")}
            )
            for b, e in base.items()
        }
        p = predict(rows, progress=False, overrides=over)
        log_err[share] = _log_ttft_error(p)
        if progress:
            sys.stderr.write(f"\rprotocol: share {i + 1}/{len(SHARES)}")
    if progress:
        sys.stderr.write("\n")
    err = pd.DataFrame(log_err)
    camp = rows["silicon_data_source"].map(campaign)
    chosen = np.full(len(rows), np.nan)
    held_out = np.full(len(rows), np.nan)
    rng = np.random.default_rng(SPLIT_SEED)
    campaigns: list[dict[str, object]] = []
    sizes: list[int] = []
    for name, idx in camp.groupby(camp).groups.items():
        idx = np.asarray(idx)
        best = _best_share(err, idx)
        chosen[idx] = err.loc[idx, best].to_numpy()
        if len(idx) >= MIN_SPLIT_ROWS:  # each half priced with the share fitted on the other half
            perm = rng.permutation(idx)
            a, b = perm[: len(idx) // 2], perm[len(idx) // 2 :]
            held_out[a] = err.loc[a, _best_share(err, b)].to_numpy()
            held_out[b] = err.loc[b, _best_share(err, a)].to_numpy()
        campaigns.append({"campaign": str(name), "rows": len(idx), "lockstep_share": best})
        sizes.append(len(idx))
    return {
        "agg_rows": int(len(rows)),
        "campaigns": len(campaigns),
        "agg_ttft_median_ape_pct": {
            "fitted_engine_shares": _median_ape(_log_ttft_error(default)),
            "one_share_per_campaign": _median_ape(chosen),
            "one_share_per_campaign_held_out": _median_ape(held_out),
            "held_out_rows": int(np.isfinite(held_out).sum()),
        },
        "by_campaign": [campaigns[i] for i in np.argsort([-n for n in sizes], kind="stable")],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lab.protocol", description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--format", choices=("table", "json"), default="table")
    args = ap.parse_args(argv)
    if not args.data.is_file():
        sys.stderr.write(f"error: --data: {args.data} does not exist\n")
        return 2
    rep = protocol_report(read_measurements(Path(args.data)))
    if args.format == "json":
        print(json.dumps(rep, indent=2))
        return 0
    ape = rep["agg_ttft_median_ape_pct"]
    assert isinstance(ape, dict)
    print(f"aggregated rows {rep['agg_rows']}, campaigns {rep['campaigns']}")
    print(
        f"agg TTFT median APE: fitted engine shares {ape['fitted_engine_shares']:.1f}%, "
        f"one share per campaign {ape['one_share_per_campaign']:.1f}% "
        "(fitted on the other half of the campaign: "
        f"{ape['one_share_per_campaign_held_out']:.1f}% on {ape['held_out_rows']} rows)"
    )
    by = rep["by_campaign"]
    assert isinstance(by, list)
    for c in by:
        print(f"{c['lockstep_share']:5.2f}  {c['rows']:4d}  {c['campaign'][:110]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
