"""Plan files for the report tests: one the solver makes now, one hand-written with other shapes."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def solver_plan_json() -> str:
    """The default Llama-3.1-70B / H200 plan, as ``planner plan --format json`` prints it
    (~0.3 s)."""
    from solvers.plan import PlanRequest, plan

    req = PlanRequest(
        model="llama-3.1-70b",
        gpus=("h200",),
        max_gpus=8,
        isl=4000,
        osl=500,
        ttft_ms=1000,
        tpot_ms=30,
        percentile="p90",
    )
    return json.dumps(plan(req).to_plan_dict())


@pytest.fixture
def solver_plan(solver_plan_json: str) -> dict[str, Any]:
    """A fresh decoded copy of the solver's plan (tests may edit it)."""
    data: dict[str, Any] = json.loads(solver_plan_json)
    return data


@pytest.fixture
def synthetic_plan() -> dict[str, Any]:
    """Hand-written plan: breakdown as shares, one memory plan, a None alternative,
    short numbers."""
    data: dict[str, Any] = json.loads((DATA / "synthetic_plan.json").read_text())
    return data


@pytest.fixture(params=["solver", "synthetic"])
def plan(request: pytest.FixtureRequest) -> dict[str, Any]:
    """Each plan in turn."""
    data: dict[str, Any] = request.getfixturevalue(f"{request.param}_plan")
    return data


@pytest.fixture
def disagg_plan(synthetic_plan: dict[str, Any]) -> dict[str, Any]:
    """The synthetic plan with per-role (prefill/decode) breakdowns in shares."""
    out = copy.deepcopy(synthetic_plan)
    pred = out["best"]["predicted"]
    pred["step_breakdown"] = {
        "prefill": pred["step_breakdown"],
        "decode": {"attention_decode": 0.6, "gemm_mlp": 0.4},
    }
    pred["memory"] = {"prefill": pred["memory"], "decode": pred["memory"]}
    return out
