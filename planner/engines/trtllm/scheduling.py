"""TensorRT-LLM's prompt holds (``PyExecutor``): attention-DP balance and batch waiting, launch
settings that hold a waiting prompt back before its prefill; the serving model reads them as a
``planner.engines.PromptHolds`` (``serving.WorkerArrays.holds``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special


@dataclass(frozen=True)
class LaunchHolds:
    """The prompt holds a TensorRT-LLM launch enables (K candidates); None: that hold is off for
    every candidate."""

    adp_balance_iters: np.ndarray | None = None
    """Attention-DP balance (``attention_dp_config: enable_balance, timeout_iters``): steps a
    prompt may be held until every DP rank has one (``adp_balance_wait``); 0: off."""
    batch_wait_iters: np.ndarray | None = None
    """Batch waiting (``batch_wait_timeout_iters``): steps a prompt may be held for more prompts
    (``batch_wait``); 0: off."""
    batch_wait_tokens: np.ndarray | None = None
    """Its token threshold, ``batch_wait_max_tokens_ratio`` x ``max_num_tokens``."""

    def add_wait(
        self,
        overhead_s: np.ndarray,
        rate: np.ndarray,
        t_step: np.ndarray,
        dp: np.ndarray,
        isl: np.ndarray,
        decode: np.ndarray,
    ) -> np.ndarray:
        """``overhead_s`` plus the balance hold, then the batch-wait hold (s per request)."""
        out = overhead_s
        if self.adp_balance_iters is not None:  # held for the other DP ranks
            out = out + adp_balance_wait(rate, t_step, self.adp_balance_iters, dp)
        if self.batch_wait_iters is not None and self.batch_wait_tokens is not None:
            out = out + batch_wait(
                rate, t_step, self.batch_wait_iters, self.batch_wait_tokens, isl, decode
            )
        return out

    def any(self) -> bool:
        """Whether any hold is set (a launch with neither holds nothing)."""
        waits = self.batch_wait_iters is not None and self.batch_wait_tokens is not None
        return self.adp_balance_iters is not None or waits


def adp_balance_wait(
    x: np.ndarray, t_step: np.ndarray, iters: np.ndarray, dp: np.ndarray
) -> np.ndarray:
    """Mean wait (s) of a prompt held by TensorRT-LLM's attention-DP balance: with
    ``enable_balance`` a rank's context requests wait until every one of the ``dp`` ranks has one,
    or until ``iters`` steps (``timeout_iters``, each ``t_step`` s) have passed, and then all that
    waited go together (``PyExecutor._balance_adp_requests``, github:NVIDIA/TensorRT-LLM; the
    strategy: docs/source/blogs/tech_blog/blog10_ADP_Balance_Strategy.md). Arrivals at ``x``
    requests/s open a window at the first held prompt; it closes after W = min(iters·t_step,
    (D·H_D - 1)/x), the timeout or the arrivals until every rank holds one: the router gives a new
    request to the rank with the fewest active requests, in a closed loop the rank a request just
    left, so the ranks are drawn at random and covering all D takes D·H_D arrivals on average
    (H_D = 1 + 1/2 + ... + 1/D; coupon collector). The first prompt waits W and the x·W that
    arrive during the window wait W/2 on average: mean W·(1 + x·W/2)/(1 + x·W). Zero where
    ``iters`` <= 0 or ``dp`` <= 1. On the seven InferenceMAX DeepSeek-R1 TensorRT-LLM H200 rows with
    attention DP 8 (``timeout_iters`` 60), predicted with engine constants fitted on other
    campaigns, it takes TTFT from 0.15-0.37 of the measured value to 0.40-0.67."""
    d = np.maximum(dp, 1.0)
    # arrivals until every rank has one: D·H_D (coupon collector) less the first
    harmonic = special.digamma(d + 1.0) + np.euler_gamma  # H_D
    held = _held_wait(x, t_step, iters, d * harmonic - 1.0)
    return np.where((iters > 0) & (dp > 1), held, 0.0)


def batch_wait(
    x: np.ndarray,
    t_step: np.ndarray,
    iters: np.ndarray,
    tokens: np.ndarray,
    isl: np.ndarray,
    decode: np.ndarray,
) -> np.ndarray:
    """Mean wait (s) of a prompt held by TensorRT-LLM's batch waiting (``batch_wait_timeout_iters``,
    ``batch_wait_max_tokens_ratio``; without attention DP): while requests decode, context requests
    wait until a step's scheduled tokens (their prompts plus one per decoding request) reach
    ``tokens`` = ratio x ``max_num_tokens``, or until ``iters`` steps have passed
    (``PyExecutor._waiting_requests``, github:NVIDIA/TensorRT-LLM). The window closes after
    min(iters·t_step, k/x) with k = (tokens - decode)/isl - 1 more prompts of ``isl`` tokens at
    ``x`` requests/s (``decode``: requests decoding per step); mean hold as in
    ``adp_balance_wait``. Zero where ``iters`` <= 0 or one prompt already reaches the threshold."""
    need = (tokens - decode) / np.maximum(isl, 1.0) - 1.0
    held = _held_wait(x, t_step, iters, np.maximum(need, 0.0))
    return np.where((iters > 0) & (need > 0), held, 0.0)


def _held_wait(
    x: np.ndarray, t_step: np.ndarray, iters: np.ndarray, more: np.ndarray
) -> np.ndarray:
    """Mean wait (s) of prompts held in windows that open at the first held prompt and close
    after min(iters·t_step, more/x): ``more`` further arrivals at ``x`` requests/s, or the timeout.
    The first prompt waits the whole window W, the x·W arriving during it W/2 on average: mean
    W·(1 + x·W/2)/(1 + x·W). A non-finite rate waits the whole timeout."""
    x = np.where(np.isfinite(x), np.maximum(x, 0.0), 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        fill = np.where(x > 0, more / x, np.inf)
    w = np.minimum(np.maximum(iters, 0.0) * t_step, fill)
    xw = x * w
    return np.asarray(w * (1.0 + xw / 2.0) / (1.0 + xw))


OVERLAP_SCHEDULER = (
    "TensorRT-LLM's PyExecutor launches step n+1 before it processes step n's outputs, "
    "enabled by default (disable_overlap_scheduler=False); 'the optimization introduces one "
    "extra decoding step' (github:NVIDIA/TensorRT-LLM docs/source/features/overlap-scheduler.md"
    "@081661b76c54f3516a894b682f1f15ceb7d3a03c)"
)
"""Why TensorRT-LLM emits a first token one step late and a new prompt misses one step
(``Engine.overlap_scheduler``)."""
