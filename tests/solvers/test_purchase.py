"""Costs are of the GPUs bought, in whole purchase units, per output and per total token
(issue 47, item 6)."""

from __future__ import annotations

import numpy as np
import pytest

from hardware.errors import InfeasibleError
from solvers.plan import PlanRequest, plan
from solvers.purchase import units_bought


def test_units_hold_workers_as_the_emitters_place_them() -> None:
    # 14 workers of 64 GPUs: 224 trays of 4 (896 GPUs), or 14 whole NVL72 racks (1,008 GPUs)
    assert int(units_bought(np.array(64), np.array(14), 4)) * 4 == 896
    assert int(units_bought(np.array(64), np.array(14), 72)) * 72 == 1008
    # workers that fit a unit share it, never straddling two: 3-GPU workers, 2 per 8-GPU host
    assert units_bought(np.array([3, 3, 2, 8, 12]), np.array([4, 5, 5, 3, 2]), 8).tolist() == [
        2,
        3,
        2,
        3,
        4,
    ]
    assert units_bought(np.array([1, 2]), np.array([7, 7]), 1).tolist() == [7, 14]


REQ = dict(
    model="llama-3.1-8b",
    gpus=("gb200",),
    max_gpus=16,
    isl=2000,
    osl=500,
    rate_per_s=5,
    ttft_ms=1000,
    tpot_ms=40,
    mode="agg",
    confidence=0,
)


def test_costs_are_of_the_gpus_bought() -> None:
    tray = plan(PlanRequest(**REQ)).best
    assert tray.purchase_unit["gpus"] == 4 and "tray" in str(tray.purchase_unit["source"])
    assert tray.gpus_bought % 4 == 0 and tray.gpus_bought >= tray.gpus
    # the budget counts the GPUs bought: one 72-GPU rack needs a budget of 72
    rack = plan(PlanRequest(**(REQ | {"max_gpus": 72}), node_gpus=72)).best
    assert rack.purchase_unit == {"gpus": 72, "source": "--node-gpus"}
    assert rack.gpus_bought == 72 and rack.gpus < 72  # --node-gpus now changes agg plans
    for c in (tray, rack):
        per_gpu_hour = c.cost_per_hour_usd / c.gpus_bought
        assert per_gpu_hour == pytest.approx(6.5)  # the GB200 spec's price, of every GPU bought
    assert rack.cost_per_hour_usd > tray.cost_per_hour_usd


def test_total_token_cost_counts_input_and_output() -> None:
    c = plan(PlanRequest(**REQ)).best
    out_tok_s = float(str(c.predicted["output_tok_s_per_gpu"])) * c.gpus
    assert c.cost_per_million_output_tokens == pytest.approx(
        c.cost_per_hour_usd / 3600 / out_tok_s * 1e6
    )
    share = REQ["osl"] / (REQ["isl"] + REQ["osl"])  # type: ignore[operator]
    assert c.cost_per_million_total_tokens == pytest.approx(
        c.cost_per_million_output_tokens * share
    )


def test_fleet_pays_for_whole_units() -> None:
    from solvers.fleet import FleetSpec, solve_fleet

    raw = dict(
        classes=[
            dict(
                name="chat",
                model="llama-3.1-8b",
                rate_per_s=3,
                isl=1000,
                osl=300,
                ttft_ms=1000,
                tpot_ms=40,
            )
        ],
        gpus=[dict(gpu="gb200", available=64)],
        max_gpus_per_replica=2,
        confidence=0,
    )
    tray = solve_fleet(FleetSpec.model_validate(raw))
    used, bought = tray.gpus_by_type["gb200"], tray.gpus_bought_by_type["gb200"]
    assert bought % 4 == 0 and used <= bought < used + 4
    assert tray.cost_per_hour_usd == pytest.approx(6.5 * bought)
    single = solve_fleet(
        FleetSpec.model_validate(
            raw | {"gpus": [dict(gpu="gb200", available=64, purchase_unit_gpus=1)]}
        )
    )
    assert single.cost_per_hour_usd == pytest.approx(6.5 * single.gpus_by_type["gb200"])
    assert single.cost_per_hour_usd <= tray.cost_per_hour_usd


def test_the_budget_counts_the_gpus_bought() -> None:
    # a 4-GPU tray: a budget of 6 buys one tray, whatever the GPUs used
    for budget in (4, 6, 7):
        c = plan(PlanRequest(**(REQ | {"max_gpus": budget}))).best
        assert c.gpus_bought <= budget and c.gpus_bought % 4 == 0
    with pytest.raises(InfeasibleError, match="budget of --max-gpus 3"):
        plan(PlanRequest(**(REQ | {"max_gpus": 3})))
