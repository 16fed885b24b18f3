"""Engine configs from a plan: vLLM, SGLang and TensorRT-LLM launch lines, YAML, benchmark, PLAN.md.

Engine names appear only in this package. Flag spellings live in ``flags.yaml``.
"""

from planner.emitters.bundle import build_bundle, write_engine_configs, write_files
from planner.emitters.flag_table import ENGINES

__all__ = ["ENGINES", "build_bundle", "write_engine_configs", "write_files"]
