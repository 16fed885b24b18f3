"""A plan predicts exactly what ``planner estimate`` predicts for the same deployment
(one serving model)."""

from __future__ import annotations

import numpy as np
import pytest

from hardware.catalog import get_gpu
from planner.model.bundled import load_model
from planner.perf.estimate import Estimate, estimate
from planner.workload.spec import fixed
from solvers.describe import deployment
from solvers.plan import PlanRequest, plan
from solvers.plan_core import Evaluated, evaluate_request

ACCEPT = dict(
    model="llama-3.1-70b",
    gpus=("h200",),
    max_gpus=8,
    isl=4000,
    osl=500,
    ttft_ms=1000,
    tpot_ms=30,
    confidence=0,
)  # the point prediction (the band edge: tests/solvers/test_plan_confidence.py)
REL = 1e-9


def _estimate(ev: Evaluated, i: int) -> Estimate:
    req = ev.req
    b, j = ev.blocks[int(ev.block_of[i])], int(ev.local[i])
    dep = deployment(ev.model, b, j, req.isl, req.osl)
    conc = float(b.concurrency[j])
    wl = (
        fixed(req.isl, req.osl, concurrency=round(conc))
        if np.isfinite(conc)
        else fixed(req.isl, req.osl, rate_per_s=req.rate_per_s)
    )
    return estimate(
        ev.model,
        get_gpu(b.gpu.key),
        wl,
        backend=req.backend,
        agg=dep.agg,
        prefill=dep.prefill,
        decode=dep.decode,
    )


def _assert_same(ev: Evaluated, i: int) -> None:
    e = _estimate(ev, i)
    p = ev.req.percentile
    assert ev.ttft[i] == pytest.approx(getattr(e.ttft_ms, p), rel=REL)
    assert ev.tpot[i] == pytest.approx(getattr(e.tpot_ms, p), rel=REL)
    assert ev.tok_per_gpu[i] == pytest.approx(e.output_tok_s_per_gpu, rel=REL)
    assert ev.tok_per_user[i] == pytest.approx(e.output_tok_s_per_user, rel=REL)
    assert ev.rps[i] == pytest.approx(e.requests_per_s, rel=REL)
    assert ev.gpus[i] == e.gpus


def _picks(ev: Evaluated, mode: int, n: int, rng: np.random.Generator) -> list[int]:
    """The best feasible candidate of ``mode`` and ``n`` random feasible ones."""
    sel = np.flatnonzero(ev.meets() & (ev.mode_code == mode))
    assert sel.size, f"no feasible candidate of mode {mode}"
    best = int(sel[np.argmax(ev.tok_per_gpu[sel])])
    return [best, *rng.choice(sel, min(n, sel.size), replace=False).tolist()]


def test_plan_candidates_equal_estimate_agg_and_disagg() -> None:
    ev = evaluate_request(PlanRequest(**ACCEPT))  # type: ignore[arg-type]
    rng = np.random.default_rng(0)
    for mode in (0, 1):
        for i in _picks(ev, mode, 3, rng):
            _assert_same(ev, i)


def test_plan_best_predicted_equals_estimate() -> None:
    r = plan(PlanRequest(**ACCEPT))  # type: ignore[arg-type]
    for c in (r.alternatives["agg"], r.alternatives["disagg"]):
        assert c is not None
        d = c.deployment
        conc = c.predicted["clients_per_worker"] * (d.agg.workers if d.agg else d.decode.workers)  # type: ignore[union-attr]
        e = estimate(
            load := load_model(d.model),
            get_gpu(d.gpu),
            fixed(4000, 500, concurrency=conc),
            agg=d.agg,
            prefill=d.prefill,
            decode=d.decode,
        )
        assert load.name == r.model
        assert c.predicted["ttft_ms"]["p90"] == pytest.approx(e.ttft_ms.p90, rel=REL)
        assert c.predicted["tpot_ms"]["p90"] == pytest.approx(e.tpot_ms.p90, rel=REL)
        assert c.predicted["output_tok_s_per_gpu"] == pytest.approx(e.output_tok_s_per_gpu, rel=REL)


def test_rate_plan_equals_estimate() -> None:
    ev = evaluate_request(
        PlanRequest(**{**ACCEPT, "max_gpus": 16}, rate_per_s=2.0, objective="gpus")
    )  # type: ignore[arg-type]
    ok = np.flatnonzero(ev.feasible())
    assert ok.size
    for mode in (0, 1):
        sel = ok[ev.mode_code[ok] == mode]
        for i in sel[:: max(1, sel.size // 3)][:3]:
            _assert_same(ev, int(i))
