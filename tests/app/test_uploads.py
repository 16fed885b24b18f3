"""Uploads: a fleet YAML may name bundled models or configs uploaded in the session, never a path
on the server's disk."""

from __future__ import annotations

import pytest

from app.planning import check_fleet_models
from hardware.errors import PlannerInputError
from solvers.fleet import FleetSpec, GpuPool, WorkloadClass


def _spec(model: str) -> FleetSpec:
    cls = WorkloadClass(
        name="chat", model=model, rate_per_s=1, isl=100, osl=10, ttft_ms=1000, tpot_ms=50
    )
    return FleetSpec(classes=(cls,), gpus=(GpuPool(gpu="h200_sxm", available=8),))


@pytest.mark.parametrize(
    "model", ["/etc/passwd", "../../secret/config.json", "/tmp/other/config.json"]
)
def test_server_paths_are_refused(model: str) -> None:
    with pytest.raises(PlannerInputError, match=r"classes\[0\]\.model"):
        check_fleet_models(_spec(model), uploaded={"/tmp/planner-ui-configs-x/abc/config.json"})


def test_bundled_and_session_uploads_are_accepted() -> None:
    assert check_fleet_models(_spec("llama-3.1-8b"), uploaded=set())
    up = "/tmp/planner-ui-configs-x/abc/config.json"
    assert check_fleet_models(_spec(up), uploaded={up})
