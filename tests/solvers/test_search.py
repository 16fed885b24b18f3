"""Search space, memory pruning, Pareto and the plan API."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from hardware.catalog import get_gpu
from hardware.errors import InfeasibleError
from planner.model.bundled import load_model
from planner.perf.batch import KV_DTYPES, WEIGHT_QUANTS, kv_tokens_held
from planner.perf.estimate import estimate
from planner.workload.spec import fixed
from solvers.binding import BINDING
from solvers.candidates import Load, evaluate, seq_capacity
from solvers.pareto import pareto_mask
from solvers.plan import PlanRequest, plan
from solvers.plan_core import evaluate_request
from solvers.space import SearchSpace, Workers

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


def test_pareto_equals_brute_force() -> None:
    rng = np.random.default_rng(1)
    x, y = rng.integers(0, 20, 200).astype(float), rng.integers(0, 20, 200).astype(float)
    mask = pareto_mask(x, y)
    pts = {(a, b) for a, b in zip(x[mask], y[mask], strict=True)}
    brute = {
        (a, b)
        for a, b in zip(x, y, strict=True)
        if not np.any((x >= a) & (y >= b) & ((x > a) | (y > b)))
    }
    assert pts == brute and mask.sum() == len(brute)


SMALL = dict(
    max_num_seqs=(16, 64),
    chunk_tokens=(1024, 4096),
    mem_fractions=(0.9,),
    concurrency_per_worker=(1, 8, 16, 64),
)


def test_search_equals_brute_force_on_small_space() -> None:
    """The vectorized search's best equals a one-by-one loop over the space through
    ``planner estimate``."""
    req = PlanRequest(
        model="llama-3.1-8b",
        gpus=("h100",),
        max_gpus=1,
        isl=1000,
        osl=200,
        ttft_ms=400,
        tpot_ms=25,
        mode="agg",
        confidence=0,
    )
    m, gpu = load_model(req.model), get_gpu("h100")
    space = SearchSpace(gpus=(gpu.key,), max_gpus=1, modes=("agg",), **SMALL)  # type: ignore[arg-type]
    ev = evaluate_request(req, space)
    best = -1.0
    for kv, seqs, chunk, clients in itertools.product(
        space.kv_dtypes, space.max_num_seqs, space.chunk_tokens, space.concurrency_per_worker
    ):
        if clients > seqs:
            continue
        from planner.perf.deployment import WorkerConfig

        wc = WorkerConfig(max_num_seqs=seqs, max_num_batched_tokens=chunk, kv_dtype=kv)  # type: ignore[arg-type]
        e = estimate(m, gpu, fixed(req.isl, req.osl, concurrency=clients), agg=wc)
        if e.ttft_ms.p90 <= req.ttft_ms and e.tpot_ms.p90 <= req.tpot_ms:
            best = max(best, e.output_tok_s_per_gpu)
    ok = ev.feasible()
    assert best > 0 and ok.any()
    assert float(np.max(ev.tok_per_gpu[ok])) == pytest.approx(best, rel=1e-9)


def test_acceptance_plan_llama70b_h200() -> None:
    r = plan(PlanRequest(**ACCEPT))  # type: ignore[arg-type]
    assert len(r.pareto) >= 5 and r.candidates_evaluated >= 10_000
    for c in (r.alternatives["agg"], r.alternatives["disagg"]):
        assert c is not None and c.gpus <= 8
        assert c.predicted["ttft_ms"]["p90"] <= 1000 and c.predicted["tpot_ms"]["p90"] <= 30
    assert r.binding_constraint in BINDING
    d = r.to_plan_dict()
    assert {
        "model",
        "gpu",
        "workload",
        "slo",
        "best",
        "pareto",
        "binding_constraint",
        "candidates_evaluated",
        "search_seconds",
        "alternatives",
    } <= set(d)
    assert d["workload"]["concurrency"] is not None


def test_rate_mode_sizes_deployment() -> None:
    r = plan(PlanRequest(**{**ACCEPT, "max_gpus": 16}, rate_per_s=2.0, objective="gpus"))  # type: ignore[arg-type]
    assert r.best.predicted["requests_per_s"] == 2.0 and r.best.gpus <= 16


def test_infeasible_tpot_names_closest_value() -> None:
    with pytest.raises(InfeasibleError) as exc:
        plan(PlanRequest(**{**ACCEPT, "tpot_ms": 1}))  # type: ignore[arg-type]
    assert exc.value.binding_constraint == "TPOT" and "closest achievable" in str(exc.value)


def test_model_that_fits_nowhere() -> None:
    with pytest.raises(InfeasibleError) as exc:
        plan(
            PlanRequest(
                model="llama-3.1-405b",
                gpus=("l4",),
                max_gpus=2,
                isl=1000,
                osl=100,
                ttft_ms=1000,
                tpot_ms=50,
            )
        )
    assert exc.value.binding_constraint == "memory"


def _one_worker(chunk: int, frac: float = 0.9, seqs: int = 256) -> Workers:
    a = lambda v: np.array([v])  # noqa: E731
    return Workers(
        gpu=a(0),
        tp=a(4),
        pp=a(1),
        dp=a(1),
        ep=a(1),
        quant=a(WEIGHT_QUANTS.index("bf16")),
        kv=a(KV_DTYPES.index("bf16")),
        max_num_seqs=a(seqs),
        chunk=a(chunk),
        mem_frac=a(frac),
    )


def test_chunk_size_trades_ttft_for_tpot() -> None:
    m, gpu, load = load_model("llama-3.1-70b"), get_gpu("h200"), Load(4000, 500)
    small, big = (
        evaluate(m, gpu, load, w.mem_frac, **w.columns(), concurrency=np.array([32.0]))
        for w in (_one_worker(1024), _one_worker(16384))
    )
    assert big.ttft_p50_s[0] < small.ttft_p50_s[0]
    assert big.tpot_p90_s[0] > small.tpot_p90_s[0]


def test_kv_budget_caps_concurrency() -> None:
    m, gpu, load = load_model("llama-3.1-70b"), get_gpu("h200"), Load(4000, 500)
    held = float(
        kv_tokens_held(4000, 500, load.backend)
    )  # vLLM allocates the answer's KV as it grows
    caps = [int(seq_capacity(m, gpu, _one_worker(8192, frac), held)[0]) for frac in (0.7, 0.95)]
    assert 1 <= caps[0] < caps[1]
    w = _one_worker(8192, 0.7)
    res = evaluate(m, gpu, load, w.mem_frac, **w.columns(), concurrency=np.array([caps[0] * 4.0]))
    assert res.seq_capacity[0] == caps[0] and res.decode_batch[0] <= caps[0]


def test_closed_loop_rows_with_spare_slots_share_one_prediction() -> None:
    """Slots beyond a closed loop's clients per worker change nothing: ``evaluate`` predicts such
    rows once, and each equals ``evaluate_batch`` of that row alone (``planner estimate``)."""
    from planner.perf.batch import CandidateArrays, evaluate_batch

    m, gpu, load = load_model("llama-3.1-70b"), get_gpu("h200"), Load(2000, 300)
    rows = [_one_worker(8192, frac, seqs) for seqs in (64, 128, 256) for frac in (0.85, 0.95)]
    w = Workers(
        **{k: np.concatenate([getattr(r, k) for r in rows]) for k in Workers.__dataclass_fields__}
    )
    conc = np.array([48.0, 48.0, 48.0, 48.0, 200.0, 200.0])
    merged = evaluate(m, gpu, load, w.mem_frac, **w.columns(), concurrency=conc)
    for i in range(w.size):
        one = w.take(np.array([i]))
        c = CandidateArrays.from_lists(**one.columns(), concurrency=conc[i : i + 1])
        alone = evaluate_batch(m, gpu, c, load.workload(), gpu_memory_utilization=one.mem_frac)
        for f in ("ttft_p90_s", "tpot_p90_s", "requests_per_s", "decode_batch"):
            assert getattr(merged, f)[i] == pytest.approx(getattr(alone, f)[0], rel=1e-9), f
