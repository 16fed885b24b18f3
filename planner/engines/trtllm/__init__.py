"""TensorRT-LLM: KV reserved on admission, a free-memory pool fraction (``memory``) and prompt
holds a launch may enable (``scheduling``)."""

from pathlib import Path

from planner.engines.base import Engine

ENGINE = Engine(
    name="trtllm", folder=Path(__file__).parent, emitter="planner.engines.trtllm.emitter"
)
