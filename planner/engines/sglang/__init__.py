"""SGLang: prefill batches before decode steps, KV from a token pool on demand, its own
memory-fraction and chunk defaults (``memory``)."""

from pathlib import Path

from planner.engines.base import Engine
from planner.engines.sglang import replay
from planner.engines.sglang.scheduling import OVERLAP_SCHEDULER

PREFILL_FIRST = (
    "SGLang runs a waiting prompt's prefill as a batch of its own before any decode step "
    "(managers/scheduler.py get_next_batch_to_run: get_new_batch_prefill first, the running "
    "decode batch only when no prefill batch forms) and mixes prefill chunks into decode steps "
    "only with --enable-mixed-chunk (server_args.py, default False)"
)
"""Why a fixed-length benchmark whose clients start together stays in lockstep on SGLang
(``batch_eval.lasting_lockstep``). On the one SGLang campaign of silicon_measured.csv that behaves
so (Qwen3-32B on H100, SGLang 0.5.1, 78 rows) it moves the median ln(pred/meas) of TTFT from -1.24
to 0.03 and of TPOT from 0.24 to 0.01; on the other SGLang campaigns it puts TTFT 1.3-3x high: they
do not stay in lockstep (aiconfigurator's generator launches SGLang with --enable-mixed-chunk; the
dumps' client draws lengths from [0.8, 1] x ISL/OSL), which the rows do not record, see
lab/notes/sglang.md. A result that says its server mixed chunks (``mixed_chunk``)
keeps the fitted share (``planner.replay_e2e.launch.named_runs``)."""

ENGINE = Engine(
    name="sglang",
    folder=Path(__file__).parent,
    emitter="planner.engines.sglang.emitter",
    prefill_first=PREFILL_FIRST,
    overlap_scheduler=OVERLAP_SCHEDULER,
    result_names=("sglang",),
    replay_pool=replay.kv_pool,
    replay_chunk=replay.chunk,
)
