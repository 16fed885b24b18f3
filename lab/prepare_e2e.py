"""Prepare ``silicon_measured.csv`` (or a file of its layout) into the documented e2e layout
(``planner.replay_e2e.layout``): every launch setting, campaign and annotation the rows record
only in their ids and ``silicon_data_source`` text becomes an explicit column.

    python -m lab.prepare_e2e --data ../shared/validation/e2e/silicon_measured.csv --out rows.csv
    planner validate e2e --data rows.csv --holdout campaign

What it reads: the client count (``silicon_concurrency=``), layouts recorded flattened
(``layouts.layouts_from_ids``), the InferenceMAX launch recipes (``recipes``, ``disagg_recipes``:
KV dtype, expert parallelism, token budget, memory flag, balance and batch waits, activation
scale, decode caps and routers), the InferenceMAX length spread, the campaign
(``layouts.campaign``), the rows named unmodellable (``unmodellable``) and the rows of the
aiconfigurator harness whose serving regime is open (``AIC_HARNESS``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from hardware.errors import PlannerInputError
from lab.disagg_recipes import decode_cap, decode_routers, launch_expert_parallel
from lab.layouts import _recorded_concurrency, campaign, layouts_from_ids, length_low_fractions
from lab.recipes import recipe_arrays, recipe_expert_parallel, recipe_for, recipe_kv_dtype
from lab.unmodellable import named_unmodellable
from planner.replay_e2e.candidates import _attention_dp, _concurrency, _num, prepare
from planner.replay_e2e.layout import LOW_FRACTION_COLUMN, read_measurements
from planner.safe_files import write_new_file

AIC_HARNESS = "aic-auto-gap-analysis/"
"""Substring of ``silicon_data_source`` naming the aiconfigurator gap-analysis harness: genai-perf
with fixed lengths (``--synthetic-input-tokens-stddev 0``, ``--output-tokens-stddev 0``,
``ignore_eos``) and ``--request-count`` 10 x concurrency
(``src/aiconfigurator/eval/benchmarks/genai_perf_runner.py`` @fade9583c, ai-dynamo/aiconfigurator).
Its aggregated rows on a prefill-first engine do not record whether the server mixed chunks, so
their regime is open (``planner.replay_e2e.regimes``)."""
AIC_REQUESTS_PER_CLIENT = 10
"""genai-perf ``--request-count`` of that harness per client (genai_perf_runner.py @fade9583c)."""
ROW = "_lab_row"
LAUNCH_READ = (
    "max_num_batched_tokens",
    "memory_fraction",
    "attention_dp_balance_iters",
    "batch_wait_iters",
    "batch_wait_max_tokens",
    "alt_bench_requests",
)
"""The columns ``_launch_columns`` reads from a row's recipe once its deployment is prepared."""


def _row_settings(row: pd.Series) -> dict[str, object]:
    """The settings one row's text and recipes give, before its candidate columns are known."""
    out: dict[str, object] = {"concurrency": _recorded_concurrency(row)}
    if row.get("mode") == "agg":
        out["kv_dtype"] = recipe_kv_dtype(row) or np.nan
        out["ep_all_ranks"] = 1.0 if recipe_expert_parallel(row) else np.nan
        return out
    launch = launch_expert_parallel(row)
    for role in ("prefill_", "decode_"):
        tp, ep = _num(row, f"{role}tp_size"), _num(row, f"{role}moe_ep_size")
        dp = _attention_dp(row, role, tp, ep)
        out[f"{role}ep_all_ranks"] = 1.0 if dp > 1 and launch else np.nan
    clients = _concurrency(pd.Series({**row.to_dict(), **out}), np.nan)
    out["decode_max_num_seqs"] = decode_cap(row, clients)
    out["decode_routers"] = decode_routers(row, clients)
    return out


def _launch_columns(df: pd.DataFrame) -> pd.DataFrame:
    """The recipe flags that depend on each row's prepared deployment (``recipes.recipe_arrays``)
    and the open-regime run of the aic harness's rows, by the frame's rows."""
    prep = prepare(df.assign(**{ROW: np.arange(len(df))})).rows
    if prep.empty:  # no row can be modelled: nothing to read
        return pd.DataFrame(index=np.arange(len(df)), columns=list(LAUNCH_READ), dtype=float)
    arrays = recipe_arrays(prep)
    cols = pd.DataFrame(
        {
            "max_num_batched_tokens": arrays.chunk,
            "memory_fraction": arrays.memory_flag,
            "attention_dp_balance_iters": np.where(
                arrays.adp_balance_iters > 0, arrays.adp_balance_iters, np.nan
            ),
            "batch_wait_iters": np.where(
                arrays.batch_wait_iters > 0, arrays.batch_wait_iters, np.nan
            ),
            "batch_wait_max_tokens": np.where(
                arrays.batch_wait_iters > 0, arrays.batch_wait_tokens, np.nan
            ),
        }
    )
    aic = prep["silicon_data_source"].astype(str).str.contains(AIC_HARNESS, regex=False)
    clients = prep["c_concurrency"].astype(float)
    cols["alt_bench_requests"] = np.where(aic, AIC_REQUESTS_PER_CLIENT * clients, np.nan)
    cols.index = prep[ROW].to_numpy()
    return cols.reindex(np.arange(len(df)))


def _activation(row: pd.Series) -> object:
    r = recipe_for(row)
    return r.activation_scale if r is not None and r.activation_scale else np.nan


def _fill(out: pd.DataFrame, read: pd.DataFrame) -> pd.DataFrame:
    """``out`` with each column of ``read`` (same index) filled in where ``out`` gives none: a
    setting the row records itself wins over one read from its text."""
    out = out.copy()
    for col in read.columns:
        given = out[col] if col in out else pd.Series(np.nan, index=out.index, dtype=object)
        out[col] = given.where(given.notna(), read[col])
    return out


def prepare_frame(raw: pd.DataFrame) -> pd.DataFrame:
    """``raw`` rows (``silicon_measured.csv`` layout) in the documented e2e layout; settings a
    row already records in its own columns stay."""
    df, _, _ = layouts_from_ids(raw.reset_index(drop=True))
    settings = pd.DataFrame([_row_settings(row) for _, row in df.iterrows()], index=df.index)
    out = _fill(df, settings)
    acts = pd.DataFrame({"activation_scale": [_activation(row) for _, row in out.iterrows()]})
    out = _fill(out, acts.set_axis(out.index))
    out[LOW_FRACTION_COLUMN] = length_low_fractions(out)
    out = _fill(out, _launch_columns(out).set_axis(out.index))
    cause = {k: v.cause for k, v in named_unmodellable().items()}
    ids = out["id"].astype(str) if "id" in out else pd.Series("", index=out.index)
    notes = {"campaign": out["silicon_data_source"].map(campaign), "unmodellable": ids.map(cause)}
    return _fill(out, pd.DataFrame(notes))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m lab.prepare_e2e", description=(__doc__ or "").split("\n")[0]
    )
    ap.add_argument("--data", type=Path, required=True, help="silicon_measured.csv-layout CSV")
    ap.add_argument("--out", type=Path, required=True, help="CSV to write (the e2e layout)")
    ap.add_argument("--force", action="store_true", help="overwrite an existing --out")
    args = ap.parse_args(argv)
    try:
        if args.out.exists() and not args.force:
            raise PlannerInputError("--out", f"{args.out} exists; pass --force to overwrite it")
        rows = prepare_frame(read_measurements(args.data))
        write_new_file(args.out, rows.to_csv(index=False).encode(), force=True)
    except PlannerInputError as e:
        sys.stderr.write(f"error: {e}\n")
        return 2
    sys.stderr.write(f"wrote {len(rows)} rows to {args.out}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
