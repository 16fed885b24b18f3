"""Load and validate the JSON that ``planner plan --format json`` prints (a plan file).

Only the fields the emitters need are checked; other fields written by the plan command
are kept in ``raw`` and ignored here, so the plan format can grow without breaking emit.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from planner.emitters.types import PrefixCaching, Workload
from planner.errors import PlannerInputError
from planner.model.bundled import check_model_id, find_bundled, load_model
from planner.perf.deployment import Deployment, Speculative
from planner.plan_io import read_plan_json, validate_plan

_PLAN = ConfigDict(frozen=True, extra="ignore")
MAX_NAME_CHARS = 200
MAX_EMIT_REPLICAS = 1_024
"""Most replicas of one role a launch.sh starts (one server line each)."""


class Best(BaseModel):
    """The recommended deployment and what the planner predicts for it."""

    model_config = _PLAN
    deployment: Deployment = Field(description="The recommended deployment.")
    predicted: dict[str, object] = Field(default_factory=dict, description="Predicted metrics.")
    gpus: int = Field(ge=1, description="GPUs of the deployment.")
    cost_per_million_output_tokens: float | None = Field(
        default=None, description="USD per million output tokens; None without a price."
    )
    speculative: Speculative | None = Field(
        default=None, description="Speculative decoding the deployment runs; None: off."
    )


class PlanFile(BaseModel):
    """The parts of a plan file the emitters read."""

    model_config = _PLAN
    model: str = Field(description="Model name.")
    gpu: str = Field(description="GPU key.")
    workload: Workload = Field(description="The load the plan was sized for.")
    best: Best = Field(description="The recommendation.")
    prefix_cache: PrefixCaching | None = Field(
        default=None, description="Prefix caching the plan priced; None: not priced."
    )


def _check_text(field: str, value: str) -> None:
    """A display name that reaches scripts and reports: printable, one line, bounded."""
    if not value or len(value) > MAX_NAME_CHARS or not value.isprintable():
        raise PlannerInputError(
            field,
            f"{value[:80]!r} must be 1-{MAX_NAME_CHARS} printable "
            "characters on one line (no control characters)",
        )


def parse_plan(data: object) -> PlanFile:
    """Validate a decoded plan; any problem is one PlannerInputError naming the field.

    The model's identity (``best.deployment.hf_id``) must be present and be an HF id or a local
    path: a plan made from a local config.json without ``--model-id`` cannot be emitted.
    """
    plan = validate_plan(data, PlanFile)
    dep = plan.best.deployment
    for role in ("agg", "prefill", "decode"):
        worker = getattr(dep, role)
        if worker is not None and worker.workers > MAX_EMIT_REPLICAS:
            raise PlannerInputError(
                f"plan.best.deployment.{role}.workers",
                f"at most {MAX_EMIT_REPLICAS:,} replicas per role can be "
                f"emitted, got {worker.workers:,}",
            )
    if plan.workload.concurrency is None and plan.workload.rate is None:
        raise PlannerInputError("plan.workload", "needs a concurrency or a rate to benchmark")
    dep = plan.best.deployment
    for field, value in (
        ("plan.model", plan.model),
        ("plan.gpu", plan.gpu),
        ("plan.best.deployment.model", dep.model),
        ("plan.best.deployment.gpu", dep.gpu),
    ):
        _check_text(field, value)
    if not dep.hf_id:
        raise PlannerInputError(
            "plan.best.deployment.hf_id",
            f"model {dep.model!r} has no "
            "identity (HF id or weights path); re-run `planner plan` with "
            "--model-id naming the weights of the local config.json",
        )
    check_model_id(dep.hf_id, "plan.best.deployment.hf_id")
    bundled = find_bundled(dep.hf_id)
    if not dep.checkpoint_quant and bundled is not None and bundled.hf_id == dep.hf_id:
        # a plan file from before the format was recorded: the bundled checkpoint's own format
        fmt = load_model(bundled.hf_id).quant.weight_format
        best = plan.best.model_copy(
            update={"deployment": dep.model_copy(update={"checkpoint_quant": fmt})}
        )
        plan = plan.model_copy(update={"best": best})
    return plan


def load_plan(path: str | Path) -> PlanFile:
    """Read a plan file from disk."""
    return parse_plan(read_plan_json(path, "plan"))
