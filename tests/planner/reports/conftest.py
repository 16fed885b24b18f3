"""Plan files for the report tests."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).parent / "data"


def _load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / name).read_text())
    return data


@pytest.fixture
def plan() -> dict[str, Any]:
    """A plan file as ``planner plan --format json`` writes it."""
    return _load("synthetic_plan.json")


@pytest.fixture
def disagg_plan(plan: dict[str, Any]) -> dict[str, Any]:
    """The same plan with per-role (prefill/decode) breakdowns, as a disaggregated plan holds them."""
    out = copy.deepcopy(plan)
    pred = out["best"]["predicted"]
    pred["step_breakdown"] = {"prefill": pred["step_breakdown"], "decode": {"attention_decode": 0.6, "gemm_mlp": 0.4}}
    pred["memory"] = {"prefill": pred["memory"], "decode": pred["memory"]}
    return out
