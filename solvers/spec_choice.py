"""Speculative decoding as a planned decision: the search runs once without it and once per
draft length of the requested method (``PlanRequest.spec_options``), and keeps the setting whose
best deployment scores highest by the request's objective. Speculating wins only where it is
strictly better: at high load the verify step over ``k + 1`` tokens per sequence turns
compute-bound (``planner.perf.spec_decode``) and the plan declines it."""

from __future__ import annotations

from hardware.errors import InfeasibleError
from planner.perf.deployment import Speculative
from planner.uncertainty.bands import Bands
from planner.workload.spec import SpecDecode
from solvers.plan import plan
from solvers.plan_models import Choice, PlanRequest, PlanResult


def choice_score(req: PlanRequest, c: Choice) -> float:
    """The objective's value of ``c``, higher is better (``Evaluated.score`` of one choice)."""
    if req.objective == "cost":
        return -(
            c.cost_per_hour_usd if req.rate_per_s is not None else c.cost_per_million_total_tokens
        )
    if req.objective == "gpus":
        return -float(c.gpus_bought)
    return float(c.predicted["output_tok_s_per_gpu"])  # type: ignore[arg-type]


def spec_label(sd: SpecDecode | None) -> str:
    """A speculative-decoding setting in a few words ('none', 'mtp k=3')."""
    return "none" if sd is None else f"{sd.method} k={sd.draft_len}"


def _outcome(req: PlanRequest, sd: SpecDecode | None, res: PlanResult | None) -> dict[str, object]:
    row: dict[str, object] = {"setting": spec_label(sd)}
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
    won = next(r for r in rows if r["setting"] == spec_label(win))
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
    decision = {"chosen": spec_label(win), "why": _why(req, win, rows), "options": rows}
    return res.model_copy(
        update={
            "request": req,
            "best": res.best.model_copy(update={"speculative": spec}),
            "speculative_decision": decision,
        }
    )
