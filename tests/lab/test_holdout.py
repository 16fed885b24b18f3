"""Layouts read from ids and columns (``lab.layouts``) and the campaign-held-out figures of
``silicon_measured.csv`` (``planner validate e2e --holdout campaign`` on the prepared rows)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lab.layouts import layouts_from_ids
from planner.replay_e2e.e2e import validate_e2e
from planner.replay_e2e.layout import drop_duplicates
from tests.lab import SILICON_MEASURED, prepared_file

DATA = SILICON_MEASURED


def test_a_layout_read_from_its_id_joins_its_copy_in_another_dump() -> None:
    """The same DeepSeek-R1 measurement in two dumps: one records ``..._tp8_ep8_...`` as tp_size
    64, moe_tp 8; the other as tp 8, moe_tp 1. Read from the id, the two are one measurement."""
    common = {"mode": "agg", "batch_size": 32.0, "attention_dp_size": 1.0, "moe_ep_size": 8.0}
    df = pd.DataFrame(
        [
            {
                "id": "d2_agg_1024x1024_c32_tp8_ep8_922",
                "silicon_data_source": "b",
                "tp_size": 64.0,
                "moe_tp_size": 8.0,
                **common,
            },
            {
                "id": "d1_agg_1024x1024_c32_tp8_0_ep8_0_1255",
                "silicon_data_source": "a",
                "tp_size": 8.0,
                "moe_tp_size": 1.0,
                **common,
            },
        ]
    )
    read, n, by_columns = layouts_from_ids(df)
    assert n == 1 and by_columns == 0
    assert read.loc[0, "tp_size"] == 8.0 and read.loc[0, "moe_tp_size"] == 1.0
    assert drop_duplicates(read)[1] == 1


def test_a_layout_read_from_its_columns_is_rewritten_as_it_ran() -> None:
    """A db-dump row (no layout in its id) recorded as attention DP 64 with MoE TP 8 x EP 8 on an
    8-GPU H200 is rewritten as attention DP 8 at TP 1, MoE TP 1, one client per rank becoming 8;
    the same shape inside the NVLink domain (TP 4 = MoE TP 2 x EP 2) is kept."""
    common = {"mode": "agg", "system": "h200_sxm", "silicon_data_source": "db-dump/x"}
    df = pd.DataFrame(
        [
            {
                "id": "dsr1_h200_trtllm_fp8_agg_8192x1024_c64_cfg183",
                "tp_size": 1.0,
                "attention_dp_size": 64.0,
                "moe_tp_size": 8.0,
                "moe_ep_size": 8.0,
                "batch_size": 1.0,
                **common,
            },
            {
                "id": "qwen_h200_trtllm_agg_128x128_c16_cfg7",
                "tp_size": 4.0,
                "attention_dp_size": 1.0,
                "moe_tp_size": 2.0,
                "moe_ep_size": 2.0,
                "batch_size": 16.0,
                **common,
            },
        ]
    )
    read, by_id, by_columns = layouts_from_ids(df)
    assert (by_id, by_columns) == (0, 1)
    got = read.loc[0, ["tp_size", "attention_dp_size", "moe_tp_size", "batch_size"]].tolist()
    assert got == [1.0, 8.0, 1.0, 8.0]
    assert read.loc[1, df.columns].equals(df.loc[1])
    assert read["layout_read_from"].tolist()[0] == "columns"


@pytest.mark.validation
@pytest.mark.heldout
def test_held_out_accuracy(tmp_path: Path) -> None:
    """Campaign-held-out figures of ``planner validate e2e --holdout campaign`` (5 folds): the
    published accuracy. Every complete row is modelled; each fold's constants differ from no fit."""
    if not DATA.is_file():
        pytest.skip(f"{DATA} absent (shared validation folder not mounted)")
    rows = prepared_file(DATA, tmp_path / "rows.csv")
    r = validate_e2e(rows, progress=False, holdout="campaign", folds=5)
    # 225 exact copies, 52 round-off, 34 by id layout, 30 under a second label of one
    # architecture, 30 restated to 0.01 ms by the gap-analysis files
    assert r["duplicates_dropped"] == 371
    # 71 with moe_ep_size the id's EP, 15 MiniMax-M2.5 vLLM H100 rows with EP as attention DP
    assert r["layout_read_from_id"] == 86
    # InferenceMAX DeepSeek-R1 H200 TensorRT-LLM configs 181 and 183 (tp_size or attention DP 64)
    assert r["layout_read_from_columns"] == 15
    assert r["modelled"] + sum(r["skipped"].values()) == r["rows"] - r["duplicates_dropped"]
    assert set(r["skipped"]) <= {"incomplete_config", "tp_not_dividing_heads"}
    groups = {(g["by"], g["key"]): g for g in r["groups"]}  # type: ignore[attr-defined]
    agg, dis = groups[("mode", "agg")], groups[("mode", "disagg")]
    assert agg["ttft"]["median_ape_pct"] <= HELD_OUT["agg_ttft"]
    assert agg["tpot"]["median_ape_pct"] <= HELD_OUT["agg_tpot"]
    assert dis["ttft"]["median_ape_pct"] <= HELD_OUT["disagg_ttft"]
    assert dis["tpot"]["median_ape_pct"] <= HELD_OUT["disagg_tpot"]
    assert all(np.isfinite(g["ttft"]["p90_ape_pct"]) for g in (agg, dis))
    h = r["holdout"]
    assert h["folds"] == 5 and sum(h["fold_rows"]) == r["modelled"]  # type: ignore[index]
    # rows off by more than 3x either way on TTFT or TPOT: 166 of 1,588 on 2026-12-02 (issue 16
    # asks for at most 1% outside a named list; lab/notes/outliers.md)
    assert r["off_by_3x"]["either"] <= OFF_BY_3X  # type: ignore[index]


OFF_BY_3X = 168
"""Held-out rows off by more than 3x on TTFT or TPOT, guarded just above 166 (2026-12-02, fifteenth
pass: the 15 MiniMax-M2.5 vLLM H100 rows of the 2026-04-06 export, recorded as 16 GPUs, read as the
TP 4 / EP 4 worker their ids name, ``e2e.id_layout``: their two 64-client rows back inside 3x, one
32-client 8k/1k row out, 167 -> 166; fourteenth pass: grouped expert GEMMs priced at the busiest EP
rank's load as tokens, and each first-wave share searched jointly with the engines' request
overheads, 168 -> 167). Twelfth pass: 19 InferenceMAX disaggregated deployments launched by NVIDIA
srt-slurm behind 2-10 slot-blind round-robin frontends, ``serving.routed_running``: three rows that
waited for a decode slot on a full worker while another had one free back inside 3x, 171 -> 168;
before that, 15 InferenceMAX DeepSeek-R1 H200 TensorRT-LLM rows recorded as a worker of 64 GPUs are
read as the 8-GPU TP 8 / EP 8 worker that ran, ``e2e.column_layout``: their TPOT ratio predicted /
measured moves from 0.34-1.06 (median 0.66) to 0.75-1.03 (0.88), their TTFT ratio from 0.08-2.42
(0.90, 64-GPU collectives over the network offsetting a missing per-request time) to 0.27-0.93
(0.47), as on the InferenceMAX export rows of the same deployment, and three 1k-prompt rows fall
below 1/3: 170 -> 173; then the same rows at the flags of their launch script, whose model their ids
name, ``recipes.model_label``: two rows back inside 3x, 173 -> 171). Eleventh pass: the December
2025 SGLang GB200 disaggregated launches replayed as the DEP layouts they ran, a deployment the
replay could not start replayed at the memory flag that starts it: 175 -> 170. Tenth pass: FP8 GEMMs
priced without the kernel harness's activation-scale pass, fused-MoE layers as their kernels, the
step overhead per engine: 178 -> 175. Ninth pass: the InferenceMAX disaggregated rows replayed at
the decode cap their launch recipe set, ``validation.disagg_recipes``, took 15 rows inside 3x, 193
-> 178; before, 195 -> 189 -> 193 in the fifth pass: TensorRT-LLM's attention-DP balance wait, then
the Llama-3.1-70B batch waiting with four aic Llama-3.1-8B rows near the line through one fold's
request overhead."""
HELD_OUT: dict[str, float] = {
    "agg_ttft": 23.0,
    "agg_tpot": 12.1,
    "disagg_ttft": 25.0,
    "disagg_tpot": 13.6,
}
"""Median APE (%) guarded on held-out campaigns, just above the measured figures (22.79, 11.80,
24.84, 13.38 % on 1,588 rows, 2026-12-02, fifteenth pass; issue 16's targets are 22, 13, 25, 15 %:
all but agg TTFT met; disagg TTFT by the smallest margin: 79 of 158 rows within 25 %, the median
the mean of the 79th and 80th errors, so its guard is the target itself). The fifteenth pass reads
the 15 MiniMax-M2.5 vLLM H100 rows of the 2026-04-06 export, whose columns record their id's
``_tp4_ep4_`` as a 16-GPU worker (attention DP 4, moe_ep_size 16), as the 4-GPU TP 4 / EP 4
worker InferenceX ran (``e2e.id_layout``): 23.45 / 12.02 / 24.84 / 13.38 -> 22.79 / 11.80 / 24.84
/ 13.38 % (guards tightened 23.7 -> 23.0, 12.3 -> 12.1). The fourteenth pass
prices the grouped expert GEMMs of the busiest EP rank at its load as tokens of a balanced layer,
T(f x n), not the balanced time times the load factor, f x T(n) (``opgraph.moe_ops``;
``kernels_db.moe_load`` against AIConfigurator's fused-MoE tables: median |ln| 0.104 against
0.242 on 12,000 skewed / balanced pairs), and searches each first-wave share jointly with the
engines' request overheads (``fit_engines.joint_pick``: alone, the coordinate search stopped at a
share of 0.1 whose fitted overheads priced every engine's aggregated TTFT worse, |ln| 0.276
against 0.225). Separately, held out: main 24.88 / 12.64 / 25.40 / 14.19 %; the joint search alone
24.88 / 12.64 / 24.39 / 14.31 %; the busiest rank as tokens alone 23.46 / 11.46 / 26.94 / 13.07 %
(in sample, at fixed constants, it moves 22.69 / 11.10 / 24.31 / 12.50 to 22.71 / 11.05 / 25.38 /
12.36 %: most held-out movement is the folds' refits, outliers.md "Fourteenth pass"); both
23.45 / 12.02 / 24.84 / 13.38 % (guards tightened 25.2 -> 23.7, 12.9 -> 12.3, 25.5 -> 25.0, 14.4 ->
13.6). The twelfth
pass prices the slot-blind routers of 19 InferenceMAX disaggregated deployments (NVIDIA
srt-slurm's nginx in front of 2-10 round-robin dynamo frontends, ``serving.routed_running``,
``inferencemax_disagg.yaml`` ``decode_routers``): three rows back inside 3x and disagg TTFT p90
87.0 -> 68.5 %, but the median 25.11 -> 25.40 % (guard LOOSENED 25.4 -> 25.5; disagg TPOT 14.31
-> 14.19 %, guard tightened 14.6 -> 14.4): fold 3's refit flips between near-equal constants
(TensorRT-LLM disaggregated request time 0.10 -> 0.16 s, SGLang 0.25 -> 0.20 s, vLLM 0.20 ->
0.25 s), which moves the April 2026 Kimi-K2.5 rows about 60 ms up and SGLang's about 50 ms down.
(A first build that let a single decode worker's requests spread as over several gave 24.04 %:
that one-worker case is pooled now.) It also reads 15 InferenceMAX rows recorded as a 64-GPU
H200 worker (tp_size or attention DP 64 = MoE TP 8 x EP 8) as the 8-GPU worker that ran
(``e2e.column_layout``): 24.87 / 12.77 / 25.11 / 14.31 -> 24.88 / 12.64 / 25.11 / 14.31 % (agg
TPOT guard tightened 13.0 -> 12.9). The eleventh pass replays the December 2025 SGLang GB200
disaggregated rows (InferenceMAX, lmsysorg/sglang:v0.5.5.post2) at the DEP layout their launch
script hardcoded (attention DP with DeepEP expert parallelism over each worker; the dumps record EP
1: ``validation.disagg_recipes.launch_expert_parallel``) and a deployment the replay could not start
(out of memory at 0.9 of the device) at the memory flag that starts it
(``e2e.startup_utilization``): 24.88 / 12.69 / 28.82 / 9.89 -> 24.87 / 12.77 / 25.11 / 14.31 %
(guards tightened 25.3 -> 25.2 and 29.0 -> 25.4; disagg TPOT LOOSENED 10.3 -> 14.6: under the
recorded tensor-parallel MoE layout those rows' TPOT was right, under the layout they ran it is
priced 20% fast, as on the February rows that record EP 32: the DeepEP decode on GB200,
lab/notes/disagg.md "Eleventh pass"). The tenth pass prices FP8 GEMMs as serving runs
them (the kernel tables' dynamic activation-scale pass charged only where a checkpoint needs it,
block-scaled FP8 at its fitted compute share: ``kernels_db.fp8_scale``), every fused-MoE layer as
its kernels (two grouped GEMMs, routing, combine, and two quantizations for 8-bit inputs:
``costs.MOE_GROUPED_GEMMS``, ``opgraph.moe_aux_ops``) and fits the step overhead per engine (SGLang
and TensorRT-LLM 1 ms, vLLM 2 ms): 27.18 / 12.96 / 28.64 / 10.14 -> 24.88 / 12.69 / 28.82 / 9.89 %
(guards tightened 27.6 -> 25.3 and 10.5 -> 10.3; disagg TTFT +0.18 points inside its 29.0 guard).
The ninth pass replays 55 InferenceMAX disaggregated rows at the decode cap (``max_batch_size`` per
rank) of the launch recipe InferenceX's nvidia-master.yaml named for them
(``validation.disagg_recipes``, ``inferencemax_disagg.yaml``): requests that wait for a decode slot
at the sweep tops are now priced, disagg TTFT 42.32 -> 28.64 % (guard tightened 42.7 -> 29.0); one
fold's shared step overhead then refits 2 -> 1 ms (a near-tie), which moves agg TTFT / TPOT 27.21 /
12.63 -> 27.18 / 12.96 % and disagg TPOT 9.53 -> 10.14 % (guard LOOSENED 9.9 -> 10.5). Before, 27.21
/ 12.63 / 42.32 / 9.53 % (2026-12-01, fifth pass). The fifth pass prices TensorRT- LLM's
attention-DP balance where an InferenceMAX script enabled it (seven DeepSeek-R1 H200 rows; agg TPOT
12.73 -> 12.71 %, the other medians unchanged to 0.01 points) and replays the InferenceMAX rows at
the expert-parallel MoE layout their scripts launched where the exports record it tensor-parallel
(DeepSeek-R1 and gpt-oss-120b TensorRT-LLM of 2025-11-02: 27.55 -> 27.57 %, 12.71 -> 12.47 %;
MiniMax-M2.5 H200 vLLM from 2026-03-13). With kernel_scale still fitted in the folds the MiniMax
reading gave 27.91 / 13.53 / 43.23 / 11.61 %: one fold's kernel_scale flipped 1.0 -> 0.9 on a near-
tie, moving every engine's TPOT there; the packaged fit now holds kernel_scale at 1 (fit_engines
``Constant.held``; the full-data fit gives 1.0 anyway), and the figures are 27.57 / 12.47 / 42.32 /
9.53 % again. Last, TensorRT-LLM's batch waiting where the Llama-3.1-70B script set it (1k/1k below
TP 8, ``serving.batch_wait``): 27.21 / 12.63 / 42.32 / 9.53 % (guards 27.9 -> 27.6, 12.8 -> 13.0,
42.7, 9.9). Last in the fourth pass, the InferenceMAX aggregated rows are replayed at the KV-cache
dtype, token budget and memory flag their launch scripts set (``validation.recipes``,
``inferencemax_recipes.yaml``: Llama-3.3-70B-FP8 on vLLM with an FP8 KV cache, TensorRT-LLM
max_num_tokens 16,384 / 20,000 / clients + ISL, SGLang chunks of 16,384 and 32,768): 26.50 / 15.91 /
44.32 / 13.00 -> 27.55 / 12.73 / 42.32 / 9.53 % (agg TTFT guard LOOSENED 26.9 -> 27.9; the others
tightened: 16.3 -> 13.1, 44.7 -> 42.7, 13.4 -> 9.9; rows off > 3x 199 -> 195). In sample the TTFT
figures do not move (23.73 / 35.47 %) and agg TPOT goes 14.22 -> 12.77 %; held out, the folds'
refitted kernel_scale no longer drops to 0.9 in three of five folds, which moves TPOT everywhere,
and two folds' TensorRT-LLM request overheads move (gpt-oss-120b TensorRT-LLM TTFT 26.8 -> 43.1 %).
Before that in the fourth pass two readings of the rows changed: the InferenceMAX rows are replayed
at the lengths their client drew (uniform whole numbers in [int(0.8 L), L], mean about 0.9 L;
``e2e.length_spec``), and the 30 measurements the two gap-analysis files restate to 0.01 ms count
once (``e2e.duplicate_key``: 1,618 -> 1,588 modelled rows, which re-deals the campaigns). The copies
alone: 28.52 / 16.16 / 42.99 / 12.32 -> 28.92 / 15.85 / 42.99 / 12.32 %; with the lengths: 26.50 /
15.91 / 44.32 / 13.00 % (agg TTFT guard tightened 28.9 -> 26.9, agg TPOT 16.5 -> 16.3; disagg TTFT
LOOSENED 43.4 -> 44.7 and disagg TPOT 12.7 -> 13.4, rows off > 3x 196 -> 201: the disaggregated
InferenceMAX rows were priced low on TTFT already, median ln(pred / measured) -0.03 -> -0.08;
lab/notes/outliers.md). Third pass: the agg TTFT guard was LOOSENED 27.9 -> 28.9 in
the last step of that pass, for a physics fix: the fitted GEMM model now counts the split-K blocks a
library runs when a product has too few output tiles to fill the SMs
(``kernels_db.roofline.gemm_units``; before, a larger m priced up to 23% faster, breaking "more work
never takes less time"); all five GPUs refitted, kernel p90s within 0.7 points. Held out, one
campaign moves: aic TensorRT-LLM 1.0.0rc3 Llama-3.1-8B on H100 (177 rows), whose small prefill GEMMs
now price faster, TTFT median APE 31.0 -> 40.3 % (its TTFT was already priced low: host-side queue,
notes/outliers.md), while agg TPOT improves 16.46 -> 16.16 % (guard tightened 16.8 -> 16.5) and rows
off by > 3x 198 -> 194. Earlier in this pass each measured row was replayed at its engine's defaults
for the flags it does not record (TensorRT-LLM's KV pool: 0.9 of the memory free after the model,
``e2e.kv_pool``; SGLang's prefill chunk by GPU memory and version, ``e2e.engine_chunk``): 27.6,
16.6, 45.1, 12.5 -> 27.55, 16.46, 43.01, 12.32 %, guards tightened agg TTFT 28.0 -> 27.9, agg TPOT
16.9 -> 16.8, disagg TTFT 45.5 -> 43.4, disagg TPOT 12.9 -> 12.7. The pass before tightened agg TTFT
29.0 -> 28.0 and disagg TPOT 13.8 -> 12.9 and LOOSENED disagg TTFT 44.0 -> 45.5: the 30 DeepSeek-R1
measurements a second dump labels DeepSeek-V3 now count once (``e2e.drop_duplicates`` compares model
labels by architecture; all 30 aggregated), which removes two campaigns and so re-deals the
campaigns to folds, and the kernel fit now prices each measured row as its harness ran it
(``kernels_db.harness``; held out on the old deal 43.4 -> 43.7 %). The disaggregated figure rests on
158 rows of about ten campaigns and moves by points with the deal. Earlier passes, for the record:
the guards were just above 28.4, 16.4, 36.9, 18.6 % on 1,648 rows. Three guards were LOOSENED in
this pass (agg TPOT 16.2 -> 16.9, disagg TTFT 35.5 -> 37.5, disagg TPOT 15.5 -> 19.2) and one
tightened (agg TTFT 31.5 -> 29.0), for a protocol reason, not a model change: duplicates are now
compared to 9 significant digits and layouts are read from the row ids, so 86 more rows are
recognised as copies of a measurement in another dump (they sat in a training and a test fold
before) and the round-robin deal of campaigns to folds moved. With the model unchanged that move
alone takes the figures from 29.6 / 15.9 / 34.8 / 14.9 to 28.4 / 16.5 / 36.9 / 18.6 (the
disaggregated ones rest on 158 rows of about ten campaigns; a fold's shared kernel_scale flips
between 0.9 and 1.0 with the deal). Of the model changes, DSA pricing took agg TPOT from 16.5 to
16.4 (GLM-5 TPOT 25 -> 11 %) and reading the layouts from the ids agg TTFT from 30.9 to 29.6 %.
History: 30.9 / 15.7 / 34.8 / 14.9 % (1,678 rows) after issue 16b's fitted kernel tier, 29.8 / 14.1
/ 43.8 / 17.0 % before it (lab/notes/outliers.md). Issue 16k's kernel tier (MLA
decode computing at the prefill fit's tensor-core efficiency) took the disaggregated TPOT from 19.2
to 13.3 % (guard tightened 19.2 -> 13.8) and the disaggregated TTFT from 37.0 to 43.4 % (guard
LOOSENED 37.5 -> 44.0): in sample, with the shipped constants, TTFT moves only 37.3 -> 38.4 %; held
out, the folds' refitted disaggregated request overheads and wave shares move (TensorRT-LLM 0.1 ->
0.2 s in two folds), chiefly on the GB200 TensorRT-LLM 0.5.1 campaign (15 rows, 12 -> 44 %)."""
