"""Speculative decoding as a planned decision: the search runs once without it and once per
draft length of the requested method (``PlanRequest.spec_options``), and keeps the setting whose
best deployment scores highest by the request's objective. Speculating wins only where it is
strictly better: at high load the verify step over ``k + 1`` tokens per sequence turns
compute-bound (``planner.perf.spec_decode``) and the plan declines it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from hardware.errors import InfeasibleError
from planner.emitters.types import Speculative
from planner.uncertainty.bands import Bands
from planner.workload.spec import SpecDecode
from solvers.plan import plan
from solvers.plan_models import Choice, PlanRequest, PlanResult

if TYPE_CHECKING:  # capacity imports this module when it decides
    from planner.workload.traces import Trace
    from solvers.capacity import CapacityRequest, CapacityResult


def choice_score(req: PlanRequest, c: Choice) -> float:
    """The objective's value of ``c``, higher is better (``Evaluated.score`` of one choice)."""
    if req.objective == "cost":
        return -(
            c.cost_per_hour_usd if req.rate_per_s is not None else c.cost_per_million_total_tokens
        )
    if req.objective == "gpus":
        return -float(c.gpus_bought)
    return float(c.predicted["output_tok_s_per_gpu"])  # type: ignore[arg-type]


def _label(sd: SpecDecode | None) -> str:
    return "none" if sd is None else f"{sd.method} k={sd.draft_len}"


def _outcome(req: PlanRequest, sd: SpecDecode | None, res: PlanResult | None) -> dict[str, object]:
    row: dict[str, object] = {"setting": _label(sd)}
    if sd is not None:
        row |= {
            "tokens_per_step": round(sd.tokens_per_step, 3),
            "acceptance": list(sd.acceptance),
            "acceptance_source": sd.source,
        }
    if res is None:
        return row | {"feasible": False}
    return row | {
        "feasible": True,
        "score": round(choice_score(req, res.best), 6),
        "config": res.best.config,
        "tpot_ms_p50": res.best.predicted["tpot_ms"]["p50"],  # type: ignore[index]
    }


def _value(req: PlanRequest, score: object) -> str:
    """A score in the objective's units, 4 significant figures."""
    v = float(score)  # type: ignore[arg-type]
    if req.objective == "cost":
        unit = "/hour" if req.rate_per_s is not None else " per 1M total tokens"
        return f"${-v:.4g}{unit}"
    if req.objective == "gpus":
        return f"{-v:.0f} GPUs bought"
    return f"{v:.4g} output tok/s per GPU"


def _why(req: PlanRequest, win: SpecDecode | None, rows: list[dict[str, object]]) -> str:
    base = next(r for r in rows if r["setting"] == "none")
    won = next(r for r in rows if r["setting"] == _label(win))
    if win is None:
        best_spec = max(
            (r for r in rows if r["feasible"] and r["setting"] != "none"),
            key=lambda r: float(r["score"]),  # type: ignore[arg-type]
            default=None,
        )
        if best_spec is None:
            return "no speculative setting meets the SLOs within the budget; planned without"
        return (
            f"declined: the best speculative setting, {best_spec['setting']}, gives "
            f"{_value(req, best_spec['score'])} against {_value(req, base['score'])} without "
            "(at this load the verify step over k+1 tokens per sequence costs more than the "
            "accepted tokens save)"
        )
    if not base["feasible"]:
        return f"{won['setting']}: nothing meets the SLOs within the budget without it"
    return (
        f"{won['setting']} ({won['tokens_per_step']} tokens per step) gives "
        f"{_value(req, won['score'])} against {_value(req, base['score'])} without"
    )


def plan_with_spec(req: PlanRequest, bands: Bands | None = None) -> PlanResult:
    """``plan`` with speculative decoding decided (``req.spec_options``; none: plain ``plan``)."""
    if not req.spec_options:
        return plan(req, bands)
    settings: list[SpecDecode | None] = [None, *req.spec_options]
    results: list[PlanResult | None] = []
    errors: list[InfeasibleError] = []
    for sd in settings:
        try:
            results.append(
                plan(req.model_copy(update={"spec_decode": sd, "spec_options": ()}), bands)
            )
        except InfeasibleError as exc:
            results.append(None)
            errors.append(exc)
    if all(r is None for r in results):
        raise errors[0]
    rows = [_outcome(req, sd, r) for sd, r in zip(settings, results, strict=True)]
    # the first strictly best: none unless a speculative setting scores higher
    best_i = max(
        (i for i, r in enumerate(results) if r is not None),
        key=lambda i: (choice_score(req, results[i].best), -i),  # type: ignore[union-attr]
    )
    win, res = settings[best_i], results[best_i]
    assert res is not None
    spec = (
        None
        if win is None
        else Speculative(method=win.method, draft_tokens=win.draft_len, draft_model=win.draft_model)
    )
    decision = {"chosen": _label(win), "why": _why(req, win, rows), "options": rows}
    return res.model_copy(
        update={
            "request": req,
            "best": res.best.model_copy(update={"speculative": spec}),
            "speculative_decision": decision,
        }
    )


def capacity_with_spec(
    trace: Trace, req: CapacityRequest, size: Callable[[Trace, CapacityRequest], CapacityResult]
) -> CapacityResult:
    """``size`` (one capacity sizing) without speculative decoding and with each of
    ``req.spec_options``; the autoscaled fleet with the fewest windows missing the SLO, then the
    lowest cost, wins (none on a tie)."""
    settings: list[SpecDecode | None] = [None, *req.spec_options]
    results: list[CapacityResult | None] = []
    errors: list[InfeasibleError] = []
    for sd in settings:
        try:
            one = req.model_copy(update={"spec_decode": sd, "spec_options": ()})
            results.append(size(trace, one))
        except InfeasibleError as exc:
            results.append(None)
            errors.append(exc)
    if all(r is None for r in results):
        raise errors[0]

    def key(i: int) -> tuple[int, float, int]:
        r = results[i]
        assert r is not None
        return (r.autoscaled.windows_violating, r.autoscaled.cost, i)

    best_i = min((i for i, r in enumerate(results) if r is not None), key=key)
    rows = [
        {"setting": _label(sd)}
        | (
            {"feasible": False}
            if r is None
            else {
                "feasible": True,
                "autoscaled_cost_usd": round(r.autoscaled.cost, 2),
                "windows_violating": r.autoscaled.windows_violating,
                "gpu_hours": round(r.autoscaled.gpu_hours, 1),
            }
        )
        for sd, r in zip(settings, results, strict=True)
    ]
    win, res = settings[best_i], results[best_i]
    assert res is not None
    base = results[0]
    if win is None:
        why = "declined: no speculative setting sizes a cheaper autoscaled fleet"
    elif base is None:
        why = f"{_label(win)}: nothing can be sized without speculative decoding"
    else:
        why = (
            f"{_label(win)} ({win.tokens_per_step:.4g} tokens per step): autoscaled fleet "
            f"${res.autoscaled.cost:.4g} against ${base.autoscaled.cost:.4g} without"
        )
    decision = {"chosen": _label(win), "why": why, "options": rows}
    return res.model_copy(update={"speculative_decision": decision})
