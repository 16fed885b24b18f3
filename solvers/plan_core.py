"""Evaluate a plan request into one flat table over all blocks (GPU types x modes) and rank it."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from hardware.catalog import get_gpu
from hardware.errors import InfeasibleError, PlannerInputError
from hardware.spec import GpuSpec
from planner.model.bundled import load_model
from planner.model.spec import ModelSpec
from planner.perf.batch import KV_DTYPES, WEIGHT_QUANTS, Reason
from planner.perf.deployment import Parallelism
from planner.perf.estimate import Percentiles
from planner.perf.memory_plan import plan_memory
from planner.uncertainty.bands import Bands, deployment_bands, packaged_bands, upper_factor
from solvers.candidates import Block, Edge, Load, agg_block, evaluate, percentile_ms
from solvers.counts import MAX_BUDGET_GPUS
from solvers.describe import deployment, predicted
from solvers.disagg import disagg_block
from solvers.explain import (
    infeasible_budget,
    infeasible_memory,
    infeasible_over_budget,
    infeasible_slo,
    infeasible_throughput,
)
from solvers.plan_models import Choice, PlanRequest
from solvers.rate_pd import rate_disagg_block
from solvers.space import SearchSpace

if TYPE_CHECKING:
    from planner.perf.deployment import WorkerConfig

SECONDS_PER_HOUR = 3600.0


@dataclass
class Evaluated:
    """All candidates of a request, flattened (arrays of length K) with a way back to their
    block."""

    req: PlanRequest
    model: ModelSpec
    blocks: list[Block]
    prices: list[float]
    evaluated: int
    milp_info: dict[str, object] = field(default_factory=dict)
    bands: Bands = field(default_factory=packaged_bands)
    """The band table the SLOs are checked at and the choices state (a profile's own or the
    packaged one)."""

    def __post_init__(self) -> None:
        p, cat = self.req.percentile, np.concatenate
        self.block_of = cat([np.full(b.size, k) for k, b in enumerate(self.blocks)])
        self.local = cat([np.arange(b.size) for b in self.blocks])
        self.mode_code = cat([np.full(b.size, 0 if b.mode == "agg" else 1) for b in self.blocks])
        self.ttft = cat([percentile_ms(b.res, "ttft", p) for b in self.blocks])
        self.tpot = cat([percentile_ms(b.res, "tpot", p) for b in self.blocks])
        self.gpus = cat([b.res.gpus for b in self.blocks]).astype(int)
        self.tok_per_user = cat([b.res.output_tok_s_per_user for b in self.blocks])
        self.rps = cat([b.res.requests_per_s for b in self.blocks])
        self.tok_per_gpu = cat([b.res.output_tok_s_per_gpu for b in self.blocks])
        self.predicted_ok = cat([b.res.feasible for b in self.blocks])
        self.fits_memory = cat(
            [b.res.infeasible_reason != Reason.OUT_OF_MEMORY for b in self.blocks]
        )
        price = cat([np.full(b.size, pr) for b, pr in zip(self.blocks, self.prices, strict=True)])
        self.cost_per_hour = price * self.gpus
        self.cost_per_mtok = price / (SECONDS_PER_HOUR * np.maximum(self.tok_per_gpu, 1e-12)) * 1e6
        # input and output tokens together: a request's isl + osl tokens per osl output tokens
        self.cost_per_mtok_total = self.cost_per_mtok * self.req.osl / (self.req.isl + self.req.osl)
        self.within_budget = self.gpus <= self.req.max_gpus
        self.kv_full = cat([b.res.seq_capacity < b.limit for b in self.blocks])
        # upper edges of the prediction bands; the SLO must hold there unless --confidence 0
        backend = self.req.backend
        m, blocks = self.model, self.blocks
        bs = self.bands
        self.ttft_band = self.ttft * cat([band_factor(m, b, backend, "ttft", bs) for b in blocks])
        self.tpot_band = self.tpot * cat([band_factor(m, b, backend, "tpot", bs) for b in blocks])
        robust = self.req.confidence > 0
        self.ttft_edge = self.ttft_band if robust else self.ttft
        self.tpot_edge = self.tpot_band if robust else self.tpot

    def feasible(self) -> np.ndarray:
        """Candidates within budget and both SLOs at the requested percentile, at the upper edge of
        the prediction band (``PlanRequest.confidence``; the point prediction when 0)."""
        return (
            self.within_budget
            & self.predicted_ok
            & (self.ttft_edge <= self.req.ttft_ms)
            & (self.tpot_edge <= self.req.tpot_ms)
        )

    def headroom(self, i: int) -> dict[str, object]:
        """SLO / predicted and SLO / band edge of TTFT and TPOT, and the tighter of the two at the
        edge (the smaller SLO / band edge; what stops a better plan is ``binding``, not this)."""
        r = self.req
        out: dict[str, object] = {"confidence": r.confidence, "percentile": r.percentile}
        over_edge: dict[str, float] = {}
        for name, pred, edge, slo in (
            ("ttft", self.ttft, self.ttft_band, r.ttft_ms),
            ("tpot", self.tpot, self.tpot_band, r.tpot_ms),
        ):
            over_edge[name] = float(slo / edge[i])
            out[name] = {
                "slo_over_predicted": float(slo / pred[i]),
                "slo_over_band_edge": over_edge[name],
                "band_edge_ms": float(edge[i]),
            }
        ttft_tighter = over_edge["ttft"] <= over_edge["tpot"]
        out["tightest_at_band_edge"] = "TTFT" if ttft_tighter else "TPOT"
        return out

    def score(self, objective: str) -> np.ndarray:
        """Higher is better; -inf outside the GPU budget (``pick_best`` breaks ties by fewer GPUs).

        ``cost``: minus $/hour at a requested rate (the deployment serves exactly that load), else
        minus $ per 1M total tokens at the plan's throughput (closed loop or no load);
        ``gpus``: minus GPUs; ``throughput-per-gpu``: output tokens/s per GPU."""
        if objective == "cost":
            at_rate = self.req.rate_per_s is not None
            s = -(self.cost_per_hour if at_rate else self.cost_per_mtok_total)
        elif objective == "gpus":
            s = -self.gpus.astype(float)
        else:
            s = self.tok_per_gpu.copy()
        return np.where(self.within_budget, s, -np.inf)

    def mode_of(self, i: int) -> str:
        return self.blocks[self.block_of[i]].mode

    def gpu_of(self, i: int) -> str:
        return self.blocks[self.block_of[i]].gpu.key

    def clients_of(self, i: int) -> int:
        c = float(self.blocks[self.block_of[i]].clients[self.local[i]])
        return int(np.ceil(c)) if np.isfinite(c) else 0

    def total_clients(self, i: int) -> int:
        c = float(self.blocks[self.block_of[i]].concurrency[self.local[i]])
        return int(round(c)) if np.isfinite(c) else 0

    def summary(self, i: int) -> str:
        b, j = self.blocks[self.block_of[i]], int(self.local[i])
        d = deployment(self.model, b, j, self.req.isl, self.req.osl)

        def one(role: WorkerConfig) -> str:
            p = role.parallel
            return (
                f"tp{p.tp} pp{p.pp}"
                + (f" dp{p.dp}" if p.dp > 1 else "")
                + (f" ep{p.ep}" if p.ep > 1 else "")
                + f" x{role.workers} seqs {role.max_num_seqs}"
                + f" chunk {role.max_num_batched_tokens} kv {role.kv_dtype}"
            )

        n = self.clients_of(i)
        load = f", {n} client{'' if n == 1 else 's'}/worker" if np.isfinite(b.clients[j]) else ""
        if d.agg is not None:
            return f"agg {one(d.agg)}{load}"
        assert d.prefill is not None and d.decode is not None
        return f"disagg P[{one(d.prefill)}] D[{one(d.decode)}]{load}"

    def choice(self, i: int) -> Choice:
        b, j = self.blocks[self.block_of[i]], int(self.local[i])
        pred = predicted(self.model, b, j, self.req.isl, self.req.osl, self.req.engine())
        pred |= band_predictions(self.model, b, j, self.req.backend, pred, self.bands)
        return Choice(
            mode=b.mode,
            gpu=b.gpu.key,
            config=self.summary(i),
            deployment=deployment(self.model, b, j, self.req.isl, self.req.osl),
            predicted=pred,
            gpus=int(self.gpus[i]),
            cost_per_million_output_tokens=float(self.cost_per_mtok[i]),
            cost_per_million_total_tokens=float(self.cost_per_mtok_total[i]),
            cost_per_hour_usd=float(self.cost_per_hour[i]),
            headroom=self.headroom(i),
        )


def pick_best(ev: Evaluated, ok: np.ndarray, objective: str) -> int:
    """Index of the best feasible candidate; raises the explaining InfeasibleError when none is."""
    if not ok.any():
        raise _why_infeasible(ev)
    return int(rank(ev, ok, objective)[0])


def rank(ev: Evaluated, ok: np.ndarray, objective: str) -> np.ndarray:
    """Indices of the candidates in ``ok``, best first by ``objective``; equal scores go to fewer
    GPUs, then the faster deployment, so the order does not depend on the order the search visited
    the candidates in."""
    idx = np.flatnonzero(ok)
    s = ev.score(objective)[idx]
    return idx[np.lexsort((ev.ttft[idx], -ev.tok_per_user[idx], ev.gpus[idx], -s))]


SATURATION_CLIENTS_PER_SLOT = 4.0
"""Closed-loop clients per engine slot that keep every slot busy (the saturation throughput)."""


def _saturation_rate(ev: Evaluated) -> float:
    """Highest request rate any aggregated deployment within the GPU budget serves at full batch,
    SLOs ignored (closed loop with more clients than slots), requests/s; 0 when none is known."""
    best = 0.0
    for b in ev.blocks:
        if b.workers is None:
            continue
        w, reps = b.workers, b.replicas.astype(float)
        clients = (w.max_num_seqs * w.dp * SATURATION_CLIENTS_PER_SLOT + 1.0) * reps
        load = Load(ev.req.isl, ev.req.osl, concurrency=1, backend=ev.req.engine())
        res = evaluate(
            ev.model, b.gpu, load, w.mem_frac, **w.columns(), concurrency=clients, workers=reps
        )
        ok = (res.gpus <= ev.req.max_gpus) & np.isfinite(res.requests_per_s) & res.feasible
        best = max(best, float(np.max(res.requests_per_s, where=ok, initial=0.0)))
    return best


WIDER_BUDGET_FACTOR = 16
"""How much larger a budget an infeasible request is re-planned with, to tell whether the budget is
what fails (rate sizing costs log2 of the budget, so the second search costs about the first)."""
WIDER_BUDGET_MIN_GPUS = 64
"""Smallest budget of that second search, GPUs."""


def _budget_fails(ev: Evaluated) -> InfeasibleError | None:
    """The error naming the budget when a larger budget meets the request (the fewest GPUs it
    needs then), else None."""
    req = ev.req
    if req.max_gpus >= MAX_BUDGET_GPUS:
        return None
    wider = min(MAX_BUDGET_GPUS, max(req.max_gpus * WIDER_BUDGET_FACTOR, WIDER_BUDGET_MIN_GPUS))
    try:
        big = evaluate_request(req.model_copy(update={"max_gpus": wider}), bands=ev.bands)
    except InfeasibleError:
        return None
    order = rank(big, big.feasible(), "gpus")
    if order.size == 0:
        return None
    i = int(order[0])
    return infeasible_over_budget(
        req.max_gpus, int(big.gpus[i]), f"{big.gpu_of(i)}: {big.summary(i)}"
    )


def _why_infeasible(ev: Evaluated) -> InfeasibleError:
    req = ev.req
    over = _budget_fails(ev)
    if over is not None:
        return over
    slo_ok = (ev.ttft_edge <= req.ttft_ms) & (ev.tpot_edge <= req.tpot_ms)
    if req.rate_per_s is not None and slo_ok.any():
        per_gpu = ev.rps / np.maximum(ev.gpus, 1)
        best_rate = float(np.max(np.where(slo_ok, per_gpu, 0.0))) * req.max_gpus
        need = int(np.min(np.where(slo_ok, ev.gpus, np.iinfo(np.int64).max)))
        return infeasible_budget(req.rate_per_s, best_rate, need, req.max_gpus)
    where = f"of {req.model} on up to {req.max_gpus} x {'/'.join(req.gpus)}"
    pct: str = req.percentile
    if req.confidence > 0:
        pct = f"{req.percentile} (upper edge of the {req.confidence:.0%} band)"
    finite = np.isfinite(ev.ttft) & np.isfinite(ev.tpot) & ev.within_budget
    if req.rate_per_s is not None and not finite.any():  # every deployment saturates at this rate
        return infeasible_throughput(req.rate_per_s, _saturation_rate(ev), req.max_gpus, where)
    if finite.any():
        return infeasible_slo(
            ev.ttft_edge[finite], ev.tpot_edge[finite], req.ttft_ms, req.tpot_ms, pct, where
        )
    return infeasible_slo(ev.ttft_edge, ev.tpot_edge, req.ttft_ms, req.tpot_ms, pct, where)


def band_factor(
    m: ModelSpec, b: Block, backend: str, metric: str, bands: Bands | None = None
) -> np.ndarray:
    """Per candidate of ``b``, the upper edge of ``metric``'s band (of ``bands``, default the
    packaged table) over the prediction."""
    if b.mode == "agg":
        assert b.workers is not None
        q, kv = b.workers.quant, b.workers.kv
    else:
        assert b.decode is not None and b.units is not None
        q, kv = b.decode.quant[b.units.d], b.decode.kv[b.units.d]
    modes = np.full(b.size, 0 if b.mode == "agg" else 1)
    util = b.res.prefill_utilization
    return upper_factor(m, b.gpu, backend, modes, util, q, kv, metric, bands)


def band_predictions(
    m: ModelSpec,
    b: Block,
    j: int,
    backend: str,
    pred: dict[str, object],
    bands: Bands | None = None,
) -> dict[str, object]:
    """``ttft_ms_band`` / ``tpot_ms_band`` (level, and lo/hi of the mean and each percentile, as
    ``planner estimate`` reports them) of candidate ``j`` of ``b``, from ``bands`` (default: the
    packaged table)."""
    band_set = bands or packaged_bands()
    w = b.workers if b.mode == "agg" else b.decode
    assert w is not None
    k = j if b.mode == "agg" else int(b.units.d[j]) if b.units is not None else j
    own, account = deployment_bands(  # the bands and account `planner estimate` gives
        m,
        b.gpu,
        backend,
        b.mode,
        float(b.res.prefill_utilization[j]),
        WEIGHT_QUANTS[int(w.quant[k])],
        KV_DTYPES[int(w.kv[k])],
        band_set,
    )
    level = band_set.table.level
    out: dict[str, object] = {}
    for metric in ("ttft", "tpot"):
        ms = pred[f"{metric}_ms"]
        assert isinstance(ms, dict), "predicted() writes each metric as a dict"
        stats = {s: float(ms[s]) for s in ("mean", "p50", "p90", "p99")}
        band = Percentiles(**stats).with_band(own[metric], level).band
        assert band is not None
        out[f"{metric}_ms_band"] = band.model_dump()
    prov = pred.get("provenance")
    out["provenance"] = {
        **(prov if isinstance(prov, dict) else {}),
        "bands": account,
    }
    return out


def check_confidence(confidence: float) -> None:
    """``--confidence`` is 0 (the point prediction) or the level of the committed band table."""
    if confidence == 0:
        return
    level = packaged_bands().table.level
    if abs(confidence - level) > 1e-9:
        raise PlannerInputError(
            "--confidence",
            f"{confidence:g} not allowed: 0 (point prediction) "
            f"or {level:g} (the level of planner/calibration/bands.yaml)",
        )


def _memory_detail(model: ModelSpec, gpu: GpuSpec, max_gpus: int) -> str:
    tp = min(gpu.scale_up.domain_size, max_gpus, 8)
    pp = max(1, max_gpus // tp)
    try:
        plan_memory(model, gpu, Parallelism(tp=tp, pp=min(pp, model.num_layers)))
    except InfeasibleError as exc:
        return exc.message
    except ValueError as exc:
        return str(exc)
    return "no split of the model is legal within the budget"


def _space(req: PlanRequest, gpus: list[GpuSpec]) -> SearchSpace:
    modes = ("agg", "disagg") if req.mode == "auto" else (req.mode,)
    return SearchSpace(
        gpus=tuple(g.key for g in gpus),
        max_gpus=req.max_gpus,
        modes=modes,
        weight_quants=req.weight_quants,
        node_gpus=req.node_gpus,
        shape_rules=req.shape_rules,
    )


def _distinct_gpus(req: PlanRequest) -> list[GpuSpec]:
    """The request's GPU types, each once (aliases of one GPU resolve to the same key)."""
    out: dict[str, GpuSpec] = {}
    for name in dict.fromkeys(req.gpus):
        g = get_gpu(name, req.hardware_dirs)
        out.setdefault(g.key, g)
    return list(out.values())


def evaluate_request(
    req: PlanRequest, space: SearchSpace | None = None, bands: Bands | None = None
) -> Evaluated:
    """Every candidate of every GPU type and mode, evaluated (progress on stderr when slow), its
    bands from ``bands`` (default: the packaged table)."""
    t0 = time.perf_counter()
    check_confidence(req.confidence)
    model = load_model(req.model, req.model_id)
    gpus = _distinct_gpus(req)
    space = space or _space(req, gpus)
    load = Load(req.isl, req.osl, req.rate_per_s, req.concurrency, req.engine())
    bands = bands or packaged_bands()
    edge = _edge(model, req, bands)
    blocks, prices, evaluated = [], [], 0
    milp: dict[str, object] = {}
    for gi, gpu in enumerate(gpus):
        price = req.price_per_gpu_hour or gpu.price_per_gpu_hour_usd
        for mode in space.modes:
            if mode == "agg":
                slo = (req.ttft_ms, req.tpot_ms, req.percentile)
                b = agg_block(model, gpu, gi, space, load, slo, edge)
            elif req.rate_per_s is None:
                b = disagg_block(model, gpu, gi, space, load, req.tpot_ms)
            else:
                b, sol = rate_disagg_block(
                    model,
                    gpu,
                    gi,
                    space,
                    load,
                    req.ttft_ms,
                    req.tpot_ms,
                    req.percentile,
                    price,
                    edge,
                )
                if sol is not None:
                    milp[gpu.key] = {
                        "solver": sol.outcome.solver,
                        "status": sol.outcome.status,
                        "solution_status": sol.outcome.solution_status,
                        "prefill_workers": sol.x,
                        "decode_workers": sol.y,
                        "gpus": sol.gpus,
                    }
            if b is not None and b.size:
                blocks.append(b)
                prices.append(price)
                evaluated += b.evaluated
        if time.perf_counter() - t0 > 2.0:
            sys.stderr.write(
                f"plan: evaluated {evaluated:,} candidates ({gi + 1}/{len(gpus)} GPU types)\n"
            )
    if not blocks:
        raise infeasible_memory(
            model.name, req.gpus, req.max_gpus, _memory_detail(model, gpus[0], req.max_gpus)
        )
    return Evaluated(req, model, blocks, prices, evaluated, milp, bands)


def _edge(model: ModelSpec, req: PlanRequest, bands: Bands) -> Edge | None:
    """The factors :meth:`Evaluated.feasible` applies (band edge; none at confidence 0), for the
    counts the search sizes: the fewest count found is then the fewest the plan accepts."""
    if req.confidence <= 0:
        return None

    def edge(b: Block) -> tuple[np.ndarray, np.ndarray]:
        return (
            band_factor(model, b, req.backend, "ttft", bands),
            band_factor(model, b, req.backend, "tpot", bands),
        )

    return edge
