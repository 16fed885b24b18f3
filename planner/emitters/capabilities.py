"""Per-engine launch capabilities (``capabilities.yaml``): the worker shapes each engine can
express and the checkpoint formats it runs on each GPU architecture.

Two users: ``planner plan --backend B`` limits its search with :func:`shape_rules`, and every
emitter asks :func:`quant_flag` which ``--quantization`` value (usually none: engines read the
format from the checkpoint) to emit, refusing a combination the engine cannot run.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import NotRequired, TypedDict

import yaml

from planner.deployment import Deployment, Parallelism, ShapeRules
from planner.errors import PlannerInputError

_PLANNER_DTYPE = {
    "bf16": "bf16",
    "fp8": "fp8",
    "mxfp4": "fp4",
    "nvfp4": "fp4",
    "int4": "int4",
    "int8": "fp8",
}


class QuantCaps(TypedDict):
    """Weight formats an engine runs, per GPU architecture, and what it quantizes on load."""

    checkpoint: dict[str, list[str]]
    online: NotRequired[dict[str, str]]
    source: str


class EngineCaps(TypedDict):
    """One engine's entry of capabilities.yaml (``shapes`` holds :class:`ShapeRules` fields)."""

    shapes: dict[str, str]
    quant: QuantCaps


@cache
def _table() -> dict[str, EngineCaps]:
    text = resources.files("planner.emitters").joinpath("capabilities.yaml").read_text()
    engines: dict[str, EngineCaps] = yaml.safe_load(text)["engines"]
    return dict(engines)


def _engine(engine: str) -> EngineCaps:
    table = _table()
    if engine not in table:
        raise PlannerInputError("--backend", f"'{engine}' is not one of {', '.join(table)}")
    return table[engine]


def shape_rules(engine: str) -> ShapeRules:
    """The engine-neutral shape rules of ``engine``."""
    return ShapeRules.model_validate(_engine(engine)["shapes"])


def check_shape(engine: str, role: str, par: Parallelism, node_gpus: int | None = None) -> None:
    """Refuse a worker shape ``engine`` cannot launch (a plan made for another engine);
    ``node_gpus``: GPUs per host, for the multi-node rule."""
    problem = shape_rules(engine).problem(par, node_gpus)
    if problem is not None:
        raise PlannerInputError(
            f"plan.best.deployment.{role}.parallel",
            f"{engine} cannot launch this worker: {problem}; re-plan with --backend {engine}",
        )


def quant_flag(engine: str, dep: Deployment, weight_quant: str, architecture: str) -> str | None:
    """The ``--quantization`` value for ``engine`` (None: the engine reads the checkpoint).

    ``weight_quant`` is the planner's weight dtype of the worker; ``dep.checkpoint_quant`` the
    checkpoint's format. Refused: a format the engine cannot run on ``architecture``, and a
    planner dtype other than the checkpoint's unless the engine quantizes it while loading.
    """
    caps = _engine(engine)["quant"]
    fmt = dep.checkpoint_quant
    field = "plan.best.deployment.checkpoint_quant"
    if not fmt:
        raise PlannerInputError(
            field,
            "the plan does not record the checkpoint's weight format; "
            "re-run `planner plan` to write a current plan file",
        )
    archs = caps["checkpoint"].get(fmt, [])
    if architecture not in archs:
        where = ", ".join(archs) or "no GPU"
        raise PlannerInputError(
            field,
            f"{engine} cannot run {fmt} checkpoint {dep.hf_id} on "
            f"{architecture} GPUs ({dep.gpu}); it runs {fmt} on: {where}",
        )
    if weight_quant == _PLANNER_DTYPE[fmt]:
        return None
    online = caps.get("online") or {}
    if fmt == "bf16" and weight_quant in online:
        return str(online[weight_quant])
    raise PlannerInputError(
        "plan.best.deployment.weight_quant",
        f"the plan prices {weight_quant} weights but checkpoint {dep.hf_id} stores {fmt}; "
        f"{engine} cannot convert it while loading (online: {', '.join(online) or 'none'} from "
        "bf16); plan with the checkpoint's format or pick the checkpoint with those weights",
    )
