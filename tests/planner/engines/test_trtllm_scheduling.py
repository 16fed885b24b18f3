"""TensorRT-LLM's attention-DP balance and batch waiting (``adp_balance_wait``, ``batch_wait`` of
``planner.engines.trtllm.scheduling``) and their place in the aggregated closed loop."""

from __future__ import annotations

import numpy as np
import pytest

from hardware.catalog import get_gpu
from planner.engines.trtllm.scheduling import LaunchHolds, adp_balance_wait, batch_wait
from planner.model.bundled import load_model
from planner.perf.batch import CandidateArrays, RecordedLaunch, evaluate_batch
from planner.workload.spec import fixed


def _wait(x: float, step: float = 0.03, iters: float = 60, dp: float = 8) -> float:
    return float(
        adp_balance_wait(np.array([x]), np.array([step]), np.array([iters]), np.array([dp]))[0]
    )


@pytest.mark.parametrize(("iters", "dp"), [(0, 8), (60, 1), (-5, 8)])
def test_no_wait_without_balance_or_without_dp(iters: float, dp: float) -> None:
    assert _wait(5.0, iters=iters, dp=dp) == 0.0


def test_rare_arrivals_wait_the_whole_timeout() -> None:
    """One prompt in a window waits timeout_iters steps: 60 x 30 ms; so does one whose rate is
    not known (NaN)."""
    assert _wait(1e-6) == pytest.approx(60 * 0.03, rel=1e-4)
    assert _wait(0.0) == pytest.approx(60 * 0.03)
    assert _wait(float("nan")) == pytest.approx(60 * 0.03)


def test_busy_arrivals_fill_the_ranks_before_the_timeout() -> None:
    """At 1,000 requests/s the eight ranks hold one each after 8·H_8 - 1 = 20.7 arrivals (20.7
    ms), long before the 1.8 s timeout; the prompts of that window wait about half of it."""
    h8 = sum(1.0 / i for i in range(1, 9))
    window = (8 * h8 - 1.0) / 1000.0
    xw = 1000.0 * window
    assert _wait(1000.0) == pytest.approx(window * (1 + xw / 2) / (1 + xw), rel=1e-9)
    assert _wait(1000.0) < window


def test_the_wait_is_bounded_by_the_timeout_and_falls_with_load() -> None:
    rates = np.geomspace(0.01, 1e4, 40)
    waits = np.array([_wait(float(x)) for x in rates])
    assert np.all(waits <= 60 * 0.03 + 1e-12)
    assert np.all(np.diff(waits) <= 1e-12)
    assert _wait(2.0, iters=120) > _wait(2.0, iters=60)


def test_the_closed_loop_carries_the_held_prompts() -> None:
    """DeepSeek-R1 on H200, attention DP 8, 128 clients of 1k/1k: the balance adds to TTFT about
    what ``adp_balance_wait`` gives at the loop's rate, and the clients it holds leave fewer
    requests decoding (TPOT does not grow)."""
    m = load_model("deepseek-r1")
    c = CandidateArrays.from_lists(
        tp=[1, 1], dp=[8, 8], ep=[8, 8], weight_quant=1, kv_dtype=1, concurrency=[128.0, 128.0]
    )
    w = fixed(1024, 1024, concurrency=1)
    holds = LaunchHolds(adp_balance_iters=np.array([0, 60]))
    launch = RecordedLaunch(holds=holds)
    r = evaluate_batch(m, get_gpu("h200"), c, w, backend="trtllm", recorded=launch)
    plain, held = r.ttft_mean_s
    assert held > plain + 0.5
    assert r.tpot_mean_s[1] <= r.tpot_mean_s[0] * (1 + 1e-6)
    assert r.requests_per_s[1] < r.requests_per_s[0]


def _bw(
    x: float, iters: float = 20, tokens: float = 14745.6, isl: float = 922, dec: float = 16
) -> float:
    return float(
        batch_wait(
            np.array([x]),
            np.array([0.02]),
            np.array([iters]),
            np.array([tokens]),
            np.array([isl]),
            np.array([dec]),
        )[0]
    )


def test_batch_wait_holds_a_lone_prompt_for_the_timeout() -> None:
    """TensorRT-LLM batch waiting, 20 steps of 20 ms: a prompt arriving alone waits 0.4 s."""
    assert _bw(1e-6) == pytest.approx(20 * 0.02, rel=1e-4)
    assert _bw(0.5, iters=0) == 0.0


def test_batch_wait_ends_when_the_prompts_fill_the_threshold() -> None:
    """At 1,000 prompts/s the 14,746-token threshold (0.9 x 16,384) is reached after
    (14,746 - 16)/922 - 1 = 15 more prompts, 15 ms, before the 0.4 s timeout; a prompt longer than
    the threshold is never held."""
    more = (14745.6 - 16) / 922 - 1.0
    w = more / 1000.0
    assert _bw(1000.0) == pytest.approx(w * (1 + 1000 * w / 2) / (1 + 1000 * w), rel=1e-9)
    assert _bw(5.0, isl=16000) == 0.0
