"""What the rows of ``silicon_measured.csv`` record in their text, read into the e2e layout
(``planner.replay_e2e.layout``) by ``python -m lab.prepare_e2e``: the client count in
``silicon_data_source``, layouts recorded flattened (read from a row's id or its columns), and the
InferenceMAX harness's length spread."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from hardware.catalog import get_gpu
from hardware.errors import PlannerInputError
from planner.replay_e2e.candidates import _attention_dp, _num
from planner.replay_e2e.layout import LAYOUT_READ_FROM, LOW_FRACTION_COLUMN

ROW_KEYS = re.compile(r"^(config_id|silicon_concurrency|measured|workflow_run_id)=")
"""Parts of ``silicon_data_source`` that name one row, not its campaign."""


def campaign(source: object) -> str:
    """The measurement campaign of a row: its ``silicon_data_source`` without the per-row parts."""
    parts = [p.strip() for p in str(source).split(";")]
    return "; ".join(p for p in parts if not ROW_KEYS.match(p))


def _recorded_concurrency(row: pd.Series) -> float:
    """Client concurrency the campaign recorded (``silicon_concurrency=`` in the source), or NaN."""
    m = re.search(r"silicon_concurrency=(\d+)", str(row.get("silicon_data_source", "")))
    return float(m.group(1)) if m else np.nan


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
(lab/notes/sglang.md)."""


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


def layouts_from_ids(df: pd.DataFrame) -> tuple[pd.DataFrame, int, int]:
    """``df`` with every aggregated row whose layout is recorded flattened (``read_layout``: its
    id says so, ``id_layout``, or its columns do, ``column_layout``) rewritten to the layout it
    ran, the way the other dumps record it (tp_size, attention_dp_size, moe_tp_size = GPUs / EP,
    moe_ep_size = EP, batch_size per attention-DP rank, so the clients stay), and how many were
    rewritten from their ids and from their columns (each such row's ``layout_read_from``: "id"
    or "columns"). Copies of one measurement then compare equal (``drop_duplicates``)."""
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
        out.loc[i, LAYOUT_READ_FROM] = "id" if by_id else "columns"
    return out, counts["id"], counts["columns"]
