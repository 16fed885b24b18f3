"""Fit the power-model parameters (planner/perf/power.py) to measured-power runs and write
planner/calibration/power.yaml.

    python -m lab.fit_power --data ../shared/validation/power/inferencex_power_single_turn.csv \
        --model Qwen/Qwen3.5-397B-A17B [--out planner/calibration/power.yaml]
"""

from __future__ import annotations

import argparse
import datetime
from pathlib import Path

import yaml

from planner.model.bundled import find_bundled
from planner.perf.power import PARAM_BOUNDS, PARAM_NAMES, POWER_FILE, PowerParams, load_params
from planner.replay_e2e.power import PricedRun, fit_params, price_run, read_runs, skip_reason

UNITS = {
    "idle_fraction": "fraction of TDP",
    "busy_fraction": "fraction of TDP",
    "pj_per_flop": "pJ per FLOP",
    "pj_per_byte": "pJ per HBM byte",
}


def fit(data: Path, model: str) -> PowerParams:
    """Parameters fitted on every priced run of ``data``."""
    df = read_runs(data)
    bundled = find_bundled(model)
    runs = []
    for i, row in df.iterrows():
        if skip_reason(row, bundled) is None and bundled is not None:
            priced = price_run(int(str(i)), row, bundled)
            if isinstance(priced, PricedRun):
                runs.append(priced)
    return fit_params(runs, load_params())


def as_yaml(prm: PowerParams, data: Path) -> str:
    """The parameter file: each value with unit, bounds and the command that fitted it."""
    day = datetime.date.today().isoformat()
    doc = {
        "source": f"{prm.source} of {data.name} by `python -m lab.fit_power`, {day}",
        "params": {
            n: {
                "value": float(f"{getattr(prm, n):.4g}"),
                "unit": UNITS[n],
                "bounds": list(PARAM_BOUNDS[n]),
            }
            for n in PARAM_NAMES
        },
    }
    return yaml.safe_dump(doc, sort_keys=False, width=100)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--model", required=True, help="bundled checkpoint the runs served")
    ap.add_argument("--out", type=Path, default=POWER_FILE)
    args = ap.parse_args()
    text = as_yaml(fit(args.data, args.model), args.data)
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
