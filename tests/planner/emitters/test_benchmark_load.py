"""benchmark.sh replays the load the plan was predicted for:
closed loop when it has a concurrency."""

from __future__ import annotations

import pytest

from planner.emitters import build_bundle
from planner.emitters.plan_file import parse_plan
from planner.engines.registry import BUILTIN
from tests.planner.emitters.plans import default_agg_plan

ENGINES = tuple(BUILTIN)


@pytest.mark.parametrize("engine", ENGINES)
def test_concurrency_plan_benchmarks_a_closed_loop(engine: str) -> None:
    plan = default_agg_plan()
    plan["workload"] = {
        **plan["workload"],
        "concurrency": 16,
        "rate": 1.25,
    }  # rate = predicted output
    files = {f.name: f.text for f in build_bundle(parse_plan(plan), engine)}
    bench = files["benchmark.sh"]
    assert "16" in bench and "request-rate" not in bench and "1.25" not in bench.split("\n", 2)[2]


@pytest.mark.parametrize("engine", ENGINES)
def test_rate_plan_benchmarks_an_open_loop(engine: str) -> None:
    plan = default_agg_plan()
    plan["workload"] = {**plan["workload"], "concurrency": None, "rate": 2.5}
    bench = {f.name: f.text for f in build_bundle(parse_plan(plan), engine)}["benchmark.sh"]
    assert "request-rate" in bench and "2.5" in bench
