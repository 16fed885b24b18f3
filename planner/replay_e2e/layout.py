"""The e2e measurement layout ``planner validate e2e``, ``validate decisions`` and ``calibrate e2e``
read, one row per measured deployment and load point (the layout of ``silicon_measured.csv``).

Required columns: ``backend`` (an engine name, ``planner.engines``), ``model_path`` (a bundled
model's key, name or HF id), ``system`` (a GPU key), ``mode`` (agg / disagg), ``isl`` and
``osl`` (tokens), ``silicon_ttft_ms`` and ``silicon_tpot_ms`` (measured means, ms).

Deployment columns (empty: 1): aggregated ``tp_size``, ``pp_size``, ``attention_dp_size``,
``moe_tp_size``, ``moe_ep_size``, ``batch_size`` (clients per attention-DP rank); disaggregated the
same per role with a ``prefill_`` / ``decode_`` prefix plus ``<role>_num_workers`` and
``<role>_batch_size``; ``gemm_quant_mode`` (fp8, fp8_block, nvfp4, int4_wo, bf16, fp16; empty:
the checkpoint's), ``backend_version``, ``id`` and ``silicon_data_source`` (free text, never read
as settings).

Optional launch settings a row may record (empty: the engine's default or the rule given):

=============================  ===================================================================
column                         meaning
=============================  ===================================================================
``concurrency``                closed-loop clients of the benchmark (default: ``batch_size`` x
                               attention DP aggregated; ``decode_batch_size`` x decode workers)
``kv_dtype``                   KV-cache dtype, bf16 / fp8 (default: the ``precision`` rule of
                               ``candidates.kv_dtype``)
``activation_scale``           how the FP8 GEMMs scale activations: static / token / block /
                               tensor (default: ``fp8_block`` GEMMs block, else the checkpoint's)
``ep_all_ranks``               1: the MoE layers ran expert-parallel over every GPU of the worker
                               (EP = TP x attention DP), whatever ``moe_ep_size`` records;
                               ``prefill_ep_all_ranks`` / ``decode_ep_all_ranks`` per role
``max_num_batched_tokens``     step token budget (chunk), tokens
``memory_fraction``            memory flag in the engine's own meaning (its KV pool rule,
                               ``planner.engines.kv_pool.default_pool_util``)
``attention_dp_balance_iters`` attention-DP balance timeout, engine steps (0: off)
``batch_wait_iters``           batch waiting timeout, engine steps (0: off)
``batch_wait_max_tokens``      batch waiting threshold, tokens
``decode_max_num_seqs``        decode slots per attention-DP rank of a decode worker (default:
                               ``decode_batch_size``)
``decode_routers``             slot-blind round-robin routers in front of the decode workers
``length_low_fraction``        lengths drawn uniformly from [f x ISL, ISL] and [f x OSL, OSL]
``bench_requests``             the benchmark run's requests in all (a named run)
``fixed_lengths``              1: every request has the row's ISL / OSL; 0: varied
``mixed_chunk``                1: the server mixed prefill chunks into decode steps
``alt_bench_requests``         the row's serving regime is open: also priced as a named run of
                               this many requests, fixed lengths, and banded around both
``campaign``                   measurement campaign (``--holdout campaign`` folds whole campaigns)
``layout_read_from``           where a preparation step read a layout recorded flattened (counted
                               in the report: ``layout_read_from_<value>``)
``unmodellable``               the cause a row is named unmodellable (counted in ``off_by_3x``)
=============================  ===================================================================

``python -m lab.prepare_e2e`` writes public data sets into this layout.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from hardware.errors import PlannerInputError
from hardware.input_files import numeric_columns, read_csv, require_columns
from planner.model.bundled import load_model

REQUIRED_COLUMNS = (
    "backend",
    "model_path",
    "system",
    "mode",
    "isl",
    "osl",
    "silicon_ttft_ms",
    "silicon_tpot_ms",
)
MAX_COUNT = 1e7
"""Largest batch size, worker count or parallel size accepted from a measurement row."""
MAX_TOKENS = float(1 << 24)
"""Largest token budget or threshold accepted from a measurement row."""
LOW_FRACTION_COLUMN = "length_low_fraction"
"""Optional column: the run drew each request's ISL and OSL uniformly from the whole numbers in
[int(f x ISL), ISL] and [int(f x OSL), OSL] (a ``benchmark_serving.py`` random dataset with
``--random-range-ratio f``); empty: every request has the row's ISL and OSL."""
LAYOUT_READ_FROM = "layout_read_from"
UNMODELLABLE = "unmodellable"
LATENCY_COLUMNS = ("silicon_ttft_ms", "silicon_tpot_ms")
LAUNCH_RANGES: dict[str, tuple[float, float]] = {
    "concurrency": (0.0, MAX_COUNT),
    "max_num_batched_tokens": (1.0, MAX_TOKENS),
    "memory_fraction": (0.0, 1.0),
    "attention_dp_balance_iters": (0.0, MAX_COUNT),
    "batch_wait_iters": (0.0, MAX_COUNT),
    "batch_wait_max_tokens": (0.0, MAX_TOKENS),
    "decode_max_num_seqs": (0.0, MAX_COUNT),
    "decode_routers": (0.0, MAX_COUNT),
    "alt_bench_requests": (0.0, 1e9),
    "ep_all_ranks": (0.0, 1.0),
    "prefill_ep_all_ranks": (0.0, 1.0),
    "decode_ep_all_ranks": (0.0, 1.0),
}
"""Ranges of the optional numeric launch columns."""
LAUNCH_COLUMNS: tuple[str, ...] = (
    "concurrency",
    "kv_dtype",
    "activation_scale",
    "ep_all_ranks",
    "prefill_ep_all_ranks",
    "decode_ep_all_ranks",
    "max_num_batched_tokens",
    "memory_fraction",
    "attention_dp_balance_iters",
    "batch_wait_iters",
    "batch_wait_max_tokens",
    "decode_max_num_seqs",
    "decode_routers",
    "alt_bench_requests",
)
"""The optional launch-setting columns of the table above."""
DUPLICATE_IGNORES: tuple[str, ...] = (
    "id",
    "silicon_data_source",
    "campaign",
    LAYOUT_READ_FROM,
    UNMODELLABLE,
    *LAUNCH_COLUMNS,
)
"""Columns that may differ between two rows of one measurement: a row copied into a second
campaign's dump keeps every deployment and result column, but not its id, source, campaign or
annotations, nor the launch settings a preparation step read from its source (one copy's source
may name the launch recipe, another's not): the copy kept (``drop_duplicates``) keeps its own."""


def _numeric_ranges(columns: pd.Index) -> dict[str, tuple[float, float]]:
    ranges = {
        "isl": (1.0, 1e7),
        "osl": (1.0, 1e7),
        "silicon_ttft_ms": (0.0, 1e9),
        "silicon_tpot_ms": (0.0, 1e9),
        LOW_FRACTION_COLUMN: (0.0, 1.0),
    }
    counts = [c for c in columns if c.endswith(("_size", "_workers")) or c == "batch_size"]
    return ranges | {c: (0.0, MAX_COUNT) for c in counts}


def read_measurements(path: Path, field: str = "--data") -> pd.DataFrame:
    """An e2e-layout file, its numeric cells checked (file:line: column)."""
    df = read_csv(path, "measurement CSV", field)
    where = f"{field} {path}"
    require_columns(df, REQUIRED_COLUMNS, where)
    ranges = _numeric_ranges(df.columns)
    counts = [c for c in ranges if c not in (*LATENCY_COLUMNS, LOW_FRACTION_COLUMN)]
    checked = numeric_columns(df, ranges, where, integers=counts)
    launch = {c: r for c, r in LAUNCH_RANGES.items() if c in df.columns}
    return numeric_columns(checked, launch, where) if launch else checked


DUPLICATE_DIGITS = 9
"""Significant digits two copies of a measurement agree to (dumps re-serialise floats: the same
TPOT reads 19.252099757615234 in one and 19.25209975761523 in another)."""
LATENCY_DECIMALS = 2
"""Decimals (of a millisecond) the measured latencies of two copies agree to (a restated table
writes TTFT and TPOT to 0.01 ms: 148.61 for 148.606387). Two distinct measurements agreeing to
10 us on both TTFT and TPOT at the same deployment and lengths do not occur in the data."""


def duplicate_key(df: pd.DataFrame, cols: list[str]) -> pd.DataFrame:
    """The columns ``cols`` of ``df`` as two copies of one measurement compare: measured
    latencies to ``LATENCY_DECIMALS`` decimals, other numbers to ``DUPLICATE_DIGITS`` significant
    digits."""
    key = df[cols].copy()
    for c in key.columns:
        if c in LATENCY_COLUMNS:
            key[c] = pd.to_numeric(key[c], errors="coerce").round(LATENCY_DECIMALS)
        elif pd.api.types.is_float_dtype(key[c]):
            key[c] = key[c].map(lambda v: v if pd.isna(v) else float(f"{v:.{DUPLICATE_DIGITS}g}"))
    return key


def _architecture(model_path: object) -> str:
    """The bundled config ``model_path`` names, without its name and checkpoint id (two labels of
    one architecture compare equal); a name no bundled config answers to stays itself."""
    try:
        spec = load_model(str(model_path))
    except PlannerInputError:
        return str(model_path)
    return repr(sorted(spec.model_dump(exclude={"name", "hf_id"}).items()))


def drop_duplicates(df: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """Rows equal on every column except ``DUPLICATE_IGNORES`` (``duplicate_key``: latencies to
    0.01 ms, other numbers to ``DUPLICATE_DIGITS`` significant digits) count once (the lowest
    ``id`` in string order is kept), so one measurement cannot sit in a training and a test fold;
    (rows, dropped). Model labels compare by architecture (``_architecture``): two labels of one
    architecture at the same deployment and latencies are one measurement."""
    cols = [c for c in df.columns if c not in DUPLICATE_IGNORES]
    key = duplicate_key(df, cols)
    if "model_path" in key:  # one config read per distinct label, not per row
        labels = key["model_path"].astype(str)
        key["model_path"] = labels.map({p: _architecture(p) for p in labels.unique()})
    order = key.assign(id=df["id"]).sort_values("id", kind="stable") if "id" in df.columns else key
    keep = ~order.duplicated(subset=cols, keep="first")
    kept = df.loc[order.index[keep.to_numpy()]].sort_index()
    return kept.reset_index(drop=True), int((~keep).sum())


def layout_counts(df: pd.DataFrame) -> dict[str, int]:
    """Rows per value of ``LAYOUT_READ_FROM``, most first (a preparation step's note of where it
    read a layout recorded flattened); empty without the column."""
    if LAYOUT_READ_FROM not in df:
        return {}
    given = df[LAYOUT_READ_FROM].dropna().astype(str)
    return {str(k): int(v) for k, v in given[given != ""].value_counts().items()}


Paths = Path | Sequence[Path]
"""One e2e-layout file or several (``--data`` given more than once)."""


def read_files(paths: Paths, field: str = "--data") -> pd.DataFrame:
    """The rows of every file of ``paths`` (each checked as ``read_measurements`` checks it),
    concatenated in the order given; a column one file lacks is empty in its rows."""
    files = [paths] if isinstance(paths, Path) else list(paths)
    if not files:
        raise PlannerInputError(field, "no file given")
    frames = [read_measurements(Path(f), field) for f in files]
    return frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True, sort=False)


def read_rows_counted(paths: Paths) -> tuple[pd.DataFrame, int, dict[str, int]]:
    """The measured rows of ``paths`` (one file or several, concatenated) without duplicates, a
    measurement in two files counting once (``drop_duplicates``); (rows, duplicates dropped, rows
    per ``layout_read_from`` value)."""
    df = read_files(paths)
    counts = layout_counts(df)
    rows, duplicates = drop_duplicates(df)
    return rows, duplicates, counts


def read_rows(paths: Paths) -> tuple[pd.DataFrame, int]:
    """``read_rows_counted`` without the layout count."""
    rows, duplicates, _ = read_rows_counted(paths)
    return rows, duplicates
