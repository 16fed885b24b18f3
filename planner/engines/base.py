"""The engine interface: what the generic planner reads of one inference engine.

An engine is one folder (``planner/engines/<name>/``) holding, next to its ``__init__.py`` that
defines ``ENGINE``:

- ``constants.yaml``: its defaults and fitted serving-model constants, each with its ``source``
  (``planner.engine_calibration.EngineCalibration``);
- ``flags.yaml``: its flag spellings per version (``planner.emitters.flag_table``);
- ``capabilities.yaml``: the worker shapes it can launch and the checkpoint formats it runs
  (``planner.emitters.capabilities``);
- ``args.yaml``: its own argument lists, read from its source by ``python -m
  lab.engine_args.extract`` (``planner.emitters.engine_args``);
- an emitter module with ``build(ctx, flags) -> EngineBuild`` (``planner.emitters.bundle``).

Its scheduling and KV-pool policies are values and callables of :class:`Engine` that the serving
model reads (``planner.batch_eval``); the serving model never names an engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np


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

    def file(self, name: str) -> Path:
        """Path of the engine's data file ``name`` (``constants.yaml``, ``flags.yaml``...)."""
        return self.folder / name
