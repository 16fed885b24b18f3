"""Prefix cache replay: the stack-distance LRU equals a direct LRU simulation (tiers included) on
a synthetic case and on both Mooncake traces; with one unbounded replica the hit rate is the share
of prompt tokens in a previously seen prefix; hit rate is monotone in capacity; routing."""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hardware.errors import PlannerInputError
from planner.perf.prefix_cache import (
    NEVER,
    Tiers,
    hit_curve,
    replay,
    route,
    stack_distances,
    tier_tokens,
)
from planner.workload.mooncake import PrefixBlocks
from planner.workload.trace_gen import AgenticSpec, generate_agentic
from planner.workload.traces import Trace, read_trace

SHARED = Path(__file__).resolve().parents[4] / "shared" / "traces" / "mooncake"
needs_shared = pytest.mark.skipif(
    not SHARED.is_dir(), reason="../shared/traces/mooncake (the Mooncake traces) is absent"
)
TRACES = ("conversation_trace.jsonl", "synthetic_trace.jsonl")


def reference(trace: Trace, replica: np.ndarray, caps: tuple[float, ...]) -> np.ndarray:
    """Direct simulation: one OrderedDict LRU per tier per replica; a request walks its blocks
    while some tier holds them (each served by the fastest), then touches them all, last first,
    in every tier, evicting the least recent beyond each tier's capacity."""
    assert trace.blocks is not None
    caches = [[OrderedDict[int, None]() for _ in caps] for _ in range(int(replica.max()) + 1)]
    out = np.zeros((len(trace), len(caps)))
    bt = trace.blocks.block_tokens
    for i in range(len(trace)):
        ids = trace.blocks.request(i).tolist()
        tiers = caches[int(replica[i])]
        for j, b in enumerate(ids):
            t = next((k for k, c in enumerate(tiers) if b in c), None)
            if t is None:
                break
            out[i, t] += min(bt, int(trace.isl[i]) - bt * j)
        for b in reversed(ids):
            for c, cap in zip(tiers, caps, strict=True):
                c[b] = None
                c.move_to_end(b)
                while len(c) > cap:
                    c.popitem(last=False)
    return out


def seen_prefix_share(trace: Trace) -> float:
    """Share of prompt tokens in a prefix some earlier request had (the definition)."""
    assert trace.blocks is not None
    seen: set[int] = set()
    hit = 0
    for i in range(len(trace)):
        ids = trace.blocks.request(i).tolist()
        k = 0
        while k < len(ids) and ids[k] in seen:
            k += 1
        hit += min(k * trace.blocks.block_tokens, int(trace.isl[i]))
        seen.update(ids)
    return hit / float(trace.isl.sum())


def small_trace(seed: int = 0, sessions: int = 30) -> Trace:
    return generate_agentic(
        AgenticSpec(sessions=sessions, seed=seed, system_tokens=1024, tool_tokens=600)
    )


def brute_distances(trace: Trace, replica: np.ndarray) -> np.ndarray:
    """Stack distance by definition: position in an explicit recency list of the replica."""
    assert trace.blocks is not None
    stacks: dict[int, list[int]] = {}
    out: list[int] = []
    for i in range(len(trace)):
        stack = stacks.setdefault(int(replica[i]), [])
        ids = trace.blocks.request(i).tolist()
        out.extend(stack.index(b) if b in stack else NEVER for b in ids)
        for b in reversed(ids):
            if b in stack:
                stack.remove(b)
            stack.insert(0, b)
    return np.array(out)


def test_distances_equal_definition_on_small_trace() -> None:
    tr = small_trace(sessions=12)
    rep = route(tr, 3, "round-robin")
    assert tr.blocks is not None
    got = stack_distances(tr.blocks, tr.isl, rep).distance
    np.testing.assert_array_equal(got, brute_distances(tr, rep))


@pytest.mark.parametrize("policy", ["round-robin", "prefix", "session"])
@pytest.mark.parametrize("caps", [(8.0,), (20.0, 60.0), (5.0, 30.0, 200.0), (40.0, 10.0)])
def test_tiers_equal_direct_lru_on_small_trace(policy: str, caps: tuple[float, ...]) -> None:
    tr = small_trace(seed=1)
    rep = route(tr, 3, policy)  # type: ignore[arg-type]
    assert tr.blocks is not None
    got = tier_tokens(stack_distances(tr.blocks, tr.isl, rep), caps, len(tr))
    np.testing.assert_allclose(got, reference(tr, rep, caps))


@needs_shared
@pytest.mark.parametrize("name", TRACES)
def test_lru_equals_direct_simulation_on_mooncake_traces(name: str) -> None:
    tr = read_trace(SHARED / name)
    assert tr.blocks is not None
    for rep, caps in (
        (route(tr, 4, "round-robin"), (2000.0, 12000.0)),
        (route(tr, 2, "prefix"), (6000.0,)),
    ):
        got = tier_tokens(stack_distances(tr.blocks, tr.isl, rep), caps, len(tr))
        np.testing.assert_allclose(got, reference(tr, rep, caps))


@needs_shared
def test_unbounded_single_replica_is_seen_prefix_share() -> None:
    tr = read_trace(SHARED / "conversation_trace.jsonl")
    assert tr.blocks is not None
    d = stack_distances(tr.blocks, tr.isl, np.zeros(len(tr), dtype=np.int64))
    share = tier_tokens(d, (np.inf,), len(tr)).sum() / float(tr.isl.sum())
    assert share == pytest.approx(seen_prefix_share(tr), abs=1e-12)
    assert round(share, 3) == 0.374  # the figure for this trace
    assert float(hit_curve(d, np.array([np.inf]))[0]) == pytest.approx(share, abs=1e-12)


def test_unbounded_single_replica_small_trace() -> None:
    tr = small_trace(seed=4)
    assert tr.blocks is not None
    d = stack_distances(tr.blocks, tr.isl, np.zeros(len(tr), dtype=np.int64))
    share = tier_tokens(d, (np.inf,), len(tr)).sum() / float(tr.isl.sum())
    assert share == pytest.approx(seen_prefix_share(tr), abs=1e-12)


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 1000),
    replicas=st.integers(1, 4),
    caps=st.lists(st.floats(0, 400), min_size=2, max_size=2),
    policy=st.sampled_from(["round-robin", "prefix", "session"]),
)
def test_hit_rate_monotone_in_capacity(
    seed: int, replicas: int, caps: list[float], policy: str
) -> None:
    tr = small_trace(seed=seed, sessions=10)
    assert tr.blocks is not None
    rep = route(tr, replicas, policy)  # type: ignore[arg-type]
    d = stack_distances(tr.blocks, tr.isl, rep)
    lo, hi = sorted(caps)
    curve = hit_curve(d, np.array([lo, hi]))
    assert curve[0] <= curve[1] + 1e-12
    a = tier_tokens(d, (lo,), len(tr)).sum()
    b = tier_tokens(d, (lo, hi), len(tr)).sum()  # adding a larger tier never loses a hit
    assert a <= b + 1e-9
    assert a / float(tr.isl.sum()) == pytest.approx(float(curve[0]), abs=1e-12)


def test_prefix_routing_beats_round_robin_on_sessions() -> None:
    tr = small_trace(seed=3, sessions=60)
    assert tr.blocks is not None
    rates = {}
    for policy in ("round-robin", "prefix", "session"):
        d = stack_distances(tr.blocks, tr.isl, route(tr, 4, policy))  # type: ignore[arg-type]
        rates[policy] = float(hit_curve(d, np.array([np.inf]))[0])
    assert rates["prefix"] > rates["round-robin"]
    assert rates["session"] > rates["round-robin"]


def test_load_threshold_spreads_a_hot_prefix() -> None:
    """Every request has the same prefix: without load tracking, affinity sends all of them to
    one replica; with each held long, imbalance sends the overflow elsewhere."""
    n = 400
    blocks = PrefixBlocks(
        np.tile(np.array([1, 2], dtype=np.int64), n), np.arange(0, 2 * n + 1, 2, dtype=np.int64)
    )
    tr = Trace(np.arange(n, dtype=float) * 0.01, np.full(n, 1024), np.full(n, 10), blocks=blocks)
    assert np.bincount(route(tr, 4, "prefix"), minlength=4).max() == n
    spread = np.bincount(route(tr, 4, "prefix", hold_s=100.0), minlength=4)
    assert spread.min() > 0 and spread.max() < n


def test_route_refuses_what_the_trace_lacks() -> None:
    tr = Trace(np.zeros(2), np.array([5, 5]), np.array([1, 1]))
    with pytest.raises(PlannerInputError, match="session"):
        route(tr, 2, "session")
    with pytest.raises(PlannerInputError, match="hash_ids"):
        route(tr, 2, "prefix")
    with pytest.raises(PlannerInputError, match="replicas"):
        route(tr, 0, "round-robin")


def test_replay_reports_tiers_and_load_time() -> None:
    """A tiny HBM and a large host tier: the host serves what HBM evicted, and its load time is
    the bytes one GPU holds of those tokens over the tier's bandwidth."""
    tr = small_trace(seed=6, sessions=40)
    tiers = Tiers(
        names=("hbm", "host"),
        capacity_blocks=(10.0, 1e9),
        gib_per_gpu=(1.0, 100.0),
        bandwidth_bytes_per_s=(np.inf, 50e9),
        sources=("test", "test"),
        kv_bytes_per_token_per_gpu=1e5,
    )
    rep = replay(tr, 2, "prefix", tiers)
    hbm, host = rep.tiers
    assert host.tokens > hbm.tokens > 0
    assert rep.hit_rate == pytest.approx(hbm.hit_rate + host.hit_rate)
    assert rep.prefill_tokens_saved == hbm.tokens + host.tokens
    assert hbm.load_s == 0 and host.load_s == pytest.approx(host.tokens * 1e5 / 50e9)
    assert rep.load_ms["mean"] * len(tr) / 1e3 == pytest.approx(host.load_s)
    d = stack_distances(tr.blocks, tr.isl, route(tr, 2, "prefix")) if tr.blocks else None
    assert d is not None and rep.hit_rate == pytest.approx(float(hit_curve(d, np.array([1e9]))[0]))
