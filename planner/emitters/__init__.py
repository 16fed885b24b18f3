"""Engine configs from a plan: launch lines, YAML, benchmark, PLAN.md, for any known engine.

The generic machinery lives here; each engine's emitter, flag spellings and capabilities live in
its folder (``planner/engines/<name>/``).
"""

from planner.emitters.bundle import build_bundle, write_engine_configs, write_files

__all__ = ["build_bundle", "write_engine_configs", "write_files"]
