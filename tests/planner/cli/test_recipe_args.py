"""Length and memory checks behind ``--max-isl`` / ``--max-osl`` (estimate, plan, capacity)."""

from __future__ import annotations

import numpy as np
import pytest

from planner.cli.main import main
from planner.cli.recipe_args import check_one_request, trace_within
from planner.errors import PlannerInputError
from planner.workload.traces import Trace


def _trace(isl: list[int], osl: list[int]) -> Trace:
    n = len(isl)
    return Trace(
        arrival_s=np.arange(n, dtype=float),
        isl=np.asarray(isl, dtype=np.int64),
        osl=np.asarray(osl, dtype=np.int64),
    )


def test_capacity_leaves_out_requests_longer_than_the_model_and_counts_them() -> None:
    kept, dropped, max_isl, max_osl = trace_within(
        _trace([100, 3000, 500, 1900], [50, 10, 900, 100]), 2048, None, None, "gpt-j"
    )
    assert dropped == 1 and len(kept) == 3
    assert (max_isl, max_osl) == (1900, 900)  # the kept trace's longest, not the dropped one's


def test_capacity_refuses_a_stated_length_above_the_model() -> None:
    with pytest.raises(PlannerInputError, match="2,048 tokens") as exc:
        trace_within(_trace([100], [50]), 2048, None, 4096, "gpt-j")
    assert exc.value.field == "--max-osl"


def test_a_kv_cache_that_cannot_hold_one_request_is_refused_with_the_reason() -> None:
    memory = {"agg": {"kv_capacity_tokens": 64_000, "parallel": {"dp": 8}}}
    check_one_request({"memory": memory}, {"max_isl": 4000, "max_osl": 4000})  # 8,000 per rank
    with pytest.raises(PlannerInputError, match="holds 8,000 tokens, less than one request"):
        check_one_request({"memory": memory}, {"max_isl": 4000, "max_osl": 4001})


def test_a_prefill_worker_needs_only_the_prompt() -> None:
    memory = {"prefill": {"kv_capacity_tokens": 5000, "parallel": {"dp": 1}}}
    check_one_request({"memory": memory}, {"max_isl": 5000, "max_osl": 90_000})


def test_estimate_refuses_a_length_above_the_model(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(
        ["estimate", "--model", "gpt-j-6b", "--gpu", "h100", "--concurrency", "4"]
        + ["--isl", "512", "--osl", "128", "--max-isl", "4096"]
    )
    err = capsys.readouterr().err
    assert rc == 2 and "--max-isl" in err and "2,048" in err and "Traceback" not in err
