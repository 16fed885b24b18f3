"""Load and validate the JSON that ``planner plan --format json`` prints (a plan file).

Only the fields the emitters need are checked; other fields written by the plan command
are kept in ``raw`` and ignored here, so the plan format can grow without breaking emit.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from planner.deployment import Deployment
from planner.emitters.types import Workload
from planner.errors import PlannerInputError

_PLAN = ConfigDict(frozen=True, extra="ignore")


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


def _error_line(exc: ValidationError) -> PlannerInputError:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "plan"
    if err["type"] == "missing":
        return PlannerInputError("plan", f"not a plan file: missing field {where!r}")
    return PlannerInputError(f"plan.{where}", err["msg"])


def parse_plan(data: Any) -> PlanFile:
    """Validate a decoded plan; any problem is one PlannerInputError naming the field."""
    if not isinstance(data, dict):
        raise PlannerInputError("plan", f"not a plan file: expected a JSON object, got {type(data).__name__}")
    try:
        plan = PlanFile.model_validate(data)
    except ValidationError as exc:
        raise _error_line(exc) from None
    if plan.workload.concurrency is None and plan.workload.rate is None:
        raise PlannerInputError("plan.workload", "needs a concurrency or a rate to benchmark")
    return plan


def load_plan(path: str | Path) -> PlanFile:
    """Read a plan file from disk."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise PlannerInputError("plan", f"cannot read {path}: {exc.strerror}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PlannerInputError("plan", f"{path} is not JSON: {exc.msg} at line {exc.lineno}") from None
    return parse_plan(data)
