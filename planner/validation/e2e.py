"""Replay measured deployments (``silicon_measured.csv`` layout) through the serving model.

One row = backend, model, system, precision/quant modes, isl, osl, closed-loop concurrency
(``batch_size``) and parallelism; disaggregated rows carry per-role workers and parallelism.
Rows that cannot be modelled are counted under a reason, never dropped silently. Rows are grouped
by (model, system, backend, isl, osl) and each group is evaluated in one vectorized call.
DataFrames live only here, at the edge.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hardware.catalog import get_gpu
from hardware.errors import PlannerInputError
from hardware.input_files import numeric_columns, read_csv, read_yaml, require_columns
from planner.batch_eval import (
    KV_DTYPES,
    WEIGHT_QUANTS,
    CandidateArrays,
    Reason,
    RecordedLaunch,
    ResultArrays,
    evaluate_batch,
)
from planner.engine_calibration import EngineCalibration, EnginePolicy, engine
from planner.engines import engine_names, get_engine, prefill_first
from planner.engines.kv_pool import KvPool
from planner.engines.sglang.memory import chunked_prefill as sglang_chunked_prefill
from planner.engines.trtllm.scheduling import LaunchHolds
from planner.model_spec import ModelSpec
from planner.models import load_model
from planner.validation.disagg_recipes import (
    decode_cap,
    decode_routers,
    launch_expert_parallel,
)
from planner.validation.recipes import (
    activation_scales,
    recipe_arrays,
    recipe_expert_parallel,
    recipe_kv_dtype,
    recipe_memory_flags,
)
from planner.validation.rows import parse_version
from planner.workload import LengthSpec, fixed

QUANT_MODES: dict[str, str] = {
    "fp8": "fp8",
    "fp8_block": "fp8",
    "nvfp4": "fp4",
    "int4_wo": "int4",
    "bf16": "bf16",
    "fp16": "bf16",
}
GROUP_BY: tuple[str, ...] = ("backend", "mode", "system", "model")
CONST_PREFIX = "const_"
"""Prefix of the per-row engine-constant columns (``with_constants``)."""
REQUIRED = frozenset(
    {"backend", "model_path", "system", "mode", "isl", "osl", "silicon_ttft_ms", "silicon_tpot_ms"}
)
DUPLICATE_IGNORES: tuple[str, ...] = ("id", "silicon_data_source")
"""Columns that may differ between two rows of one measurement: a row copied into a second
campaign's dump keeps every deployment and result column."""


@dataclass(frozen=True)
class Prepared:
    """Rows with candidate columns filled in, and the skip reason of every other row."""

    rows: pd.DataFrame
    skipped: dict[str, int]


def _num(row: pd.Series, col: str, default: float = 1.0) -> float:
    v = row.get(col)
    return default if v is None or pd.isna(v) or float(v) <= 0 else float(v)


def _recorded_concurrency(row: pd.Series) -> float:
    """Client concurrency the campaign recorded (``silicon_concurrency=`` in the source), or NaN."""
    m = re.search(r"silicon_concurrency=(\d+)", str(row.get("silicon_data_source", "")))
    return float(m.group(1)) if m else np.nan


def _concurrency(row: pd.Series, dp: float) -> float:
    """Closed-loop clients of the benchmark: the recorded concurrency; else for an aggregated row
    ``batch_size`` per attention-DP rank (the harness runs batch_size x attention-DP clients, e.g.
    ``..._c256_..`` rows with batch_size 32 and attention DP 8), for a disaggregated row the decode
    batch of every decode worker."""
    recorded = _recorded_concurrency(row)
    if np.isfinite(recorded):
        return recorded
    if row["mode"] == "agg":
        return _num(row, "batch_size", np.nan) * dp
    return _num(row, "decode_batch_size", np.nan) * _num(row, "decode_num_workers", np.nan)


def _attention_dp(row: pd.Series, role: str, tp: float, ep: float) -> float:
    """Attention-DP ranks of a worker. The layout's rule is tp·dp = moe_tp·moe_ep (the MoE layers
    span every rank of the worker); rows that leave ``attention_dp_size`` empty but give a wider MoE
    (vLLM ``--data-parallel-size`` without expert parallelism: ``tp_size`` 1, ``moe_tp_size`` 2 is
    two GPUs, one attention replica each, MoE sharded over both) take dp = moe_tp·moe_ep / tp
    instead of silently running the whole model on ``tp`` GPUs."""
    dp = row.get(f"{role}attention_dp_size")
    if dp is not None and not pd.isna(dp) and float(dp) > 0:
        return float(dp)
    moe = _num(row, f"{role}moe_tp_size") * ep
    return moe / tp if moe > tp and moe % tp == 0 else 1.0


_ID_LAYOUT = re.compile(r"_tp(\d+)(?:_0)?_ep(\d+)(?:_0)?_")
"""The layout an aggregated row's id names: ``..._tp8_ep8_...`` or ``..._tp8_0_ep8_0_...``."""


def id_layout(row: pd.Series, tp: float, dp: float) -> tuple[float, float, float] | None:
    """(tp, attention DP, EP) read from the row's id when its columns record the id's layout
    flattened, else None.

    Reading rule: an aggregated row whose id names ``_tp<N>_ep<M>_`` (M > 1: the id's world is N
    GPUs, TensorRT-LLM's convention, EP inside it) but whose columns give a worker of
    tp_size x attention_dp_size = N x M GPUs counts the expert ranks twice (one dump records
    ``..._tp8_ep8_...`` as tp_size 64 or attention DP 64 on an 8-GPU H200, beyond its scale-up
    domain, and ``..._tp2_ep2_...`` as tp_size 4). The id is unambiguous: N GPUs, EP M, and the
    recorded split keeps its direction (attention DP N at TP 1 where the row records attention
    DP, else TP N). The clients stay as recorded (batch_size x the recorded ranks = the id's
    ``_c<K>_``).

    A second flattening puts the id's EP into ``attention_dp_size`` and the whole N x M worker
    into ``moe_ep_size`` (tp_size N, attention DP M, moe_ep_size N x M): the 15 MiniMax-M2.5 vLLM
    H100 rows of the 2026-04-06 export, ``..._tp4_ep4_...`` recorded as 16 GPUs on an 8-GPU node.
    InferenceX ran them as ``{tp: 4, ep: 4}`` without ``dp-attn`` (``.github/configs/
    nvidia-master.yaml`` ``minimaxm2.5-fp8-h100-vllm`` @1cb92d21d and @51e31df4a, ``multinode:
    false``) through ``vllm serve --tensor-parallel-size=4 --enable-expert-parallel``
    (``benchmarks/single_node/minimaxm2.5_fp8_h100.sh`` @51e31df4a: no data-parallel flag), and
    their running requests by Little's law (28.8 / 29.3 at 32 / 64 clients, 8k/1k) are one TP-4
    worker's KV pool (33 sequences), not four (472): read as TP N, EP M, no attention DP."""
    m = _ID_LAYOUT.search(str(row.get("id", "")))
    if row.get("mode") != "agg" or m is None:
        return None
    n, ep = float(m.group(1)), float(m.group(2))
    if ep <= 1 or tp * dp != n * ep:
        return None
    moe_ep = _num(row, "moe_ep_size")
    if moe_ep == ep:
        return (1.0, n, ep) if dp > 1 else (n, 1.0, ep)
    if moe_ep == n * ep and tp == n and dp == ep:
        return (n, 1.0, ep)
    return None


def column_layout(row: pd.Series, tp: float, dp: float) -> tuple[float, float, float] | None:
    """(tp, attention DP, EP) of an aggregated row whose id names no layout but whose columns
    record the same flattening ``id_layout`` reads, else None.

    The flattened rows record tp_size x attention_dp_size = moe_tp_size x moe_ep_size = N x M
    with moe_tp_size N, the id's GPUs, and moe_ep_size M, its EP (all 71 rows ``id_layout``
    rewrites in silicon_measured.csv do; none of the 691 other aggregated rows with an id layout
    does). Without an id, that shape alone also fits a real MoE split (TP 4 = MoE TP 2 x EP 2 on
    aic H100 rows), so it is read only where the recorded worker is larger than the GPU's
    scale-up domain: an aggregated worker of that many GPUs would span nodes, and only where EP
    divides the N GPUs and any attention DP is recorded, not derived. The case in the
    data: InferenceMAX's December 2025 DeepSeek-R1 FP8 H200 TensorRT-LLM runs (db-dump configs
    181 and 183, 15 rows: tp_size 64, or attention DP 64, with moe_tp 8 x EP 8), which InferenceX
    launched on one 8-GPU H200 node as ``{tp: 8, ep: 8}``, with ``dp-attn`` at 8k / 1k and 64
    clients (``.github/configs/nvidia-master.yaml`` @c040b5cf2, ``dsr1-fp8-h200-trt``, runner
    h200, ``multinode: false``). Read as ``id_layout`` reads an id: N GPUs, EP M, the recorded
    direction kept."""
    if row.get("mode") != "agg" or _ID_LAYOUT.search(str(row.get("id", ""))):
        return None
    n, ep = _num(row, "moe_tp_size"), _num(row, "moe_ep_size")
    if n <= 1 or ep <= 1 or ep > n or n % ep or tp * dp != n * ep:
        return None  # not the flattening: EP spans the id's N GPUs in every flattened row
    if dp > 1 and _num(row, "attention_dp_size", 0.0) != dp:
        return None  # attention DP derived from the MoE columns, not recorded: no reading
    try:
        domain = get_gpu(str(row.get("system"))).scale_up.domain_size
    except PlannerInputError:
        return None
    if tp * dp <= domain:
        return None
    return (1.0, n, ep) if dp > 1 else (n, 1.0, ep)


def read_layout(row: pd.Series, tp: float, dp: float) -> tuple[float, float, float] | None:
    """The layout ``id_layout`` reads from the row's id, else the one ``column_layout`` reads from
    its columns; None: the columns stand."""
    return id_layout(row, tp, dp) or column_layout(row, tp, dp)


def candidate_columns(row: pd.Series, weight_default: str) -> dict[str, float] | str:
    """CandidateArrays columns of one row, or the reason it cannot be modelled (``read_layout``
    corrects a layout recorded flattened)."""
    quant = QUANT_MODES.get(str(row.get("gemm_quant_mode")), weight_default)
    kv = recipe_kv_dtype(row) or (
        "fp8" if row["backend"] == "trtllm" and quant in ("fp8", "fp4") else "bf16"
    )
    agg_tp, agg_ep = _num(row, "tp_size"), _num(row, "moe_ep_size")
    agg_dp = _attention_dp(row, "", agg_tp, agg_ep)
    conc = _concurrency(row, agg_dp)
    read = read_layout(row, agg_tp, agg_dp)
    if read is not None:
        agg_tp, agg_dp, agg_ep = read
    if recipe_expert_parallel(row):  # the launch script's --ep_size, not the export's layout
        agg_ep = agg_tp * agg_dp
    if not np.isfinite(conc):
        return "incomplete_config"
    out = {
        "weight_quant": WEIGHT_QUANTS.index(quant),
        "kv_dtype": KV_DTYPES.index(kv),
        "concurrency": conc,
    }
    if row["mode"] == "agg":
        # batch_size is not an engine cap: rows that recorded more clients than batch_size x
        # attention DP ran them all (TPOT grows with them, TTFT shows no admission queue)
        out |= {"tp": agg_tp, "pp": _num(row, "pp_size"), "dp": agg_dp, "ep": agg_ep, "mode": 0}
        return out
    if pd.isna(row.get("prefill_num_workers")) or pd.isna(row.get("decode_num_workers")):
        return "incomplete_config"
    (tp, dp, ep), (p_tp, p_dp, p_ep) = (_disagg_role(row, r) for r in ("decode_", "prefill_"))
    out |= {
        "mode": 1,
        "tp": tp,
        "pp": _num(row, "decode_pp_size"),
        "dp": dp,
        "ep": ep,
        "workers": _num(row, "decode_num_workers"),
        "prefill_tp": p_tp,
        "prefill_pp": _num(row, "prefill_pp_size"),
        "prefill_dp": p_dp,
        "prefill_ep": p_ep,
        "prefill_workers": _num(row, "prefill_num_workers"),
        # the deployment's batch sizes per (DP rank of a) worker: prompts per prefill step, decode
        # slots
        "prefill_max_num_seqs": _num(row, "prefill_batch_size", np.nan),
        "max_num_seqs": _decode_slots(row, conc),
        # not a CandidateArrays field: read once here, passed to the replay (``_group_replay``)
        "decode_routers": decode_routers(row, conc),
    }
    return out


def _disagg_role(row: pd.Series, role: str) -> tuple[float, float, float]:
    """(TP, attention DP, EP) of a disaggregated row's ``role`` (``prefill_`` / ``decode_``)
    worker; where its launch ran attention-DP workers as DEP (``launch_expert_parallel``), EP
    spans the worker's GPUs whatever the row records."""
    tp, ep = _num(row, f"{role}tp_size"), _num(row, f"{role}moe_ep_size")
    dp = _attention_dp(row, role, tp, ep)
    if dp > 1 and launch_expert_parallel(row):
        ep = tp * dp
    return tp, dp, ep


def _decode_slots(row: pd.Series, clients: float) -> float:
    """Decode slots per attention-DP rank of a disaggregated row's decode worker: the cap its
    InferenceMAX launch recipe set (``disagg_recipes.decode_cap``), else ``decode_batch_size`` (the
    clients per rank of the sweep point: a cap with no slack, not the engine's)."""
    cap = decode_cap(row, clients)
    return cap if np.isfinite(cap) else _num(row, "decode_batch_size", np.nan)


def _runnable_tp(model: ModelSpec, c: Mapping[str, float]) -> bool:
    """Whether every role's tensor parallelism divides the model's attention heads, as every engine
    requires (and ``planner.memory.check_parallelism``). Rows that fail it do not record their
    deployment: e.g. GB200 rows whose ``tp_size`` is the GPU count of a whole disaggregated
    deployment (20, 28 or 72 GPUs for DeepSeek-R1's 128 heads)."""
    tps = [c.get("tp", 1.0), c.get("prefill_tp", 1.0)]
    return all(model.num_heads % int(tp) == 0 for tp in tps if np.isfinite(tp))


def prepare(df: pd.DataFrame) -> Prepared:
    """Resolve model, GPU, backend and candidate columns of every row; count the rest by reason."""
    skipped: dict[str, int] = {}
    keep, cols = [], []
    for i, row in df.iterrows():
        reason = None
        try:
            model = load_model(str(row["model_path"]))
            get_gpu(str(row["system"]))
        except PlannerInputError:
            reason = "unknown_model_or_gpu"
        if reason is None and row["backend"] not in engine_names():
            reason = "unknown_backend"
        c = candidate_columns(row, model.weight_dtype) if reason is None else reason
        if not isinstance(c, str) and not _runnable_tp(model, c):
            c = "tp_not_dividing_heads"
        if isinstance(c, str):
            skipped[c] = skipped.get(c, 0) + 1
            continue
        keep.append(i)
        cols.append({f"c_{k}": v for k, v in c.items()})
    rows = df.loc[keep].reset_index(drop=True)
    return Prepared(pd.concat([rows, pd.DataFrame(cols)], axis=1), skipped)


def with_constants(rows: pd.DataFrame, values: Mapping[str, Mapping[str, float]]) -> pd.DataFrame:
    """``rows`` with a ``const_<name>`` column per fitted engine constant: ``values[backend][name]``
    of each row's backend (``predict`` prices every row with its own constants)."""
    out = rows.copy()
    names = sorted({n for v in values.values() for n in v})
    for name in names:
        by_backend = {b: float(v[name]) for b, v in values.items() if name in v}
        out[f"{CONST_PREFIX}{name}"] = out["backend"].map(by_backend).astype(float)
    return out


def _row_constants(sub: pd.DataFrame) -> dict[str, np.ndarray] | None:
    cols = [c for c in sub.columns if c.startswith(CONST_PREFIX)]
    if not cols:
        return None
    vals = {c.removeprefix(CONST_PREFIX): sub[c].to_numpy(dtype=float) for c in cols}
    return {k: v for k, v in vals.items() if np.isfinite(v).all()}


def _set_or_none(values: np.ndarray) -> np.ndarray | None:
    """``values`` where any is non-zero, else None (the option is off on every row)."""
    return values if values.any() else None


def named_runs(rows: pd.DataFrame) -> pd.Series:
    """Request count of every row that names its benchmark run, else 0. Optional columns:
    ``bench_requests`` (the run's requests in all, e.g. ``--num-prompts``) and ``fixed_lengths``
    (1 every request has the row's ISL/OSL, 0 varied, empty unknown; ``planner.calibration_data``
    reads both from native result files). Such a row is priced as ``estimate --isl --osl
    --bench-requests P`` prices that run: a lockstep start-up wave of N/P, and on an engine that
    keeps fixed-length waves in lockstep (``batch_eval.lasting_lockstep``) the whole run in
    lockstep, unless its lengths are known to vary or the server mixed prefill chunks into
    decode steps (optional ``mixed_chunk`` = 1: SGLang's ``--enable-mixed-chunk``, which breaks
    the lockstep; planner/validation/notes/sglang.md): that row keeps the fitted share."""
    if "bench_requests" not in rows:
        return pd.Series(0, index=rows.index, dtype=int)
    runs = pd.to_numeric(rows["bench_requests"], errors="coerce")
    lengths = rows["fixed_lengths"] if "fixed_lengths" in rows else pd.Series(np.nan, rows.index)
    varied = pd.to_numeric(lengths, errors="coerce") == 0
    mixed = rows["mixed_chunk"] if "mixed_chunk" in rows else pd.Series(np.nan, rows.index)
    mixes = pd.to_numeric(mixed, errors="coerce") == 1  # SGLang --enable-mixed-chunk
    lockstep = rows["backend"].map(lambda b: prefill_first(str(b))).astype(bool)
    named = (runs >= 1) & (runs < 1e9) & ~((varied | mixes) & lockstep)
    return runs.where(named, 0).fillna(0).round().astype(int)


LOW_FRACTION_COLUMN = "length_low_fraction"
"""Optional column: the run drew each request's ISL and OSL uniformly from the whole numbers in
[int(f x ISL), ISL] and [int(f x OSL), OSL] (a ``benchmark_serving.py`` random dataset with
``--random-range-ratio f``); empty: every request has the row's ISL and OSL."""
INFERENCEMAX_LOW_FRACTION = 0.8
"""``--random-range-ratio`` of the InferenceMAX (now InferenceX) runs: its sweep workflow passes
0.8 (SemiAnalysisAI/InferenceX ``.github/workflows/full-sweep-tmpl.yml`` @2582bce40, the commit
of 2025-10-29 that retired its Llama-3.1-70B runs, measured that day in these rows;
``benchmarks/benchmark_lib.sh`` @843c6254f requires the flag), and its client
(``utils/bench_serving/benchmark_serving.py`` ``sample_random_requests``, @d053ae24e and
@843c6254f, the fork of kimbochen/bench_serving the earlier scripts cloned) draws lengths with
``np.random.randint(int(L * ratio), L + 1)``: mean (int(0.8 L) + L) / 2, about 0.9 L."""
INFERENCEMAX_SOURCES = re.compile(
    r"^(db-dump/\d{4}-\d{2}-\d{2}; |source_file=\d{4}-\d{2}-\d{2}\.csv; "
    r"|source_file=(kimi-k2\.5|qwen3\.5-397b)-gap-analysis\.csv; )"
)
"""``silicon_data_source`` of the InferenceMAX measurements: the result-database dump
(``db-dump/...; config_id; workflow_run_id``: InferenceX's GitHub workflow runs), the dated
exports (``source_file=2026-03-25.csv`` / ``2026-04-06.csv``) and the two gap-analysis files that
restate them to 0.01 ms (``LATENCY_DECIMALS``). Every such row sits on InferenceMAX's
fixed-sequence grid (ISL / OSL 1k / 1k, 1k / 8k, 8k / 1k); the aiconfigurator gap-analysis rows
(``.../aic-auto-gap-analysis/...``) ran genai-perf or aiperf with standard deviation 0
(planner/validation/notes/sglang.md)."""


def length_low_fractions(rows: pd.DataFrame) -> pd.Series:
    """Each row's ``LOW_FRACTION_COLUMN``: the column's value where given, else
    ``INFERENCEMAX_LOW_FRACTION`` for an InferenceMAX row (``INFERENCEMAX_SOURCES``), else NaN
    (fixed lengths)."""
    given = (
        pd.to_numeric(rows[LOW_FRACTION_COLUMN], errors="coerce")
        if LOW_FRACTION_COLUMN in rows
        else pd.Series(np.nan, index=rows.index)
    )
    source = rows["silicon_data_source"] if "silicon_data_source" in rows else None
    if source is None:
        return given
    harness = np.array([bool(INFERENCEMAX_SOURCES.match(str(v))) for v in source], dtype=bool)
    return given.where(given.notna().to_numpy() | ~harness, INFERENCEMAX_LOW_FRACTION)


def length_spec(nominal: float, low_fraction: float) -> LengthSpec:
    """The length distribution of a row's ISL or OSL: fixed at ``nominal``, or (``low_fraction``
    given) the whole numbers in [int(f x L), L] drawn uniformly: their mean and standard deviation
    (((L - lo + 1)^2 - 1) / 12)^(1/2)."""
    if not np.isfinite(low_fraction) or low_fraction >= 1.0:
        return LengthSpec(mean=nominal)
    lo = max(float(int(low_fraction * nominal)), 1.0)
    mean = (lo + nominal) / 2.0
    std = np.sqrt(((nominal - lo + 1.0) ** 2 - 1.0) / 12.0)
    return LengthSpec(mean=mean, dist="uniform", cv=float(std / mean))


SGLANG_RESERVE_RULE_SINCE = (0, 5, 3)
"""First SGLang release whose ``mem_fraction_static`` default follows the chunked-prefill and
CUDA-graph reserve (``memory_batch.sglang_mem_fraction``; 0.5.2 and earlier: a reserve table,
``memory_batch.sglang_052_mem_fraction``)."""


SGLANG_AT_DEFAULT = False
"""Whether SGLang rows are replayed at SGLang's own default ``mem_fraction_static`` (False: at 0.9
of the device in vLLM's meaning, as before). Off because the rows show that their SGLang deployments
did not all run at the default: the cfg227 GB200 DeepSeek-V3 FP8 deployment (attention DP 4, 181.7
GB of weights per GPU) served 16-128 clients, yet SGLang 0.5.5's default there is 0.811 of the GPU,
below the weights' 0.915, so it cannot have started without a raised ``--mem-fraction-static`` (0.9
of the device cannot start it either: ``startup_utilization`` replays such a row at the flag that
starts it). Applied to every SGLang row (campaign-held-out) the default moved 12 rows: 3 aggregated
H100 rows closer, 6 of 8 disaggregated rows further on TTFT (one of them off by > 3x), held-out
medians unchanged (planner/validation/notes/outliers.md, "Engines' default KV pools")."""


def kv_pool(backend: str, version: object, sglang_default: bool = SGLANG_AT_DEFAULT) -> KvPool:
    """How a measured row's engine sized its KV pool: no row records its memory flag
    (``--gpu-memory-utilization``, ``free_gpu_memory_fraction``, ``--mem-fraction-static``), so
    each is replayed at its engine's default (``planner.engines.kv_pool.KvPool``), SGLang only with
    ``sglang_default`` (``SGLANG_AT_DEFAULT``). SGLang's default changed in 0.5.3; a row without
    a readable version (empty, or a build tag) takes the newer rule."""
    if backend == "trtllm":
        return KvPool.TRTLLM
    if backend == "sglang" and sglang_default:
        return KvPool.SGLANG_052 if _sglang_before_053(version) else KvPool.SGLANG
    return KvPool.VLLM


def _sglang_before_053(version: object) -> bool:
    """Whether an SGLang ``backend_version`` predates ``SGLANG_RESERVE_RULE_SINCE`` (the memory
    defaults changed there); an unreadable version (empty, a build tag) counts as newer."""
    v = parse_version(version)
    return v is not None and v < SGLANG_RESERVE_RULE_SINCE


def _backends_versions(rows: pd.DataFrame) -> Iterator[tuple[str, object]]:
    """(backend, backend_version) of every row; the version column is optional."""
    versions = rows["backend_version"] if "backend_version" in rows else [None] * len(rows)
    return zip(rows["backend"].astype(str), versions, strict=True)


def kv_pools(rows: pd.DataFrame, flags: np.ndarray | None = None) -> np.ndarray:
    """``kv_pool`` of every row (``KvPool`` values); an SGLang row whose launch recorded its
    ``--mem-fraction-static`` (``flags``, default ``recipe_memory_flags``) sizes its pool by
    SGLang's rule at that fraction."""
    flags = recipe_memory_flags(rows) if flags is None else flags
    return np.array(
        [
            int(kv_pool(b, v, sglang_default=b == "sglang" and bool(np.isfinite(f))))
            for (b, v), f in zip(_backends_versions(rows), flags, strict=True)
        ],
        dtype=int,
    )


def engine_chunk(backend: str, version: object, memory_bytes: float, default: float) -> float:
    """``max_num_batched_tokens`` a measured row's engine ran at: no row records its chunk flag
    (``--chunked-prefill-size``, ``--max-num-batched-tokens``, ``max_num_tokens``), so each runs
    at its engine's default. SGLang's depends on the GPU's memory and, below 60 GiB, on the
    version (``memory_batch.sglang_chunked_prefill``: 16384 on GPUs of 160 GiB and more, e.g.
    GB200 and B200, 8192 on H100 and H200, in every wheel read, 0.5.0rc0 to 0.5.23); a row
    without a readable version takes the newer rule. Other engines: ``default``, engines.yaml's
    value (the planner's own plans keep it too: they pass the flag)."""
    if backend != "sglang":
        return default
    return float(sglang_chunked_prefill(memory_bytes, _sglang_before_053(version)))


def engine_chunks(rows: pd.DataFrame, memory_bytes: float, default: float) -> np.ndarray:
    """``engine_chunk`` of every row, all on one GPU."""
    return np.array(
        [engine_chunk(b, v, memory_bytes, default) for b, v in _backends_versions(rows)]
    )


_GroupKey = tuple[str, str, str, float, float, int, float, str]
"""A ``predict`` group: model, GPU, engine, ISL, OSL, named run (0: none), length spread (1:
fixed lengths), FP8 activation scale ("" : the checkpoint's)."""


def _group_key(key: tuple[Any, ...]) -> _GroupKey:
    model, system, backend, isl, osl, runs, frac, act = key
    return (
        str(model),
        str(system),
        str(backend),
        float(isl),
        float(osl),
        int(runs),
        float(frac),
        str(act or ""),
    )


def _group_replay(
    sub: pd.DataFrame, key: _GroupKey, overrides: dict[str, EngineCalibration] | None
) -> tuple[Callable[..., ResultArrays], CandidateArrays, np.ndarray, np.ndarray]:
    """(evaluate_batch with the rows' deployment, workload and launch flags bound, the rows'
    candidates, the memory flag their launch recorded (NaN: none), their engines' KV pools) for
    the rows ``sub`` of one ``predict`` group ``key`` (model, GPU, engine, ISL, OSL, named run,
    length spread, activation scale); the memory settings are left to the call."""
    model, system, backend, isl, osl, runs, frac, act = key
    spec = load_model(model)
    if act:  # the FP8 activation scale the row or its launch script records
        spec = spec.model_copy(
            update={"quant": spec.quant.model_copy(update={"activation_scale": act})}
        )
    eng = (overrides or {}).get(str(backend)) or engine(str(backend))
    given = {
        c: sub[f"c_{c}"].to_numpy(dtype=float)
        for c in CandidateArrays.__dataclass_fields__
        if f"c_{c}" in sub
    }
    seqs = given.pop("max_num_seqs", np.full(len(sub), np.nan))
    given["max_num_seqs"] = np.where(np.isnan(seqs), eng.max_num_seqs.value, seqs)
    gpu = get_gpu(str(system))
    chunk = engine_chunks(sub, gpu.memory_bytes, eng.max_num_batched_tokens.value)
    # InferenceMAX rows: the token budget and memory flag their launch script set
    recipe = recipe_arrays(sub)
    chunk = np.where(np.isfinite(recipe.chunk), recipe.chunk, chunk)
    cand = CandidateArrays.from_lists(**given, max_num_batched_tokens=chunk)
    # a benchmark run: its lockstep start-up wave priced with the engine's fitted share, or
    # the named run itself (as `estimate --bench-requests` prices it) where the row names it
    run = {"bench_requests": int(runs)} if runs else {"startup_wave": True}
    lengths = {"isl": length_spec(float(isl), frac), "osl": length_spec(float(osl), frac)}
    bench = fixed(int(isl), int(osl), concurrency=1).model_copy(update=run | lengths)
    # the scheduler holds only where a script set them (None: no per-step work for them)
    holds = LaunchHolds(
        _set_or_none(recipe.adp_balance_iters),
        _set_or_none(recipe.batch_wait_iters),
        _set_or_none(recipe.batch_wait_tokens),
    )
    launch = RecordedLaunch(
        holds=holds, decode_routers=_routers(sub), constants=_row_constants(sub)
    )
    replay = partial(
        _replay,
        spec,
        gpu,
        cand,
        bench,
        backend=EnginePolicy(get_engine(str(backend)), eng, ""),
        launch=launch,
    )
    return replay, cand, recipe.memory_flag, kv_pools(sub, recipe.memory_flag)


def _replay(
    *args: object,
    launch: RecordedLaunch,
    kv_pool: np.ndarray | None = None,
    pool_flag: np.ndarray | None = None,
    **kw: object,
) -> ResultArrays:
    """``evaluate_batch`` of a recorded ``launch`` at the KV pool and memory flag given."""
    rec = replace(launch, kv_pool=kv_pool, pool_flag=pool_flag)
    return evaluate_batch(*args, recorded=rec, **kw)  # type: ignore[arg-type]


def _routers(rows: pd.DataFrame) -> np.ndarray | None:
    """Per prepared row, the slot-blind routers its launch recipe ran in front of the decode
    workers (``c_decode_routers``, read by ``candidate_columns`` from
    ``disagg_recipes.decode_routers``; NaN where none is read); None where no row has them."""
    if "c_decode_routers" not in rows:
        return None
    out = rows["c_decode_routers"].to_numpy(dtype=float)
    return out if np.isfinite(out).any() else None


def _predicted(res: ResultArrays) -> dict[str, np.ndarray]:
    """The prediction columns ``predict`` writes, from one replay."""
    return {
        "pred_ttft_ms": res.ttft_mean_s * 1e3,
        "pred_tpot_ms": res.tpot_mean_s * 1e3,
        "pred_tok_s_per_gpu": np.asarray(res.output_tok_s_per_gpu, dtype=float),
        "pred_prefill_util": np.asarray(res.prefill_utilization, dtype=float),  # the bands' load
    }


def predict(
    rows: pd.DataFrame, progress: bool = True, overrides: dict[str, EngineCalibration] | None = None
) -> pd.DataFrame:
    """Add pred_ttft_ms / pred_tpot_ms / pred_tok_s_per_gpu to prepared rows; ``const_<name>``
    columns (``with_constants``) replace the engines' fitted constants row by row; each row's KV
    pool is sized as ``kv_pool`` says, its chunk as ``engine_chunk`` says (an InferenceMAX row's
    as its script set it, ``validation.recipes``)."""
    out = rows.copy()
    for col in ("pred_ttft_ms", "pred_tpot_ms", "pred_tok_s_per_gpu", "pred_prefill_util"):
        out[col] = np.nan
    keys = [out[c] for c in ("model_path", "system", "backend", "isl", "osl")]
    low = length_low_fractions(out).fillna(1.0)  # 1: fixed lengths (groupby drops NaN keys)
    acts = activation_scales(out)
    groups = list(out.groupby([*keys, named_runs(out), low, acts]).groups.items())
    for n, (raw_key, idx) in enumerate(groups):
        sub = out.loc[idx]
        key = _group_key(raw_key)
        replay, cand, memory_flag, pools = _group_replay(sub, key, overrides)
        res = replay(kv_pool=pools, pool_flag=memory_flag)
        pred = _predicted(res)
        # rows replayed out of memory at a flag no launch recorded: at the flag that starts them
        oom = np.asarray(res.infeasible_reason == Reason.OUT_OF_MEMORY) & np.isnan(memory_flag)
        if oom.any():
            o_replay, o_cand, _, o_pools = _group_replay(sub[oom], key, overrides)
            started = startup_utilization(o_cand, partial(_at_utilization, o_replay))
            ran = np.isfinite(started)
            o_res = o_replay(
                gpu_memory_utilization=np.where(ran, started, 0.9),
                kv_pool=np.where(ran, KvPool.VLLM, o_pools),
                pool_flag=np.full(len(o_cand), np.nan),
            )
            for col, values in _predicted(o_res).items():
                pred[col][oom] = values
        for col, values in pred.items():
            out.loc[idx, col] = values
        if progress and (n % 50 == 0 or n == len(groups) - 1):
            sys.stderr.write(f"\rvalidate e2e: group {n + 1}/{len(groups)}")
    if progress:
        sys.stderr.write("\n")
    return out


STARTUP_UTILIZATIONS = tuple(round(0.9 + 0.01 * i, 2) for i in range(11))
"""Memory flags (vLLM's meaning, share of the device) a replay tries, in order, on a measured
deployment that does not start at the flag it is replayed at (``startup_utilization``)."""


def _at_utilization(replay: Callable[..., ResultArrays], util: float) -> ResultArrays:
    return replay(gpu_memory_utilization=util)


def startup_utilization(
    cand: CandidateArrays, replay: Callable[[float], ResultArrays]
) -> np.ndarray:
    """Per row of measured deployments that do not start at the memory flag they are replayed at
    and whose launch recorded none, the flag they ran at (NaN: none starts them).

    Such rows are replayed at their engine's default (SGLang's at 0.9 of the device, vLLM's
    meaning: ``kv_pool``). A measured row ran, so its engine loaded the weights and kept a KV pool;
    a replay that finds no room for one sequence (``Reason.OUT_OF_MEMORY``) contradicts the row,
    and pricing it anyway would cap each worker at one running request (e.g. a GB200 DeepSeek-V3
    FP8 worker of 4 GPUs with attention DP, 181.7 GB of weights per GPU, which served 16-128
    clients although SGLang's default and 0.9 of the device are both below its weights). The
    launch must have raised its memory flag, which the row does not record; the replay takes the
    smallest of ``STARTUP_UTILIZATIONS`` (share of the device, vLLM's meaning) at which the
    deployment holds its clients' sequences. Where none does, the run queued for KV at any flag,
    and the replay gives it the most room a launch could (the largest flag, where the deployment
    starts there). ``replay(u)`` prices the rows at utilization ``u``."""
    out = np.full(len(cand), np.nan)
    clients = cand.concurrency / np.maximum(cand.workers, 1.0)
    starts = np.zeros(len(cand), dtype=bool)
    for util in STARTUP_UTILIZATIONS:
        r = replay(util)
        starts = np.asarray(r.infeasible_reason != Reason.OUT_OF_MEMORY)
        out = np.where(np.isnan(out) & starts & (r.seq_capacity >= clients), util, out)
        if not np.isnan(out).any():
            return out
    return np.where(np.isnan(out) & starts, STARTUP_UTILIZATIONS[-1], out)


def band_coverage_pct(meas: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> float:
    """Share (%) of measured values inside their band [lo, hi]."""
    ok = np.isfinite(meas) & np.isfinite(lo) & np.isfinite(hi)
    if not ok.any():
        return float("nan")
    return float(np.mean((meas[ok] >= lo[ok]) & (meas[ok] <= hi[ok])) * 100.0)


def error_stats(pred: np.ndarray, meas: np.ndarray) -> dict[str, float]:
    """median / p90 absolute percentage error and median signed error, percent."""
    ok = np.isfinite(pred) & np.isfinite(meas) & (meas > 0)
    if not ok.any():
        return {
            "median_ape_pct": float("nan"),
            "p90_ape_pct": float("nan"),
            "median_signed_pct": float("nan"),
        }
    signed = (pred[ok] - meas[ok]) / meas[ok] * 100.0
    return {
        "median_ape_pct": float(np.median(np.abs(signed))),
        "p90_ape_pct": float(np.percentile(np.abs(signed), 90)),
        "median_signed_pct": float(np.median(signed)),
    }


def _stats(sub: pd.DataFrame, m: str) -> dict[str, float]:
    meas = sub[f"silicon_{m}_ms"].to_numpy(float)
    out = error_stats(sub[f"pred_{m}_ms"].to_numpy(float), meas)
    if f"pred_{m}_ms_lo" in sub:
        out["band_coverage_pct"] = band_coverage_pct(
            meas, sub[f"pred_{m}_ms_lo"].to_numpy(float), sub[f"pred_{m}_ms_hi"].to_numpy(float)
        )
    return out


def summarize(pred: pd.DataFrame) -> list[dict[str, object]]:
    """Error groups: overall, then by backend, mode, system and model."""
    frame = pred.assign(model=pred["model_path"])

    def one(by: str, key: str, sub: pd.DataFrame) -> dict[str, object]:
        return {
            "by": by,
            "key": key,
            "n": int(len(sub)),
            **{m: _stats(sub, m) for m in ("ttft", "tpot")},
        }

    groups = [one("overall", "all", frame)]
    for by in GROUP_BY:
        groups += [one(by, str(k), sub) for k, sub in frame.groupby(by)]
    return groups


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
    """A ``silicon_measured.csv``-layout file, its numeric cells checked (file:line: column)."""
    df = read_csv(path, "measurement CSV", field)
    where = f"{field} {path}"
    require_columns(df, REQUIRED_COLUMNS, where)
    ranges = _numeric_ranges(df.columns)
    counts = [c for c in ranges if c not in (*LATENCY_COLUMNS, LOW_FRACTION_COLUMN)]
    return numeric_columns(df, ranges, where, integers=counts)


DUPLICATE_DIGITS = 9
"""Significant digits two copies of a measurement agree to (dumps re-serialise floats: the same
TPOT reads 19.252099757615234 in one and 19.25209975761523 in another)."""
LATENCY_DECIMALS = 2
"""Decimals (of a millisecond) the measured latencies of two copies agree to: the two
gap-analysis files (``kimi-k2.5-gap-analysis.csv``, ``qwen3.5-397b-gap-analysis.csv``) restate 30
InferenceMAX measurements of the dated exports with TTFT and TPOT written to 0.01 ms (148.61 for
148.606387). Two distinct measurements agreeing to 10 us on both TTFT and TPOT at the same
deployment and lengths do not occur in the data."""
LATENCY_COLUMNS = ("silicon_ttft_ms", "silicon_tpot_ms")


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
    (rows, dropped). Model labels compare by architecture (``_architecture``): two dumps hold the
    same 15 DeepSeek-R1 SGLang and 15 TensorRT-LLM measurements, once labelled DeepSeek-V3 (same
    architecture and deployment, TTFT and TPOT equal to 15 digits), which would otherwise sit in
    two campaigns' folds."""
    cols = [c for c in df.columns if c not in DUPLICATE_IGNORES]
    key = duplicate_key(df, cols)
    if "model_path" in key:  # one config read per distinct label, not per row
        labels = key["model_path"].astype(str)
        key["model_path"] = labels.map({p: _architecture(p) for p in labels.unique()})
    order = key.assign(id=df["id"]).sort_values("id", kind="stable") if "id" in df.columns else key
    keep = ~order.duplicated(subset=cols, keep="first")
    kept = df.loc[order.index[keep.to_numpy()]].sort_index()
    return kept.reset_index(drop=True), int((~keep).sum())


def layouts_from_ids(df: pd.DataFrame) -> tuple[pd.DataFrame, int, int]:
    """``df`` with every aggregated row whose layout is recorded flattened (``read_layout``: its
    id says so, ``id_layout``, or its columns do, ``column_layout``) rewritten to the layout it
    ran, the way the other dumps record it (tp_size, attention_dp_size, moe_tp_size = GPUs / EP,
    moe_ep_size = EP, batch_size per attention-DP rank, so the clients stay), and how many were
    rewritten from their ids and from their columns. Copies of one measurement then compare equal
    (``drop_duplicates``)."""
    out = df.copy()
    counts = {"id": 0, "columns": 0}
    for i, row in df.iterrows():
        if row.get("mode") != "agg":
            continue
        tp = _num(row, "tp_size")
        dp = _attention_dp(row, "", tp, _num(row, "moe_ep_size"))
        by_id = id_layout(row, tp, dp)
        got = by_id or column_layout(row, tp, dp)
        if got is None:
            continue
        new_tp, new_dp, ep = got
        out.loc[i, ["tp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size"]] = [
            new_tp,
            new_dp,
            new_tp * new_dp / ep,
            ep,
        ]
        if not pd.isna(row.get("batch_size")):
            out.loc[i, "batch_size"] = float(row["batch_size"]) * dp / new_dp
        counts["id" if by_id else "columns"] += 1
    return out, counts["id"], counts["columns"]


def read_rows_counted(path: Path) -> tuple[pd.DataFrame, int, dict[str, int]]:
    """The measured rows of ``path`` with flattened layouts read as they ran (``read_layout``),
    without duplicates; (rows, duplicates dropped, layouts read from ids and from columns)."""
    df, from_id, from_columns = layouts_from_ids(read_measurements(path))
    rows, duplicates = drop_duplicates(df)
    return rows, duplicates, {"id": from_id, "columns": from_columns}


def read_rows(path: Path) -> tuple[pd.DataFrame, int]:
    """``read_rows_counted`` without the layout count."""
    rows, duplicates, _ = read_rows_counted(path)
    return rows, duplicates


def modelled(pred: pd.DataFrame, skipped: dict[str, int]) -> tuple[pd.DataFrame, dict[str, int]]:
    """Rows with finite predictions, and ``skipped`` with the others counted."""
    bad = ~np.isfinite(pred["pred_ttft_ms"]) | ~np.isfinite(pred["pred_tpot_ms"])
    out = dict(skipped)
    if bad.any():
        out["does_not_fit_or_saturated"] = int(bad.sum())
    return pred[~bad], out


OFF_FACTOR = 3.0
"""A row is grossly off when its prediction is more than this factor from the measurement, either
way, on TTFT or TPOT (issue 16: |ln(predicted / measured)| > ln 3)."""


UNMODELLABLE_FILE = Path(__file__).parents[1] / "calibration" / "unmodellable.yaml"
"""Measured rows named unmodellable, each with its cause and the note that gives the evidence."""
NOTES_DIR = Path(__file__).with_name("notes")
UNMODELLABLE_CAP_PCT = 1.0
"""Issue 16: the named rows may be at most this share (%) of the modelled rows."""


@dataclass(frozen=True)
class NamedRow:
    """One row of ``UNMODELLABLE_FILE``: why it is off, and where the evidence is written."""

    cause: str
    note: str


def named_unmodellable(path: Path = UNMODELLABLE_FILE) -> dict[str, NamedRow]:
    """Row id -> ``NamedRow`` of the unmodellable list (an input error naming the file and entry
    when an entry lacks an id, names an unknown cause or a note that does not exist)."""
    raw = read_yaml(path, "calibration YAML", "unmodellable")
    if not isinstance(raw, dict) or not isinstance(raw.get("causes"), dict):
        raise PlannerInputError("unmodellable", f"{path}: needs 'causes' and 'rows'")
    causes, rows = raw["causes"], raw.get("rows")
    if not isinstance(rows, list):
        raise PlannerInputError("unmodellable", f"{path}: 'rows' is not a list")
    out: dict[str, NamedRow] = {}
    for i, row in enumerate(rows):
        where = f"{path}: rows[{i}]"
        if not isinstance(row, dict) or not isinstance(row.get("id"), str) or not row["id"]:
            raise PlannerInputError("unmodellable", f"{where}: needs an 'id'")
        if row.get("cause") not in causes:
            raise PlannerInputError(
                "unmodellable", f"{where}: cause {row.get('cause')!r} not one of {sorted(causes)}"
            )
        note = str(row.get("note", ""))
        if "/" in note or not (NOTES_DIR / note).is_file():
            raise PlannerInputError("unmodellable", f"{where}: note {note!r} not in {NOTES_DIR}")
        if row["id"] in out:
            raise PlannerInputError("unmodellable", f"{where}: {row['id']} listed twice")
        out[row["id"]] = NamedRow(str(row["cause"]), note)
    return out


def off_by_factor(
    pred: pd.DataFrame, factor: float = OFF_FACTOR, named: Mapping[str, NamedRow] | None = None
) -> dict[str, float]:
    """Rows of ``pred`` whose TTFT, TPOT, or either is off by more than ``factor`` either way,
    and the share (%) of rows off on either; with ``named`` (the unmodellable list) and an ``id``
    column, how many of the rows off are named there, how many are not, and the named rows'
    share (%) of all rows."""
    out: dict[str, float] = {"factor": factor}
    off = np.zeros(len(pred), dtype=bool)
    for m in ("ttft", "tpot"):
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.log(
                pred[f"pred_{m}_ms"].to_numpy(float) / pred[f"silicon_{m}_ms"].to_numpy(float)
            )
        this = np.abs(r) > np.log(factor)
        out[m], off = int(this.sum()), off | this
    out["either"] = int(off.sum())
    out["share_pct"] = round(100.0 * float(off.mean()), 2) if len(pred) else 0.0
    if named is not None and "id" in pred:
        listed = pred["id"].astype(str).isin(list(named)).to_numpy()
        out["named"] = int((off & listed).sum())
        out["not_named"] = int((off & ~listed).sum())
        out["named_share_pct"] = round(100.0 * float(listed.mean()), 2) if len(pred) else 0.0
        out["named_cap_pct"] = UNMODELLABLE_CAP_PCT
    return out


def validate_e2e(
    path: Path,
    predictions_out: Path | None = None,
    progress: bool = True,
    holdout: str = "none",
    folds: int = 5,
    overrides: dict[str, EngineCalibration] | None = None,
) -> dict[str, object]:
    """The ``planner validate e2e`` report: in-sample (``holdout`` "none": the shipped
    constants), or held out ("campaign": each fold of measurement campaigns priced with constants
    refitted on the other folds, ``planner.validation.holdout``), in the same shape plus
    ``holdout``; ``overrides``: engine constants replacing the packaged ones (a profile's)."""
    df, duplicates, layouts = read_rows_counted(path)
    prep = prepare(df)
    head = {
        "rows": int(len(df) + duplicates),
        "duplicates_dropped": duplicates,
        "layout_read_from_id": layouts["id"],
        "layout_read_from_columns": layouts["columns"],
    }
    if holdout == "none":
        pred = predict(prep.rows, progress, overrides)
        extra: dict[str, object] = {}
    elif holdout == "campaign":
        from planner.validation.holdout import campaign_holdout

        pred, extra = campaign_holdout(prep.rows, folds, progress, overrides)
    else:
        raise PlannerInputError("--holdout", f"'{holdout}' not one of ['campaign', 'none']")
    if not pred.empty:  # the committed prediction bands (planner.bands) around every prediction
        from planner.validation.bands import with_band_columns

        pred = with_band_columns(pred)
    good, skipped = modelled(pred, prep.skipped)
    if predictions_out is not None:
        pred.drop(columns=[c for c in pred.columns if c.startswith(CONST_PREFIX)]).to_csv(
            predictions_out, index=False
        )
    return {
        **head,
        "modelled": int(len(good)),
        "skipped": skipped,
        "groups": summarize(good),
        "off_by_3x": off_by_factor(good, named=named_unmodellable()),
        **extra,
    }
