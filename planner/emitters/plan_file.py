"""Load and validate the JSON that ``planner plan --format json`` prints (a plan file).

Only the fields the emitters need are checked; other fields written by the plan command
are kept in ``raw`` and ignored here, so the plan format can grow without breaking emit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from planner.deployment import Deployment
from planner.emitters.types import Workload
from planner.errors import PlannerInputError
from planner.plan_io import read_plan_json, validate_plan

_PLAN = ConfigDict(frozen=True, extra="ignore")
MAX_EMIT_REPLICAS = 1_024
"""Most replicas of one role a launch.sh starts (one server line each)."""


class Best(BaseModel):
    """The recommended deployment and what the planner predicts for it."""

    model_config = _PLAN
    deployment: Deployment
    predicted: dict[str, Any] = Field(default_factory=dict, description="Predicted metrics.")
    gpus: int = Field(ge=1)
    cost_per_million_output_tokens: float | None = None


class PlanFile(BaseModel):
    """The parts of a plan file the emitters read."""

    model_config = _PLAN
    model: str
    gpu: str
    workload: Workload
    best: Best


def parse_plan(data: Any) -> PlanFile:
    """Validate a decoded plan; any problem is one PlannerInputError naming the field."""
    plan = validate_plan(data, PlanFile)
    dep = plan.best.deployment
    for role in ("agg", "prefill", "decode"):
        worker = getattr(dep, role)
        if worker is not None and worker.workers > MAX_EMIT_REPLICAS:
            raise PlannerInputError(f"plan.best.deployment.{role}.workers",
                                    f"at most {MAX_EMIT_REPLICAS:,} replicas per role can be "
                                    f"emitted, got {worker.workers:,}")
    if plan.workload.concurrency is None and plan.workload.rate is None:
        raise PlannerInputError("plan.workload", "needs a concurrency or a rate to benchmark")
    return plan


def load_plan(path: str | Path) -> PlanFile:
    """Read a plan file from disk."""
    return parse_plan(read_plan_json(path, "plan"))
