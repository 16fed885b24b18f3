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
(:mod:`planner.memory_batch`), predict every candidate deployment with
:func:`planner.batch_eval.evaluate_batch` - the model behind ``planner estimate``, so a plan
predicts exactly what ``estimate`` predicts for the same deployment (:mod:`solvers.candidates`,
:mod:`solvers.disagg`) - keep those meeting both SLOs at the requested percentile, rank by the
objective, build the Pareto front of tok/s/GPU vs tok/s/user, name the binding constraint
(:mod:`solvers.explain`). With a rate, disaggregated worker counts come from the MILP
(:mod:`solvers.pd_milp`). Infeasible requests raise InfeasibleError (CLI: one line, exit 2).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from hardware.errors import PlannerInputError
from planner.deployment import Deployment, ShapeRules
from planner.engine_calibration import PACKAGED, EngineConstants, EnginePolicy
from planner.engines import DEFAULT_ENGINE
from solvers.binding import explain_binding, per_gpu_type, top_candidates
from solvers.counts import MAX_BUDGET_GPUS
from solvers.pareto import pareto_indices
from solvers.plan_core import Evaluated, evaluate_request, pick_best

if TYPE_CHECKING:
    import numpy as np

_FROZEN = ConfigDict(frozen=True, extra="forbid")
Objective = Literal["throughput-per-gpu", "cost", "gpus"]
Percentile = Literal["p50", "p90", "p99"]
PARETO_MAX_POINTS = 40


class PlanRequest(BaseModel):
    """What the user asks for."""

    model_config = _FROZEN
    model: str = Field(description="Bundled model name, HF id or config.json path.")
    model_id: str = Field(default="", description="Identity of a local config.json's weights.")
    shape_rules: ShapeRules = Field(
        default_factory=ShapeRules, description="Worker shapes the target engine can launch."
    )
    gpus: tuple[str, ...] = Field(
        min_length=1, description="GPU names or aliases to consider (see `planner gpus`)."
    )
    max_gpus: int = Field(default=8, ge=1, description="GPU budget of the deployment.")

    @field_validator("max_gpus")
    @classmethod
    def _budget(cls, v: int) -> int:
        if v > MAX_BUDGET_GPUS:
            raise PlannerInputError(
                "--max-gpus",
                f"{v:,} is above {MAX_BUDGET_GPUS:,}, the largest GPU budget the search prices",
            )
        return v

    isl: int = Field(ge=1, description="Input tokens per request.")
    osl: int = Field(ge=1, description="Output tokens per request.")
    rate_per_s: float | None = Field(
        default=None, gt=0, description="Open-loop request rate to serve, requests/s."
    )
    concurrency: int | None = Field(default=None, ge=1, description="Closed-loop clients to serve.")
    ttft_ms: float = Field(gt=0, description="TTFT SLO, ms.")
    tpot_ms: float = Field(gt=0, description="TPOT SLO, ms.")
    percentile: Percentile = Field(default="p90", description="Percentile the SLOs apply to.")
    mode: Literal["agg", "disagg", "auto"] = Field(
        default="auto", description="agg, disagg, or auto (both, the better wins)."
    )
    backend: str = Field(
        default=DEFAULT_ENGINE,
        description="Engine: its calibration, the worker shapes it can launch and the configs "
        "written for it.",
    )
    price_per_gpu_hour: float | None = Field(
        default=None, gt=0, description="Override of every GPU's $/hour."
    )
    objective: Objective = Field(
        default="throughput-per-gpu", description="What the recommendation maximises or minimises."
    )
    weight_quants: tuple[str, ...] = Field(
        default=(), description="Weight dtypes allowed besides the checkpoint's."
    )
    confidence: float = Field(
        default=0.8,
        ge=0,
        le=1,
        description="Meet the SLO at the upper edge of the prediction "
        "band of this level (planner.bands, 0.8); 0: at the point prediction.",
    )
    node_gpus: int | None = Field(
        default=None, ge=1, description="Count GPUs in whole nodes of this size."
    )
    hardware_dirs: tuple[str, ...] = Field(
        default=(), description="Extra folders of GPU spec files."
    )
    engine_constants: EngineConstants = Field(
        default=PACKAGED,
        exclude=True,
        description="Engine constants replacing the packaged ones (a user's calibration "
        "profile, `--calibration`).",
    )

    def engine(self) -> EnginePolicy:
        """The request's engine with its constants."""
        return self.engine_constants.policy(self.backend)


class Choice(BaseModel):
    """One recommended deployment with its predictions."""

    model_config = _FROZEN
    mode: str = Field(description="agg or disagg.")
    gpu: str = Field(description="GPU key.")
    config: str = Field(description="Short description of the deployment.")
    deployment: Deployment = Field(description="The deployment.")
    predicted: dict[str, object] = Field(
        description="Predicted TTFT, TPOT, throughput and memory (planner estimate's numbers)."
    )
    gpus: int = Field(description="GPUs of the deployment.")
    cost_per_million_output_tokens: float = Field(description="USD per million output tokens.")
    cost_per_hour_usd: float = Field(description="USD per hour of the deployment.")
    headroom: dict[str, object] = Field(
        default_factory=dict,
        description="SLO / predicted and SLO / band edge per metric, and "
        "the metric with the least headroom at the band edge (tightest_at_band_edge).",
    )


class ParetoPoint(BaseModel):
    """A point of the throughput-per-GPU vs throughput-per-user front."""

    model_config = _FROZEN
    mode: str = Field(description="agg or disagg.")
    gpu: str = Field(description="GPU key.")
    output_tok_s_per_gpu: float = Field(description="Output tokens/s per GPU.")
    output_tok_s_per_user: float = Field(description="Output tokens/s one request sees.")
    ttft_ms: float = Field(description="At the requested percentile.")
    tpot_ms: float = Field(description="At the requested percentile.")
    gpus: int = Field(description="GPUs of the deployment.")
    clients_per_worker: int | None = Field(
        description="Closed-loop clients per worker; None at a rate."
    )
    config: str = Field(
        description="Short description, e.g. 'agg tp4 pp1 x2, seqs 64, chunk 4096'."
    )


class PlanResult(BaseModel):
    """The answer: best plan, Pareto front, alternatives per mode, binding constraint."""

    model_config = _FROZEN
    request: PlanRequest = Field(description="The request planned for.")
    model: str = Field(description="Model name.")
    gpu: str = Field(description="GPU key of the best choice.")
    workload: dict[str, object] = Field(description="The load planned for.")
    slo: dict[str, object] = Field(description="TTFT and TPOT targets and their percentile.")
    best: Choice = Field(description="The recommendation.")
    pareto: tuple[ParetoPoint, ...] = Field(description="Throughput-per-GPU vs per-user frontier.")
    binding_constraint: str = Field(
        description="What limits the recommendation (an SLO, memory or the GPU budget)."
    )
    candidates_evaluated: int = Field(description="Candidates the search priced.")
    search_seconds: float = Field(description="Search wall time, s.")
    alternatives: dict[str, Choice | None] = Field(
        description="Best choice per mode; None where a mode has none."
    )
    milp: dict[str, object] | None = Field(
        default=None,
        description="Disaggregated rate search (MILP) details; None when it did not run.",
    )
    binding: dict[str, object] = Field(
        default_factory=dict, description="solvers.binding.explain_binding."
    )
    candidates: tuple[dict[str, object], ...] = Field(
        default=(), description="Top feasible candidates."
    )
    per_gpu_type: dict[str, dict[str, object]] = Field(
        default_factory=dict, description="Best plan or reason, per GPU type."
    )
    max_gpus: int = Field(default=0, description="The GPU budget of the request.")

    def to_plan_dict(self) -> dict[str, object]:
        """The plan-file JSON (``planner plan --format json``; read by
        planner.emitters.plan_file)."""
        out = self.model_dump(mode="json", exclude={"request"})
        out["objective"] = self.request.objective
        return out


def _workload(req: PlanRequest, ev: Evaluated, i: int) -> dict[str, object]:
    conc = req.concurrency
    if conc is None and req.rate_per_s is None:
        conc = ev.total_clients(i)
    rate = req.rate_per_s if req.rate_per_s is not None else float(ev.rps[i])
    return {
        "isl": req.isl,
        "osl": req.osl,
        "concurrency": conc,
        "rate": rate,
        "load": "rate"
        if req.rate_per_s
        else "concurrency"
        if req.concurrency
        else "max-throughput-per-gpu",
    }


def _front(ev: Evaluated, ok: np.ndarray) -> np.ndarray:
    import numpy as np

    sel = np.flatnonzero(ok)
    front = sel[pareto_indices(ev.tok_per_gpu[sel], ev.tok_per_user[sel])]
    if front.size > PARETO_MAX_POINTS:
        front = front[np.linspace(0, front.size - 1, PARETO_MAX_POINTS).round().astype(int)]
    return front


def _pareto(ev: Evaluated, front: np.ndarray) -> tuple[ParetoPoint, ...]:
    rate = ev.req.rate_per_s is not None
    return tuple(
        ParetoPoint(
            mode=ev.mode_of(i),
            gpu=ev.gpu_of(i),
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


def plan(req: PlanRequest) -> PlanResult:
    """Search the space for ``req``; raises InfeasibleError when nothing meets the SLOs and
    budget."""
    t0 = time.perf_counter()
    ev = evaluate_request(req)
    ok = ev.feasible()
    best = pick_best(ev, ok, req.objective)
    binding = explain_binding(ev, best)
    alts: dict[str, Choice | None] = {}
    for mode in ("agg", "disagg"):
        mask = ok & (ev.mode_code == (0 if mode == "agg" else 1))
        alts[mode] = ev.choice(pick_best(ev, mask, req.objective)) if mask.any() else None
    front = _front(ev, ok)
    pareto = _pareto(ev, front)
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
        max_gpus=req.max_gpus,
    )
