"""vLLM: continuous batching that mixes prefill chunks into decode steps (decodes first, then
prefill chunks in the rest of the token budget), KV allocated in blocks on demand."""

from pathlib import Path

from planner.engines.base import Engine

ENGINE = Engine(
    name="vllm",
    folder=Path(__file__).parent,
    emitter="planner.engines.vllm.emitter",
    result_names=("vllm",),
)
