"""Power of plan candidates (solvers.power_plan): equal to planner estimate's power object, and
--objective energy picks the fewest joules per total token."""

from __future__ import annotations

import numpy as np
import pytest

from hardware.catalog import get_gpu
from planner.model.bundled import load_model
from planner.perf.estimate import estimate
from planner.workload.spec import fixed
from solvers.plan import PlanRequest, plan
from solvers.plan_core import evaluate_request
from solvers.power_plan import energy_score

BASE = {
    "model": "llama-3.1-8b",
    "gpus": ("h100_sxm", "b200_sxm"),
    "isl": 1024,
    "osl": 256,
    "ttft_ms": 1000.0,
    "tpot_ms": 50.0,
    "max_gpus": 8,
}


@pytest.mark.parametrize("mode", ["agg", "disagg"])
def test_plan_power_equals_estimate_power(mode: str) -> None:
    req = PlanRequest(**BASE, rate_per_s=5.0, mode=mode, electricity_price=0.1, pue=1.3)
    best = plan(req).best
    p = best.power
    assert p is not None
    dep = best.deployment
    roles = {"agg": dep.agg} if dep.agg else {"prefill": dep.prefill, "decode": dep.decode}
    est = estimate(
        load_model("llama-3.1-8b"),
        get_gpu(best.gpu),
        fixed(1024, 256, rate_per_s=5.0),
        electricity_price=0.1,
        pue=1.3,
        **roles,  # type: ignore[arg-type]
    )
    assert est.power is not None
    for f in ("avg_power_w_per_gpu", "deployment_kw", "j_per_output_token", "j_per_total_token"):
        assert getattr(p, f) == pytest.approx(getattr(est.power, f), rel=1e-6), f
    assert p.kwh_per_day == pytest.approx(p.deployment_kw * 1.3 * 24)
    assert p.total_cost_usd_per_hour == pytest.approx(
        best.cost_per_hour_usd + p.deployment_kw * 1.3 * 0.1
    )


def test_energy_objective_picks_the_fewest_joules_per_total_token() -> None:
    req = PlanRequest(**BASE, objective="energy")
    ev = evaluate_request(req)
    ok = ev.feasible()
    j = -energy_score(ev)
    best = plan(req).best
    assert best.power is not None
    assert best.power.j_per_total_token == pytest.approx(float(np.min(j[ok])), rel=1e-6)
    cheapest = plan(req.model_copy(update={"objective": "cost"})).best
    assert cheapest.power is not None
    assert best.power.j_per_total_token <= cheapest.power.j_per_total_token * (1 + 1e-9)


def test_energy_score_is_finite_only_where_a_candidate_serves() -> None:
    ev = evaluate_request(PlanRequest(**BASE, concurrency=32))
    s = energy_score(ev)
    assert np.all(np.isfinite(s[ev.predicted_ok & (ev.rps > 0)]))
    assert np.all(s[~ev.predicted_ok] == -np.inf)
    assert np.all(s[np.isfinite(s)] < 0)


def test_capacity_power_is_the_static_mean_fleet_at_the_mean_rate() -> None:
    from planner.workload.trace_gen import TraceSpec, generate
    from solvers.capacity import CapacityRequest, capacity

    trace, _ = generate(TraceSpec(hours=2, peak_rate=2.0, isl_mean=1000, osl_mean=200, seed=3))
    req = CapacityRequest(
        model="llama-3.1-8b", gpus=("h100",), ttft_ms=1000, tpot_ms=50, pue=1.2, objective="energy"
    )
    res = capacity(trace, req)
    p = res.power
    assert p is not None
    assert p.idle_power_w_per_gpu <= p.avg_power_w_per_gpu <= p.board_limit_w
    assert p.gpu_cost_usd_per_hour == pytest.approx(res.static_mean.gpus * res.price_per_gpu_hour)
    assert p.kwh_per_day == pytest.approx(p.deployment_kw * 1.2 * 24)
    # J per output token x output tokens/s = board watts of the fleet
    out_tok_s = len(trace) / trace.duration_s * float(np.mean(trace.osl))
    assert p.j_per_output_token * out_tok_s == pytest.approx(p.deployment_kw * 1e3, rel=0.02)
    _capacity_sheet_shows(res.model_dump(mode="json"))


def _capacity_sheet_shows(cap: dict) -> None:
    """The Capacity sheet carries the power object's figures as numbers."""
    import io

    import openpyxl

    from planner.reports.capacity_sheet import FLEET_ROW, POWER_COLUMNS, capacity_xlsx

    ws = openpyxl.load_workbook(io.BytesIO(capacity_xlsx(cap)))["Capacity"]
    for c, (head, key) in enumerate(POWER_COLUMNS, start=7):  # openpyxl counts from 1
        assert ws.cell(FLEET_ROW + 1, c).value == head
        assert ws.cell(FLEET_ROW + 2, c).value == pytest.approx(cap["power"][key])


def test_fleet_energy_objective_draws_no_more_power_than_the_cost_one() -> None:
    from solvers.fleet import FleetSpec, solve_fleet

    spec = {
        "classes": [
            {
                "name": "chat",
                "model": "llama-3.1-8b",
                "rate_per_s": 20,
                "isl": 1000,
                "osl": 300,
                "ttft_ms": 800,
                "tpot_ms": 40,
            },
        ],
        "gpus": [{"gpu": "h100_sxm", "available": 16}, {"gpu": "h200_sxm", "available": 16}],
        "max_gpus_per_replica": 4,
    }
    cheap = solve_fleet(FleetSpec.model_validate(spec))
    green = solve_fleet(FleetSpec.model_validate(spec | {"objective": "energy"}))
    assert cheap.power is not None and green.power is not None
    assert green.power.board_kw <= cheap.power.board_kw * (1 + 1e-6)
    assert green.cost_per_hour_usd >= cheap.cost_per_hour_usd * (1 - 1e-6)
    kw = sum(a.board_kw for a in green.assignments)
    assert green.power.board_kw == pytest.approx(kw)
    assert green.power.kwh_per_day == pytest.approx(kw * green.power.pue * 24)


def test_fleet_energy_objective_takes_the_option_of_least_power() -> None:
    """A 2-GPU option at 900 W or a 1-GPU option at 700 W serving the same rate: cost takes the
    cheaper first, energy the second."""
    from solvers.fleet import FleetSpec, Options, solve_options

    cls = {"name": "a", "model": "llama-3.1-8b", "rate_per_s": 10, "isl": 100, "osl": 10}
    spec = FleetSpec.model_validate(
        {
            "classes": [cls | {"ttft_ms": 500, "tpot_ms": 50}],
            "gpus": [{"gpu": "h100", "available": 8}, {"gpu": "h200", "available": 8}],
        }
    )
    opt = Options(
        klass=(0, 0),
        gtype=(0, 1),
        gpus=(2, 1),
        rps=(10.0, 10.0),
        price=(1.0, 3.0),
        config=("", ""),
        watts=(900.0, 700.0),
    )
    assert solve_options(spec, opt)[0] == [1, 0]
    assert solve_options(spec.model_copy(update={"objective": "energy"}), opt)[0] == [0, 1]


def test_sweep_rows_carry_kwh_next_to_dollars_per_million_tokens() -> None:
    from planner.emitters.capabilities import shape_rules
    from solvers.sweep import SweepSpec, run_scenario, scenarios

    base = {
        "models": ["llama-3.1-8b"],
        "gpu_sets": [{"name": "h", "gpus": ["h100"], "max_gpus": 4}],
        "workloads": [{"name": "chat", "isl": 1000, "osl": 300, "rate_per_s": 4}],
        "slos": [{"name": "s", "ttft_ms": 1500, "tpot_ms": 40}],
    }
    plain = scenarios(SweepSpec.model_validate(base), shape_rules("vllm"))
    priced = scenarios(
        SweepSpec.model_validate(base | {"electricity_price": 0.2, "pue": 1.1}), shape_rules("vllm")
    )
    # a spec without the keys keeps the ids it had before they existed
    assert "electricity_price" not in plain[0].request
    assert plain[0].scenario_id != priced[0].scenario_id
    row = run_scenario(priced[0])
    assert row["status"] == "ok", row
    j = float(row["j_per_total_token"])  # type: ignore[arg-type]
    kwh = float(row["kwh_per_million_total_tokens"])  # type: ignore[arg-type]
    assert kwh == pytest.approx(j * 1e6 * 1.1 / 3.6e6)
    energy_usd = float(row["energy_cost_per_million_total_tokens_usd"])  # type: ignore[arg-type]
    assert energy_usd == pytest.approx(kwh * 0.2)
    assert float(row["avg_power_w_per_gpu"]) > 0  # type: ignore[arg-type]


def test_plan_power_with_prefix_hits_equals_estimate_power() -> None:
    """A prefix-cache hit skips prefill compute, in the plan's power as in estimate's."""
    req = PlanRequest(**BASE, rate_per_s=5.0, mode="agg", prefix_hit=0.5)
    best = plan(req).best
    assert best.power is not None and best.deployment.agg is not None
    est = estimate(
        load_model("llama-3.1-8b"),
        get_gpu(best.gpu),
        fixed(1024, 256, rate_per_s=5.0).model_copy(update={"prefix_hit": 0.5}),
        agg=best.deployment.agg,
    )
    assert est.power is not None
    assert best.power.avg_power_w_per_gpu == pytest.approx(est.power.avg_power_w_per_gpu, rel=1e-6)
