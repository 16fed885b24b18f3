"""Launch capabilities (each engine's ``capabilities.yaml``): the worker shapes an engine can
express and the checkpoint formats it runs on each GPU architecture.

Two users: ``planner plan --backend B`` limits its search with :func:`shape_rules`, and every
emitter asks :func:`quant_flag` which ``--quantization`` value (usually none: engines read the
format from the checkpoint) to emit, refusing a combination the engine cannot run.

The solvers never read these files by engine name: `planner plan --backend B` turns its
`shapes` block into an engine-neutral planner.perf.deployment.ShapeRules that limits the search.

Planner parallelism (planner/perf/deployment.py Parallelism): a worker has tp*pp*dp GPUs; attention
runs TP `tp` inside each of `dp` attention-DP ranks; MoE experts are spread over the tp*dp ranks
of a pipeline stage in `ep` expert groups of moe_tp = tp*dp/ep GPUs each.

shapes.expert_parallel: "divides" = any ep dividing tp*dp is launchable;
                        "all_ranks" = ep is either 1 (experts tensor-parallel over all tp*dp
                        ranks) or tp*dp (one expert group per rank).
shapes.attention_dp_tp: "any" = attention-DP ranks may run attention with TP > 1;
                        "one" = with attention DP on, attention runs at TP 1 (dp == tp*dp).
shapes.multi_node_dp: a worker wider than one host with attention DP: "any" = one distributed
                      group over all its GPUs, launched once per host; "rank_per_host" = each
                      host runs whole DP ranks (tp*pp GPUs of a rank inside one host).
shapes.multi_node_source: how the engine starts one worker on several hosts (the emitters write
                      one launch line per host, or one mpirun line for all of them).

known_failures: worker shapes the engine is reported to crash on (each with its upstream issue):
  a shape is refused when every parallelism named in `at_least` is at least that size (e.g.
  {pp: 2, dp: 2, ep: 2}: PP with attention DP and expert parallelism). `planner plan` does not
  search them (solvers.space.legal_splits) and the emitters refuse a plan that holds one.

quant.checkpoint: checkpoint weight format (planner/model/quantization.py WeightFormat) -> GPU
  architectures (hardware/specs/*.yaml `architecture`) the engine runs it on. The engine reads
  the format from the checkpoint, so no flag is emitted. A format or architecture not listed is
  refused, with the reason, rather than emitted.
quant.online: planner weight dtype -> the engine's --quantization value that quantizes a bf16
  checkpoint while loading it; absent = the engine needs a pre-quantized checkpoint.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import NotRequired, TypedDict, cast

from hardware.input_files import read_packaged_yaml
from planner.engines import engine_names, get_engine
from planner.engines.capabilities import failure_of
from planner.errors import PlannerInputError
from planner.perf.deployment import Deployment, Parallelism, ShapeRules

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
    known_failures: NotRequired[list[dict[str, object]]]


@cache
def _caps(path: Path) -> EngineCaps:
    caps = cast(EngineCaps, read_packaged_yaml(path))
    return caps


def _engine(engine: str) -> EngineCaps:
    if engine not in engine_names():
        raise PlannerInputError(
            "--backend", f"'{engine}' is not one of {', '.join(engine_names())}"
        )
    return _caps(get_engine(engine).file("capabilities.yaml"))


def shape_rules(engine: str) -> ShapeRules:
    """The engine-neutral shape rules of ``engine``."""
    return ShapeRules.model_validate(_engine(engine)["shapes"])


def check_shape(engine: str, role: str, par: Parallelism, node_gpus: int | None = None) -> None:
    """Refuse a worker shape ``engine`` cannot launch (a plan made for another engine) or is
    reported to crash on; ``node_gpus``: GPUs per host, for the multi-node rule."""
    problem = shape_rules(engine).problem(par, node_gpus)
    failure = failure_of(engine, par)
    if problem is None and failure is not None:
        problem = f"{engine} is reported to fail on it: {failure.what} ({failure.source})"
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
