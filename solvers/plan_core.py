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
from planner.engines.capabilities import known_failures
from planner.model.bundled import load_model
from planner.model.spec import ModelSpec
from planner.perf.batch import KV_DTYPES, WEIGHT_QUANTS, Reason
from planner.perf.deployment import Parallelism
from planner.perf.estimate import Percentiles
from planner.perf.memory_plan import plan_memory
from planner.uncertainty.bands import (
    Bands,
    LogBand,
    candidate_bands,
    deployment_bands,
    packaged_bands,
    upper_factor,
)
from solvers.candidates import Block, Edge, Load, agg_block, evaluate, percentile_ms
from solvers.counts import MAX_BUDGET_GPUS
from solvers.describe import deployment, predicted
from solvers.explain import (
    infeasible_budget,
    infeasible_memory,
    infeasible_over_budget,
    infeasible_slo,
    infeasible_throughput,
)
from solvers.plan_models import DEFAULT_CONFIDENCE, Choice, PlanRequest, confidence_problem
from solvers.power_plan import choice_power, energy_score
from solvers.purchase import cost_per_million, purchase_unit, role_gpus_bought
from solvers.role_pairs import disagg_blocks, role_sets
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
        # costs are of the GPUs bought (whole purchase units of each role's GPU type), each role
        # at its own type's price, per output and per total token
        bought = [role_gpus_bought(b, self.req.node_gpus) for b in self.blocks]
        self.gpus_bought = cat([p + d for p, d in bought])
        pre_price = [
            self.req.price_per_gpu_hour or b.pre_gpu.price_per_gpu_hour_usd for b in self.blocks
        ]
        self.cost_per_hour = cat(
            [p * pp + d * pd for (p, d), pp, pd in zip(bought, pre_price, self.prices, strict=True)]
        )
        out_tok_s = self.tok_per_gpu * self.gpus
        self.cost_per_mtok = cost_per_million(self.cost_per_hour, out_tok_s)
        total = (self.req.isl + self.req.osl) / self.req.osl
        self.cost_per_mtok_total = cost_per_million(self.cost_per_hour, out_tok_s * total)
        # the budget is what the user buys: whole purchase units
        self.within_budget = self.gpus_bought <= self.req.max_gpus
        self.uses_pp = cat([uses_pp(b) for b in self.blocks])
        keys = [b.type_key for b in self.blocks]
        self.gpu_code = cat([np.full(b.size, keys.index(b.type_key)) for b in self.blocks])
        self.kv_full = cat([b.res.seq_capacity < b.limit for b in self.blocks])
        # the values each SLO must hold at: met with probability >= --confidence one-sided (the
        # point prediction when 0; the band is then stated at the default confidence)
        backend, m, blocks, bs = self.req.backend, self.model, self.blocks, self.bands
        c = self.req.confidence or DEFAULT_CONFIDENCE
        self.ttft_band = self.ttft * cat(
            [band_factor(m, b, backend, "ttft", bs, c) for b in blocks]
        )
        self.tpot_band = self.tpot * cat(
            [band_factor(m, b, backend, "tpot", bs, c) for b in blocks]
        )
        robust = self.req.confidence > 0
        self.ttft_edge = self.ttft_band if robust else self.ttft
        self.tpot_edge = self.tpot_band if robust else self.tpot

    def meets(self, at_prediction: bool = False) -> np.ndarray:
        """Candidates within budget and both SLOs at the requested percentile, each met with
        probability >= ``PlanRequest.confidence`` (``at_prediction`` or confidence 0: at the
        point prediction)."""
        t, p = (self.ttft, self.tpot) if at_prediction else (self.ttft_edge, self.tpot_edge)
        return (
            self.within_budget
            & self.predicted_ok
            & (t <= self.req.ttft_ms)
            & (p <= self.req.tpot_ms)
        )

    def feasible(self, at_prediction: bool = False) -> np.ndarray:
        """The candidates a plan may pick: those ``meets`` keeps, less the PP ones on a GPU type
        where a PP-free candidate meets the request (``pp_dropped``)."""
        ok = self.meets(at_prediction)
        return ok & ~self.pp_dropped(ok)

    def pp_dropped(self, ok: np.ndarray) -> np.ndarray:
        """Candidates with pipeline parallelism on a GPU type where a PP-free candidate of ``ok``
        meets the request: no measurement in the data has PP > 1 (docs/capacity.md,
        "Pipeline parallelism"), so PP is chosen only when nothing without it meets the SLO. A
        prefill/decode pair of two types counts its own candidates and those of each of its two
        types: the pair's PP-free workers that one type beats are not priced as a pair
        (``solvers.disagg.cross_type_pruned``), their same-type plans stand for them."""
        keys = [b.type_key for b in self.blocks]
        free = {keys[int(c)] for c in np.unique(self.gpu_code[ok & ~self.uses_pp])}
        family = [
            {b.type_key, b.pre_gpu.key, b.gpu.key} if b.mixed else {b.type_key} for b in self.blocks
        ]
        shadowed = np.array([bool(f & free) for f in family])
        return self.uses_pp & shadowed[self.gpu_code]

    def band_of(self, i: int, metric: str) -> LogBand:
        """The band (``ttft`` or ``tpot``) candidate ``i`` is checked with."""
        b, j = self.blocks[self.block_of[i]], int(self.local[i])
        w = b.workers if b.mode == "agg" else b.decode
        assert w is not None
        k = j if b.mode == "agg" or b.units is None else int(b.units.d[j])
        util = float(b.res.prefill_utilization[j])
        mode = int(self.mode_code[i])
        quant, kv = int(w.quant[k]), int(w.kv[k])
        return candidate_bands(
            self.model, b.gpu, self.req.backend, mode, util, quant, kv, self.bands
        )[metric]

    def probability_met(self, i: int, metric: str) -> float:
        """Probability that ``metric`` at the requested percentile stays within its SLO for
        candidate ``i``: the band's quantile function inverted at ln(SLO / prediction)."""
        slo = self.req.ttft_ms if metric == "ttft" else self.req.tpot_ms
        pred = float((self.ttft if metric == "ttft" else self.tpot)[i])
        if not np.isfinite(pred) or pred <= 0:
            return 0.0 if not np.isfinite(pred) else 1.0
        band = self.band_of(i, metric)
        return meet_probability(band, float(np.log(slo / pred)), self.bands.table.level)

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
                "probability_met": round(self.probability_met(i, name), 4),
            }
        ttft_tighter = over_edge["ttft"] <= over_edge["tpot"]
        out["tightest_at_band_edge"] = "TTFT" if ttft_tighter else "TPOT"
        return out

    def score(self, objective: str) -> np.ndarray:
        """Higher is better; -inf outside the GPU budget (``pick_best`` breaks ties by fewer GPUs).

        ``cost``: minus $/hour at a requested rate (the deployment serves exactly that load), else
        minus $ per 1M total tokens at the plan's throughput (closed loop or no load);
        ``gpus``: minus GPUs bought; ``throughput-per-gpu``: output tokens/s per GPU; ``energy``:
        minus board joules per total token (``solvers.power_plan``)."""
        if objective == "cost":
            at_rate = self.req.rate_per_s is not None
            s = -(self.cost_per_hour if at_rate else self.cost_per_mtok_total)
        elif objective == "gpus":
            s = -self.gpus_bought.astype(float)
        elif objective == "energy":
            s = energy_score(self)
        else:
            s = self.tok_per_gpu.copy()
        return np.where(self.within_budget, s, -np.inf)

    def mode_of(self, i: int) -> str:
        return self.blocks[self.block_of[i]].mode

    def gpu_of(self, i: int) -> str:
        """The GPU type of candidate ``i`` (its decode workers' when disaggregated)."""
        return self.blocks[self.block_of[i]].gpu.key

    def prefill_gpu_of(self, i: int) -> str:
        """The GPU type of candidate ``i``'s prefill workers (``gpu_of`` unless it mixes types)."""
        return self.blocks[self.block_of[i]].pre_gpu.key

    def type_of(self, i: int) -> str:
        """Candidate ``i``'s GPU type, or its ``prefill+decode`` pair of types."""
        return self.blocks[self.block_of[i]].type_key

    def clients_of(self, i: int) -> int:
        c = float(self.blocks[self.block_of[i]].clients[self.local[i]])
        return int(np.ceil(c)) if np.isfinite(c) else 0

    def total_clients(self, i: int) -> int:
        c = float(self.blocks[self.block_of[i]].concurrency[self.local[i]])
        return int(round(c)) if np.isfinite(c) else 0

    def summary(self, i: int) -> str:
        b, j = self.blocks[self.block_of[i]], int(self.local[i])
        d = deployment(self.model, b, j, self.req.isl, self.req.osl, self.req.max_model_len)

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
        unit, unit_source = purchase_unit(b.gpu, self.req.node_gpus)
        roles = {}
        if b.mode == "disagg":
            roles = {"prefill_gpu": b.pre_gpu.key, "decode_gpu": b.gpu.key}
        return Choice(
            mode=b.mode,
            gpu=b.gpu.key,
            **roles,
            config=self.summary(i),
            deployment=deployment(
                self.model, b, j, self.req.isl, self.req.osl, self.req.max_model_len
            ),
            predicted=pred,
            gpus=int(self.gpus[i]),
            gpus_bought=int(self.gpus_bought[i]),
            purchase_unit={"gpus": unit, "source": unit_source},
            cost_per_million_output_tokens=float(self.cost_per_mtok[i]),
            cost_per_million_total_tokens=float(self.cost_per_mtok_total[i]),
            cost_per_hour_usd=float(self.cost_per_hour[i]),
            headroom=self.headroom(i),
            power=choice_power(self, i),
        )


def pick_best(ev: Evaluated, ok: np.ndarray, objective: str) -> int:
    """Index of the best feasible candidate; raises the explaining InfeasibleError when none is."""
    if not ok.any():
        raise _why_infeasible(ev)
    return int(rank(ev, ok, objective)[0])


def rank(ev: Evaluated, ok: np.ndarray, objective: str) -> np.ndarray:
    """Indices of the candidates in ``ok``, best first by ``objective``; equal scores go to fewer
    GPUs bought, then fewer used, then the faster deployment, so the order does not depend on the
    order the search visited the candidates in."""
    idx = np.flatnonzero(ok)
    s = ev.score(objective)[idx]
    keys = (ev.ttft[idx], -ev.tok_per_user[idx], ev.gpus[idx], ev.gpus_bought[idx], -s)
    return idx[np.lexsort(keys)]


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
        req.max_gpus, int(big.gpus_bought[i]), f"{big.gpu_of(i)}: {big.summary(i)}"
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
        need = int(np.min(np.where(slo_ok, ev.gpus_bought, np.iinfo(np.int64).max)))
        return infeasible_budget(req.rate_per_s, best_rate, need, req.max_gpus)
    where = f"of {req.model} on up to {req.max_gpus} x {'/'.join(req.gpus)}"
    pct: str = req.percentile
    if req.confidence > 0:
        pct = f"{req.percentile} (met with {req.confidence:.0%} probability, one-sided)"
    finite = np.isfinite(ev.ttft) & np.isfinite(ev.tpot) & ev.within_budget
    if req.rate_per_s is not None and not finite.any():  # every deployment saturates at this rate
        return infeasible_throughput(req.rate_per_s, _saturation_rate(ev), req.max_gpus, where)
    if finite.any():
        return infeasible_slo(
            ev.ttft_edge[finite], ev.tpot_edge[finite], req.ttft_ms, req.tpot_ms, pct, where
        )
    return infeasible_slo(ev.ttft_edge, ev.tpot_edge, req.ttft_ms, req.tpot_ms, pct, where)


def uses_pp(b: Block) -> np.ndarray:
    """Per candidate of ``b``: does a worker (either role when disaggregated) use PP > 1?"""
    if b.mode == "agg":
        assert b.workers is not None
        return np.asarray(b.workers.pp > 1)
    assert b.prefill is not None and b.decode is not None and b.units is not None
    return np.asarray((b.prefill.pp[b.units.p] > 1) | (b.decode.pp[b.units.d] > 1))


def band_factor(
    m: ModelSpec,
    b: Block,
    backend: str,
    metric: str,
    bands: Bands | None = None,
    confidence: float | None = None,
) -> np.ndarray:
    """Per candidate of ``b``, what ``metric``'s prediction is multiplied by to be met with
    probability ``confidence`` one-sided (``upper_factor``; None: the upper edge of the band
    table's central band), from ``bands`` (default the packaged table)."""
    if b.mode == "agg":
        assert b.workers is not None
        q, kv = b.workers.quant, b.workers.kv
    else:
        assert b.decode is not None and b.units is not None
        q, kv = b.decode.quant[b.units.d], b.decode.kv[b.units.d]
    modes = np.full(b.size, 0 if b.mode == "agg" else 1)
    util = b.res.prefill_utilization
    return upper_factor(m, b.gpu, backend, modes, util, q, kv, metric, bands, confidence)


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


PROBABILITY_BOUNDS = (1e-3, 1.0 - 1e-3)
"""The probabilities ``meet_probability`` resolves (beyond them the table's tails say nothing)."""


def meet_probability(band: LogBand, log_ratio: float, level: float) -> float:
    """P(ln(measured / predicted) <= ``log_ratio``): the inverse of ``LogBand.quantile`` (which
    rises with its probability) by bisection, clamped to ``PROBABILITY_BOUNDS``."""
    lo, hi = PROBABILITY_BOUNDS
    if log_ratio <= band.quantile(lo, level):
        return lo
    if log_ratio >= band.quantile(hi, level):
        return hi
    for _ in range(40):  # 2^-40 of the interval: far below the 3-4 figures a plan shows
        mid = 0.5 * (lo + hi)
        if band.quantile(mid, level) <= log_ratio:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def check_confidence(confidence: float, field: str = "--confidence") -> None:
    """``confidence`` is 0 (the point prediction) or a one-sided probability in
    ``CONFIDENCE_RANGE`` (an input error naming ``field`` otherwise)."""
    problem = confidence_problem(confidence)
    if problem is not None:
        raise PlannerInputError(field, problem)


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
        known_failures=known_failures(req.backend),
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


def _slo_factors(model: ModelSpec, req: PlanRequest, bands: Bands | None) -> Edge | None:
    """What a block's TTFT and TPOT predictions are multiplied by to be met with probability
    ``req.confidence`` (None at confidence 0: the point prediction): the factors
    :meth:`Evaluated.feasible` applies, so the fewest count the search sizes is the fewest the plan
    accepts."""
    if req.confidence == 0:
        return None

    def factors(b: Block) -> tuple[np.ndarray, np.ndarray]:
        return tuple(  # type: ignore[return-value]
            band_factor(model, b, req.backend, metric, bands, req.confidence)
            for metric in ("ttft", "tpot")
        )

    return factors


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
    load = Load(
        req.isl,
        req.osl,
        req.rate_per_s,
        req.concurrency,
        req.engine(),
        req.prefix_hit,
        req.spec_decode,
    )
    bands = bands or packaged_bands()
    # the plan's own test (Evaluated.feasible) for the counts the search sizes
    edge = _slo_factors(model, req, bands)
    blocks, prices, evaluated = [], [], 0
    milp: dict[str, object] = {}
    roles = role_sets(model, gpus, space, load) if "disagg" in space.modes else None
    for gi, gpu in enumerate(gpus):
        price = req.price_per_gpu_hour or gpu.price_per_gpu_hour_usd
        for mode in space.modes:
            found: list[Block | None] = []
            if mode == "agg":
                slo = (req.ttft_ms, req.tpot_ms, req.percentile)
                found.append(agg_block(model, gpu, gi, space, load, slo, edge))
            else:
                assert roles is not None
                found += disagg_blocks(model, req, gpus, gi, space, load, roles, edge, milp)
            for b in found:
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
