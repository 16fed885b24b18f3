"""Search space, memory pruning, Pareto and the plan API."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from hardware.catalog import get_gpu
from hardware.errors import InfeasibleError
from planner.deployment import Parallelism
from planner.memory import plan_memory
from planner.models import load_model
from solvers.memory_vec import memory_arrays, shard_terms
from solvers.pareto import pareto_mask
from solvers.perf import agg_metrics, engine_for
from solvers.plan import PlanRequest, plan
from solvers.space import KV_DTYPES, QUANTS, SearchSpace, Workers, enumerate_workers

ACCEPT = dict(model="llama-3.1-70b", gpus=("h200",), max_gpus=8, isl=4000, osl=500, ttft_ms=1000, tpot_ms=30)


def test_vectorized_memory_matches_plan_memory() -> None:
    m, gpu = load_model("llama-3.1-70b"), get_gpu("h200")
    w = enumerate_workers(m, SearchSpace(gpus=("h200_sxm",), max_gpus=8), 0, 8)
    mem = memory_arrays(np.full(w.size, gpu.memory_bytes), w, shard_terms(m, w, 4000, 500))
    for i in np.random.default_rng(0).choice(w.size, 40, replace=False):
        p = Parallelism(tp=int(w.tp[i]), pp=int(w.pp[i]))
        kw = dict(weight_quant=QUANTS[w.quant[i]], kv_dtype=KV_DTYPES[w.kv[i]], max_num_batched_tokens=int(w.chunk[i]),
                  max_num_seqs=int(w.max_num_seqs[i]), gpu_memory_utilization=float(w.mem_frac[i]), isl=4000, osl=500)
        try:
            ref = plan_memory(m, gpu, p, **kw)  # type: ignore[arg-type]
        except InfeasibleError:
            assert not mem.fits[i]
            continue
        assert mem.kv_budget_bytes[i] == pytest.approx(ref.kv_budget_bytes_per_gpu, rel=1e-9)
        assert mem.max_concurrency[i] == ref.max_concurrency


def test_pareto_equals_brute_force() -> None:
    rng = np.random.default_rng(1)
    x, y = rng.integers(0, 20, 200).astype(float), rng.integers(0, 20, 200).astype(float)
    mask = pareto_mask(x, y)
    pts = {(a, b) for a, b in zip(x[mask], y[mask], strict=True)}
    brute = {(a, b) for a, b in zip(x, y, strict=True) if not np.any((x >= a) & (y >= b) & ((x > a) | (y > b)))}
    assert pts == brute and mask.sum() == len(brute)


def _small_space_brute(req: PlanRequest) -> float:
    """Best tok/s/GPU by looping over every agg candidate one by one."""
    m, gpu = load_model(req.model), get_gpu(req.gpus[0])
    space = SearchSpace(gpus=(gpu.key,), max_gpus=req.max_gpus, modes=("agg",))
    eng, best = engine_for("vllm"), -1.0
    w = enumerate_workers(m, space, 0, gpu.scale_up.domain_size)
    for i, c in itertools.product(range(w.size), space.concurrency_per_worker):
        one = w.take(np.array([i]))
        mem = memory_arrays(np.array([gpu.memory_bytes]), one, shard_terms(m, one, req.isl, req.osl))
        if not mem.fits[0]:
            continue
        met = agg_metrics(m, gpu, eng, one, mem.max_concurrency, np.array([c]), req.isl, req.osl)
        if met.ttft_ms[2, 0] <= req.ttft_ms and met.tpot_ms[2, 0] <= req.tpot_ms:
            best = max(best, float(met.output_tok_s_per_gpu[0]))
    return best


def test_search_equals_brute_force_on_small_space() -> None:
    req = PlanRequest(model="llama-3.1-8b", gpus=("h100",), max_gpus=1, isl=1000, osl=200, ttft_ms=400, tpot_ms=25,
                      mode="agg")
    assert plan(req).best.predicted["output_tok_s_per_gpu"] == pytest.approx(_small_space_brute(req), rel=1e-9)


def test_acceptance_plan_llama70b_h200() -> None:
    r = plan(PlanRequest(**ACCEPT))  # type: ignore[arg-type]
    assert len(r.pareto) >= 5 and r.candidates_evaluated >= 10_000
    for c in (r.alternatives["agg"], r.alternatives["disagg"]):
        assert c is not None and c.gpus <= 8
        assert c.predicted["ttft_ms"]["p90"] <= 1000 and c.predicted["tpot_ms"]["p90"] <= 30
    assert r.binding_constraint in ("memory", "TTFT", "TPOT", "GPU budget")
    d = r.to_plan_dict()
    assert {"model", "gpu", "workload", "slo", "best", "pareto", "binding_constraint", "candidates_evaluated",
            "search_seconds", "alternatives"} <= set(d)
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
        plan(PlanRequest(model="llama-3.1-405b", gpus=("l4",), max_gpus=2, isl=1000, osl=100, ttft_ms=1000, tpot_ms=50))
    assert exc.value.binding_constraint == "memory"


def _one_worker(chunk: int, frac: float = 0.9, seqs: int = 256) -> Workers:
    a = lambda v: np.array([v])  # noqa: E731
    return Workers(gpu=a(0), tp=a(4), pp=a(1), dp=a(1), ep=a(1), quant=a(QUANTS.index("bf16")),
                   kv=a(KV_DTYPES.index("bf16")), max_num_seqs=a(seqs), chunk=a(chunk), mem_frac=a(frac))


def test_chunk_size_trades_ttft_for_tpot() -> None:
    m, gpu, eng = load_model("llama-3.1-70b"), get_gpu("h200"), engine_for("vllm")
    small, big = (agg_metrics(m, gpu, eng, _one_worker(c), np.array([10_000]), np.array([32]), 4000, 500)
                  for c in (1024, 16384))
    assert big.ttft_ms[1, 0] < small.ttft_ms[1, 0]
    assert big.tpot_ms[2, 0] > small.tpot_ms[2, 0]


def test_kv_budget_caps_concurrency() -> None:
    m, gpu = load_model("llama-3.1-70b"), get_gpu("h200")
    caps = []
    for frac in (0.7, 0.95):
        w = _one_worker(8192, frac)
        caps.append(int(memory_arrays(np.array([gpu.memory_bytes]), w, shard_terms(m, w, 4000, 500)).max_concurrency[0]))
    assert caps[0] < caps[1]
    eng = engine_for("vllm")
    met = agg_metrics(m, gpu, eng, _one_worker(8192, 0.7), np.array([caps[0]]), np.array([caps[0] * 4]), 4000, 500)
    assert met.running[0] == caps[0]
