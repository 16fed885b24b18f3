"""Power model: idle floor, board limit, monotone in load, the f^3 clock law, --power-cap input."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hardware.catalog import get_gpu
from hardware.errors import PlannerInputError
from planner.engines.calibration import engine
from planner.model.bundled import load_model
from planner.perf.deployment import Parallelism, WorkerConfig
from planner.perf.estimate import estimate
from planner.perf.power import (
    CLOCK_EXPONENT,
    Activity,
    PowerParams,
    board_limit_w,
    board_power_w,
    cap_for,
    clock_ratio,
    clocked_gpu,
    demand_w,
    idle_power_w,
    load_params,
    parse_power_caps,
    role_loads,
    role_steps,
    step_work,
)
from planner.workload.spec import fixed

PRM = PowerParams(0.2, 0.2, 0.4, 100.0, "test")
GPUS = ("b200_sxm", "h100_sxm", "mi355x", "l4", "h100_nvl")


def _act(busy: float, tflops: float, tbytes: float) -> Activity:
    return Activity(np.array([busy]), np.array([tflops * 1e12]), np.array([tbytes * 1e12]))


@settings(max_examples=60, deadline=None)
@given(
    gpu=st.sampled_from(GPUS),
    busy=st.floats(0.0, 1.0),
    tflops=st.floats(0.0, 5000.0),
    tbytes=st.floats(0.0, 8.0),
    more=st.floats(1.0, 4.0),
    cap=st.one_of(st.none(), st.floats(50.0, 2000.0)),
)
def test_power_is_monotone_in_load_never_below_idle_never_above_the_limit(
    gpu: str, busy: float, tflops: float, tbytes: float, more: float, cap: float | None
) -> None:
    g = get_gpu(gpu)
    low = board_power_w(g, _act(busy, tflops, tbytes), PRM, cap)[0]
    high = board_power_w(g, _act(min(busy * more, 1.0), tflops * more, tbytes * more), PRM, cap)[0]
    assert high >= low - 1e-9
    assert low >= idle_power_w(g, PRM) - 1e-9
    assert high <= max(board_limit_w(g, cap), idle_power_w(g, PRM)) + 1e-9


def test_idle_gpu_draws_its_idle_floor() -> None:
    g = get_gpu("b200_sxm")
    assert board_power_w(g, _act(0, 0, 0), PRM)[0] == pytest.approx(0.2 * g.power_watts)


def test_clock_follows_the_cube_law_above_the_limit_and_is_full_below() -> None:
    g = get_gpu("b200_sxm")
    act = _act(1.0, 500.0, 3.0)
    idle, demand = idle_power_w(g, PRM), float(demand_w(g, act, PRM)[0])
    assert demand < g.power_watts
    assert float(clock_ratio(g, act, PRM)[0]) == 1.0
    cap = idle + (demand - idle) / 2
    expect = 0.5 ** (1 / CLOCK_EXPONENT)  # half the dynamic power: 0.794 of the clock
    assert float(clock_ratio(g, act, PRM, cap_w=cap)[0]) == pytest.approx(expect)


def test_clocked_gpu_scales_flops_not_bandwidth() -> None:
    g = get_gpu("h100_sxm")
    slow = clocked_gpu(g, 0.8)
    assert slow.peak_flops("fp8") == pytest.approx(0.8 * g.peak_flops("fp8"))
    assert slow.hbm_bandwidth_bytes_per_s == g.hbm_bandwidth_bytes_per_s
    assert clocked_gpu(g, 1.0) is g


def test_power_cap_flag_parses_and_refuses_bad_values() -> None:
    caps = parse_power_caps(["h100_nvl=350", "B200=700"])
    assert cap_for(get_gpu("h100_nvl"), caps) == 350.0
    assert cap_for(get_gpu("b200_sxm"), caps) == 700.0
    assert cap_for(get_gpu("h200_sxm"), caps) is None
    for bad in ("h100", "h100=", "=300", "h100=-5", "h100=abc"):
        with pytest.raises(PlannerInputError, match="--power-cap"):
            parse_power_caps([bad])


def test_packaged_parameters_lie_in_their_bounds_and_name_their_fit() -> None:
    prm = load_params()
    assert "lab.fit_power" in prm.source


def test_bad_parameter_file_is_an_input_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "power.yaml"
    f.write_text("params:\n  idle_fraction: {value: 3}\n")
    with pytest.raises(PlannerInputError, match="idle_fraction"):
        load_params(f)


def test_a_tighter_cap_lowers_power_and_clock_and_never_raises_throughput() -> None:
    m, g = load_model("llama-3.1-8b"), get_gpu("h100_sxm")
    wl = fixed(2048, 256, concurrency=64)
    agg = WorkerConfig(parallel=Parallelism(tp=1), weight_quant="fp8", kv_dtype="fp8")
    free = estimate(m, g, wl, agg=agg)
    capped = estimate(m, g, wl, agg=agg, power_cap_w=250.0)
    assert free.power is not None and capped.power is not None
    assert capped.power.avg_power_w_per_gpu <= 250.0 + 1e-6
    assert capped.power.clock_ratio < 1.0
    assert capped.output_tok_s_per_gpu <= free.output_tok_s_per_gpu * (1 + 1e-9)
    assert capped.ttft_ms.mean >= free.ttft_ms.mean


def test_energy_figures_follow_from_power_and_throughput() -> None:
    m, g = load_model("llama-3.1-8b"), get_gpu("h100_sxm")
    est = estimate(m, g, fixed(1024, 256, concurrency=16), electricity_price=0.1, pue=1.5)
    p = est.power
    assert p is not None
    out_tok_s = est.output_tok_s_per_gpu * est.gpus
    assert p.j_per_output_token == pytest.approx(p.avg_power_w_per_gpu * est.gpus / out_tok_s)
    assert p.j_per_total_token < p.j_per_output_token
    assert p.kwh_per_day == pytest.approx(p.deployment_kw * 1.5 * 24)
    assert p.energy_cost_usd_per_day == pytest.approx(p.kwh_per_day * 0.1)
    assert p.total_cost_usd_per_hour == pytest.approx(
        est.gpus * g.price_per_gpu_hour_usd + p.deployment_kw * 1.5 * 0.1
    )


@pytest.mark.parametrize("gpu", ["h100_sxm", "b200_sxm", "l4"])
def test_estimated_power_never_falls_as_clients_are_added(gpu: str) -> None:
    m, g = load_model("llama-3.1-8b"), get_gpu(gpu)
    quant = "fp8" if g.supports("fp8") else "bf16"
    agg = WorkerConfig(parallel=Parallelism(tp=1), weight_quant=quant, kv_dtype="fp8")
    powers = [
        estimate(m, g, fixed(1024, 256, concurrency=clients), agg=agg).power
        for clients in (1, 4, 16, 64, 256)
    ]
    watts = [p.avg_power_w_per_gpu for p in powers if p is not None]
    assert len(watts) == len(powers) and watts == sorted(watts), watts
    last = powers[-1]
    assert last is not None
    assert watts[0] >= last.idle_power_w_per_gpu
    assert watts[-1] <= last.board_limit_w + 1e-6


@pytest.mark.parametrize(
    ("model", "gpu", "pre", "main"),
    [
        (
            "llama-3.1-70b",
            "h200",
            None,
            WorkerConfig(parallel=Parallelism(tp=4), weight_quant="fp8"),
        ),
        (
            "qwen3-32b",
            "h100",
            WorkerConfig(parallel=Parallelism(tp=2)),
            WorkerConfig(parallel=Parallelism(tp=2, pp=2), max_num_batched_tokens=4096),
        ),
        ("qwen3-30b-a3b", "b200", None, WorkerConfig(parallel=Parallelism(tp=1, dp=2, ep=2))),
    ],
)
def test_a_roles_work_is_the_sum_of_its_steps_priced_one_by_one(
    model: str, gpu: str, pre: WorkerConfig | None, main: WorkerConfig
) -> None:
    """``role_load`` prices a role's steps' FLOPs and bytes in one op graph (their rows end to
    end): the same as each step's ``step_work`` alone, times its count per request."""
    m, g = load_model(model), get_gpu(gpu)
    wl = fixed(3000, 400, rate_per_s=2.0)
    cal = engine("vllm")
    rate = 2.0
    for role, load in zip(
        role_steps(g, wl, main, pre, 24.0),
        role_loads(m, g, wl, main, pre, cal, rate, 24.0),
        strict=True,
    ):
        flops = sum(t * float(step_work(m, role.par, mix)[0][0]) for mix, t in role.steps)
        nbytes = sum(t * float(step_work(m, role.par, mix)[1][0]) for mix, t in role.steps)
        per_gpu = rate / role.workers
        assert load.activity.flops_per_s[0] == pytest.approx(per_gpu * flops, rel=1e-12)
        assert load.activity.bytes_per_s[0] == pytest.approx(per_gpu * nbytes, rel=1e-12)
        assert load.activity.busy[0] > 0.0
