"""Edge cases of the discrete-event simulator (planner.perf.simulator) found by the CLI fuzz."""

from __future__ import annotations

import pytest

from hardware.errors import PlannerInputError
from planner.model.bundled import load_model
from planner.perf.deployment import WorkerConfig
from planner.perf.simulator import simulate
from planner.workload.spec import fixed


def test_one_token_answers_keep_the_clients_asking() -> None:
    """OSL 1 ends a request with its prefill; the closed loop must send the next one (it once
    waited forever)."""
    s = simulate(
        load_model("llama-3.1-8b"),
        "h200",
        fixed(1000, 1, concurrency=8),
        WorkerConfig(),
        requests=60,
    )
    assert s.ttft_s.size > 0 and s.requests_per_s > 0


def test_too_few_requests_to_measure_is_an_input_error() -> None:
    with pytest.raises(PlannerInputError, match="--requests"):
        simulate(
            load_model("llama-3.1-8b"),
            "h200",
            fixed(1000, 200, concurrency=8),
            WorkerConfig(),
            requests=1,
        )
