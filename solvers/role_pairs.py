"""Disaggregated blocks of a plan request over the GPU types asked for: each type's prefill and
decode sets priced once, then combined into same-type pairs and pairs of two types (a pair less
the workers the other type beats, ``solvers.disagg.cross_type_pruned``)."""

from __future__ import annotations

from hardware.spec import GpuSpec
from planner.model.spec import ModelSpec
from solvers.candidates import Block, Edge, Load
from solvers.disagg import (
    DecodeSet,
    PrefillSet,
    combine,
    cross_type_pruned,
    decode_levels,
    decode_set,
    disagg_block,
    prefill_set,
)
from solvers.plan_models import PlanRequest
from solvers.rate_pd import rate_disagg_block, rate_levels
from solvers.space import SearchSpace

RoleSets = tuple[list[PrefillSet | None], list[DecodeSet | None]]
"""Per GPU type asked for (request order): its prefill set and its decode set (None: no worker
of that role fits)."""


def role_sets(model: ModelSpec, gpus: list[GpuSpec], space: SearchSpace, load: Load) -> RoleSets:
    """Each GPU type's prefill workers and decode points, priced once: a P/D pair of two types
    combines one type's prefill set with the other's decode set."""
    levels = decode_levels(space, load) if load.rate_per_s is None else rate_levels(space)
    pre = [prefill_set(model, g, gi, space, load) for gi, g in enumerate(gpus)]
    dec = [decode_set(model, g, gi, space, load, levels) for gi, g in enumerate(gpus)]
    return pre, dec


def disagg_blocks(
    model: ModelSpec,
    req: PlanRequest,
    gpus: list[GpuSpec],
    gi: int,
    space: SearchSpace,
    load: Load,
    roles: RoleSets,
    edge: Edge | None,
    milp: dict[str, object],
) -> list[Block | None]:
    """Disaggregated blocks with decode on ``gpus[gi]``: prefill on the same type first, then on
    each other type asked for (a pair of types; the MILP details of each under its type key)."""
    gpu, out = gpus[gi], []
    price = req.price_per_gpu_hour or gpu.price_per_gpu_hour_usd
    for pi in [gi] + [k for k in range(len(gpus)) if k != gi]:
        pre, dec = roles[0][pi], roles[1][gi]
        pre_price = req.price_per_gpu_hour or gpus[pi].price_per_gpu_hour_usd
        rival_p, rival_d = roles[0][gi], roles[1][pi]
        if pi != gi and pre and dec and rival_p and rival_d:
            by_cost = req.objective == "cost"
            prices = (pre_price, price) if by_cost else (1.0, 1.0)
            pre, dec = cross_type_pruned(pre, dec, (rival_p, rival_d), prices)
        sets = combine(pre, dec)
        if sets is None:
            continue
        if req.rate_per_s is None:
            out.append(disagg_block(model, gpu, gi, space, load, req.tpot_ms, sets))
            continue
        slo = (req.ttft_ms, req.tpot_ms, req.percentile)
        b, sol = rate_disagg_block(model, gpu, gi, space, load, *slo, price, edge, sets, pre_price)
        out.append(b)
        if sol is not None:
            key = gpu.key if pi == gi else f"{gpus[pi].key}+{gpu.key}"
            milp[key] = {
                "solver": sol.outcome.solver,
                "status": sol.outcome.status,
                "solution_status": sol.outcome.solution_status,
                "prefill_workers": sol.x,
                "decode_workers": sol.y,
                "gpus": sol.gpus,
            }
    return out
