"""The sized search (bisection over counts, widest slot cap per shape) vs exhaustive enumeration."""

from __future__ import annotations

import numpy as np
import pytest

from hardware.catalog import get_gpu
from planner.model.bundled import load_model
from solvers import rate_pd
from solvers.candidates import Load, evaluate, fitting_workers, meets
from solvers.plan import PlanRequest
from solvers.plan_core import evaluate_request, pick_best
from solvers.space import SearchSpace

SMALL = dict(max_num_seqs=(16, 64), chunk_tokens=(1024, 4096), mem_fractions=(0.85, 0.95))


def _exhaustive_agg(req: PlanRequest, space: SearchSpace) -> tuple[int, float, float, float, int]:
    """(GPUs, tok/s/GPU, TPOT, TTFT, candidates) of the best agg deployment, from every worker at
    every replica count."""
    m, gpu = load_model(req.model), get_gpu(req.gpus[0])
    w, _ = fitting_workers(m, gpu, space, 0, req.isl + req.osl)
    reps = np.arange(1, req.max_gpus + 1)
    idx, r = np.repeat(np.arange(w.size), reps.size), np.tile(reps, w.size)
    keep = r * w.gpus_per_worker[idx] <= req.max_gpus
    ws, r = w.take(idx[keep]), r[keep]
    load = Load(req.isl, req.osl, req.rate_per_s, None, req.backend)
    res = evaluate(
        m,
        gpu,
        load,
        ws.mem_frac,
        **ws.columns(),
        concurrency=np.full(r.size, np.nan),
        workers=r.astype(float),
    )
    ok = meets(res, (req.ttft_ms, req.tpot_ms, req.percentile))
    assert ok.any(), "the case must be feasible"
    ttft, tpot = res.ttft_p90_s * 1e3, res.tpot_p90_s * 1e3
    score = np.where(ok, res.output_tok_s_per_gpu, -np.inf)
    i = int(np.lexsort((ttft, -res.output_tok_s_per_user, -score))[0])
    return (
        int(res.gpus[i]),
        float(res.output_tok_s_per_gpu[i]),
        float(tpot[i]),
        float(ttft[i]),
        r.size,
    )


@pytest.mark.parametrize(("max_gpus", "rate"), [(16, 20.0), (64, 150.0)])
def test_sized_agg_search_equals_exhaustive(max_gpus: int, rate: float) -> None:
    """llama-3.1-8b at a rate on up to 16 and 64 H100 (replicas by bisection, widest slots only)."""
    req = PlanRequest(
        model="llama-3.1-8b",
        gpus=("h100",),
        max_gpus=max_gpus,
        isl=2000,
        osl=300,
        rate_per_s=rate,
        ttft_ms=600,
        tpot_ms=25,
        mode="agg",
        confidence=0,  # the exhaustive enumeration checks the point prediction
    )
    space = SearchSpace(gpus=("h100_sxm",), max_gpus=max_gpus, modes=("agg",), **SMALL)  # type: ignore[arg-type]
    ev = evaluate_request(req, space)
    i = pick_best(ev, ev.feasible(), req.objective)
    gpus, tok, tpot, ttft, n_all = _exhaustive_agg(req, space)
    assert int(ev.gpus[i]) == gpus > 1
    assert float(ev.tok_per_gpu[i]) == pytest.approx(tok, rel=1e-9)
    assert float(ev.tpot[i]) == pytest.approx(tpot, rel=1e-6)
    assert float(ev.ttft[i]) == pytest.approx(ttft, rel=1e-6)
    assert ev.evaluated < n_all


def test_disagg_counts_by_bisection_equal_every_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """The P/D option sizes of a rate plan: bisection past 8 workers vs checking every count."""
    req = PlanRequest(
        model="llama-3.1-8b",
        gpus=("h100",),
        max_gpus=48,
        isl=2000,
        osl=300,
        rate_per_s=180.0,
        ttft_ms=800,
        tpot_ms=25,
        mode="disagg",
        confidence=0,  # the exhaustive enumeration checks the point prediction
    )
    space = SearchSpace(gpus=("h100_sxm",), max_gpus=48, modes=("disagg",), **SMALL)  # type: ignore[arg-type]
    sized = evaluate_request(req, space)
    monkeypatch.setattr(rate_pd, "DISAGG_DENSE_COUNTS", 10**6)
    every = evaluate_request(req, space)
    a, b = pick_best(sized, sized.feasible(), "gpus"), pick_best(every, every.feasible(), "gpus")
    assert sized.milp_info == every.milp_info
    assert (
        max(
            sized.milp_info["h100_sxm"]["decode_workers"],
            sized.milp_info["h100_sxm"]["prefill_workers"],
        )
        > 8
    )
    assert sized.summary(a) == every.summary(b) and sized.gpus[a] == every.gpus[b]


def test_budget_of_100k_gpus_costs_about_what_64_cost() -> None:
    base = dict(
        model="llama-3.1-8b",
        gpus=("h100",),
        isl=2000,
        osl=300,
        rate_per_s=150.0,
        ttft_ms=600,
        tpot_ms=25,
        mode="agg",
        confidence=0,  # the exhaustive enumeration checks the point prediction
    )
    evs = []
    for budget in (64, 100_000):
        req = PlanRequest(**base, max_gpus=budget)  # type: ignore[arg-type]
        space = SearchSpace(gpus=("h100_sxm",), max_gpus=budget, modes=("agg",), **SMALL)  # type: ignore[arg-type]
        ev = evaluate_request(req, space)
        evs.append((ev, pick_best(ev, ev.feasible(), req.objective)))
    (small, i), (big, j) = evs
    assert small.summary(i) == big.summary(j)
    assert big.evaluated <= 2 * small.evaluated


def test_budget_above_the_limit_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    from planner.cli.main import main

    rc = main(
        [
            "plan",
            "--model",
            "llama-3.1-8b",
            "--gpu",
            "h100",
            "--max-gpus",
            "100001",
            "--isl",
            "100",
            "--osl",
            "10",
            "--ttft-ms",
            "100",
            "--tpot-ms",
            "10",
        ]
    )
    err = capsys.readouterr().err
    assert (
        rc == 2 and "--max-gpus" in err and "100,000" in err and len(err.strip().splitlines()) == 1
    )
