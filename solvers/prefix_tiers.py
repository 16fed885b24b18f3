"""``planner capacity`` with prefix caching: GPU-hours with and without KV tiers.

For a trace with block hashes (Mooncake ``hash_ids``), size the fleet (:func:`solvers.capacity
.capacity`) once without a prefix cache, then for each tier set (HBM; HBM + host memory; HBM +
host + SSD, as asked) replay the trace over the replicas the sizing needs at its peak
(:mod:`planner.perf.prefix_cache`), price the hit share as skipped prefill (the workload's
``prefix_hit``: uncached tokens are computed, the decode still reads the whole context) and the
load time from host/SSD at the SLO percentile as added TTFT (no overlap with compute assumed),
and size again; when that sizing needs a different peak, replay over the new count and size once
more. The answer is the sizing with every tier asked for; ``prefix_cache`` holds each scenario's
hit rates and fleet, and the hit rate of every routing policy on the same replicas.

Routing loads (:func:`planner.perf.prefix_cache.route`): a request is counted in flight for the
time the SLO allows it, TTFT + answer tokens x TPOT.

A trace without hashes takes a stated ``prefix_hit`` (``--prefix-hit``) instead.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from hardware.catalog import get_gpu
from hardware.errors import PlannerInputError
from planner.model.bundled import load_model
from planner.perf.memory_plan import plan_memory
from planner.perf.prefix_cache import (
    POLICIES,
    Policy,
    PrefixCacheReport,
    Tiers,
    plan_tiers,
    replay,
)
from planner.workload.traces import Trace
from solvers.capacity import CapacityRequest, CapacityResult, capacity

_FROZEN = ConfigDict(frozen=True, extra="forbid")
METHOD = (
    "Sized without a prefix cache, then per tier set: the trace's block hashes replayed through "
    "an LRU per replica over the replicas the sizing needs at its peak (write-through tiers, "
    "prefix lookup stops at the first miss); the hit share priced as skipped prefill "
    "(decode still reads the whole context) and the load time from host/SSD at the SLO "
    "percentile added to TTFT without overlap; sized again, and replayed once more over the new "
    "peak when it differs."
)
"""How the scenarios were priced, carried in the JSON."""
DEFAULT_HOST_KV_GIB = 128.0
"""Host memory for KV per GPU, GiB (assumption: half of an 8-GPU server's 2 TB system memory,
NVIDIA DGX H100/H200 datasheets: 2 TB for 8 GPUs); 0 turns the host tier off."""
MAX_PRICED_HIT = 0.99
"""Highest prefix hit priced: an engine computes at least the prompt's last token."""
REFINEMENTS = 2
"""Replays per scenario at most: at the baseline's peak replicas, then at the priced sizing's."""


class PrefixRequest(BaseModel):
    """The prefix-cache part of ``planner capacity``."""

    model_config = _FROZEN
    host_kv_gib: float = Field(
        default=DEFAULT_HOST_KV_GIB, ge=0, le=1e5, description="Host memory for KV per GPU, GiB."
    )
    ssd_kv_gib: float = Field(default=0.0, ge=0, le=1e7, description="SSD for KV per GPU, GiB.")
    ssd_gbps: float | None = Field(
        default=None, gt=0, le=1e4, description="SSD read bandwidth per GPU, GB/s (override)."
    )
    routing: Policy = Field(default="prefix", description="round-robin, prefix or session.")
    prefix_hit: float | None = Field(
        default=None, ge=0, lt=1, description="Stated hit share for a trace without hash_ids."
    )


class PricedCache(BaseModel):
    """A prefix cache as priced: the replay, the hit share and the load time it adds."""

    model_config = _FROZEN
    cache: PrefixCacheReport | None = Field(description="Replay result; None without a cache.")
    prefix_hit: float = Field(description="Hit share priced, 0..1.")
    prefix_load_ms: float = Field(
        description="Load time from host/SSD added to TTFT at the SLO percentile, ms."
    )


class Scenario(PricedCache):
    """One tier set and the fleet it needs."""

    name: str = Field(description="Tiers: none, hbm, hbm+host, hbm+host+ssd.")
    replicas_peak: int = Field(description="Replicas the busiest window needs.")
    gpus_max: int = Field(description="Most GPUs bought at once (autoscaled).")
    gpu_hours_autoscaled: float = Field(description="GPU-hours, autoscaled fleet.")
    gpu_hours_static_peak: float = Field(description="GPU-hours, static peak fleet.")
    cost_autoscaled_usd: float = Field(description="USD, autoscaled fleet.")
    windows_violating: int = Field(description="Windows predicted to miss the SLO (autoscaled).")


class PrefixCapacity(BaseModel):
    """What ``prefix_cache`` of a capacity answer holds."""

    model_config = _FROZEN
    routing: str = Field(description="Routing policy of the scenarios.")
    scenarios: tuple[Scenario, ...] = Field(description="Without a cache first, then by tiers.")
    routing_hit_rates: dict[str, float] = Field(
        description="Hit share of every routing policy the trace allows, on the last scenario's "
        "tiers and replicas."
    )
    method: str = Field(default=METHOD, description="How the scenarios were priced.")


def _scenario(name: str, res: CapacityResult, cache: PrefixCacheReport | None) -> Scenario:
    pct = str(res.slo["percentile"])
    return Scenario(
        name=name,
        cache=cache,
        prefix_hit=0.0 if cache is None else min(cache.hit_rate, MAX_PRICED_HIT),
        prefix_load_ms=0.0 if cache is None else cache.load_ms[pct],
        replicas_peak=res.static_peak.replicas or 0,
        gpus_max=res.autoscaled.gpus,
        gpu_hours_autoscaled=res.autoscaled.gpu_hours,
        gpu_hours_static_peak=res.static_peak.gpu_hours,
        cost_autoscaled_usd=res.autoscaled.cost,
        windows_violating=res.autoscaled.windows_violating,
    )


def _tier_sets(p: PrefixRequest) -> list[tuple[str, float, float]]:
    out = [("hbm", 0.0, 0.0)]
    if p.host_kv_gib > 0:
        out.append(("hbm+host", p.host_kv_gib, 0.0))
    if p.ssd_kv_gib > 0:
        out.append(
            ("hbm+host+ssd" if p.host_kv_gib > 0 else "hbm+ssd", p.host_kv_gib, p.ssd_kv_gib)
        )
    return out


def _tiers(req: CapacityRequest, res: CapacityResult, p: PrefixRequest) -> list[tuple[str, Tiers]]:
    dep = res.deployment
    assert dep.agg is not None
    w = dep.agg
    gpu = get_gpu(dep.gpu, req.hardware_dirs)
    mem = plan_memory(
        load_model(req.model),
        gpu,
        w.parallel,
        weight_quant=w.weight_quant,
        kv_dtype=w.kv_dtype,
        max_num_batched_tokens=w.max_num_batched_tokens,
        max_num_seqs=w.max_num_seqs,
        gpu_memory_utilization=w.gpu_memory_utilization,
    )
    return [(n, plan_tiers(mem, gpu, h, s, p.ssd_gbps)) for n, h, s in _tier_sets(p)]


def _priced(
    trace: Trace, req: CapacityRequest, tiers: Tiers, replicas: int, p: PrefixRequest
) -> tuple[CapacityResult, PrefixCacheReport]:
    hold = hold_seconds(trace, req)
    res: CapacityResult | None = None
    for _ in range(REFINEMENTS):
        cache = replay(trace, replicas, p.routing, tiers, hold)
        update = {
            "prefix_hit": min(cache.hit_rate, MAX_PRICED_HIT),
            "prefix_load_ms": cache.load_ms[req.percentile],
        }
        res = capacity(trace, req.model_copy(update=update))
        if (res.static_peak.replicas or 1) == replicas:
            break
        replicas = max(res.static_peak.replicas or 1, 1)
    assert res is not None
    return res, cache


def prefix_capacity(trace: Trace, req: CapacityRequest, p: PrefixRequest) -> CapacityResult:
    """``capacity`` with prefix caching priced (module docstring)."""
    if trace.blocks is None:
        if not p.prefix_hit:
            return capacity(trace, req)
        res = capacity(trace, req.model_copy(update={"prefix_hit": p.prefix_hit}))
        stated = {"stated_prefix_hit": p.prefix_hit, "source": "--prefix-hit"}
        return res.model_copy(update={"prefix_cache": stated})
    base = capacity(trace, req)
    scenarios, last = [_scenario("none", base, None)], base
    tiers_last, reps_last = None, max(base.static_peak.replicas or 1, 1)
    for name, tiers in _tiers(req, base, p):
        last, cache = _priced(trace, req, tiers, max(base.static_peak.replicas or 1, 1), p)
        scenarios.append(_scenario(name, last, cache))
        tiers_last, reps_last = tiers, cache.replicas
    assert tiers_last is not None
    hold = hold_seconds(trace, req)
    allowed = [q for q in POLICIES if q != "session" or trace.session is not None]
    rates = {
        q: replay(trace, reps_last, q, tiers_last, hold).hit_rate  # type: ignore[arg-type]
        for q in allowed
    }
    out = PrefixCapacity(routing=p.routing, scenarios=tuple(scenarios), routing_hit_rates=rates)
    return last.model_copy(update={"prefix_cache": out.model_dump(mode="json")})


def hold_seconds(trace: Trace, req: CapacityRequest) -> np.ndarray:
    """Seconds each request counts in flight for routing: TTFT + answer tokens x TPOT (SLO)."""
    return (req.ttft_ms + trace.osl * req.tpot_ms) / 1e3


def hit_rate_curve(
    trace: Trace,
    replicas: int,
    routing: Policy,
    capacities_blocks: np.ndarray,
    hold_s: float | np.ndarray = 0.0,
) -> np.ndarray:
    """Token-weighted hit rate for each total KV capacity per replica (blocks of the trace's
    block size; HBM + host + SSD together, write-through tiers): a tier set whose largest tier
    holds C blocks serves exactly what one LRU of C blocks serves, so the share served by a tier
    is the curve at its capacity less the curve at the next faster tier's."""
    from planner.perf.prefix_cache import hit_curve, route, stack_distances

    if trace.blocks is None:
        raise PlannerInputError("--trace", "a hit-rate curve needs a trace with hash_ids")
    rep = route(trace, replicas, routing, hold_s)
    return hit_curve(stack_distances(trace.blocks, trace.isl, rep), capacities_blocks)
