"""Per-engine calibration constants (``planner/calibration/engines.yaml``), each with its source.

``step_overhead_s``: CPU-side time per step not hidden behind the GPU (scheduling, sampling,
detokenization, CUDA-graph replay); ``kernel_scale``: achieved kernel time / our priced kernel time
for that engine's kernels; ``request_overhead_s``: per-request time added to TTFT outside the steps
(HTTP, tokenization, scheduler admission); ``disagg_request_overhead_s``: the same for a
disaggregated deployment, whose requests also cross the router/proxy to a prefill worker and back
and set up a KV transfer; ``burst_fraction``: share b of a closed-loop run's requests that arrive in
a lockstep wave (benchmark clients start together; fixed OSL keeps them aligned) — 1/W for a run of
W waves — which wait for (N-1)/2 prefills queued ahead instead of the steady-state wait
(``queueing.wave_mix_response``); ``disagg_burst_fraction``: the same for disaggregated deployments,
whose calibration rows come from other measurement campaigns (other benchmark harnesses). Both stand
for a benchmark protocol the calibration data do not record; a workload that names its run length
(``Workload.bench_requests``) replaces them. Units, bounds and the fitting command of each:
``planner.validation.fit_engines.CONSTANTS``, written next to every value in engines.yaml. Engine
names appear only here and in the emitters.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from hardware.errors import PlannerInputError

Backend = Literal["vllm", "sglang", "trtllm"]
BACKENDS: tuple[Backend, ...] = ("vllm", "sglang", "trtllm")
ENGINES_FILE = Path(__file__).with_name("calibration") / "engines.yaml"
_FROZEN = ConfigDict(frozen=True, extra="forbid")
ENGINE_DEFAULTS: tuple[str, ...] = (
    "max_num_batched_tokens",
    "max_num_seqs",
    "kv_held_osl_fraction",
)
"""Fields of :class:`EngineCalibration` that are the engine's own settings and policies (from its
documentation), not fitted constants."""


class Sourced(BaseModel):
    """A number and where it came from; a fitted constant also names its unit and bounds."""

    model_config = _FROZEN
    value: float = Field(description="the number, in ``unit``")
    source: str = Field(
        min_length=1, description="what it is and which command fitted it on which data"
    )
    unit: str | None = Field(default=None, description="unit of ``value`` (fitted constants)")
    bounds: tuple[float, float] | None = Field(
        default=None, description="physical range [lo, hi] of ``value``"
    )

    @model_validator(mode="after")
    def _inside_bounds(self) -> Sourced:
        if self.bounds is not None and not self.bounds[0] <= self.value <= self.bounds[1]:
            raise ValueError(f"value {self.value} outside bounds {list(self.bounds)}")
        return self


PREFILL_FIRST: dict[str, str] = {
    "sglang": "SGLang runs a waiting prompt's prefill as a batch of its own before any decode step "
    "(managers/scheduler.py get_next_batch_to_run: get_new_batch_prefill first, the running "
    "decode batch only when no prefill batch forms) and mixes prefill chunks into decode steps "
    "only with --enable-mixed-chunk (server_args.py, default False)",
}
"""Engines that do not mix prefill into decode steps by default, each with its source. Their
decodes stall while any prompt waits, so N benchmark clients with fixed lengths that start together
stay in lockstep for the whole run (``serving.solve_agg``)."""


def prefill_first(backend: str) -> bool:
    """Whether ``backend`` runs prefill batches before, not inside, decode steps
    (``PREFILL_FIRST``)."""
    return backend in PREFILL_FIRST


class EngineCalibration(BaseModel):
    """Calibration of one engine."""

    model_config = _FROZEN
    step_overhead_s: Sourced = Field(
        description="CPU time per engine step not hidden behind the GPU, s."
    )
    kernel_scale: Sourced = Field(
        description="Achieved / priced kernel time of the engine's kernels."
    )
    request_overhead_s: Sourced = Field(
        description="Time to first token outside the engine steps (aggregated), s per request."
    )
    disagg_request_overhead_s: Sourced = Field(
        description="The same for a disaggregated deployment, s per request."
    )
    burst_fraction: Sourced = Field(
        description="Share of a closed-loop run's requests in its first lockstep wave (aggregated)."
    )
    disagg_burst_fraction: Sourced = Field(description="The same for disaggregated deployments.")
    disagg_prefill_kernel_scale: Sourced = Field(
        default=Sourced(
            value=1.0,
            unit="1",
            bounds=(0.25, 4.0),
            source="a disaggregated prefill worker's kernel time relative to kernel_scale (1: the "
            "same); a user's profile that fits kernel_scale to decode (TPOT) keeps the prefill "
            "worker at the packaged kernel time (planner.calibration_profile.with_constants)",
        ),
        description="Disaggregated prefill worker's kernel time relative to kernel_scale.",
    )
    max_num_batched_tokens: Sourced = Field(
        description="The engine's default token budget per step."
    )
    max_num_seqs: Sourced = Field(description="The engine's default cap on running requests.")
    kv_held_osl_fraction: Sourced = Field(
        description="Share of the answer's KV a running request holds on average (KV-capacity "
        "count: a request holds ISL + this x OSL); set by the engine's KV allocation policy"
    )

    def step_kwargs(self) -> dict[str, float]:
        """``kernel_scale`` and ``overhead_s`` for ``step_model.step_time`` / ``price_step``."""
        return {"kernel_scale": self.kernel_scale.value, "overhead_s": self.step_overhead_s.value}

    def model_constants(self) -> tuple[str, ...]:
        """Names of the fitted serving-model constants (the engine defaults excluded)."""
        return tuple(f for f in type(self).model_fields if f not in ENGINE_DEFAULTS)


@lru_cache(maxsize=4)
def load_engines(path: Path = ENGINES_FILE) -> dict[str, EngineCalibration]:
    """All engines' calibration from ``path``."""
    raw = yaml.safe_load(path.read_text())
    return {name: EngineCalibration.model_validate(v) for name, v in raw.items()}


_ACTIVE: ContextVar[Mapping[str, tuple[EngineCalibration, str]] | None] = ContextVar(
    "planner_engine_calibration", default=None
)
"""Engines replaced by a user's calibration profile (``--calibration``), each with the profile's
name; see :func:`use_calibration`. A context variable: a command sets it for its process, and a
UI session's plan (its own thread) sets it for that plan only (:func:`calibrated`)."""


def use_calibration(engines: Mapping[str, EngineCalibration], label: str) -> None:
    """From now on :func:`engine` returns ``engines[b]`` for each ``b`` given (a user's profile,
    ``planner.calibration_profile``); ``label`` names it in provenance. An empty mapping resets."""
    _ACTIVE.set({b: (cal, label) for b, cal in engines.items()})


@contextmanager
def calibrated(engines: Mapping[str, EngineCalibration], label: str) -> Iterator[None]:
    """:func:`use_calibration` inside the ``with`` block only (the previous state after it)."""
    token = _ACTIVE.set({b: (cal, label) for b, cal in engines.items()})
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def calibration_label(backend: str) -> str:
    """Where ``backend``'s constants come from: the active profile or the packaged file."""
    active = (_ACTIVE.get() or {}).get(backend)
    return active[1] if active else "planner/calibration/engines.yaml"


def engine(backend: str) -> EngineCalibration:
    """Calibration of ``backend`` (a profile set by :func:`use_calibration` first); unknown names
    are an input error listing the choices."""
    active = (_ACTIVE.get() or {}).get(backend)
    if active is not None:
        return active[0]
    engines = load_engines()
    if backend not in engines:
        raise PlannerInputError("--backend", f"'{backend}' not one of {sorted(engines)}")
    return engines[backend]
