"""Per-engine calibration constants (each engine's ``constants.yaml``), each with its source.

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
``planner.replay_e2e.fit.CONSTANTS``, written next to every value in each engine's
``constants.yaml`` (``planner/engines/<name>/``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import cast

from pydantic import BaseModel, ConfigDict, Field, model_validator

from hardware.input_files import read_packaged_yaml
from planner.engines import Engine, engine_names, get_engine

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
            "worker at the packaged kernel time (planner.calibration.profile.with_constants)",
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


CONSTANTS_FILE = "constants.yaml"
"""Name of the file of an engine's folder holding its calibration (one top-level key: its name)."""


def load_file(path: Path) -> dict[str, EngineCalibration]:
    """Every engine's calibration in the file ``path`` (engine name -> its fields)."""
    raw = cast(dict[str, object], read_packaged_yaml(path))
    return {name: EngineCalibration.model_validate(v) for name, v in raw.items()}


@lru_cache(maxsize=16)
def _packaged(name: str, path: Path) -> EngineCalibration:
    """The calibration of engine ``name`` in its ``constants.yaml`` at ``path``."""
    found = load_file(path)
    if set(found) != {name}:
        raise ValueError(f"{path}: holds {sorted(found)}, not the one engine {name!r}")
    return found[name]


def packaged(name: str) -> EngineCalibration:
    """The packaged calibration of the known engine ``name`` (its folder's constants file); an
    unknown name is an input error listing the choices."""
    return _packaged(name, get_engine(name).file(CONSTANTS_FILE))


def load_engines() -> dict[str, EngineCalibration]:
    """Every known engine's packaged calibration, by name."""
    return {name: packaged(name) for name in engine_names()}


@dataclass(frozen=True)
class EnginePolicy:
    """One engine resolved for a request: what it is and does (``Engine``), the constants the
    serving model prices it with, and where those come from (provenance)."""

    engine: Engine
    calibration: EngineCalibration
    label: str
    """The constants' source: the packaged file, or the user's calibration profile."""

    @property
    def name(self) -> str:
        """The engine's ``--backend`` name."""
        return self.engine.name


@dataclass(frozen=True)
class EngineConstants:
    """Constants that replace the packaged ones for some engines (a user's calibration profile,
    ``planner.calibration.profile``), with the profile's label; empty: the packaged constants.
    A value carried by the request, so an answer depends only on its inputs."""

    engines: tuple[tuple[str, EngineCalibration], ...] = ()
    """(engine name, its constants) pairs."""
    label: str = ""

    @classmethod
    def of(cls, engines: Mapping[str, EngineCalibration], label: str) -> EngineConstants:
        """The constants ``engines`` (by engine name) labelled ``label``."""
        return cls(tuple(engines.items()), label)

    def policy(self, backend: str) -> EnginePolicy:
        """Engine ``backend`` with these constants where given, else its packaged ones; an
        unknown name is an input error listing the choices."""
        eng = get_engine(backend)
        given = dict(self.engines)
        if backend in given:
            return EnginePolicy(eng, given[backend], self.label)
        return EnginePolicy(eng, packaged(backend), packaged_label(backend))


PACKAGED = EngineConstants()
"""The packaged constants of every engine."""


def policy_of(backend: str | EnginePolicy) -> EnginePolicy:
    """``backend`` itself when resolved already, else the engine of that name with its packaged
    constants."""
    return backend if isinstance(backend, EnginePolicy) else PACKAGED.policy(backend)


def engine(backend: str) -> EngineCalibration:
    """The packaged calibration of ``backend`` (a user's profile reaches a prediction as an
    :class:`EnginePolicy`); unknown names are an input error listing the choices."""
    return packaged(backend)


def packaged_label(backend: str) -> str:
    """Provenance of ``backend``'s packaged constants: its constants file, from the repository
    root for a built-in engine."""
    return _label_of(get_engine(backend).file(CONSTANTS_FILE))


@lru_cache(maxsize=64)
def _label_of(path: Path) -> str:
    """``path`` from the repository root where it lies inside it (resolved once per path)."""
    root = Path(__file__).resolve().parents[2]
    inside = path.resolve().is_relative_to(root)
    return str(path.resolve().relative_to(root)) if inside else str(path)


def _comment_head(text: str) -> str:
    """The leading comment lines of a constants file."""
    lines = text.splitlines(keepends=True)
    n = next((i for i, line in enumerate(lines) if not line.startswith("#")), len(lines))
    return "".join(lines[:n])


def packaged_text(names: Iterable[str]) -> str:
    """The constants files of engines ``names`` as one text: the first file's leading comment,
    then each file's body, in the order given (the form the engine-constant fit renders)."""
    texts = [get_engine(n).file(CONSTANTS_FILE).read_text() for n in names]
    bodies = "".join(t[len(_comment_head(t)) :] for t in texts)
    return (_comment_head(texts[0]) if texts else "") + bodies


def split_text(text: str) -> dict[str, str]:
    """Inverse of :func:`packaged_text`: engine name -> its file's text (the shared leading
    comment, then its block)."""
    head = _comment_head(text)
    out: dict[str, str] = {}
    name = ""
    for line in text[len(head) :].splitlines(keepends=True):
        if line[:1].isalnum():
            name = line.split(":", 1)[0]
            out[name] = head
        out[name] += line
    return out
