"""The calibration profile: which constants few rows can fit, and checks on reading a profile."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from planner.calibration.profile import activate, constants_to_fit, load_profile
from planner.engines import get_engine
from planner.engines.calibration import EnginePolicy, load_engines
from planner.errors import PlannerInputError
from tests.planner.calibration.fixtures import write_profile


@pytest.fixture(autouse=True)
def _reset_profile() -> object:
    yield
    activate(None)


def _rows(mode: str, concurrencies: list[int]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "model_path": "m",
            "system": "h100_sxm",
            "isl": 1000,
            "osl": 100,
            "mode": mode,
            "c_concurrency": concurrencies,
        }
    )


@pytest.mark.parametrize(
    ("concurrencies", "expected"),
    [
        ([8], ["kernel_scale", "request_overhead_s"]),
        ([8, 8, 8], ["kernel_scale", "request_overhead_s"]),  # one load point, however many runs
        ([1, 8, 32], ["kernel_scale", "request_overhead_s", "step_overhead_s"]),
        ([1, 2, 4, 8], ["kernel_scale", "request_overhead_s", "step_overhead_s", "burst_fraction"]),
        (
            [1, 2, 4, 8, 16, 32],
            ["kernel_scale", "request_overhead_s", "step_overhead_s", "burst_fraction"],
        ),
    ],
)
def test_fewer_rows_fit_fewer_constants(concurrencies: list[int], expected: list[str]) -> None:
    assert constants_to_fit(_rows("agg", concurrencies)) == expected


def test_named_runs_do_not_fit_the_lockstep_share() -> None:
    """A run that names its request count P has the share N/P: nothing to fit."""
    named = _rows("agg", [1, 2, 4, 8]).assign(backend="sglang", bench_requests=[5, 10, 20, 40])
    assert constants_to_fit(named) == ["kernel_scale", "request_overhead_s", "step_overhead_s"]
    half = named.assign(bench_requests=[5, 10, None, None])
    assert "burst_fraction" not in constants_to_fit(half)  # two unnamed load points
    assert "burst_fraction" in constants_to_fit(named.assign(bench_requests=None))


def test_disaggregated_rows_fit_their_own_constants() -> None:
    rows = pd.concat([_rows("agg", [8, 16]), _rows("disagg", [1, 2, 4, 8])])
    assert constants_to_fit(rows) == [
        "kernel_scale",
        "request_overhead_s",
        "disagg_request_overhead_s",
        "step_overhead_s",
        "disagg_burst_fraction",
    ]


def test_activate_replaces_and_names_the_engine_constants(tmp_path: Path) -> None:
    prof = write_profile(tmp_path / "p.yaml", "sglang", {"kernel_scale": 1.5})
    packaged = load_engines()["sglang"].kernel_scale.value
    consts = activate(prof)
    sglang = consts.policy("sglang")
    assert str(prof) in consts.label and sglang.label == consts.label
    assert sglang.calibration.kernel_scale.value == pytest.approx(1.5 * packaged)
    assert str(prof) in sglang.calibration.kernel_scale.source
    vllm = consts.policy("vllm")  # not in the profile
    assert vllm.label == "planner/engines/vllm/constants.yaml"
    assert vllm.calibration == load_engines()["vllm"]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda d: d["engines"]["vllm"]["all_gpus"]["constants"].update(kernel_scale=9.0),
            "engines.vllm.all_gpus.constants.kernel_scale = 9.0 is outside [0.5, 2]",
        ),
        (
            lambda d: d["engines"]["vllm"]["all_gpus"]["constants"].update(warp_speed=1.0),
            "constants.warp_speed: unknown constant",
        ),
        (lambda d: d.update(engines={"tgi": d["engines"]["vllm"]}), "engine 'tgi' not one of"),
        (lambda d: d.update(format="other/2"), "format 'other/2'"),
        (
            lambda d: d["engines"]["vllm"]["all_gpus"].pop("rows_used"),
            "field 'engines.vllm.all_gpus.rows_used'",
        ),
    ],
)
def test_bad_profile_names_the_field(tmp_path: Path, edit: object, message: str) -> None:
    path = write_profile(tmp_path / "p.yaml", "vllm", {"kernel_scale": 1.2})
    data = yaml.safe_load(path.read_text())
    edit(data)  # type: ignore[operator]
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(PlannerInputError) as exc:
        load_profile(path)
    assert str(exc.value).startswith("--calibration") and message in str(exc.value)


def test_fitted_kernel_scale_keeps_the_disaggregated_prefill_worker() -> None:
    """Disaggregated TPOT measures decode steps: a kernel_scale fitted to it must not move the
    prefill worker (that coupling made held-out disaggregated TTFT worse)."""
    import numpy as np

    from hardware.catalog import get_gpu
    from planner.calibration.profile import with_constants
    from planner.model.bundled import load_model
    from planner.perf.batch import CandidateArrays
    from planner.perf.roles import prefill_role
    from planner.workload.spec import fixed

    base = load_engines()["vllm"]
    cal = with_constants(base, {"kernel_scale": 0.5}, "fit")
    assert cal.disagg_prefill_kernel_scale.value == pytest.approx(base.kernel_scale.value / 0.5)
    one = [1.0]
    cand = CandidateArrays.from_lists(
        tp=one, prefill_tp=one, prefill_workers=one, workers=one, mode=one
    )
    m, gpu, w = (
        load_model("llama-3.1-8b-instruct"),
        get_gpu("h100_sxm"),
        fixed(4000, 200, concurrency=8),
    )
    vllm = get_engine("vllm")
    times = [
        prefill_role(m, gpu, cand, w, backend=EnginePolicy(vllm, c, "x")).alone_s
        for c in (base, cal)
    ]
    np.testing.assert_allclose(times[1], times[0], rtol=1e-9)
    half = with_constants(base, {"kernel_scale": 0.5, "disagg_prefill_kernel_scale": 1.0}, "x")
    half_role = prefill_role(m, gpu, cand, w, backend=EnginePolicy(vllm, half, "x"))
    assert half_role.alone_s[0] < times[0][0]
