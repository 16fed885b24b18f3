"""Disaggregated pairs of two GPU types against same-type plans, in one sentence built from the
figures beside it (``PlanResult.role_types``)."""

from __future__ import annotations

import numpy as np

from hardware.catalog import get_gpu
from solvers.plan_core import Evaluated, rank


def _pair_words(ev: Evaluated, i: int) -> str:
    dirs = ev.req.hardware_dirs
    pre = get_gpu(ev.prefill_gpu_of(i), dirs).name
    dec = get_gpu(ev.gpu_of(i), dirs).name
    if ev.mode_of(i) == "agg":
        return f"aggregated on {dec}"
    if pre == dec:
        return f"disaggregated on {dec}"
    return f"prefill on {pre}, decode on {dec}"


def _figures(ev: Evaluated, i: int) -> dict[str, object]:
    return {
        "prefill_gpu": ev.prefill_gpu_of(i) if ev.mode_of(i) == "disagg" else None,
        "decode_gpu": ev.gpu_of(i) if ev.mode_of(i) == "disagg" else None,
        "gpu": ev.gpu_of(i),
        "mode": ev.mode_of(i),
        "gpus_bought": int(ev.gpus_bought[i]),
        "cost_per_hour_usd": float(ev.cost_per_hour[i]),
        "cost_per_million_total_tokens": float(ev.cost_per_mtok_total[i]),
        "config": ev.summary(i),
    }


def _no_pair(ev: Evaluated, mixed: np.ndarray) -> str:
    """Why no pair of two types is a candidate: none meets the request, or those that do need
    pipeline parallelism while a plan without it meets the request (``Evaluated.pp_dropped``)."""
    if (ev.meets() & mixed & ev.uses_pp).any():
        return (
            "the prefill/decode pairs of two GPU types that meet the request need pipeline "
            "parallelism, chosen only when nothing without it does"
        )
    return "no prefill/decode pair of two GPU types meets the request"


def role_types(ev: Evaluated, ok: np.ndarray) -> dict[str, object] | None:
    """The best feasible plan whose prefill and decode workers run on two GPU types against the
    best same-type plan (aggregated or disaggregated), by the request's objective; None when no
    pair of two types was searched. ``cheaper``: the pair ranks first (its objective wins); the
    sentence states $/hour (at a rate) or $ per 1M total tokens (no load) of both."""
    mixed = np.concatenate([np.full(b.size, b.mixed) for b in ev.blocks])
    if not mixed.any():
        return None
    pair, same = rank(ev, ok & mixed, ev.req.objective), rank(ev, ok & ~mixed, ev.req.objective)
    if pair.size == 0 and same.size == 0:
        return None
    if pair.size == 0:
        s = int(same[0])
        return {
            "cheaper": False,
            "pair": None,
            "same_type": _figures(ev, s),
            "sentence": f"{_no_pair(ev, mixed)}; the best same-type plan ({_pair_words(ev, s)}) "
            f"costs {_money(ev, s)}",
        }
    p = int(pair[0])
    if same.size == 0:
        return {
            "cheaper": True,
            "pair": _figures(ev, p),
            "same_type": None,
            "sentence": f"{_pair_words(ev, p)}: {_money(ev, p)}; no same-type plan meets the "
            "request",
        }
    s = int(same[0])
    cheaper = int(rank(ev, ok, ev.req.objective)[0]) == p
    verb = "against" if cheaper else "does not beat"
    return {
        "cheaper": cheaper,
        "pair": _figures(ev, p),
        "same_type": _figures(ev, s),
        "sentence": f"{_pair_words(ev, p)}: {_money(ev, p)} {verb} {_money(ev, s)} for the best "
        f"same-type plan ({_pair_words(ev, s)}, objective {ev.req.objective})",
    }


def _money(ev: Evaluated, i: int) -> str:
    """$/hour at a rate (the load is fixed), else $ per 1M total tokens."""
    if ev.req.rate_per_s is not None:
        return f"${float(ev.cost_per_hour[i]):,.4g}/h ({int(ev.gpus_bought[i])} GPUs)"
    return f"${float(ev.cost_per_mtok_total[i]):,.4g} per 1M total tokens"
