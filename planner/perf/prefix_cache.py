"""Prefix caching on replicas: route a trace's requests, replay their KV blocks through each
replica's LRU cache with tiers (HBM, host memory, SSD), and count the prompt tokens each tier
serves.

Model (every piece a stated assumption or a cited engine behaviour):

* **Blocks.** A request's prompt is its block ids (Mooncake ``hash_ids``, :mod:`planner.workload
  .mooncake`): a block is served from cache only if every block before it is (prefix caching
  stops at the first miss, as vLLM's and SGLang's lookups do). Hit tokens are the tokens of the
  leading hit blocks (the last block holds ``isl - block_tokens * (n - 1)``).
* **LRU per replica, looked up before it is filled.** A request first matches its prefix against
  the cache as it was, then touches all its blocks; it touches them last block first, so that a
  request's head is the most recent (vLLM frees a request's blocks in reverse order "so that the
  tail blocks are evicted first", vllm/v1/core/kv_cache_manager.py ``KVCacheManager.free``).
* **Tiers are write-through** (vLLM's KV offloading connector and LMCache store every computed
  block to host memory; SGLang HiCache's default ``write_through`` policy): every tier sees every
  block, each tier is an LRU of its own size, and a block is served by the fastest tier holding
  it. By the LRU inclusion property (Mattson et al., "Evaluation techniques for storage
  hierarchies", IBM Systems Journal 1970) an LRU cache of C blocks holds exactly the blocks of
  stack distance < C, so one pass computes every block's stack distance (distinct blocks touched
  on its replica since its last touch) and every capacity follows from it: hit in a tier of
  C blocks iff distance < C. Hit rate is therefore monotone in every tier's capacity.
* **Load time** of a tier = the bytes one GPU holds of the hit tokens / the tier's bandwidth to
  one GPU (each GPU loads its own shard over its own link); HBM hits load nothing.
* **Routing** (:func:`route`): ``round-robin``; ``prefix`` (cache-aware, after SGLang's model
  gateway ``cache_aware`` policy: when the replicas' loads are imbalanced go to the least loaded,
  else to the longest prefix match when it covers at least ``cache_threshold`` of the prompt, else
  to the replica holding the fewest blocks); ``session`` (a session sticks to its first replica
  unless that one is imbalanced against the least loaded). The router's view of a replica is every
  block sent to it (not its evictions); the load of a replica is its requests in flight, each
  held ``hold_s`` from its arrival (0: loads are not tracked).
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from hardware.errors import PlannerInputError
from hardware.spec import GpuSpec
from planner.perf.memory_plan import MemoryPlan
from planner.workload.mooncake import BLOCK_TOKENS, PrefixBlocks
from planner.workload.traces import Trace

Policy = Literal["round-robin", "prefix", "session"]
POLICIES: tuple[str, ...] = ("round-robin", "prefix", "session")
TIERS: tuple[str, ...] = ("hbm", "host", "ssd")
"""Tiers from the fastest; a block is served by the first that holds it."""
NEVER = np.iinfo(np.int64).max
"""Stack distance of a block never touched before on its replica (a miss at any capacity)."""


@dataclass(frozen=True)
class RouterThresholds:
    """When the cache-aware router gives up affinity (SGLang model gateway ``cache_aware``
    defaults: lightseekorg/smg docs/getting-started/load-balancing.md, ``--cache-threshold 0.3
    --balance-abs-threshold 64 --balance-rel-threshold 1.5``)."""

    cache_threshold: float = 0.3
    """Least share of the prompt's blocks the best match must cover to win, 0..1."""
    balance_abs: int = 64
    """Imbalanced when max - min requests in flight exceed this ..."""
    balance_rel: float = 1.5
    """... and max exceeds this many times min."""


def route(
    trace: Trace,
    replicas: int,
    policy: Policy,
    hold_s: float | np.ndarray = 0.0,
    thresholds: RouterThresholds = RouterThresholds(),  # noqa: B008 (frozen)
) -> np.ndarray:
    """The replica (0..replicas-1) of every request, in trace order (int64)."""
    if replicas < 1:
        raise PlannerInputError("--replicas", f"must be >= 1, got {replicas}")
    if policy not in POLICIES:
        raise PlannerInputError("--routing", f"{policy!r} is not one of {', '.join(POLICIES)}")
    n = len(trace)
    if policy == "round-robin" or replicas == 1:
        return np.arange(n, dtype=np.int64) % replicas
    if policy == "session" and trace.session is None:
        raise PlannerInputError(
            "--routing", "session affinity needs a trace with a session column or field"
        )
    if policy == "prefix" and trace.blocks is None:
        raise PlannerInputError("--routing", "prefix routing needs a trace with hash_ids")
    router = _Router(replicas, thresholds, trace.blocks)
    done = trace.arrival_s + np.broadcast_to(np.asarray(hold_s, dtype=float), (n,))
    sessions = None if trace.session is None else trace.session.tolist()
    out = np.empty(n, dtype=np.int64)
    for i, now in enumerate(trace.arrival_s.tolist()):
        router.release(now)
        if policy == "session":
            assert sessions is not None
            r = router.sticky(sessions[i])
        else:
            r = router.prefix(i)
        router.send(i, r, float(done[i]))
        out[i] = r
    return out


@dataclass
class _Router:
    """The router's state: blocks sent to each replica (bit masks per block), requests in flight."""

    replicas: int
    th: RouterThresholds
    blocks: PrefixBlocks | None
    owners: dict[int, int] = field(default_factory=dict)
    held: list[int] = field(default_factory=list)
    load: list[int] = field(default_factory=list)
    finish: list[tuple[float, int]] = field(default_factory=list)
    home: dict[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.held = [0] * self.replicas
        self.load = [0] * self.replicas

    def release(self, now: float) -> None:
        while self.finish and self.finish[0][0] <= now:
            self.load[heapq.heappop(self.finish)[1]] -= 1

    def _least(self, among: range | list[int]) -> int:
        return min(among, key=lambda r: (self.load[r], self.held[r], r))

    def _imbalanced(self, r: int) -> bool:
        low = min(self.load)
        return self.load[r] - low > self.th.balance_abs and self.load[r] > self.th.balance_rel * low

    def prefix(self, i: int) -> int:
        everyone = range(self.replicas)
        if self._imbalanced(max(everyone, key=lambda r: self.load[r])):
            return self._least(everyone)
        assert self.blocks is not None
        ids = self.blocks.request(i).tolist()
        alive, depth = (1 << self.replicas) - 1, 0
        for b in ids:
            m = self.owners.get(b, 0) & alive
            if not m:
                break
            alive, depth = m, depth + 1
        if depth and depth >= self.th.cache_threshold * len(ids):
            return self._least([r for r in everyone if alive >> r & 1])
        return min(everyone, key=lambda r: (self.held[r], self.load[r], r))

    def sticky(self, session: int) -> int:
        r = self.home.get(session)
        if r is None or self._imbalanced(r):
            r = self._least(range(self.replicas))
            self.home[session] = r
        return r

    def send(self, i: int, r: int, done: float) -> None:
        bit = 1 << r
        if self.blocks is not None:
            for b in self.blocks.request(i).tolist():
                m = self.owners.get(b, 0)
                if not m & bit:
                    self.owners[b] = m | bit
                    self.held[r] += 1
        self.load[r] += 1
        heapq.heappush(self.finish, (done, r))


def _greater_before(v: np.ndarray, group: np.ndarray) -> np.ndarray:
    """For every i, #{k < i : group[k] == group[i], v[k] > v[i]}; ``group`` labels contiguous
    runs. Bottom-up merge counting, vectorized per level: at the level of segments of 2s, every
    element of a right half counts the larger values of its left half (sorted keys, one
    ``searchsorted``); each pair k < i is split at exactly one level."""
    n = v.size
    out = np.zeros(n, dtype=np.int64)
    if n < 2:
        return out
    span = int(v.max() - v.min()) + 2
    val = (v - v.min()).astype(np.int64)
    idx = np.arange(n, dtype=np.int64)
    level = 0
    while (1 << level) < n:
        seg = idx >> (level + 1)
        change = np.ones(n, dtype=bool)
        change[1:] = (seg[1:] != seg[:-1]) | (group[1:] != group[:-1])
        key_base = np.cumsum(change) * span
        right = ((idx >> level) & 1).astype(bool)
        left_keys = np.sort(key_base[~right] + val[~right])
        q_base, q_val = key_base[right], val[right]
        hi = np.searchsorted(left_keys, q_base + span - 1, side="right")
        lo = np.searchsorted(left_keys, q_base + q_val, side="right")
        out[right] += hi - lo
        level += 1
    return out


@dataclass(frozen=True)
class Distances:
    """Every block's LRU stack distance on its replica when its request looked it up."""

    distance: np.ndarray
    """Per block in trace (CSR) order: distinct blocks touched on the replica since this block's
    last touch, before this request (``NEVER`` when not touched before). int64."""
    tokens: np.ndarray
    """Prompt tokens of each block (the last one of a request may be partial). int64."""
    request: np.ndarray
    """Request index of each block. int64."""


def stack_distances(blocks: PrefixBlocks, isl: np.ndarray, replica: np.ndarray) -> Distances:
    """Stack distances of every block (module docstring), in O(N log^2 N) numpy."""
    counts = blocks.counts()
    n_req = counts.size
    req_of = np.repeat(np.arange(n_req, dtype=np.int64), counts)
    pos_in = np.arange(blocks.ids.size, dtype=np.int64) - blocks.offsets[req_of]
    # the access stream: requests grouped by replica (trace order kept), blocks last to first
    order_req = np.argsort(replica, kind="stable")
    rank = np.empty(n_req, dtype=np.int64)
    rank[order_req] = np.arange(n_req)
    stream = np.lexsort((-pos_in, rank[req_of]))
    sid = blocks.ids[stream]
    srep = replica[req_of[stream]]
    sreq = req_of[stream]
    n = stream.size
    prev = np.full(n, -1, dtype=np.int64)
    by_key = np.lexsort((np.arange(n), sid, srep))
    same = (sid[by_key][1:] == sid[by_key][:-1]) & (srep[by_key][1:] == srep[by_key][:-1])
    prev[by_key[1:][same]] = by_key[:-1][same]
    start = np.flatnonzero(np.r_[True, sreq[1:] != sreq[:-1]])
    s_of = np.repeat(start, np.diff(np.r_[start, n]))
    warm = np.flatnonzero(prev >= 0)
    dist = np.full(n, NEVER, dtype=np.int64)
    if warm.size:
        p = prev[warm]
        before = _greater_before(p, np.zeros(warm.size, dtype=np.int64))
        within = _greater_before(p, sreq[warm])
        dist[warm] = s_of[warm] - p - 1 - (before - within)
    out = np.empty(n, dtype=np.int64)
    out[stream] = dist
    last = blocks.offsets[1:] - 1
    tokens = np.full(blocks.ids.size, blocks.block_tokens, dtype=np.int64)
    tokens[last[counts > 0]] = (isl - blocks.block_tokens * (counts - 1))[counts > 0]
    return Distances(out, tokens, req_of)


def tier_tokens(dist: Distances, capacities: tuple[float, ...], n_req: int) -> np.ndarray:
    """Prompt tokens each tier serves per request, shape (requests, tiers): the leading blocks
    held by some tier (distance < its capacity in blocks), each from the fastest holding it."""
    caps = np.asarray(capacities, dtype=float)
    d = dist.distance.astype(float)
    d[dist.distance == NEVER] = math.inf
    miss = d >= (caps.max() if caps.size else 0.0)
    cum: np.ndarray = np.cumsum(miss)
    first: np.ndarray = np.searchsorted(dist.request, dist.request)  # first block of the request
    hit: np.ndarray = (cum - cum[first] + miss[first]) == 0  # no miss up to and including it
    tier = np.argmax(d[:, None] < caps[None, :], axis=1) if caps.size else np.zeros(d.size, int)
    out = np.zeros((n_req, max(caps.size, 1)))
    np.add.at(out, (dist.request[hit], tier[hit]), dist.tokens[hit])
    return out


def hit_curve(dist: Distances, capacities: np.ndarray) -> np.ndarray:
    """Token-weighted hit rate of one tier of each capacity (blocks per replica), all at once:
    a block is served iff every block up to it in its request has distance < capacity."""
    if not dist.distance.size:
        return np.zeros(np.shape(capacities))
    warm = dist.distance != NEVER
    big = int(dist.distance[warm].max(initial=0)) + 2
    key = dist.request * big + np.where(warm, dist.distance, big - 1)
    prefix_max = (np.maximum.accumulate(key) - dist.request * big).astype(float)
    prefix_max[prefix_max == big - 1] = math.inf
    order = np.argsort(prefix_max)
    cum = np.r_[0, np.cumsum(dist.tokens[order])]
    idx = np.searchsorted(prefix_max[order], np.asarray(capacities, dtype=float), side="left")
    return cum[idx] / max(float(dist.tokens.sum()), 1.0)


GIB = float(2**30)
"""Bytes per GiB (``--host-kv-gib``, ``--ssd-kv-gib``)."""
GB = 1e9
"""Bytes per GB (``--ssd-gbps``: GB/s)."""


@dataclass(frozen=True)
class Tiers:
    """The KV tiers of one replica, fastest first."""

    names: tuple[str, ...]
    """Tier names (of ``TIERS``)."""
    capacity_blocks: tuple[float, ...]
    """Blocks each tier holds per replica."""
    gib_per_gpu: tuple[float, ...]
    """Bytes of each tier per GPU, GiB."""
    bandwidth_bytes_per_s: tuple[float, ...]
    """Load bandwidth to one GPU, bytes/s (inf for HBM: nothing to load)."""
    sources: tuple[str, ...]
    """Where each capacity and bandwidth comes from."""
    kv_bytes_per_token_per_gpu: float
    """KV bytes one token puts on one GPU (the memory model's)."""


def plan_tiers(
    mem: MemoryPlan,
    gpu: GpuSpec,
    host_kv_gib: float = 0.0,
    ssd_kv_gib: float = 0.0,
    ssd_gbps: float | None = None,
    block_tokens: int = BLOCK_TOKENS,
) -> Tiers:
    """HBM: the KV budget the memory model leaves (all of it: a replica's running sequences are
    the most recent blocks of its LRU stack); host and SSD: ``*_kv_gib`` per GPU, in blocks in
    the same proportion to that budget. Bandwidths from the GPU spec (``--ssd-gbps`` overrides)."""
    for flag, v in (("--host-kv-gib", host_kv_gib), ("--ssd-kv-gib", ssd_kv_gib)):
        if not (v >= 0 and math.isfinite(v)):
            raise PlannerInputError(flag, f"must be a finite number >= 0, got {v}")
    hbm_blocks = mem.kv_capacity_tokens / block_tokens
    per_gib = hbm_blocks * GIB / mem.kv_budget_bytes_per_gpu
    names, caps, gibs = ["hbm"], [hbm_blocks], [mem.kv_budget_bytes_per_gpu / GIB]
    bws, srcs = [math.inf], ["memory model: KV budget per GPU (planner/perf/memory_plan.py)"]
    if host_kv_gib > 0:
        host_bw = gpu.host_kv_bandwidth_bytes_per_s or gpu.pcie_bandwidth_bytes_per_s
        key = (
            "host_kv_bandwidth_bytes_per_s"
            if gpu.host_kv_bandwidth_bytes_per_s
            else "pcie_bandwidth_bytes_per_s"
        )
        names.append("host")
        caps.append(host_kv_gib * per_gib)
        gibs.append(host_kv_gib)
        bws.append(host_bw)
        srcs.append(f"--host-kv-gib; {gpu.key} {key}: {gpu.sources.get(key, 'not stated')}")
    if ssd_kv_gib > 0:
        if ssd_gbps is None and gpu.ssd_kv_bandwidth_bytes_per_s is None:
            raise PlannerInputError(
                "--ssd-gbps", f"{gpu.key} states no SSD bandwidth; give it in GB/s per GPU"
            )
        bw = ssd_gbps * GB if ssd_gbps is not None else gpu.ssd_kv_bandwidth_bytes_per_s
        assert bw is not None
        source = (
            "--ssd-gbps"
            if ssd_gbps is not None
            else f"{gpu.key} ssd_kv_bandwidth_bytes_per_s: "
            + gpu.sources.get("ssd_kv_bandwidth_bytes_per_s", "not stated")
        )
        names.append("ssd")
        caps.append(ssd_kv_gib * per_gib)
        gibs.append(ssd_kv_gib)
        bws.append(bw)
        srcs.append(f"--ssd-kv-gib; {source}")
    return Tiers(
        tuple(names),
        tuple(caps),
        tuple(gibs),
        tuple(bws),
        tuple(srcs),
        mem.kv_bytes_per_token_per_gpu,
    )


class TierUse(BaseModel):
    """What one tier served over the trace."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    tier: str = Field(description="hbm, host or ssd.")
    gib_per_gpu: float = Field(description="Tier size per GPU, GiB.")
    blocks_per_replica: float = Field(description="Blocks the tier holds per replica.")
    hit_rate: float = Field(description="Share of all prompt tokens this tier served, 0..1.")
    tokens: int = Field(description="Prompt tokens this tier served.")
    bandwidth_gb_per_s: float | None = Field(
        description="Load bandwidth to one GPU, GB/s; None for HBM (nothing to load)."
    )
    load_s: float = Field(description="Seconds spent loading from this tier, summed over requests.")
    source: str = Field(description="Where the size and bandwidth come from.")


class PrefixCacheReport(BaseModel):
    """Prefix caching of one trace on one set of replicas."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    routing: str = Field(description="round-robin, prefix or session.")
    replicas: int = Field(description="Replicas the trace was routed over.")
    block_tokens: int = Field(description="Tokens per KV block.")
    requests: int = Field(description="Requests replayed.")
    prompt_tokens: int = Field(description="Prompt tokens of all requests.")
    tiers: tuple[TierUse, ...] = Field(description="Per tier, fastest first.")
    hit_rate: float = Field(description="Share of prompt tokens served from any tier, 0..1.")
    prefill_tokens_saved: int = Field(description="Prompt tokens not recomputed.")
    load_ms: dict[str, float] = Field(
        description="Per-request load time from host and SSD, ms: mean, p50, p90, p99."
    )
    method: str = Field(
        default="LRU per replica (write-through tiers, each block served by the fastest tier "
        "holding it, lookup stops at the first miss); load = hit bytes per GPU / tier bandwidth",
        description="How the hit rates were found.",
    )


def replay(
    trace: Trace,
    replicas: int,
    routing: Policy,
    tiers: Tiers,
    hold_s: float | np.ndarray = 0.0,
) -> PrefixCacheReport:
    """Route ``trace`` over ``replicas``, replay its blocks through ``tiers``, and report."""
    if trace.blocks is None:
        raise PlannerInputError("--trace", "prefix caching needs a trace with hash_ids")
    rep = route(trace, replicas, routing, hold_s)
    dist = stack_distances(trace.blocks, trace.isl, rep)
    per = tier_tokens(dist, tiers.capacity_blocks, len(trace))
    seconds = per * tiers.kv_bytes_per_token_per_gpu / np.array(tiers.bandwidth_bytes_per_s)
    load_ms = seconds.sum(axis=1) * 1e3
    total = float(trace.isl.sum())
    uses = tuple(
        TierUse(
            tier=name,
            gib_per_gpu=tiers.gib_per_gpu[k],
            blocks_per_replica=tiers.capacity_blocks[k],
            hit_rate=float(per[:, k].sum()) / total,
            tokens=int(per[:, k].sum()),
            bandwidth_gb_per_s=None
            if math.isinf(tiers.bandwidth_bytes_per_s[k])
            else tiers.bandwidth_bytes_per_s[k] / GB,
            load_s=float(seconds[:, k].sum()),
            source=tiers.sources[k],
        )
        for k, name in enumerate(tiers.names)
    )
    return PrefixCacheReport(
        routing=routing,
        replicas=replicas,
        block_tokens=trace.blocks.block_tokens,
        requests=len(trace),
        prompt_tokens=int(total),
        tiers=uses,
        hit_rate=float(per.sum()) / total,
        prefill_tokens_saved=int(per.sum()),
        load_ms={
            "mean": float(load_ms.mean()),
            **{
                p: float(np.percentile(load_ms, q))
                for p, q in (("p50", 50), ("p90", 90), ("p99", 99))
            },
        },
    )
