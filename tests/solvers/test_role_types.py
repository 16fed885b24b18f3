"""Prefill and decode on two GPU types (issue 51, part 1): the plan searches pairs of the types
asked for, prices each role at its own type's price in whole purchase units of that type, moves
the KV cache over the slower scale-out NIC of the two, and says in one sentence whether the best
pair beats the best same-type plan."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from hardware.catalog import get_gpu
from planner.cli.main import main
from planner.model.bundled import load_model
from planner.perf.batch import kv_link_bandwidth
from planner.perf.deployment import Parallelism, WorkerConfig
from planner.perf.estimate import estimate
from planner.quantities import num
from planner.workload.spec import LengthSpec, Workload, fixed
from solvers.pd_milp import PhaseOptions, brute_force_pd, solve_pd
from solvers.plan import PlanRequest, PlanResult, plan
from solvers.plan_core import evaluate_request

SLO: dict[str, Any] = {
    "isl": 4096,
    "osl": 512,
    "ttft_ms": 2000.0,
    "tpot_ms": 40.0,
    "max_gpus": 64,
    "mode": "disagg",
}
CHEAPER_LOAD: dict[str, Any] = {"isl": 2000, "osl": 2000, "rate_per_s": 16.0, "ttft_ms": 3000.0}
CHEAPER = PlanRequest(
    model="qwen3-32b", gpus=("h100", "h200"), **(SLO | CHEAPER_LOAD | {"max_gpus": 128})
)
"""Qwen3-32B at 16 requests/s of 2,000 / 2,000 tokens: H100 prefill workers cost less per prompt
than H200's (the same compute at a lower price), H200 decode workers hold the batch H100's memory
cannot (no pipeline parallelism on either side)."""
NOT_CHEAPER = PlanRequest(model="llama-3.1-8b", gpus=("h100", "h200"), rate_per_s=10.0, **SLO)
"""Llama-3.1-8B at 10 requests/s: its decode batch fits H100 memory, so H200 decode pays the
higher price for little."""


@pytest.fixture(scope="module")
def cheaper() -> PlanResult:
    return plan(CHEAPER)


@pytest.fixture(scope="module")
def not_cheaper() -> PlanResult:
    return plan(NOT_CHEAPER)


def _same_type_best(req: PlanRequest) -> float:
    """$/hour of the cheapest feasible plan whose roles run on one GPU type."""
    ev = evaluate_request(req)
    mixed = np.concatenate([np.full(b.size, b.mixed) for b in ev.blocks])
    return float(ev.cost_per_hour[ev.feasible() & ~mixed].min())


def test_a_pair_of_two_types_beats_every_same_type_plan(cheaper: PlanResult) -> None:
    best = cheaper.best
    dep = best.deployment
    assert dep.prefill is not None and dep.decode is not None
    assert dep.prefill.parallel.pp == 1 and dep.decode.parallel.pp == 1
    assert (best.prefill_gpu, best.decode_gpu) == ("h100_sxm", "h200_sxm")
    assert best.deployment.prefill_gpu == "h100_sxm" and best.deployment.gpu == "h200_sxm"
    same = _same_type_best(CHEAPER)
    assert best.cost_per_hour_usd < same
    rt = cheaper.role_types
    assert rt is not None and rt["cheaper"] is True
    sentence = str(rt["sentence"])
    assert sentence.startswith("prefill on H100-SXM, decode on H200-SXM: ")
    assert f"${num(best.cost_per_hour_usd)}/h" in sentence and f"${num(same)}/h" in sentence
    assert "against" in sentence and "for the best same-type plan" in sentence
    rows = cheaper.per_gpu_type
    assert list(rows)[:2] == ["h100_sxm", "h200_sxm"] and "h100_sxm+h200_sxm" in rows
    assert rows["h100_sxm+h200_sxm"]["chosen"] is True


def test_each_role_is_bought_at_its_own_price(cheaper: PlanResult) -> None:
    dep = cheaper.best.deployment
    assert dep.prefill is not None and dep.decode is not None
    p_gpus = dep.prefill.parallel.gpus * dep.prefill.workers
    d_gpus = dep.decode.parallel.gpus * dep.decode.workers
    h100, h200 = get_gpu("h100"), get_gpu("h200")
    want = p_gpus * h100.price_per_gpu_hour_usd + d_gpus * h200.price_per_gpu_hour_usd
    assert cheaper.best.cost_per_hour_usd == pytest.approx(want)
    assert cheaper.best.gpus_bought == p_gpus + d_gpus


def test_the_kv_transfer_between_types_is_priced_over_the_slower_nic(cheaper: PlanResult) -> None:
    pred = cheaper.best.predicted
    slow = min(
        get_gpu("h100").scale_out_bandwidth_bytes_per_s,
        get_gpu("h200").scale_out_bandwidth_bytes_per_s,
    )
    link = str(pred["provenance"]["kv_link"])  # type: ignore[index]
    assert "scale-out NIC of H100-SXM" in link and f"{slow / 1e9:.3g} GB/s" in link
    kv_ms = float(str(pred["kv_transfer_ms"]))
    assert kv_ms > 0
    # the same deployment priced by `estimate` gives the same KV transfer
    dep = cheaper.best.deployment
    wl = Workload(isl=LengthSpec(mean=2000), osl=LengthSpec(mean=2000), rate_per_s=16.0)
    est = estimate(
        load_model(CHEAPER.model),
        get_gpu("h200"),
        wl,
        prefill=dep.prefill,
        decode=dep.decode,
        prefill_gpu=get_gpu("h100"),
    )
    assert est.kv_transfer_ms == pytest.approx(kv_ms, rel=1e-6)
    assert est.prefill_gpu == "H100-SXM" and est.kv_link_gb_per_s == pytest.approx(slow / 1e9)


def test_a_pair_that_costs_more_is_said_so(not_cheaper: PlanResult) -> None:
    best = not_cheaper.best
    assert best.prefill_gpu == best.decode_gpu  # one type wins
    rt = not_cheaper.role_types
    assert rt is not None and rt["cheaper"] is False
    pair, same = rt["pair"], rt["same_type"]
    assert isinstance(pair, dict) and isinstance(same, dict)
    assert float(pair["cost_per_hour_usd"]) > float(same["cost_per_hour_usd"])
    assert same["cost_per_hour_usd"] == pytest.approx(best.cost_per_hour_usd)
    sentence = str(rt["sentence"])
    assert " does not beat " in sentence
    assert f"${num(float(pair['cost_per_hour_usd']))}/h" in sentence


def test_kv_link_is_the_slower_nic_between_types_and_scale_up_within_one() -> None:
    h100, b300 = get_gpu("h100"), get_gpu("b300")
    assert h100.scale_out_bandwidth_bytes_per_s < b300.scale_out_bandwidth_bytes_per_s
    bw = kv_link_bandwidth(h100, b300, np.array([4, 64]))
    assert (bw == h100.scale_out_bandwidth_bytes_per_s).all()  # never one scale-up domain
    same = kv_link_bandwidth(h100, h100, np.array([4, 64]))
    assert same[0] == h100.scale_up.bandwidth_bytes_per_s
    assert same[1] == h100.scale_out_bandwidth_bytes_per_s


def _roles(pre_gpu: str, dec_gpu: str) -> Any:
    wl = Workload(isl=LengthSpec(mean=4096), osl=LengthSpec(mean=512), concurrency=32)
    worker = WorkerConfig(parallel=Parallelism(tp=4))
    return estimate(
        load_model("llama-3.1-70b"),
        get_gpu(dec_gpu),
        wl,
        prefill=worker,
        decode=worker,
        prefill_gpu=get_gpu(pre_gpu),
    )


def test_each_role_is_priced_on_its_own_type() -> None:
    """The prefill step of a pair is the prefill type's own, its decode step the decode type's."""
    mixed, h100, b200 = _roles("h100", "b200"), _roles("h100", "h100"), _roles("b200", "b200")
    assert mixed.step_breakdown["prefill_ms"] == pytest.approx(h100.step_breakdown["prefill_ms"])
    dec = sum(mixed.step_breakdown["decode_step_ms"].values())
    assert dec < sum(h100.step_breakdown["decode_step_ms"].values())
    assert mixed.prefill_memory is not None and h100.prefill_memory is not None
    assert mixed.prefill_memory == h100.prefill_memory
    assert mixed.memory == b200.memory
    assert mixed.kv_transfer_ms > h100.kv_transfer_ms  # NIC against one host's NVLink


@pytest.mark.parametrize("units", [(None, 4), (4, None), (8, 4)])
@pytest.mark.parametrize("seed", range(4))
def test_pd_milp_buys_each_role_in_its_own_units_at_its_price(
    seed: int, units: tuple[int | None, int | None]
) -> None:
    rng = np.random.default_rng(seed)

    def opts(n: int, price: float) -> PhaseOptions:
        return PhaseOptions(
            rng.integers(0, 2, n),
            rng.choice([1, 2, 4], n),
            rng.uniform(0.3, 5.0, n),
            np.full(n, price),
        )

    pre, dec = opts(6, 2.5), opts(7, 3.2)
    rate = float(rng.uniform(1, 10))
    sol = solve_pd(pre, dec, rate, 48, node_gpus=units, objective="cost")
    ref = brute_force_pd(pre, dec, rate, 48, node_gpus=units, objective="cost")
    if ref is None:
        assert sol is None
        return
    assert sol is not None and sol.cost_per_hour == pytest.approx(ref)


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


BASE = ["estimate", "--model", "llama-3.1-70b", "--isl", "4096", "--osl", "512"]


def test_estimate_names_each_roles_gpu_and_the_kv_transfer(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = [*BASE, "--concurrency", "32", "--mode", "disagg", "--prefill-tp", "4", "--decode-tp"]
    rc, out, _ = _cli(capsys, *args, "4", "--prefill-gpu", "h100", "--decode-gpu", "h200")
    assert rc == 0
    assert "on prefill H100-SXM, decode H200-SXM" in out
    assert "KV transfer per request, ms (mean)" in out and "50.0 (scale-out NIC" in out


@pytest.mark.parametrize(
    ("extra", "flag"),
    [
        (["--prefill-gpu", "h100", "--gpu", "h200", "--concurrency", "8"], "--prefill-gpu"),
        (["--mode", "disagg", "--prefill-gpu", "h100", "--concurrency", "8"], "--decode-gpu"),
    ],
)
def test_estimate_role_gpu_input_errors(
    capsys: pytest.CaptureFixture[str], extra: list[str], flag: str
) -> None:
    rc, _, err = _cli(capsys, *BASE, *extra)
    assert rc == 2 and err.startswith("error: ") and flag in err and err.count("\n") == 1


def test_fleet_buys_each_role_on_its_own_pool() -> None:
    """``disagg: true``: the class is served by prefill on the H100 pool and decode on the H200
    pool, each role's GPUs counted and priced on its own pool, cheaper than aggregated only."""
    from solvers.fleet import FleetSpec, solve_fleet

    spec: dict[str, Any] = {
        "classes": [
            {"name": "long", "model": CHEAPER.model, "tpot_ms": 40} | CHEAPER_LOAD,
        ],
        "gpus": [{"gpu": "h100_sxm", "available": 32}, {"gpu": "h200_sxm", "available": 32}],
    }
    agg = solve_fleet(FleetSpec.model_validate(spec))
    both = solve_fleet(FleetSpec.model_validate(spec | {"disagg": True}))
    assert both.cost_per_hour_usd < agg.cost_per_hour_usd
    (a,) = both.assignments
    assert (a.prefill_gpu, a.gpu) == ("h100_sxm", "h200_sxm")
    pre, dec = a.prefill_gpus_per_replica, a.gpus_per_replica - a.prefill_gpus_per_replica
    assert both.gpus_by_type == {"h100_sxm": pre * a.replicas, "h200_sxm": dec * a.replicas}
    h100, h200 = (get_gpu(g).price_per_gpu_hour_usd for g in ("h100", "h200"))
    assert both.cost_per_hour_usd == pytest.approx(a.replicas * (pre * h100 + dec * h200))


def test_every_disaggregated_candidate_names_both_roles(cheaper: PlanResult) -> None:
    d = cheaper.to_plan_dict()
    rows: list[Any] = [*d["candidates"], *d["pareto"]]  # type: ignore[misc]
    rows += [e["best"] for e in d["per_gpu_type"].values() if e["best"]]  # type: ignore[attr-defined]
    rows += [c for c in d["alternatives"].values() if c]  # type: ignore[attr-defined]
    disagg = [r for r in rows if r["mode"] == "disagg"]
    assert disagg
    for r in disagg:
        assert r["prefill_gpu"] in ("h100_sxm", "h200_sxm") and r["decode_gpu"] == r["gpu"]


def test_a_pair_of_two_types_draws_each_roles_own_power() -> None:
    """Each role's board power is its own type's: the pair's watts are the prefill role's as in
    an all-H100 pair plus the decode role's as in an all-B200 pair."""
    mixed, h100, b200 = _roles("h100", "b200"), _roles("h100", "h100"), _roles("b200", "b200")
    assert mixed.power is not None and h100.power is not None and b200.power is not None
    gpus = mixed.gpus / 2  # one prefill and one decode worker of equal size
    assert h100.power.idle_power_w_per_gpu < mixed.power.idle_power_w_per_gpu
    assert mixed.power.idle_power_w_per_gpu < b200.power.idle_power_w_per_gpu
    assert mixed.power.idle_power_w_per_gpu == pytest.approx(
        (h100.power.idle_power_w_per_gpu + b200.power.idle_power_w_per_gpu) / 2
    )
    assert mixed.power.deployment_kw * 1e3 > gpus * h100.power.idle_power_w_per_gpu


def test_plan_power_of_a_pair_equals_estimate_power(cheaper: PlanResult) -> None:
    best = cheaper.best
    assert best.prefill_gpu and best.prefill_gpu != best.gpu and best.power is not None
    dep = best.deployment
    req = cheaper.request
    est = estimate(
        load_model(req.model),
        get_gpu(best.gpu),
        fixed(req.isl, req.osl, rate_per_s=req.rate_per_s),
        prefill=dep.prefill,
        decode=dep.decode,
        prefill_gpu=get_gpu(best.prefill_gpu),
    )
    assert est.power is not None
    for f in ("avg_power_w_per_gpu", "deployment_kw", "j_per_total_token"):
        assert getattr(best.power, f) == pytest.approx(getattr(est.power, f), rel=1e-6), f


def test_fleet_energy_objective_with_pairs_of_two_pools() -> None:
    from solvers.fleet import FleetSpec, solve_fleet

    spec: dict[str, Any] = {
        "classes": [
            {
                "name": "long",
                "model": "llama-3.1-70b",
                "rate_per_s": 4,
                "isl": 4096,
                "osl": 512,
                "ttft_ms": 2000,
                "tpot_ms": 40,
            }
        ],
        "gpus": [{"gpu": "h100_sxm", "available": 32}, {"gpu": "h200_sxm", "available": 32}],
        "disagg": True,
    }
    cost = solve_fleet(FleetSpec.model_validate(spec))
    energy = solve_fleet(FleetSpec.model_validate(spec | {"objective": "energy"}))
    assert cost.power is not None and energy.power is not None
    assert energy.power.board_kw <= cost.power.board_kw + 1e-9
    assert all(a.board_kw > 0 for a in energy.assignments)
