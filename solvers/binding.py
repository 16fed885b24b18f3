"""What limits a plan, per docs/architecture.md ("Binding constraint"), and the evidence.

The binding constraint is the limit that stops the *next better plan*: among candidates within the
GPU budget that fit in memory and score better than the pick (more throughput per GPU, lower cost
or fewer GPUs), the nearest one; it fails some limit, and the one it exceeds most binds (named with
that plan's predicted value and the limit; at the upper edge of the prediction band when the plan
requires the SLO there, ``PlanRequest.confidence`` > 0). When no candidate within the budget scores
better, a better plan with more GPUs than the budget means the GPU budget binds; otherwise KV
capacity binds when it caps the running batch, else the workload itself (its clients or rate are
all there is to serve) or, without a stated load, the search space. Headroom is stated for every
limit of the pick.

Also: the top-N feasible candidates (not only the Pareto front) and, for each GPU type asked for,
its best plan or the reason it has none.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from hardware.catalog import get_gpu
from planner.quantities import count, ms, num
from solvers.plan_core import rank

if TYPE_CHECKING:
    from solvers.plan_core import Evaluated

BINDING = ("TTFT", "TPOT", "memory", "GPU budget", "workload", "search space")
"""Every name ``explain_binding`` gives."""
GAIN = 1.01
"""A plan must beat the pick by more than 1% of the objective to count as better."""
TOP_CANDIDATES = 50
"""Feasible candidates kept in the plan file, best first."""


def plural(n: object, noun: str) -> str:
    """``n`` and ``noun`` agreeing in number ("1 GPU", "8 GPUs")."""
    c = count(n)
    return f"{c} {noun}" if c == "1" else f"{c} {noun}s"


def objective_value(ev: Evaluated, i: int) -> float:
    """The quantity the request's objective ranks by, of candidate ``i`` (in its own unit)."""
    obj = ev.req.objective
    if obj == "cost":
        at_rate = ev.req.rate_per_s is not None
        return float(ev.cost_per_hour[i] if at_rate else ev.cost_per_mtok_total[i])
    if obj == "gpus":
        return float(ev.gpus[i])
    if obj == "energy":
        return float(-ev.score("energy")[i])
    return float(ev.tok_per_gpu[i])


def objective_text(ev: Evaluated, value: float) -> str:
    """``value`` of the objective in words with its unit ("$25.6 per hour")."""
    obj = ev.req.objective
    if obj == "cost":
        if ev.req.rate_per_s is not None:
            return f"${num(value)} per hour"
        return f"${num(value)} per 1M total tokens"
    if obj == "gpus":
        return plural(value, "GPU")
    if obj == "energy":
        return f"{num(value)} J per total token"
    return f"{num(value)} output tokens/s per GPU"


def objective_goal(ev: Evaluated) -> str:
    """What a better plan has, in words."""
    obj = ev.req.objective
    if obj == "cost":
        at_rate = ev.req.rate_per_s is not None
        return "a lower $ per hour" if at_rate else "a lower $ per 1M total tokens"
    if obj == "energy":
        return "fewer joules per total token"
    return "fewer GPUs" if obj == "gpus" else "more output tokens/s per GPU"


def raw_score(ev: Evaluated, objective: str) -> np.ndarray:
    """The objective (higher is better) of every candidate, ignoring the GPU budget."""
    within = ev.within_budget
    ev.within_budget = np.ones_like(within)
    try:
        return ev.score(objective)
    finally:
        ev.within_budget = within


def headroom(ev: Evaluated, i: int) -> list[dict[str, object]]:
    """Every limit of candidate ``i``: its value, the limit and the headroom (1 - value/limit)."""
    req = ev.req
    b, j = ev.blocks[ev.block_of[i]], int(ev.local[i])
    items = [
        (f"TTFT {req.percentile}", float(ev.ttft[i]), req.ttft_ms, "ms"),
        (f"TPOT {req.percentile}", float(ev.tpot[i]), req.tpot_ms, "ms"),
        (
            "KV capacity",
            float(b.res.decode_batch[j]),
            float(b.res.seq_capacity[j]),
            "running requests per worker",
        ),
        ("GPU budget", float(ev.gpus_bought[i]), float(req.max_gpus), "GPUs bought"),
    ]
    return [
        {
            "limit_name": n,
            "value": v,
            "limit": lim,
            "unit": u,
            "headroom": (1.0 - v / lim) if lim > 0 and np.isfinite(v) else None,
        }
        for n, v, lim, u in items
    ]


def _violation(ev: Evaluated, k: int) -> tuple[str, float, float]:
    """(constraint, predicted value, limit) that candidate ``k`` exceeds most (by ratio)."""
    req = ev.req
    t, p = float(ev.ttft_edge[k]), float(ev.tpot_edge[k])  # at the band edge when required
    if not bool(ev.predicted_ok[k]) or not np.isfinite(t):  # saturated: the queue grows without end
        return "TTFT", float("inf"), req.ttft_ms
    if t / req.ttft_ms >= p / req.tpot_ms:
        return "TTFT", t, req.ttft_ms
    return "TPOT", p, req.tpot_ms


def _config_only(ev: Evaluated, i: int) -> str:
    """The deployment's description without its closed-loop clients (compared, not shown)."""
    return ev.summary(i).split(", ")[0]


def _change(ev: Evaluated, best: int, k: int) -> str:
    """What the next better plan changes, in words (GPU type, GPUs, mode, shape, clients)."""
    parts = []
    if ev.type_of(k) != ev.type_of(best):
        parts.append(f"on {type_name(ev, k)}")
    if ev.gpus[k] != ev.gpus[best]:
        parts.append(f"{plural(ev.gpus[k], 'GPU')} instead of {count(ev.gpus[best])}")
    if _config_only(ev, k) != _config_only(ev, best):  # names the mode too
        parts.append(_config_only(ev, k))
    ck, cb = ev.clients_of(k), ev.clients_of(best)
    if ck and cb and ck != cb and ev.req.rate_per_s is None:
        parts.append(f"{plural(ck, 'client')} per worker instead of {count(cb)}")
    return ", ".join(parts) or ev.summary(k)


def _next(ev: Evaluated, best: int, k: int) -> dict[str, object]:
    """The next better plan's fields a sentence names."""
    return {
        "gpu": ev.gpu_of(k),
        "gpus": int(ev.gpus[k]),
        "mode": ev.mode_of(k),
        "config": ev.summary(k),
        "objective_value": objective_value(ev, k),
        "change": _change(ev, best, k),
    }


def at_confidence(confidence: float) -> str:
    """Where an SLO is read: at the one-sided ``confidence`` quantile of the prediction's band
    (``--confidence``), or nothing at the point prediction (confidence 0)."""
    return f" at {confidence:.0%} confidence (one-sided)" if confidence > 0 else ""


def _slo_binding(ev: Evaluated, best: int, k: int) -> dict[str, object]:
    name, value, limit = _violation(ev, k)
    pct = ev.req.percentile
    edge = at_confidence(ev.req.confidence)
    shown = "an unbounded queue" if not np.isfinite(value) else ms(value)
    nxt, mine = _next(ev, best, k), objective_value(ev, best)
    sentence = (
        f"{name} {pct} binds{edge}: the next better plan ({nxt['change']}; "
        f"{objective_text(ev, objective_value(ev, k))} against "
        f"{objective_text(ev, mine)}) would push {name} {pct}{edge} to {shown}, past the "
        f"{ms(limit)} SLO."
    )
    return {
        "constraint": name,
        "value": value if np.isfinite(value) else None,
        "limit": limit,
        "unit": "ms",
        "next_config": ev.summary(k),
        "next": nxt,
        "objective_value": mine,
        "sentence": sentence,
    }


def _budget_binding(ev: Evaluated, best: int, k: int) -> dict[str, object]:
    req = ev.req
    nxt, mine = _next(ev, best, k), objective_value(ev, best)
    sentence = (
        f"GPU budget binds: a plan buying {plural(ev.gpus_bought[k], 'GPU')} ({nxt['change']}) "
        "would meet "
        f"the SLOs at {objective_text(ev, objective_value(ev, k))} "
        f"against {objective_text(ev, mine)}, but the budget is {plural(req.max_gpus, 'GPU')}."
    )
    return {
        "constraint": "GPU budget",
        "value": float(ev.gpus_bought[k]),
        "limit": float(req.max_gpus),
        "unit": "GPUs bought",
        "next_config": ev.summary(k),
        "next": nxt,
        "objective_value": mine,
        "sentence": sentence,
    }


def _tightest(ev: Evaluated, best: int) -> str:
    """The pick's SLO with the least headroom, with its figures (at the band edge when the plan
    requires the SLO there)."""
    h = ev.headroom(best)
    name = str(h["tightest_at_band_edge"])
    m = h[name.lower()]
    assert isinstance(m, dict)
    slo = ev.req.ttft_ms if name == "TTFT" else ev.req.tpot_ms
    robust = ev.req.confidence > 0
    at = float(m["band_edge_ms"]) if robust else slo / float(m["slo_over_predicted"])
    where = at_confidence(ev.req.confidence)
    return f"least headroom: {name} {ev.req.percentile}{where} {ms(at)} against the {ms(slo)} SLO"


def _idle_binding(ev: Evaluated, best: int) -> dict[str, object]:
    req = ev.req
    b, j = ev.blocks[ev.block_of[best]], int(ev.local[best])
    cap, running = float(b.res.seq_capacity[j]), float(b.res.decode_batch[j])
    n, bought = int(ev.gpus[best]), int(ev.gpus_bought[best])
    used = (
        f"{count(n)} of {plural(req.max_gpus, 'GPU')} used"
        if bought == n
        else f"{plural(n, 'GPU')} used, {count(bought)} of {plural(req.max_gpus, 'GPU')} bought"
    )
    mine = objective_value(ev, best)
    if bool(ev.kv_full[best]):
        return {
            "constraint": "memory",
            "value": running,
            "limit": cap,
            "unit": "running requests per worker",
            "next_config": None,
            "objective_value": mine,
            "sentence": (
                f"Memory binds: KV-cache capacity caps each worker at "
                f"{plural(cap, 'running request')}; no plan within the budget does "
                f"better than {objective_text(ev, mine)} ({used})."
            ),
        }
    if req.concurrency is not None or req.rate_per_s is not None:
        load = (
            plural(req.concurrency, "client")
            if req.concurrency is not None
            else f"{num(req.rate_per_s)} requests/s"
        )
        return {
            "constraint": "workload",
            "value": float(ev.gpus_bought[best]),
            "limit": float(req.max_gpus),
            "unit": "GPUs bought",
            "next_config": None,
            "objective_value": mine,
            "sentence": (
                f"The workload binds: {load} is all there is to serve, and no other "
                f"configuration serves it at better than {objective_text(ev, mine)} "
                f"({used}; {_tightest(ev, best)})."
            ),
        }
    return {
        "constraint": "search space",
        "value": None,
        "limit": None,
        "unit": "",
        "next_config": None,
        "objective_value": mine,
        "sentence": (
            f"No configuration searched does better than {objective_text(ev, mine)} "
            f"({used}; {_tightest(ev, best)})."
        ),
    }


def explain_binding(ev: Evaluated, best: int, scope: np.ndarray | None = None) -> dict[str, object]:
    """The binding constraint of pick ``best`` as data and as a sentence, with every headroom;
    ``scope``: the candidates a better plan may come from (default all; one GPU type's own)."""
    req = ev.req
    within = np.ones(ev.gpus.size, dtype=bool) if scope is None else scope
    score = ev.score(req.objective)
    cur = float(score[best])
    bar = cur + abs(cur) * (GAIN - 1.0)
    # a candidate that does not fit in memory is no plan: its throughput was never possible
    better = within & np.isfinite(score) & (score > bar) & ev.fits_memory
    better &= ~ev.pp_dropped(ev.meets())  # left out for their PP, not for an SLO
    if better.any():
        k = int(np.argmin(np.where(better, score, np.inf)))
        out = _slo_binding(ev, best, k)
    else:
        raw = raw_score(ev, req.objective)
        meets = ev.predicted_ok & (ev.ttft_edge <= req.ttft_ms) & (ev.tpot_edge <= req.tpot_ms)
        over = within & ~ev.within_budget & meets & (raw > bar)
        if over.any():
            k = int(np.argmin(np.where(over, ev.gpus_bought, np.iinfo(np.int64).max)))
            out = _budget_binding(ev, best, k)
        else:
            out = _idle_binding(ev, best)
    return {**out, "headroom": headroom(ev, best)}


def candidate_record(ev: Evaluated, i: int, score: float, on_front: bool) -> dict[str, object]:
    """One candidate as a flat JSON row: names with percentile and unit (full precision)."""
    pct = ev.req.percentile
    clients = ev.clients_of(i)
    roles = {}
    if ev.mode_of(i) == "disagg":
        roles = {"prefill_gpu": ev.prefill_gpu_of(i), "decode_gpu": ev.gpu_of(i)}
    return {
        "mode": ev.mode_of(i),
        "gpu": ev.gpu_of(i),
        **roles,
        "gpus": int(ev.gpus[i]),
        f"ttft_{pct}_ms": float(ev.ttft[i]),
        f"tpot_{pct}_ms": float(ev.tpot[i]),
        "output_tok_s_per_gpu": float(ev.tok_per_gpu[i]),
        "output_tok_s_per_user": float(ev.tok_per_user[i]),
        "requests_per_s": float(ev.rps[i]),
        "cost_per_million_output_tokens": float(ev.cost_per_mtok[i]),
        "cost_per_million_total_tokens": float(ev.cost_per_mtok_total[i]),
        "cost_per_hour_usd": float(ev.cost_per_hour[i]),
        "clients_per_worker": clients if ev.req.rate_per_s is None and clients else None,
        "pareto": on_front,
        "score": score,
        "config": ev.summary(i),
    }


def type_name(ev: Evaluated, i: int) -> str:
    """Candidate ``i``'s GPU type in words, each role's where a disaggregated pair mixes types."""
    dirs = ev.req.hardware_dirs
    name = get_gpu(ev.gpu_of(i), dirs).name
    if ev.prefill_gpu_of(i) == ev.gpu_of(i):
        return name
    return f"prefill {get_gpu(ev.prefill_gpu_of(i), dirs).name}, decode {name}"


def _type_keys(ev: Evaluated) -> np.ndarray:
    """Per candidate, its GPU type or ``prefill+decode`` pair of types (``Block.type_key``)."""
    return np.array([ev.blocks[k].type_key for k in ev.block_of])


def _type_bests(ev: Evaluated, ok: np.ndarray) -> dict[str, int | None]:
    """For each GPU type asked for (in request order), then each prefill/decode pair of two types
    searched, its best feasible candidate by the objective (the order ``pick_best`` uses), or
    None."""
    keys = _type_keys(ev)
    asked = [get_gpu(g, ev.req.hardware_dirs).key for g in ev.req.gpus]
    pairs = [b.type_key for b in ev.blocks if b.mixed]
    out: dict[str, int | None] = {}
    for key in dict.fromkeys(asked + pairs):
        order = rank(ev, ok & (keys == key), ev.req.objective)
        out[key] = int(order[0]) if order.size else None
    return out


def top_candidates(
    ev: Evaluated, ok: np.ndarray, front: np.ndarray, n: int = TOP_CANDIDATES
) -> list[dict[str, object]]:
    """The ``n`` best feasible candidates by the objective, best first (the recommendation is the
    first), then each GPU type's best when it is not among them."""
    score = ev.score(ev.req.objective)
    order = rank(ev, ok, ev.req.objective)
    on_front = set(int(i) for i in front)
    out, seen, kept = [], set(), set()
    for i in order:  # settings that change no prediction (e.g. a larger unused chunk) show once
        metrics = np.round([ev.ttft[i], ev.tpot[i], ev.tok_per_gpu[i]], 6)
        key = (ev.type_of(int(i)), int(ev.gpus[i]), *metrics)
        if key in seen:
            continue
        seen.add(key)
        kept.add(int(i))
        out.append(candidate_record(ev, int(i), float(score[i]), int(i) in on_front))
        if len(out) == n:
            break
    for i in _type_bests(ev, ok).values():
        if i is not None and i not in kept:
            out.append(candidate_record(ev, i, float(score[i]), i in on_front))
    return out


def per_gpu_type(ev: Evaluated, ok: np.ndarray, best: int) -> dict[str, dict[str, object]]:
    """For each GPU type asked for, and each prefill/decode pair of two types searched (key
    ``prefill+decode``): its best plan by the objective (GPUs, $/hour, $/1M total tokens), what
    binds it, and whether it is the recommendation (exactly one is); or why it has none."""
    keys = _type_keys(ev)
    score = ev.score(ev.req.objective)
    out: dict[str, dict[str, object]] = {}
    for key, i in _type_bests(ev, ok).items():
        if i is None:
            out[key] = {
                "best": None,
                "chosen": False,
                "reason": _why_not(ev, keys == key),
                "binding": None,
            }
            continue
        rec = candidate_record(ev, i, float(score[i]), False)
        rec.pop("pareto")
        bind = explain_binding(ev, i, scope=keys == key)
        out[key] = {
            "best": rec,
            "chosen": i == best,
            "reason": None,
            "binding": {"constraint": bind["constraint"], "sentence": bind["sentence"]},
        }
    return out


def _why_not(ev: Evaluated, mine: np.ndarray) -> str:
    """Why a GPU type has no plan: nothing fits within the budget, the load saturates every
    deployment, or the closest plan's figures at the edge the plan requires."""
    req = ev.req
    cand = mine & ev.within_budget
    if not cand.any():
        return f"no configuration fits in memory within {plural(req.max_gpus, 'GPU')}"
    if (ev.meets() & mine).any():  # those meeting it use PP, dropped for a PP-free plan
        return (
            "meets the SLOs only with pipeline parallelism, chosen only when nothing without it "
            "does (a plan without it meets them)"
        )
    t, p = ev.ttft_edge, ev.tpot_edge
    ratio = np.where(cand & ev.predicted_ok, np.maximum(t / req.ttft_ms, p / req.tpot_ms), np.inf)
    i = int(np.argmin(ratio))
    if not np.isfinite(ratio[i]):
        return (
            f"every configuration within the budget of {plural(req.max_gpus, 'GPU')} is "
            "saturated by the load"
        )
    pct = req.percentile
    edge = at_confidence(req.confidence)
    return (
        f"misses the SLOs within the budget of {plural(req.max_gpus, 'GPU')}: the closest plan "
        f"({plural(ev.gpus[i], 'GPU')}) reaches TTFT {pct}{edge} {ms(t[i])} (SLO "
        f"{ms(req.ttft_ms)}) and TPOT {pct}{edge} {ms(p[i])} (SLO {ms(req.tpot_ms)})"
    )
