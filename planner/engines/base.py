"""The engine interface: what the generic planner reads of one inference engine.

An engine is one folder (``planner/engines/<name>/``) holding, next to its ``__init__.py`` that
defines ``ENGINE``:

- ``constants.yaml``: its defaults and fitted serving-model constants, each with its ``source``
  (``planner.engines.calibration.EngineCalibration``);
- ``flags.yaml``: its flag spellings per version (``planner.emitters.flag_table``);
- ``capabilities.yaml``: the worker shapes it can launch and the checkpoint formats it runs
  (``planner.emitters.capabilities``);
- ``args.yaml``: its own argument lists, read from its source by ``python -m
  lab.engine_args.extract`` (``planner.emitters.engine_args``);
- ``per_rank.yaml``: which of its flags count one attention-DP rank and which the whole server,
  each with the engine source that says so (``planner.emitters.per_rank``);
- an emitter module with ``build(ctx, flags) -> EngineBuild`` (``planner.emitters.bundle``).

Its scheduling and KV-pool policies are values and callables of :class:`Engine` that the serving
model reads (``planner.perf.batch``); the serving model never names an engine.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from typing import Protocol

import numpy as np


class KvPool(IntEnum):
    """How an engine sizes its KV pool at its default memory flag."""

    VLLM = 0
    """``gpu_memory_utilization`` 0.9 of the device: KV = 0.9 x device - weights - activations -
    reserve (vllm/v1/worker/gpu_worker.py ``determine_available_memory``: requested memory
    total x utilization minus the profiled non-KV memory; vllm-project/vllm @35d5cda)."""
    TRTLLM = 1
    """``KvCacheConfig.free_gpu_memory_fraction`` 0.9 of the memory free after the weights and
    the profiled peak: KV = 0.9 x (device - weights - activations - reserve)."""
    SGLANG = 2
    """``mem_fraction_static`` from ``ServerArgs._handle_gpu_memory_settings`` (SGLang >= 0.5.3):
    KV = fraction x device - weights - CUDA context and NCCL (the replay applies it only with
    ``planner.engines.sglang.replay.AT_DEFAULT``)."""
    SGLANG_052 = 3
    """``mem_fraction_static`` from ``ServerArgs.__post_init__`` of SGLang <= 0.5.2."""
    DEVICE = 0
    """A share of the device (the planner's own budget, ``gpu_memory_utilization``): ``VLLM``."""


class PromptHolds(Protocol):
    """A scheduler that holds a waiting prompt back for a while before its prefill (e.g. to batch
    it with others): the mean time it adds to the prompt's TTFT, in the serving model's fixed
    point (``serving.solve_agg``)."""

    def add_wait(
        self,
        overhead_s: np.ndarray,
        rate: np.ndarray,
        t_step: np.ndarray,
        dp: np.ndarray,
        isl: np.ndarray,
        decode: np.ndarray,
    ) -> np.ndarray:
        """``overhead_s`` (s per request) plus the mean hold of a prompt (s), given the arrival
        ``rate`` (requests/s), the decode step time ``t_step`` (s), the attention-DP ranks ``dp``,
        the prompt's computed tokens ``isl`` and the requests decoding per step ``decode``."""
        ...


MaybeArray = np.ndarray | None
HoldsFactory = Callable[[MaybeArray, MaybeArray, MaybeArray], PromptHolds]
"""Builds an engine's ``PromptHolds`` from a launch's recorded hold settings."""


@dataclass(frozen=True)
class Engine:
    """One inference engine as the planner sees it (see the module docstring)."""

    name: str
    """The ``--backend`` value."""
    folder: Path
    """The folder holding its YAML files."""
    emitter: str
    """Module whose ``build(ctx, flags)`` writes its launch commands."""
    prefill_first: str | None = None
    """Why it runs a waiting prompt's prefill as a batch of its own before any decode step
    (decodes stall while prompts wait), with the source; None: it mixes prefill chunks into
    decode steps. A fixed-length benchmark whose clients start together stays in lockstep on such
    an engine (``serving.lockstep_agg``)."""

    kv_dtype_follows_weights: bool = False
    """Whether its default KV-cache dtype follows the checkpoint's (FP8 KV with FP8 or FP4
    weights); False: BF16 unless a launch sets it."""
    result_names: tuple[str, ...] = ()
    """Words that name this engine in a result table's framework column (lower case, matched
    inside the text; e.g. MLPerf's "TensorRT")."""
    replay_pool: Callable[[object, bool], int] | None = None
    """How a measured launch sized its KV pool, given the engine version it ran and whether it
    records the engine's own memory flag: a ``planner.engines.kv_pool.KvPool`` value; None: a
    share of the device (``KvPool.DEVICE``)."""
    replay_chunk: Callable[[float, object], int] | None = None
    """The prefill chunk (tokens) a measured launch ran at when it records none, given the GPU's
    memory (bytes) and the engine version; None: the engine's ``max_num_batched_tokens``."""
    launch_holds: HoldsFactory | None = None
    """The prompt holds a measured launch enabled, from the steps and tokens it records per
    candidate (attention-DP balance steps, batch-wait steps, batch-wait tokens; None where
    unset); None: the engine has no such scheduler setting."""

    def file(self, name: str) -> Path:
        """Path of the engine's data file ``name`` (``constants.yaml``, ``flags.yaml``...)."""
        return self.folder / name
