"""TensorRT-LLM's KV pool default, for replaying measured launches (``planner.engines.kv_pool``)."""

FREE_FRACTION = 0.9
"""TensorRT-LLM ``KvCacheConfig.free_gpu_memory_fraction`` default (tensorrt_llm/llmapi/
llm_args.py, NVIDIA/TensorRT-LLM @fcd3f31): ``KvCacheCreator._cal_max_memory`` in
tensorrt_llm/_torch/pyexecutor/_util.py (@0004396) sizes the pool as (total - peak memory of the
profiling run + the temporary KV it held) x fraction, the peak being weights, activations and
workspace (the TensorRT engine path takes the same fraction of ``cudaMemGetInfo`` free memory
after the engine is loaded)."""
