"""Worker shapes an engine is reported to crash on: the ``known_failures`` list of the engine's
``capabilities.yaml``, each entry with its upstream citation. The planner's search leaves these
shapes out and the emitters refuse them (``planner.emitters.capabilities.check_shape``)."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field

from hardware.input_files import read_packaged_yaml
from planner.engines.registry import engine_names, get_engine
from planner.errors import PlannerInputError
from planner.perf.deployment import Parallelism


class KnownFailure(BaseModel):
    """A worker shape an engine is reported to crash on: refused, with its citation."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    at_least: dict[Literal["tp", "pp", "dp", "ep"], int] = Field(
        min_length=1,
        description="Refused when every named parallelism size is at least this (e.g. pp: 2).",
    )
    what: str = Field(min_length=1, description="The failure, in words.")
    source: str = Field(min_length=1, description="Upstream report: repository and issue number.")

    def matches(self, p: Parallelism) -> bool:
        """Does worker shape ``p`` fall in this failure?"""
        return all(getattr(p, k) >= v for k, v in self.at_least.items())


@cache
def _failures(path: Path) -> tuple[KnownFailure, ...]:
    raw = cast(dict[str, Any], read_packaged_yaml(path) or {})
    return tuple(KnownFailure.model_validate(f) for f in raw.get("known_failures") or [])


def known_failures(engine: str) -> tuple[KnownFailure, ...]:
    """The worker shapes ``engine`` is reported to crash on (its table's ``known_failures``)."""
    if engine not in engine_names():
        raise PlannerInputError(
            "--backend", f"'{engine}' is not one of {', '.join(engine_names())}"
        )
    return _failures(get_engine(engine).file("capabilities.yaml"))


def failure_of(engine: str, par: Parallelism) -> KnownFailure | None:
    """The first known failure of ``engine`` that worker shape ``par`` falls in, or None."""
    return next((f for f in known_failures(engine) if f.matches(par)), None)
