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

if TYPE_CHECKING:
    from solvers.plan_core import Evaluated

BINDING = ("TTFT", "TPOT", "memory", "GPU budget", "workload", "search space")
"""Every name ``explain_binding`` gives."""
GAIN = 1.01
"""A plan must beat the pick by more than 1% of the objective to count as better."""
TOP_CANDIDATES = 50
"""Feasible candidates kept in the plan file, best first."""
_OBJECTIVE_WORDS = {
    "throughput-per-gpu": "more output tokens/s per GPU",
    "cost": "a lower cost per 1M output tokens",
    "gpus": "fewer GPUs",
}
_GAIN_WORDS = {
    "throughput-per-gpu": "more output tokens/s per GPU",
    "cost": "lower cost per 1M output tokens",
    "gpus": "fewer GPUs",
}


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
        ("GPU budget", float(ev.gpus[i]), float(req.max_gpus), "GPUs"),
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


def _change(ev: Evaluated, best: int, k: int) -> str:
    """What the next better plan changes, in words."""
    parts = []
    if ev.gpus[k] != ev.gpus[best]:
        parts.append(f"{count(ev.gpus[k])} GPUs instead of {count(ev.gpus[best])}")
    ck, cb = ev.clients_of(k), ev.clients_of(best)
    if ck and cb and ck != cb and ev.req.rate_per_s is None:
        parts.append(f"{count(ck)} clients per worker instead of {count(cb)}")
    if ev.mode_of(k) != ev.mode_of(best):
        parts.append(f"{ev.mode_of(k)} serving")
    return ", ".join(parts) or ev.summary(k)


def _slo_binding(ev: Evaluated, best: int, k: int, gain: float) -> dict[str, object]:
    name, value, limit = _violation(ev, k)
    pct = ev.req.percentile
    edge = f" at the {ev.req.confidence:.0%} band edge" if ev.req.confidence > 0 else ""
    shown = "an unbounded queue" if not np.isfinite(value) else ms(value)
    obj = ev.req.objective
    better = _GAIN_WORDS[obj] if obj == "gpus" else f"{num(gain * 100, 3)}% {_GAIN_WORDS[obj]}"
    sentence = (
        f"{name} {pct} binds{edge}: the next better plan ({_change(ev, best, k)}; {better}) "
        f"would push {name} {pct}{edge} to {shown}, past the {ms(limit)} SLO."
    )
    return {
        "constraint": name,
        "value": value if np.isfinite(value) else None,
        "limit": limit,
        "unit": "ms",
        "next_config": ev.summary(k),
        "sentence": sentence,
    }


def _budget_binding(ev: Evaluated, best: int, k: int) -> dict[str, object]:
    req = ev.req
    sentence = (
        f"GPU budget binds: a plan with {count(ev.gpus[k])} GPUs would meet the SLOs with "
        f"{_OBJECTIVE_WORDS[req.objective]}, but the budget is {count(req.max_gpus)} GPUs."
    )
    return {
        "constraint": "GPU budget",
        "value": float(ev.gpus[k]),
        "limit": float(req.max_gpus),
        "unit": "GPUs",
        "next_config": ev.summary(k),
        "sentence": sentence,
    }


def _idle_binding(ev: Evaluated, best: int) -> dict[str, object]:
    req = ev.req
    b, j = ev.blocks[ev.block_of[best]], int(ev.local[best])
    cap, running = float(b.res.seq_capacity[j]), float(b.res.decode_batch[j])
    used = f"{count(ev.gpus[best])} of {count(req.max_gpus)} GPUs used"
    if bool(ev.kv_full[best]):
        return {
            "constraint": "memory",
            "value": running,
            "limit": cap,
            "unit": "running requests per worker",
            "next_config": None,
            "sentence": (
                f"Memory binds: KV-cache capacity caps each worker at {num(cap, 3)} "
                f"running requests; no plan within the budget does better ({used})."
            ),
        }
    if req.concurrency is not None or req.rate_per_s is not None:
        load = (
            f"{count(req.concurrency)} clients"
            if req.concurrency is not None
            else f"{num(req.rate_per_s)} requests/s"
        )
        return {
            "constraint": "workload",
            "value": float(ev.gpus[best]),
            "limit": float(req.max_gpus),
            "unit": "GPUs",
            "next_config": None,
            "sentence": (
                f"The workload binds: {load} is all there is to serve, and no other "
                f"configuration serves it with {_OBJECTIVE_WORDS[req.objective]} "
                f"({used}; the SLOs have headroom)."
            ),
        }
    return {
        "constraint": "search space",
        "value": None,
        "limit": None,
        "unit": "",
        "next_config": None,
        "sentence": f"No configuration searched does better ({used}; the SLOs have headroom).",
    }


def explain_binding(ev: Evaluated, best: int) -> dict[str, object]:
    """The binding constraint of pick ``best`` as data and as a sentence, with every headroom."""
    req = ev.req
    score = ev.score(req.objective)
    cur = float(score[best])
    bar = cur + abs(cur) * (GAIN - 1.0)
    # a candidate that does not fit in memory is no plan: its throughput was never possible
    better = np.isfinite(score) & (score > bar) & ev.fits_memory
    better &= ~ev.pp_dropped(ev.meets())  # left out for their PP, not for an SLO
    if better.any():
        k = int(np.argmin(np.where(better, score, np.inf)))
        out = _slo_binding(ev, best, k, (float(score[k]) - cur) / abs(cur) if cur else 0.0)
    else:
        raw = raw_score(ev, req.objective)
        meets = ev.predicted_ok & (ev.ttft_edge <= req.ttft_ms) & (ev.tpot_edge <= req.tpot_ms)
        over = ~ev.within_budget & meets & (raw > bar)
        if over.any():
            k = int(np.argmin(np.where(over, ev.gpus, np.iinfo(np.int64).max)))
            out = _budget_binding(ev, best, k)
        else:
            out = _idle_binding(ev, best)
    return {**out, "headroom": headroom(ev, best)}


def candidate_record(ev: Evaluated, i: int, score: float, on_front: bool) -> dict[str, object]:
    """One candidate as a flat JSON row: names with percentile and unit (full precision)."""
    pct = ev.req.percentile
    clients = ev.clients_of(i)
    return {
        "mode": ev.mode_of(i),
        "gpu": ev.gpu_of(i),
        "gpus": int(ev.gpus[i]),
        f"ttft_{pct}_ms": float(ev.ttft[i]),
        f"tpot_{pct}_ms": float(ev.tpot[i]),
        "output_tok_s_per_gpu": float(ev.tok_per_gpu[i]),
        "output_tok_s_per_user": float(ev.tok_per_user[i]),
        "requests_per_s": float(ev.rps[i]),
        "cost_per_million_output_tokens": float(ev.cost_per_mtok[i]),
        "cost_per_hour_usd": float(ev.cost_per_hour[i]),
        "clients_per_worker": clients if ev.req.rate_per_s is None and clients else None,
        "pareto": on_front,
        "score": score,
        "config": ev.summary(i),
    }


def top_candidates(
    ev: Evaluated, ok: np.ndarray, front: np.ndarray, n: int = TOP_CANDIDATES
) -> list[dict[str, object]]:
    """The ``n`` best feasible candidates by the objective, best first (ties by tok/s per GPU)."""
    score = np.where(ok, ev.score(ev.req.objective), -np.inf)
    idx = np.flatnonzero(ok)
    order = idx[np.lexsort((-ev.tok_per_gpu[idx], -score[idx]))]
    on_front = set(int(i) for i in front)
    out, seen = [], set()
    for i in order:  # settings that change no prediction (e.g. a larger unused chunk) show once
        metrics = np.round([ev.ttft[i], ev.tpot[i], ev.tok_per_gpu[i]], 6)
        key = (ev.gpu_of(int(i)), int(ev.gpus[i]), *metrics)
        if key in seen:
            continue
        seen.add(key)
        out.append(candidate_record(ev, int(i), float(score[i]), int(i) in on_front))
        if len(out) == n:
            break
    return out


def per_gpu_type(ev: Evaluated, ok: np.ndarray, best: int) -> dict[str, dict[str, object]]:
    """For each GPU type asked for: its best plan, or why it has none (the closest it gets)."""
    req = ev.req
    gpu_keys = np.array([ev.blocks[k].gpu.key for k in ev.block_of])
    score = np.where(ok, ev.score(req.objective), -np.inf)
    out: dict[str, dict[str, object]] = {}
    for key in dict.fromkeys(get_gpu(g, req.hardware_dirs).key for g in req.gpus):
        mine = gpu_keys == key
        if (ok & mine).any():
            i = int(np.argmax(np.where(mine, score, -np.inf)))
            rec = candidate_record(ev, i, float(score[i]), False)
            rec.pop("pareto")
            out[key] = {"best": rec, "chosen": i == best, "reason": None}
        else:
            out[key] = {"best": None, "chosen": False, "reason": _why_not(ev, mine)}
    return out


def _why_not(ev: Evaluated, mine: np.ndarray) -> str:
    req = ev.req
    cand = mine & ev.within_budget
    if not cand.any():
        return f"no configuration fits in memory within {count(req.max_gpus)} GPUs"
    ratio = np.where(cand, np.maximum(ev.ttft / req.ttft_ms, ev.tpot / req.tpot_ms), np.inf)
    i = int(np.argmin(ratio))
    if not np.isfinite(ratio[i]):
        return "every configuration within the budget is saturated by the load"
    pct = req.percentile
    return (
        f"misses the SLOs: the closest plan reaches TTFT {pct} {ms(ev.ttft[i])} "
        f"(SLO {ms(req.ttft_ms)}) and TPOT {pct} {ms(ev.tpot[i])} (SLO {ms(req.tpot_ms)})"
    )
