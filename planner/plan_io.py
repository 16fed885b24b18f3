"""Reading plan files (the JSON ``planner plan --format json`` prints),
shared by emit and report."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from hardware.errors import PlannerInputError
from hardware.input_files import read_json

T = TypeVar("T", bound=BaseModel)


def read_plan_json(path: str | Path, field: str = "--plan") -> object:
    """Decode a plan file; unreadable or non-JSON files are one-line input errors."""
    return read_json(path, "plan.json", field)


def validate_plan(data: object, model: type[T]) -> T:
    """Validate a decoded plan against ``model``; the first problem becomes one error naming the
    field."""
    if not isinstance(data, dict):
        raise PlannerInputError(
            "plan", f"not a plan file: expected a JSON object, got {type(data).__name__}"
        )
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "plan"
        if err["type"] == "missing":
            raise PlannerInputError("plan", f"not a plan file: missing field {where!r}") from None
        raise PlannerInputError(f"plan.{where}", err["msg"]) from None
