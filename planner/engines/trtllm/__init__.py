"""TensorRT-LLM: KV reserved on admission, a free-memory pool fraction (``memory``) and prompt
holds a launch may enable (``scheduling``).

Benchmark results: ``tensorrt_llm/serve/scripts/benchmark_serving.py`` (github:NVIDIA/TensorRT-LLM
@0228a71223416496ff056a157936bad2e42c762f) is derived from vLLM's ``benchmarks/serve.py`` and
writes the same fields with ``--save-result``, so ``planner.calibration.data`` reads it as a vLLM
result."""

from pathlib import Path

from planner.engines.base import Engine, KvPool
from planner.engines.trtllm.scheduling import OVERLAP_SCHEDULER, LaunchHolds


def _kv_pool(version: object, flag_recorded: bool) -> int:
    """Every TensorRT-LLM launch sizes its pool as a share of the free memory (``memory``)."""
    return KvPool.TRTLLM


ENGINE = Engine(
    name="trtllm",
    folder=Path(__file__).parent,
    emitter="planner.engines.trtllm.emitter",
    kv_dtype_follows_weights=True,  # KvCacheConfig.dtype "auto": the checkpoint's KV quant
    result_names=("tensorrt", "trtllm"),
    replay_pool=_kv_pool,
    launch_holds=LaunchHolds,
    overlap_scheduler=OVERLAP_SCHEDULER,
)
