"""How a measured SGLang launch ran where its row records no setting: the KV pool and the prefill
chunk at SGLang's defaults, which changed in 0.5.3 (``python/sglang/srt/server_args.py``)."""

from __future__ import annotations

from planner.engines.base import KvPool
from planner.engines.sglang.memory import chunked_prefill
from planner.replay_e2e.rows import parse_version

RESERVE_RULE_SINCE = (0, 5, 3)
"""First SGLang release whose ``mem_fraction_static`` default follows the chunked-prefill and
CUDA-graph reserve (``memory.mem_fraction``; 0.5.2 and earlier: a reserve table,
``memory.mem_fraction_052``)."""

AT_DEFAULT = False
"""Whether SGLang rows that record no memory flag are replayed at SGLang's own default
``mem_fraction_static`` (False: at 0.9 of the device, ``KvPool.DEVICE``). Off because measured
SGLang deployments did not all run at the default: a GB200 DeepSeek-V3 FP8 deployment (attention
DP 4, 181.7 GB of weights per GPU) served 16-128 clients, yet SGLang 0.5.5's default there is
0.811 of the GPU, below the weights' 0.915, so it cannot have started without a raised
``--mem-fraction-static`` (``planner.replay_e2e.predict.startup_utilization`` replays such a row
at the flag that starts it)."""


def before_053(version: object) -> bool:
    """Whether an SGLang ``backend_version`` predates ``RESERVE_RULE_SINCE`` (the memory and
    chunk defaults changed there); False for an unreadable version (the newer rule)."""
    v = parse_version(version)
    return v is not None and v < RESERVE_RULE_SINCE


def kv_pool(version: object, flag_recorded: bool) -> int:
    """The ``KvPool`` a launch of SGLang ``version`` sized its KV pool by: SGLang's rule when the
    row records its ``--mem-fraction-static`` (or with ``AT_DEFAULT``), else a share of the
    device."""
    if not (flag_recorded or AT_DEFAULT):
        return KvPool.DEVICE
    return KvPool.SGLANG_052 if before_053(version) else KvPool.SGLANG


def chunk(memory_bytes: float, version: object) -> int:
    """The ``--chunked-prefill-size`` a launch of SGLang ``version`` ran at on a GPU of
    ``memory_bytes`` when it set none (``memory.chunked_prefill``)."""
    return chunked_prefill(memory_bytes, before_053(version))
