"""``planner plan --trace`` with prefix caching: KV tier sizes and the routing policy searched
alongside the deployment.

The plan is sized for the trace's mean prompt and answer lengths at its mean request rate
(:func:`solvers.plan.plan`). Prefix caching enters it as the workload's ``prefix_hit`` (uncached
prompt tokens are computed; the decode still reads the whole context) and as the load time from
host memory / SSD at the SLO percentile, taken off the TTFT SLO the search sizes against (added to
TTFT without overlap, as :mod:`solvers.prefix_tiers` prices it for ``capacity``).

Search: first the plan without a prefix cache; then for every option (routing policy x host
size x SSD size, from the request's lists) the trace's block hashes are replayed through an LRU
per replica (:mod:`planner.perf.prefix_cache`) over the replicas that receive prompts (aggregated
workers, or prefill workers of a disaggregated plan) with the HBM the plan's worker leaves for KV,
the plan is re-run with that hit share, and, when the new plan's replicas or worker differ, the
trace is replayed on the new plan and planned once more. The options are ranked by the plan's
objective; ties go to the least tier memory, then to the order of ``POLICIES`` (simplest first).
Tiers cost no GPUs: they are the server's own host memory and local SSD (an assumption, stated).
"""

from __future__ import annotations

from typing import cast

from pydantic import BaseModel, ConfigDict, Field

from hardware.catalog import get_gpu
from hardware.errors import PlannerInputError
from planner.model.bundled import load_model
from planner.perf.deployment import Deployment, WorkerConfig
from planner.perf.memory_plan import plan_memory
from planner.perf.prefix_cache import POLICIES, Policy, PrefixCacheReport, plan_tiers, replay
from planner.uncertainty.bands import Bands
from planner.workload.traces import Trace
from solvers.plan_models import PlanRequest, PlanResult
from solvers.prefix_tiers import DEFAULT_HOST_KV_GIB, MAX_PRICED_HIT, PricedCache
from solvers.spec_choice import plan_with_spec as plan

_FROZEN = ConfigDict(frozen=True, extra="forbid")
REFINEMENTS = 2
"""Plans per option at most: on the replay over the no-cache plan, then over the new plan."""
METHOD = (
    "Planned at the trace's mean lengths and rate; per option (routing x host GiB x SSD GiB) "
    "the trace's block hashes replayed through an LRU per replica (write-through tiers, prefix "
    "lookup stops at the first miss) over the plan's prompt-receiving replicas with the KV budget "
    "its worker leaves, the hit share priced as skipped prefill and the host/SSD load time at the "
    "SLO percentile taken off the TTFT SLO; re-planned, and replayed once more when the plan "
    "changed. Best option by the objective; ties to the least tier memory. Tiers cost no GPUs."
)


class PrefixPlanRequest(BaseModel):
    """The prefix-cache part of ``planner plan``."""

    model_config = _FROZEN
    host_kv_gib: tuple[float, ...] = Field(
        default=(0.0, DEFAULT_HOST_KV_GIB),
        min_length=1,
        description="Host memory sizes for KV per GPU to search, GiB (0: no host tier).",
    )
    ssd_kv_gib: tuple[float, ...] = Field(
        default=(0.0,),
        min_length=1,
        description="SSD sizes for KV per GPU to search, GiB (0: no SSD tier).",
    )
    ssd_gbps: float | None = Field(
        default=None, gt=0, le=1e4, description="SSD read bandwidth per GPU, GB/s (override)."
    )
    routing: tuple[Policy, ...] = Field(
        default=(), description="Routing policies to search (empty: every one the trace allows)."
    )


class PrefixOption(PricedCache):
    """One tier set and routing policy, and the plan it leads to."""

    routing: str = Field(description="round-robin, prefix or session; none without a cache.")
    host_kv_gib: float = Field(description="Host memory for KV per GPU, GiB.")
    ssd_kv_gib: float = Field(description="SSD for KV per GPU, GiB.")
    gpus: int = Field(description="GPUs the plan uses.")
    gpus_bought: int = Field(description="GPUs the plan buys.")
    cost_per_hour_usd: float = Field(description="USD per hour of the GPUs bought.")
    cost_per_million_total_tokens: float = Field(description="USD per 1M input + output tokens.")
    config: str = Field(description="The plan's deployment.")


class PrefixPlan(BaseModel):
    """What ``prefix_cache`` of a plan answer holds (also read by ``planner emit``)."""

    model_config = _FROZEN
    enabled: bool = Field(default=True, description="Prefix caching is on in the plan.")
    routing: str = Field(description="Routing policy of the chosen option.")
    host_kv_gib_per_gpu: float = Field(description="Host memory tier of the chosen option, GiB.")
    ssd_kv_gib_per_gpu: float = Field(description="SSD tier of the chosen option, GiB.")
    prefix_hit: float = Field(description="Hit share the plan is priced at, 0..1.")
    source: str = Field(description="trace replay or --prefix-hit.")
    chosen: int = Field(description="Index of the chosen option in ``options``.")
    options: tuple[PrefixOption, ...] = Field(
        default=(), description="Without a cache first, then every option searched."
    )
    method: str = Field(default=METHOD, description="How the options were priced.")


def _objective(res: PlanResult) -> tuple[float, ...]:
    """Lower is better: the plan's objective (``Evaluated.score``) on its chosen plan."""
    b = res.best
    per_gpu = float(b.predicted.get("output_tok_s_per_gpu", 0.0))  # type: ignore[arg-type]
    by = {
        "gpus": (b.gpus_bought, b.gpus),
        "throughput-per-gpu": (-per_gpu,),
    }
    return by.get(res.request.objective, (b.cost_per_hour_usd, b.gpus_bought))


def _front(dep: Deployment) -> WorkerConfig:
    """The worker that receives prompts and holds their prefixes (aggregated or prefill)."""
    w = dep.agg if dep.agg is not None else dep.prefill
    assert w is not None, "a deployment is aggregated or has a prefill role"
    return w


def _option(
    trace: Trace,
    req: PlanRequest,
    base: PlanResult,
    key: tuple[Policy, float, float],
    p: PrefixPlanRequest,
    bands: Bands | None,
) -> tuple[PlanResult, PrefixOption]:
    routing, host, ssd = key
    res, seen = base, None
    cache: PrefixCacheReport | None = None
    hold = (req.ttft_ms + trace.osl * req.tpot_ms) / 1e3
    model = load_model(req.model, req.model_id)
    for _ in range(REFINEMENTS):
        w = _front(res.best.deployment)
        shape = (w.model_dump_json(), w.workers)
        if shape == seen:
            break
        seen = shape
        gpu = get_gpu(res.best.gpu, req.hardware_dirs)
        mem = plan_memory(
            model,
            gpu,
            w.parallel,
            weight_quant=w.weight_quant,
            kv_dtype=w.kv_dtype,
            max_num_batched_tokens=w.max_num_batched_tokens,
            max_num_seqs=w.max_num_seqs,
            gpu_memory_utilization=w.gpu_memory_utilization,
        )
        tiers = plan_tiers(mem, gpu, host, ssd, p.ssd_gbps)
        cache = replay(trace, w.workers, routing, tiers, hold)
        load_ms = cache.load_ms[req.percentile]
        if load_ms >= req.ttft_ms:
            raise PlannerInputError(
                "--host-kv-gib/--ssd-kv-gib",
                f"loading cached prefixes takes {load_ms:.4g} ms at {req.percentile}, more than "
                f"the {req.ttft_ms:g} ms TTFT SLO",
            )
        update = {
            "prefix_hit": min(cache.hit_rate, MAX_PRICED_HIT),
            "ttft_ms": req.ttft_ms - load_ms,
        }
        res = plan(req.model_copy(update=update), bands)
    return res, _describe(res, routing, host, ssd, cache)


def _describe(
    res: PlanResult, routing: str, host: float, ssd: float, cache: PrefixCacheReport | None
) -> PrefixOption:
    pct = res.request.percentile
    return PrefixOption(
        routing=routing,
        host_kv_gib=host,
        ssd_kv_gib=ssd,
        cache=cache,
        prefix_hit=res.request.prefix_hit,
        prefix_load_ms=0.0 if cache is None else cache.load_ms[pct],
        gpus=res.best.gpus,
        gpus_bought=res.best.gpus_bought,
        cost_per_hour_usd=res.best.cost_per_hour_usd,
        cost_per_million_total_tokens=res.best.cost_per_million_total_tokens,
        config=res.best.config,
    )


def options(trace: Trace, p: PrefixPlanRequest) -> list[tuple[Policy, float, float]]:
    """Every (routing, host GiB, SSD GiB) searched, in tie-break order."""
    allowed = [q for q in POLICIES if q != "session" or trace.session is not None]
    for q in p.routing:
        if q not in allowed:
            raise PlannerInputError("--routing", f"{q} needs a trace with a session column")
    routes = [cast(Policy, q) for q in allowed if not p.routing or q in p.routing]
    hosts, ssds = sorted(set(p.host_kv_gib)), sorted(set(p.ssd_kv_gib))
    keys = [(r, h, s) for r in routes for h in hosts for s in ssds]
    return sorted(keys, key=lambda k: (k[1] + k[2], routes.index(k[0])))


def plan_with_prefix(
    trace: Trace, req: PlanRequest, p: PrefixPlanRequest, bands: Bands | None = None
) -> PlanResult:
    """The best plan over the options (module docstring), with ``prefix_cache`` filled."""
    if trace.blocks is None:
        raise PlannerInputError("--trace", "prefix caching needs a trace with hash_ids")
    base = plan(req, bands)
    found = [(base, _describe(base, "none", 0.0, 0.0, None))]
    for key in options(trace, p):
        found.append(_option(trace, req, base, key, p, bands))
    best = min(range(len(found)), key=lambda i: (_objective(found[i][0]), i))
    res, opt = found[best]
    out = PrefixPlan(
        enabled=opt.cache is not None,
        routing=opt.routing,
        host_kv_gib_per_gpu=opt.host_kv_gib,
        ssd_kv_gib_per_gpu=opt.ssd_kv_gib,
        prefix_hit=opt.prefix_hit,
        source="trace replay (hash_ids)",
        chosen=best,
        options=tuple(o for _, o in found),
    )
    return _restore_slo(res, req, out)


def _restore_slo(res: PlanResult, req: PlanRequest, out: PrefixPlan) -> PlanResult:
    """The answer states the user's TTFT SLO; the SLO the search met (less the load time) is in
    ``slo.ttft_ms_searched``."""
    slo = dict(res.slo) | {"ttft_ms": req.ttft_ms, "ttft_ms_searched": res.request.ttft_ms}
    request = res.request.model_copy(update={"ttft_ms": req.ttft_ms})
    return res.model_copy(
        update={"slo": slo, "request": request, "prefix_cache": out.model_dump(mode="json")}
    )


def plan_stated_hit(req: PlanRequest, hit: float, bands: Bands | None = None) -> PlanResult:
    """``plan --prefix-hit``: the plan at a stated hit share (HBM prefix caching, no tiers)."""
    res = plan(req.model_copy(update={"prefix_hit": hit}), bands)
    out = PrefixPlan(
        routing="round-robin",
        host_kv_gib_per_gpu=0.0,
        ssd_kv_gib_per_gpu=0.0,
        prefix_hit=hit,
        source="--prefix-hit",
        chosen=0,
        options=(_describe(res, "round-robin", 0.0, 0.0, None),),
    )
    return res.model_copy(update={"prefix_cache": out.model_dump(mode="json")})
