"""``plan(request) -> PlanResult``: the planner's recommendation (library API for the CLI and
the UI).

Usage::

    from solvers.plan import PlanRequest, plan
    result = plan(PlanRequest(model="llama-3.1-70b", gpus=("h200",), max_gpus=8, isl=4000, osl=500,
                              ttft_ms=1000, tpot_ms=30, percentile="p90"))
    result.best.deployment, result.best.predicted, result.pareto, result.binding_constraint
    # the JSON ``planner plan --format json`` prints (read by planner.emitters):
    result.to_plan_dict()

Steps: enumerate the space per GPU type (:mod:`solvers.space`), prune by memory
(:mod:`planner.perf.memory`), predict every candidate deployment with
:func:`planner.perf.batch.evaluate_batch` - the model behind ``planner estimate``, so a plan
predicts exactly what ``estimate`` predicts for the same deployment (:mod:`solvers.candidates`,
:mod:`solvers.disagg`) - keep those meeting both SLOs at the requested percentile, rank by the
objective, build the Pareto front of tok/s/GPU vs tok/s/user, name the binding constraint
(:mod:`solvers.explain`). With a rate, disaggregated worker counts come from the MILP
(:mod:`solvers.pd_milp`). Infeasible requests raise InfeasibleError (CLI: one line, exit 2).
"""

from __future__ import annotations

import time

import numpy as np

from planner.uncertainty.bands import Bands
from solvers.binding import explain_binding, per_gpu_type, top_candidates
from solvers.hetero import role_types
from solvers.pareto import pareto_indices
from solvers.plan_core import Evaluated, evaluate_request, pick_best
from solvers.plan_models import (
    Choice,
    Objective,
    ParetoPoint,
    Percentile,
    PlanRequest,
    PlanResult,
)

__all__ = [
    "Choice",
    "Objective",
    "ParetoPoint",
    "Percentile",
    "PlanRequest",
    "PlanResult",
    "plan",
]
PARETO_MAX_POINTS = 40


def _workload(req: PlanRequest, ev: Evaluated, i: int) -> dict[str, object]:
    conc = req.concurrency
    if conc is None and req.rate_per_s is None:
        conc = ev.total_clients(i)
    rate = req.rate_per_s if req.rate_per_s is not None else float(ev.rps[i])
    return {
        "isl": req.isl,
        "osl": req.osl,
        "max_isl": req.max_isl or req.isl,
        "max_osl": req.max_osl or req.osl,
        "concurrency": conc,
        "rate": rate,
        "load": "rate"
        if req.rate_per_s
        else "concurrency"
        if req.concurrency
        else "max-throughput-per-gpu",
    }


def _front(ev: Evaluated, ok: np.ndarray, best: int) -> np.ndarray:
    """The Pareto front of the feasible candidates (at most ``PARETO_MAX_POINTS``, evenly picked);
    when the recommendation is on it, it is its own point (not an equal-scoring twin with other
    settings) and is always kept."""
    sel = np.flatnonzero(ok)
    sel = np.concatenate([[best], sel[sel != best]])  # ties on the front keep the first point
    front = sel[pareto_indices(ev.tok_per_gpu[sel], ev.tok_per_user[sel])]
    if front.size > PARETO_MAX_POINTS:
        keep = np.linspace(0, front.size - 1, PARETO_MAX_POINTS).round().astype(int)
        front = front[np.union1d(keep, np.flatnonzero(front == best))]
    return front


def _pareto(ev: Evaluated, front: np.ndarray) -> tuple[ParetoPoint, ...]:
    rate = ev.req.rate_per_s is not None
    return tuple(
        ParetoPoint(
            mode=ev.mode_of(i),
            gpu=ev.gpu_of(i),
            **_roles(ev, i),
            output_tok_s_per_gpu=float(ev.tok_per_gpu[i]),
            output_tok_s_per_user=float(ev.tok_per_user[i]),
            ttft_ms=float(ev.ttft[i]),
            tpot_ms=float(ev.tpot[i]),
            gpus=int(ev.gpus[i]),
            clients_per_worker=None if rate else ev.clients_of(i) or None,
            config=ev.summary(i),
        )
        for i in front
    )


def _roles(ev: Evaluated, i: int) -> dict[str, str]:
    """``prefill_gpu`` / ``decode_gpu`` of a disaggregated candidate (none for aggregated)."""
    if ev.mode_of(i) != "disagg":
        return {}
    return {"prefill_gpu": ev.prefill_gpu_of(i), "decode_gpu": ev.gpu_of(i)}


def _at_prediction(ev: Evaluated, best: int) -> Choice | None:
    """The pick at the point prediction when the request asks for more confidence and it differs
    from ``best`` (another deployment), else None."""
    if ev.req.confidence == 0:
        return None
    ok = ev.feasible(at_prediction=True)
    if not ok.any():
        return None
    i = pick_best(ev, ok, ev.req.objective)
    return (
        None
        if ev.summary(i) == ev.summary(best) and ev.type_of(i) == ev.type_of(best)
        else ev.choice(i)
    )


def plan(req: PlanRequest, bands: Bands | None = None) -> PlanResult:
    """Search the space for ``req``, stating ``bands`` (default: the packaged band table; a
    calibration profile's own bands replace it); raises InfeasibleError when nothing meets the
    SLOs and budget."""
    t0 = time.perf_counter()
    ev = evaluate_request(req, bands=bands)
    ok = ev.feasible()
    best = pick_best(ev, ok, req.objective)
    binding = explain_binding(ev, best)
    alts: dict[str, Choice | None] = {}
    for mode in ("agg", "disagg"):
        # each mode's best, PP only where no PP-free deployment of that mode meets the request
        mask = ev.meets() & (ev.mode_code == (0 if mode == "agg" else 1))
        mask &= ~ev.pp_dropped(mask)
        alts[mode] = ev.choice(pick_best(ev, mask, req.objective)) if mask.any() else None
    front = _front(ev, ok, best)
    pareto = _pareto(ev, front)
    at_prediction = _at_prediction(ev, best)
    seconds = time.perf_counter() - t0
    return PlanResult(
        request=req,
        model=ev.model.name,
        gpu=ev.gpu_of(best),
        workload=_workload(req, ev, best),
        slo={
            "ttft_ms": req.ttft_ms,
            "tpot_ms": req.tpot_ms,
            "percentile": req.percentile,
            "confidence": req.confidence,
        },
        best=ev.choice(best),
        pareto=pareto,
        binding_constraint=binding["constraint"],
        candidates_evaluated=ev.evaluated,
        search_seconds=round(seconds, 4),
        alternatives=alts,
        milp=ev.milp_info or None,
        binding=binding,
        candidates=tuple(top_candidates(ev, ok, front)),
        per_gpu_type=per_gpu_type(ev, ok, best),
        role_types=role_types(ev, ok),
        max_gpus=req.max_gpus,
        at_prediction=at_prediction,
    )
