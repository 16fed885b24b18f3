"""Fit the MTP acceptance of a model family on matched MTP / no-MTP runs of one GPU and check the
throughput ratio on another GPU's pairs (planner/perf/spec_decode.py ``FAMILY_ACCEPTANCE``).

    python -m lab.fit_spec --data ../shared/validation/power/inferencex_power_single_turn.csv \
        --model Qwen/Qwen3.5-397B-A17B --fit-gpu b200 --check-gpu mi355x

A pair is two runs of the same GPU, precision, TP, EP, DP attention and clients, one with MTP and
one without; the ratio is MTP / no-MTP output tokens/s. The acceptance (one value for every
position, ``MTP_DRAFT_LEN`` drafted tokens) minimises the squared log error of the predicted
ratio over the fit GPU's pairs.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import minimize_scalar

from planner.model.bundled import BundledModel, find_bundled
from planner.replay_e2e.power import PricedRun, price_run, read_runs
from planner.replay_e2e.rows import resolve_model

PAIR_KEYS = ("hardware", "precision", "decodeTp", "decodeEp", "decodeDpAttn", "conc")
ACCEPTANCE_BOUNDS = (0.05, 0.99)
"""Per-position acceptance searched (a probability; 0 and 1 excluded as degenerate)."""


@dataclass(frozen=True)
class Pair:
    """Matched runs: line numbers and rows of the MTP and no-MTP run."""

    gpu: str
    precision: str
    conc: int
    mtp_line: int
    base_line: int
    mtp: pd.Series
    base: pd.Series

    @property
    def measured_ratio(self) -> float:
        """Measured MTP / no-MTP output tokens/s."""
        return _tok_s(self.mtp) / _tok_s(self.base)


def _tok_s(row: pd.Series) -> float:
    return float(row["total_output_tokens"]) / float(row["duration_s"])


def pairs(df: pd.DataFrame) -> list[Pair]:
    """Every (MTP, no-MTP) pair of runs sharing ``PAIR_KEYS``."""
    spec = df["specMethod"].astype(str).str.strip().str.lower()
    out = []
    for i, r in df[spec == "mtp"].iterrows():
        same = (df[list(PAIR_KEYS)] == r[list(PAIR_KEYS)]).all(axis=1) & (spec == "none")
        for j in df.index[same]:
            out.append(
                Pair(
                    str(r["hardware"]).lower(),
                    str(r["precision"]),
                    int(r["conc"]),
                    int(str(i)) + 2,
                    int(str(j)) + 2,
                    r,
                    df.loc[j],
                )
            )
    return out


def _priced(line: int, row: pd.Series, model: BundledModel, acc: float | None) -> PricedRun:
    run = price_run(line, row, model, acc)
    if isinstance(run, str):
        raise SystemExit(f"line {line}: cannot price ({run})")
    return run


def predicted_ratio(p: Pair, model: BundledModel, acceptance: float | None) -> float:
    """Predicted MTP / no-MTP throughput of ``p`` at ``acceptance`` (None: the packaged one)."""
    mtp = _priced(p.mtp_line, p.mtp, model, acceptance)
    base = _priced(p.base_line, p.base, model, None)
    return mtp.pred_tok_s / base.pred_tok_s


def fit_acceptance(ps: list[Pair], model: BundledModel) -> float:
    """The acceptance minimising the absolute log ratio error over ``ps`` (a median fit: one
    run far off its neighbours, e.g. an MTP run slower than the same deployment at fewer
    clients, does not drag the value)."""

    def loss(a: float) -> float:
        err = [np.log(predicted_ratio(p, model, a) / p.measured_ratio) for p in ps]
        return float(np.sum(np.abs(err)))

    res = minimize_scalar(loss, bounds=ACCEPTANCE_BOUNDS, method="bounded", options={"xatol": 1e-3})
    return float(res.x)


def table(ps: list[Pair], model: BundledModel, acceptance: float | None) -> pd.DataFrame:
    """Per pair: measured and predicted ratio and the error, %."""
    rows = []
    for p in ps:
        pred = predicted_ratio(p, model, acceptance)
        rows.append(
            {
                "gpu": p.gpu,
                "precision": p.precision,
                "tp": int(p.mtp["decodeTp"]),
                "ep": int(p.mtp["decodeEp"]),
                "clients": p.conc,
                "measured_ratio": round(p.measured_ratio, 3),
                "predicted_ratio": round(pred, 3),
                "error_pct": round(100.0 * (pred / p.measured_ratio - 1.0), 1),
            }
        )
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--model", required=True, help="bundled checkpoint the runs served")
    ap.add_argument("--fit-gpu", default="b200")
    ap.add_argument("--check-gpu", default="mi355x")
    args = ap.parse_args(argv)
    model = find_bundled(args.model)
    if model is None:
        raise SystemExit(f"--model: {args.model!r} is not bundled")
    df = read_runs(args.data)
    ps = [p for p in pairs(df) if (resolve_model(p.mtp["model"]) or model) is not None]
    fit = [p for p in ps if p.gpu == args.fit_gpu]
    check = [p for p in ps if p.gpu == args.check_gpu]
    a = fit_acceptance(fit, model)
    print(f"fitted per-position acceptance on {len(fit)} {args.fit_gpu} pairs: {a:.3f}")
    for name, group in ((args.fit_gpu, fit), (args.check_gpu, check)):
        t = table(group, model, a)
        print(t.to_string(index=False))
        med = float(np.median(np.abs(t["error_pct"])))
        print(f"{name}: median |error| of the MTP/no-MTP ratio {med:.1f}% over {len(t)} pairs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
