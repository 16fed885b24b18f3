"""Pipeline parallelism only when no PP-free shape meets the request (issue 47, item 9): the
measurements hold no PP > 1 row, so PP is a last resort, not a tie-breaker."""

from __future__ import annotations

import re

import numpy as np

from solvers.plan import PlanRequest, plan
from solvers.plan_core import evaluate_request


def _pp(result: object) -> set[int]:
    dep = result.best.deployment  # type: ignore[attr-defined]
    roles = [w for w in (dep.agg, dep.prefill, dep.decode) if w is not None]
    return {w.parallel.pp for w in roles}


def test_70b_at_a_rate_is_planned_without_pp() -> None:
    """Llama-3.1-70B, 20 req/s, 2000/300, p90 TTFT 1 s / TPOT 40 ms: TP2 x PP4 used to win."""
    for c in (0.0, 0.8):
        r = plan(
            PlanRequest(
                model="llama-3.1-70b",
                gpus=("h100",),
                max_gpus=64,
                isl=2000,
                osl=300,
                rate_per_s=20,
                ttft_ms=1000,
                tpot_ms=40,
                confidence=c,
            )
        )
        assert _pp(r) == {1}
        assert not any(re.search(r"pp[2-9]", p.config) for p in r.pareto)


def test_8b_fits_one_gpu_and_gets_no_pp() -> None:
    """Llama-3.1-8B at 300 req/s on H100 used to become 3 replicas of TP1 x PP4."""
    req = PlanRequest(
        model="llama-3.1-8b",
        gpus=("h100",),
        max_gpus=64,
        isl=2000,
        osl=300,
        rate_per_s=300,
        ttft_ms=1000,
        tpot_ms=40,
        confidence=0,
    )
    assert _pp(plan(req)) == {1}
    ev = evaluate_request(req)
    ok = ev.feasible()
    assert ok.any() and not (ok & ev.uses_pp).any()


def test_pp_when_nothing_else_fits() -> None:
    """Llama-3.1-405B in bf16 (811 GB) does not fit one 8 x H100 domain: TP8 x PP2 is the plan."""
    req = PlanRequest(
        model="llama-3.1-405b",
        gpus=("h100",),
        max_gpus=16,
        isl=2000,
        osl=300,
        concurrency=16,
        ttft_ms=5000,
        tpot_ms=100,
        confidence=0,
    )
    assert _pp(plan(req)) == {2}
    ev = evaluate_request(req)
    raw = ev.within_budget & ev.predicted_ok & (ev.ttft <= 5000) & (ev.tpot <= 100)
    assert raw.any() and np.all(ev.uses_pp[raw])
    assert np.array_equal(ev.feasible(), raw)  # nothing PP-free to prefer, nothing dropped
