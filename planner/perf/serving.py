"""Steady state of aggregated and disaggregated serving, vectorized over K candidate configs.

Aggregated (continuous batching, chunked prefill; docs/architecture.md "Serving"): a step holds B
decode requests plus the prefill tokens that arrive, X·ISL·t per step on average, up to the chunk
budget. TPOT is the mean step time; a new prompt waits for the prefill work queued ahead of it
(``queueing.closed_loop_response`` for N clients, M/G/1 for an open loop) and then needs
ceil(ISL / free chunk) steps of its own. The loop (X, step time) -> (TTFT, TPOT) -> (X, step time)
is a fixed point that depends on the state only through s = X·t (decode requests per step s·dsteps,
prefill tokens per step s·ISL); it is solved in log s by a bracketed per-candidate secant (falling
back to the damped iteration where a step is not finite): ~3 priced passes, each 3 step mixes in
one vectorized call. On ``planner validate e2e`` rows its predictions are within 0.1% of the fixed
point converged to 1e-9 (the damped iteration it replaced, stopped at a 2e-3 move, was up to 2x off
near saturation).

Disaggregated xPyD: x prefill workers serve prompts only (their queue, M/G/c approximated by a
single server x times as fast), the KV of ISL tokens moves to a decode worker over NVLink when both
roles sit in one scale-up domain and over the NIC otherwise, then y decode workers run decode-only
steps. Rates are matched by the same closed loop: N = X·(TTFT + (OSL-1)·TPOT).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from scipy import special

from planner.engines.base import PromptHolds
from planner.model.spec import ModelSpec
from planner.perf import queueing
from planner.perf.opgraph import ParallelArrays, StepMix
from planner.perf.step import OpPricer, step_time

FIXED_POINT_ITERS = 14
"""Most iterations of a closed-loop fixed point."""
FIXED_POINT_RTOL = 1e-4
"""A candidate has converged once the map moves its s = X·t less than this (relative)."""
DAMPING = 0.5
"""Damped fallback of a fixed-point step (where the secant is not finite)."""
MIN_FREE_CHUNK = 64.0
"""Prefill tokens a step still admits when decode requests fill the chunk budget (engines always
let some prefill through, e.g. by scheduling decodes first and prefill chunks in the remainder)."""
OVERLAP_FIRST_TOKEN_STEPS = 2.0
"""Decode steps an overlapping scheduler (``Engine.overlap_scheduler``) adds to an aggregated
prompt's time to first token: step n+1 is formed while step n runs, so a prompt arriving during
step n waits for n+1 as well (one step), and the first token computed in a step is processed
and streamed while the next step runs (one step; TensorRT-LLM's documentation: "one extra
decoding step"). Held out by GPU over both shared files it moved aggregated TTFT median error
B200 33.2 -> 32.4%, H100 40.5 -> 36.1%, H200 25.8 -> 24.7%, GB200 58.9 -> 58.1% with TPOT
unchanged (lab/notes/mechanisms.md)."""
KV_TRANSFER_LATENCY_S = 5e-4
"""ASSUMPTION: set-up time of one KV transfer (NIXL/UCX handshake, block descriptors)."""
KV_TRANSFER_BW_EFFICIENCY = 0.75
"""ASSUMPTION: achieved / link bandwidth for bulk KV copies (same as large-message collectives)."""


@dataclass(frozen=True)
class WorkerArrays:
    """One role's engine (K candidates)."""

    par: ParallelArrays
    max_num_seqs: np.ndarray
    chunk_tokens: np.ndarray  # max_num_batched_tokens
    seq_capacity: np.ndarray  # sequences of the workload that fit in KV (whole worker)
    kernel_scale: np.ndarray
    overhead_s: np.ndarray
    workers: np.ndarray
    burst_fraction: np.ndarray  # share of a closed loop's clients that arrive in lockstep waves
    lockstep: np.ndarray | None = None  # every wave in lockstep (``lockstep_agg``); None: none
    overlap: np.ndarray | None = None
    """Where the engine overlaps scheduling with the running step (``Engine.overlap_scheduler``;
    a prompt's first token comes ``OVERLAP_FIRST_TOKEN_STEPS`` steps later); None: nowhere."""
    holds: PromptHolds | None = None
    """The engine scheduler's prompt holds, a launch setting (``planner.engines.PromptHolds``);
    None: prompts are scheduled as they arrive."""


@dataclass(frozen=True)
class LoadArrays:
    """The workload (K candidates); ``concurrency`` is NaN for open loop,
    ``rate_per_s`` NaN for closed."""

    isl: np.ndarray
    osl: np.ndarray
    isl_compute: np.ndarray  # prompt tokens actually prefilled (after prefix-cache hits)
    concurrency: np.ndarray
    rate_per_s: np.ndarray
    ca2: np.ndarray  # squared CV of inter-arrival times
    cs2: np.ndarray  # squared CV of prefill work (from the ISL distribution)
    osl_cs2: np.ndarray  # squared CV of the answer length (OSL distribution)
    tokens_per_step: np.ndarray  # speculative decoding: tokens emitted per target step
    step_multiplier: np.ndarray  # speculative decoding: (target + draft) / target step time
    request_overhead_s: np.ndarray
    verify_tokens: np.ndarray  # speculative decoding: tokens verified per sequence (1: none)


@dataclass(frozen=True)
class ServingArrays:
    """Steady-state result (K candidates), seconds and requests/s."""

    ttft_s: np.ndarray
    ttft_own_s: np.ndarray  # prefill (+ KV transfer) of the request itself, no queueing
    wait_s: np.ndarray  # mean queueing delay for prefill inside the engine (exponential tail)
    admission_wait_s: (
        np.ndarray
    )  # mean wait for a running slot when clients exceed slots (near-deterministic)
    admission_ahead: (
        np.ndarray
    )  # requests queued ahead of a new one for admission (N - slots, closed loop)
    hold_cs2: np.ndarray  # squared CV of a slot's holding time (spread of the admission wait)
    prefill_rho: np.ndarray  # utilization of the prefill stage
    mixed_prefill_tokens: np.ndarray  # prompt tokens of a step carrying prefill (agg; 0 disagg)
    tpot_s: np.ndarray
    tpot_interference_s: np.ndarray  # share of TPOT caused by prefills mixed into decode steps
    interference_events: np.ndarray  # prefills one request's decode meets (Poisson mean)
    requests_per_s: np.ndarray
    decode_batch: np.ndarray  # decode requests per worker step
    kv_transfer_s: np.ndarray
    saturated: np.ndarray  # open loop beyond capacity (latencies are inf)
    wave_share: np.ndarray  # share of a closed-loop run's requests in its lockstep start-up wave
    wave_wait_s: np.ndarray  # mean prefill wait of a request of that wave (``queueing.burst_wait``)
    join_s: np.ndarray  # mean wait for the next step boundary in ttft_own_s (uniform, 0..2x)
    cohort_prompts: np.ndarray  # mean prompts sharing a prompt's prefill step (Poisson)
    cohort_cost_s: np.ndarray  # TTFT one such prompt adds (cohort·cost is in ttft_own_s)


def _tile(p: ParallelArrays, n: int) -> ParallelArrays:
    return ParallelArrays(*(np.tile(getattr(p, f), n) for f in ParallelArrays.__dataclass_fields__))


_Tiled = tuple[ParallelArrays, np.ndarray, np.ndarray]


def _tiled(w: WorkerArrays, n: int) -> _Tiled:
    """The worker's parallelism and calibration repeated for ``n`` mixes (see ``_steps``)."""
    par = _tile(w.par, n) if n > 1 else w.par
    return par, np.tile(w.kernel_scale, n), np.tile(w.overhead_s, n)


def _steps(
    m: ModelSpec,
    pricer: OpPricer,
    w: WorkerArrays,
    mixes: list[StepMix],
    tiled: _Tiled | None = None,
) -> list[np.ndarray]:
    """Price several mixes of the same K candidates in one vectorized call; ``tiled`` is
    ``_tiled(w, len(mixes))`` when the caller prices the same worker repeatedly."""
    k = w.max_num_seqs.shape[0]
    cat = StepMix.concat(mixes)
    n = len(mixes)
    par, ks, oh = tiled or _tiled(w, n)
    t = step_time(m, par, cat, pricer, kernel_scale=ks, overhead_s=oh)
    return [t[i * k : (i + 1) * k] for i in range(n)]


def _prefill_plan(isl_c: np.ndarray, free: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(chunks a prompt needs, tokens per chunk) with ``free`` chunk tokens per step."""
    chunks = np.ceil(isl_c / free)
    return chunks, isl_c / chunks


def verify_rows(load: LoadArrays, b: np.ndarray, ctx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(token rows, context per row) of ``b`` decodes at ``ctx``: with speculative decoding the
    verify step's ``b·v`` rows (every linear layer sees ``v`` tokens per sequence) read the same KV
    as ``b`` plain decodes, ``b·v`` rows at ``ctx / v`` (``planner.perf.spec_decode``)."""
    return b * load.verify_tokens, ctx / load.verify_tokens


def free_chunk(chunk_tokens: np.ndarray, decode_batch: np.ndarray) -> np.ndarray:
    """Prefill tokens a step admits next to ``decode_batch`` decodes (one token each)."""
    return np.maximum(chunk_tokens - decode_batch, MIN_FREE_CHUNK)


def prompt_chunks(isl_c: np.ndarray, free: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(chunks, tokens of the own chunk, mean prior context of a chunk) of one prompt of ``isl_c``
    tokens prefilled ``free`` tokens per step."""
    chunks, own = _prefill_plan(isl_c, free)
    return chunks, own, (chunks - 1.0) / 2.0 * own


def _closed_or_open(
    load: LoadArrays,
    burst: np.ndarray,
    t_own: np.ndarray,
    work: np.ndarray,
    z: np.ndarray,
    n: np.ndarray,
    x: np.ndarray,
    group: np.ndarray | float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """(prefill-stage response R, new throughput X) for closed (N clients) or open (rate) loops;
    ``group``: prompts of a lockstep wave prefilled in one step (``queueing.burst_wait``)."""
    closed = np.isfinite(load.concurrency)
    r_closed = queueing.wave_mix_response(
        t_own, queueing.closed_loop_response(t_own, work, z, n), work, n, burst, group
    )
    rate = np.where(closed, x, load.rate_per_s)
    r_open = t_own + queueing.mg1_wait(rate, work, load.cs2, load.ca2)
    r = np.where(closed, r_closed, r_open)
    x_new = np.where(closed, n / (r_closed + z), load.rate_per_s)
    return r, x_new


def _engine_cap(w: WorkerArrays) -> np.ndarray:
    """Requests a worker runs at once: ``max_num_seqs`` per attention-DP rank (each rank schedules
    its own batch: attention-DP ranks, or data-parallel engines), at most the KV
    capacity."""
    return np.maximum(np.minimum(w.max_num_seqs * w.par.dp, w.seq_capacity), 1.0)


def _binomial_at_least(s: np.ndarray, n: np.ndarray, p: np.ndarray) -> np.ndarray:
    """P(Binomial(n, p) >= s) elementwise: 1 for s <= 0, 0 for s > n (the regularized incomplete
    beta function I_p(s, n - s + 1) between)."""
    inside = (s >= 1.0) & (s <= n)
    tail = special.betainc(np.where(inside, s, 1.0), np.where(inside, n - s + 1.0, 1.0), p)
    return np.asarray(np.where(s <= 0.0, 1.0, np.where(s > n, 0.0, tail)))


def routed_running(
    clients: np.ndarray, workers: np.ndarray, slots: np.ndarray, routers: np.ndarray
) -> np.ndarray:
    """Requests running at once when a closed loop of ``clients`` requests is placed on
    ``workers`` workers of ``slots`` slots each by ``routers`` round-robin routers that take turns
    (a round-robin balancer in front of them) and do not look at free slots: a request routed to a
    full worker waits there for one of its slots, although another worker may have one free.

    Each router holds m = N / F of the requests in flight and spreads them over the W workers in
    turn, q = m / W per worker: floor(q) each, and one more on a share frac(q) of the workers,
    which ones independent from router to router. A worker then holds C = F floor(q) + B
    requests, B ~ Binomial(F, frac(q)) (mean N / W), and runs min(C, S); the W workers run
    W E[min(C, S)], with E[min(B, t)] = F p - E[max(B - t, 0)] and E[max(B - t, 0)] = F p
    P(Bin(F - 1, p) >= t) - t P(Bin(F, p) >= t + 1). One router fills every worker evenly
    (min(N, W S): no wait while a slot is free anywhere); as many routers as requests place each
    at random (C ~ Binomial(N, 1 / W)). Checked against a simulation of the closed loop (request
    times spread 0.8-1x, 7-10 routers, 3-7 workers of 1-8 slots: waits within 0.08 request times,
    tests/planner/perf/test_serving_routing.py); at 15 workers of 4 slots, 60 clients and 10
    routers it
    gives 0.18 request times where the simulation gives 0.09-0.20 by seed (the routers' shares
    are not independent there)."""
    n = np.maximum(np.floor(clients + 0.5), 0.0)
    w = np.maximum(workers, 1.0)
    s = np.maximum(np.floor(slots + 0.5), 1.0)
    f = np.clip(np.floor(routers + 0.5), 1.0, np.maximum(n, 1.0))
    q = n / (f * w)
    base = np.floor(q + 1e-9)
    p = np.clip(q - base, 0.0, 1.0)
    t = s - f * base  # slots left once every router's even share has one
    over = f * p * _binomial_at_least(t, f - 1.0, p) - t * _binomial_at_least(t + 1.0, f, p)
    mean_b = f * p - np.where(t > 0.0, np.maximum(over, 0.0), f * p)
    per_worker = np.where(t > 0.0, f * base + mean_b, s)
    per_worker = np.where(w <= 1.0, np.minimum(n, s), per_worker)  # one worker takes them all
    return np.asarray(np.clip(w * per_worker, 0.0, np.minimum(n, w * s)))


def _finish(
    load: LoadArrays,
    r: np.ndarray,
    t_own: np.ndarray,
    z: np.ndarray,
    x: np.ndarray,
    cap: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """TTFT including the wait outside the engine when more clients than slots (Little's law:
    N = X·(TTFT + Z)); saturation flag."""
    closed = np.isfinite(load.concurrency)
    outside = np.where(
        closed & (load.concurrency > cap), load.concurrency / np.maximum(x, 1e-12) - z, r
    )
    saturated = ~closed & (~np.isfinite(r) | (load.rate_per_s * (r + z) > cap))
    ttft = np.where(saturated, np.inf, np.maximum(outside, r))
    return ttft, saturated


def _waits(
    load: LoadArrays,
    ttft: np.ndarray,
    r: np.ndarray,
    t_own: np.ndarray,
    z: np.ndarray,
    cap: np.ndarray,
) -> dict[str, np.ndarray]:
    """Split TTFT - t_own into the admission wait (slots full; TTFT - R) and the prefill queueing
    wait (R - t_own), with what the admission wait's spread needs (see ``queueing``)."""
    closed = np.isfinite(load.concurrency)
    ahead = np.where(closed, np.maximum(load.concurrency - cap, 0.0), 0.0)
    # OSL variability spreads the decode part z of a slot's holding time r + z
    with np.errstate(invalid="ignore"):  # saturated open loops: inf - inf
        hold_cs2 = load.osl_cs2 * (z / np.maximum(r + z, 1e-12)) ** 2
        wait = np.maximum(np.minimum(ttft, r) - t_own, 0.0)
        admission = np.where(np.isfinite(ttft), np.maximum(ttft - r, 0.0), np.inf)
    return {
        "wait_s": np.where(np.isfinite(ttft), wait, np.inf),
        "admission_wait_s": admission,
        "admission_ahead": ahead,
        "hold_cs2": np.nan_to_num(hold_cs2),
    }


def _wave(
    load: LoadArrays, burst: np.ndarray, work: np.ndarray, n: np.ndarray, group: np.ndarray | float
) -> dict[str, np.ndarray]:
    """The lockstep start-up wave of a closed loop (zero share for open loops): its share of the
    run's requests and the mean prefill wait of one of its requests, for the TTFT percentiles."""
    closed = np.isfinite(load.concurrency)
    return {
        "wave_share": np.where(closed, burst, 0.0),
        "wave_wait_s": np.where(closed, queueing.burst_wait(work, n, group), 0.0),
    }


def _cohort(
    arrivals: np.ndarray, mean_cost: np.ndarray, t_own: np.ndarray, t_dec: np.ndarray
) -> dict[str, np.ndarray]:
    """The parts of an aggregated prompt's own TTFT that vary from request to request: half a
    decode step to the next step boundary (``own_prefill_time``), and the prompts that arrived
    during the step before and share its prefill steps (``prefill_step_tokens``: ``arrivals`` per
    step on average, Poisson; ``mean_cost``, their mean extra time: the priced prefill steps
    against the same steps with the prompt's chunk alone, at most the own time past the join),
    each costing mean_cost / arrivals. A closed loop's clients come back when a request
    finishes, so the prompts of a step are those that finished together; an open loop's
    arrivals pass zero ``arrivals`` (the M/G/1 wait already prices the prompts ahead, and adding
    both tails put p99 TTFT 21% above ``planner simulate`` at 70B TP4, 4000/300, 2 req/s)."""
    join = t_dec / 2.0
    mean = np.clip(np.nan_to_num(mean_cost), 0.0, np.maximum(t_own - join, 0.0))
    lam = np.maximum(np.nan_to_num(arrivals), 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        cost = np.where(lam > 0.0, mean / lam, 0.0)
    return {"join_s": join, "cohort_prompts": lam, "cohort_cost_s": cost}


def lockstep_group(chunk: np.ndarray, isl_c: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Prompts of a lockstep wave that one step prefills together: as many whole prompts as the
    chunk budget holds (the wave starts on an idle engine), at least 1, at most the N that
    arrived."""
    return np.clip(np.floor(chunk / np.maximum(isl_c, 1.0)), 1.0, np.maximum(n, 1.0))


def prefill_step_tokens(
    rate: np.ndarray, isl_c: np.ndarray, own: np.ndarray, free: np.ndarray, t: np.ndarray
) -> np.ndarray:
    """Prompt tokens of a step that carries a given prompt's chunk: its own chunk ``own`` plus the
    prompts that arrived during the step before it (rate·ISL·t on average: they join the same
    step), at most the free chunk budget. (Counting only max(own, rate·ISL·t) put the simulated
    steady-state TTFT 10-35% above the estimate at prefill utilisation 0.5-0.8.)"""
    return np.minimum(own + rate * isl_c * t, free)


def prefill_step_fraction(
    rate: np.ndarray, isl_c: np.ndarray, p: np.ndarray, t: np.ndarray
) -> np.ndarray:
    """Fraction of steps that carry a prefill chunk: prefill steps per second (rate·ISL/p) times the
    mean step time, at most 1."""
    return np.minimum(rate * isl_c * t / np.maximum(p, 1.0), 1.0)


def mean_step(t_dec: np.ndarray, t_pre: np.ndarray, f: np.ndarray) -> np.ndarray:
    """Mean step time (s) over decode-only steps and steps with a prefill chunk (share ``f``)."""
    return (1.0 - f) * t_dec + f * t_pre


def own_prefill_time(
    t_dec: np.ndarray, t_pre: np.ndarray, chunks: np.ndarray, request_overhead: np.ndarray
) -> np.ndarray:
    """TTFT of a prompt with no prefill queued ahead (s): half a decode step to the next step
    boundary, its ``chunks`` prefill steps, and the per-request overhead (below the knee most steps
    carry no prefill; checked against ``planner simulate``, see ``queueing``)."""
    return t_dec / 2.0 + chunks * t_pre + request_overhead


def solve_agg(m: ModelSpec, pricer: OpPricer, w: WorkerArrays, load: LoadArrays) -> ServingArrays:
    """Aggregated continuous batching with chunked prefill (see module docstring)."""
    cap = _engine_cap(w)
    closed = np.isfinite(load.concurrency)
    n = np.where(closed, np.minimum(load.concurrency, cap), cap)
    dsteps = np.maximum(load.osl - 1.0, 0.0) / load.tokens_per_step
    ctx = load.isl + load.osl / 2.0
    zero = np.zeros_like(ctx)
    # The map depends on the state only through s = X·t (decode requests per step = s·dsteps;
    # prefill tokens per step = s·ISL): a closed loop starts from s = N / (dsteps + 1) with no
    # pricing, an open loop (X = rate) from the decode-only step of a full engine.
    if closed.all():
        s = n / (dsteps + 1.0)
    else:
        t0 = _steps(m, pricer, w, [StepMix(*verify_rows(load, n, ctx), zero, zero, zero)])[0]
        s = np.where(closed, n / (dsteps + 1.0), load.rate_per_s * t0)
    conv, hist = _Convergence(np.zeros(s.shape, dtype=bool)), _SecantHistory.empty(s.shape)
    tiled3 = _tiled(w, 3)
    wave_group = lockstep_group(w.chunk_tokens, load.isl_compute, n)
    for _ in range(FIXED_POINT_ITERS):
        x = np.where(closed, s, load.rate_per_s)
        with np.errstate(invalid="ignore", divide="ignore"):
            t = np.where(closed, 1.0, s / load.rate_per_s)
        b = np.clip(x * dsteps * t, 0.0, cap)
        free = free_chunk(w.chunk_tokens, b)
        chunks, own, prior = prompt_chunks(load.isl_compute, free)
        p = prefill_step_tokens(x, load.isl_compute, own, free, t)
        bv = verify_rows(load, b, ctx)
        t_pre, t_full, t_dec = _steps(
            m,
            pricer,
            w,
            [
                StepMix(*bv, p, own, prior),
                StepMix(*bv, free, own, prior),
                StepMix(*bv, zero, zero, zero),
            ],
            tiled3,
        )
        f = prefill_step_fraction(x, load.isl_compute, p, t)
        t_new = mean_step(t_dec, t_pre, f) * load.step_multiplier
        work = load.isl_compute * t_full / free
        overhead = load.request_overhead_s
        if w.holds is not None:  # the engine's scheduler holds prompts back
            rate = np.where(closed, s / t_new, load.rate_per_s)  # requests/s of this iterate
            overhead = w.holds.add_wait(overhead, rate, t_dec, w.par.dp, load.isl_compute, b)
        t_own = own_prefill_time(t_dec, t_pre, chunks, overhead)
        if w.overlap is not None:
            t_own = t_own + np.where(w.overlap, OVERLAP_FIRST_TOKEN_STEPS * t_dec, 0.0)
        z = dsteps * t_new
        r, x_new = _closed_or_open(load, w.burst_fraction, t_own, work, z, n, x, wave_group)
        state = (x_new, t_new, b, t_pre, t_dec, f, work, t_own, z, r, p, chunks, own, prior)
        s_new = x_new * t_new
        if conv.record(state, s, s_new):
            break
        s = hist.step(s, s_new)
    x, t, b, t_pre, t_dec, f, work, t_own, z, r, p, chunks, own, prior = conv.result(state)
    ttft, saturated = _finish(load, r, t_own, z, x, cap)
    # the step of a prompt's chunk with no other prompt in it (the spread of TTFT, ``_cohort``)
    t_alone = _steps(m, pricer, w, [StepMix(*verify_rows(load, b, ctx), own, own, prior)])[0]
    res = ServingArrays(
        ttft_s=ttft,
        ttft_own_s=t_own,
        **_waits(load, ttft, r, t_own, z, cap),
        prefill_rho=x * work,
        mixed_prefill_tokens=p,
        tpot_s=np.where(saturated, np.inf, t / load.tokens_per_step),
        # the mean share of TPOT that mixed-in prefills add: a fraction f of steps carry one
        tpot_interference_s=f
        * np.maximum(t_pre - t_dec, 0.0)
        * load.step_multiplier
        / load.tokens_per_step,
        interference_events=x * z,
        requests_per_s=x,
        decode_batch=b,
        kv_transfer_s=zero,
        saturated=saturated,
        **_wave(load, w.burst_fraction, work, n, wave_group),
        **_cohort(
            np.where(closed, x * t, 0.0),
            chunks * np.maximum(t_pre - t_alone, 0.0),
            t_own,
            t_dec,
        ),
    )
    locked = closed & (w.lockstep if w.lockstep is not None else False)
    if not locked.any():
        return res
    lock = lockstep_agg(m, pricer, w, load, n, cap)
    return ServingArrays(
        *(
            np.where(locked, getattr(lock, f), getattr(res, f))
            for f in ServingArrays.__dataclass_fields__
        )
    )


LOCKSTEP_TPOT_EVENTS = 3.0
"""``interference_events`` of a lockstep wave's decode stall: the stall is uniform over 0..2x its
mean across the wave, whose standard deviation mean/sqrt(3) ``queueing.tpot_quantile`` gives with
3 events."""


def lockstep_agg(
    m: ModelSpec,
    pricer: OpPricer,
    w: WorkerArrays,
    load: LoadArrays,
    n: np.ndarray,
    cap: np.ndarray,
) -> ServingArrays:
    """Closed loop of ``n`` clients (fixed lengths) on an engine that stalls decodes while prompts
    wait (``Engine.prefill_first``), every wave in lockstep: the wave's N prompts are
    prefilled in prefill-only steps of p = min(chunk, N·ISL) tokens, g per step, so the k-th gets
    its first token at the end of step ceil(k/g): mean (N + g)/2 prompts' work; the decodes of the
    wave start together once the last prompt is prefilled, so a request stalls for the rest of
    the wave, (N - g)/2 prompts' work on average, which the benchmark's TPOT
    ((latency - TTFT)/(OSL - 1)) counts; the N requests then decode together, finish in the same
    step and come back together."""
    dsteps = np.maximum(load.osl - 1.0, 0.0) / load.tokens_per_step
    ctx = load.isl + load.osl / 2.0
    zero = np.zeros_like(ctx)
    isl_c = load.isl_compute
    p = np.minimum(w.chunk_tokens, n * isl_c)
    chunks, own, prior = prompt_chunks(isl_c, np.maximum(w.chunk_tokens, 1.0))
    t_pre, t_dec = _steps(
        m,
        pricer,
        w,
        [StepMix(zero, ctx, p, own, prior), StepMix(*verify_rows(load, n, ctx), zero, zero, zero)],
    )
    t_dec = t_dec * load.step_multiplier
    work = isl_c * t_pre / p  # seconds of prefill per prompt of the wave
    g = lockstep_group(w.chunk_tokens, isl_c, n)
    t_own = g * work + load.request_overhead_s  # the first group's prompts
    wave_wait = np.maximum(n - g, 0.0) / 2.0 * work
    r = t_own + wave_wait
    stall = wave_wait
    z = dsteps * t_dec + stall
    x = n / (r + z)
    ttft, saturated = _finish(load, r, t_own, z, x, cap)
    per_token = stall / np.maximum(load.osl - 1.0, 1.0)
    return ServingArrays(
        ttft_s=ttft,
        ttft_own_s=t_own,
        **_waits(load, ttft, r, t_own, z, cap),
        prefill_rho=np.minimum(x * work, 1.0),
        mixed_prefill_tokens=p,
        tpot_s=np.where(saturated, np.inf, t_dec / load.tokens_per_step + per_token),
        tpot_interference_s=per_token,
        interference_events=np.full_like(ctx, LOCKSTEP_TPOT_EVENTS),
        requests_per_s=x,
        decode_batch=n,
        kv_transfer_s=zero,
        saturated=saturated,
        wave_share=np.ones_like(ctx),
        wave_wait_s=wave_wait,
        join_s=zero,
        cohort_prompts=zero,
        cohort_cost_s=zero,
    )


MAX_LOG_STEP = 1.0
"""Largest change of log s one step of the fixed point may make (a factor e)."""


@dataclass
class _SecantHistory:
    """Per-candidate secant on h(v) = log(image of s) - log s, v = log s, kept inside the latest
    bracket (a v with h > 0 and one with h < 0; the midpoint when the secant leaves it), falling
    back to the damped iteration where a step is not finite."""

    v: np.ndarray
    h: np.ndarray
    pos: np.ndarray  # latest v with h > 0 (NaN: none yet)
    neg: np.ndarray  # latest v with h < 0

    @classmethod
    def empty(cls, shape: tuple[int, ...]) -> _SecantHistory:
        nan = np.full(shape, np.nan)
        return cls(nan, nan.copy(), nan.copy(), nan.copy())

    def step(self, s: np.ndarray, s_new: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            v = np.log(s)
            h = np.log(s_new) - v
            secant = v - h * (v - self.v) / (h - self.h)
            nxt = np.where(np.isfinite(secant), secant, v + h)  # the first step: the plain map
            nxt = v + np.clip(nxt - v, -MAX_LOG_STEP, MAX_LOG_STEP)
            self.pos = np.where(h > 0, v, self.pos)
            self.neg = np.where(h < 0, v, self.neg)
            lo, hi = np.minimum(self.pos, self.neg), np.maximum(self.pos, self.neg)
            nxt = np.where(
                np.isfinite(lo) & np.isfinite(hi) & ((nxt <= lo) | (nxt >= hi)),
                (lo + hi) / 2.0,
                nxt,
            )
            ok = np.isfinite(nxt)
            self.v, self.h = v, h
            return np.where(ok, np.exp(nxt), s + DAMPING * (s_new - s))


@dataclass
class _Convergence:
    """Per-candidate convergence of the fixed point. Each candidate keeps the state of the iteration
    where it converged (the map's image of a state that it leaves in place to FIXED_POINT_RTOL), so
    a candidate's result does not depend on the others evaluated with it (a solver sweep equals
    K = 1 estimates)."""

    done: np.ndarray
    held: tuple[np.ndarray, ...] = ()

    def record(self, state: tuple[np.ndarray, ...], s: np.ndarray, s_new: np.ndarray) -> bool:
        """Hold the state of candidates that settled now; True once every candidate has."""
        now = ~self.done & _settled(s_new, s)
        held = self.held or state
        if now.all():  # (one candidate settles or not: no per-row select)
            held = state
        elif now.any():
            held = tuple(np.where(now, v, h) for v, h in zip(state, held, strict=True))
        self.held = held
        self.done |= now
        return bool(self.done.all())

    def result(self, state: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
        """Held states where converged, the last iteration's elsewhere."""
        if self.done.all():
            return self.held
        if not self.done.any():
            return state
        return tuple(np.where(self.done, h, v) for h, v in zip(self.held, state, strict=True))


def _settled(new: np.ndarray, old: np.ndarray) -> np.ndarray:
    """Entries that moved less than ``FIXED_POINT_RTOL`` (relative), or are not finite."""
    with np.errstate(invalid="ignore"):
        moved = np.abs(new - old) > FIXED_POINT_RTOL * np.abs(old)
    return ~(moved & np.isfinite(old))


def kv_transfer_s(kv_bytes_per_gpu: np.ndarray, link_bw: np.ndarray) -> np.ndarray:
    """Seconds to move one prompt's KV: per-GPU share over that GPU's link, in parallel."""
    return KV_TRANSFER_LATENCY_S + kv_bytes_per_gpu / (link_bw * KV_TRANSFER_BW_EFFICIENCY)


@dataclass(frozen=True)
class PrefillTimes:
    """A disaggregated prefill worker's plan for one prompt (K candidates), steps and seconds."""

    chunks: np.ndarray  # steps one prompt needs
    free: np.ndarray  # prompt tokens of a full step
    t_full: np.ndarray  # seconds of a full step
    t_one: np.ndarray  # seconds of a step that carries one chunk of the prompt and nothing else
    work: np.ndarray  # busy seconds of one worker per prompt when steps run full


def prefill_times(
    m: ModelSpec, pricer: OpPricer, wp: WorkerArrays, isl_c: np.ndarray
) -> PrefillTimes:
    """The prefill worker's steps for prompts of ``isl_c`` computed tokens, priced once for
    ``solve_disagg`` and ``planner.perf.roles`` (one code path, so the roles a P/D search ranks are
    priced as the deployment is): a step holds the chunk budget, at most ``max_num_seqs`` prompts
    per attention-DP rank (the prefill worker's batch size: aiconfigurator-generated Dynamo
    prefill workers run max_batch_size 1 and max_num_tokens ISL + 500, ``generator/rule_plugin/
    trtllm.rule`` in ai-dynamo/aiconfigurator@095f58a)."""
    free = np.maximum(np.minimum(wp.chunk_tokens, wp.max_num_seqs * wp.par.dp * isl_c), 1.0)
    chunks, own = _prefill_plan(isl_c, free)
    prior = (chunks - 1.0) / 2.0 * own
    zero = np.zeros_like(isl_c)
    t_full, t_one = _steps(
        m, pricer, wp, [StepMix(zero, zero, free, own, prior), StepMix(zero, zero, own, own, prior)]
    )
    return PrefillTimes(chunks, free, t_full, t_one, isl_c * t_full / free)


def solve_disagg(
    m: ModelSpec,
    pricer: OpPricer,
    wp: WorkerArrays,
    wd: WorkerArrays,
    load: LoadArrays,
    t_kv: np.ndarray,
    routers: np.ndarray | None = None,
    prefill_pricer: OpPricer | None = None,
) -> ServingArrays:
    """Disaggregated xPyD (see module docstring); ``t_kv`` is the KV transfer time per request;
    ``prefill_pricer``: the prefill workers' op pricer where they run on another GPU type (None:
    ``pricer``, one type for both roles);
    ``routers``: per candidate, how many round-robin routers blind to free slots place requests
    on the decode workers (``routed_running``; NaN, or None for all: they fill free slots, so a
    request waits only while every slot is taken). The mean TTFT takes the routers' wait; its
    percentiles still spread it as the pooled admission wait (every waiting request waits about
    the same), while behind blind routers most requests do not wait and a few wait a whole
    request (simulated at 7 workers of one slot: mean 0.52, p50 0.06, p99 1.9 request times), so
    there p50 is high and p99 low."""
    cap = _engine_cap(wd) * wd.workers
    closed = np.isfinite(load.concurrency)
    n = np.where(closed, np.minimum(load.concurrency, cap), cap)
    if routers is not None:
        blind = closed & np.isfinite(routers)
        if blind.any():
            running = routed_running(
                load.concurrency, wd.workers, _engine_cap(wd), np.nan_to_num(routers, nan=1.0)
            )
            n = np.where(blind, np.minimum(running, n), n)
            cap = np.where(blind, n, cap)  # the clients beyond them wait outside (``_finish``)
    dsteps = np.maximum(load.osl - 1.0, 0.0) / load.tokens_per_step
    ctx = load.isl + load.osl / 2.0
    zero = np.zeros_like(ctx)
    pt = prefill_times(m, prefill_pricer or pricer, wp, load.isl_compute)
    chunks, t_one = pt.chunks, pt.t_one
    work = pt.work / wp.workers
    b = n / wd.workers
    t = (
        _steps(m, pricer, wd, [StepMix(*verify_rows(load, b, ctx), zero, zero, zero)])[0]
        * load.step_multiplier
    )
    t0 = t
    x = np.where(closed, n / (chunks * t_one + t_kv + (dsteps + 1.0) * t0), load.rate_per_s)
    # as in solve_agg, the map depends on the state only through s = X·t: a secant in log s
    s = x * t0
    conv, hist = _Convergence(np.zeros(s.shape, dtype=bool)), _SecantHistory.empty(s.shape)
    for _ in range(FIXED_POINT_ITERS):
        x = np.where(closed, s / t0, load.rate_per_s)
        with np.errstate(invalid="ignore", divide="ignore"):
            t = np.where(closed, t0, s / load.rate_per_s)
        b = np.clip(x * dsteps * t / wd.workers, 1.0, cap / wd.workers)
        mix = StepMix(*verify_rows(load, b, ctx), zero, zero, zero)
        t_new = _steps(m, pricer, wd, [mix])[0] * load.step_multiplier
        # own prefill (+ half a prefill step of joining), KV transfer, then on the decode worker the
        # rest of the step in progress when the KV lands (half a step on average, as a prompt
        # joining an aggregated engine waits for it) and the first decode step
        t_own = chunks * t_one + t_one / 2.0 + load.request_overhead_s + t_kv + 1.5 * t_new
        z = dsteps * t_new
        r, x_new = _closed_or_open(load, wd.burst_fraction, t_own, work, z, n, x)
        state = (x_new, t_new, b, t_own, z, r)
        s_new = x_new * t_new
        if conv.record(state, s, s_new):
            break
        s = hist.step(s, s_new)
    x, t, b, t_own, z, r = conv.result(state)
    ttft, saturated = _finish(load, r, t_own, z, x, cap)
    return ServingArrays(
        ttft_s=ttft,
        ttft_own_s=t_own,
        **_waits(load, ttft, r, t_own, z, cap),
        prefill_rho=x * work,
        mixed_prefill_tokens=zero,
        tpot_s=np.where(saturated, np.inf, t / load.tokens_per_step),
        tpot_interference_s=zero,
        interference_events=x * z,
        requests_per_s=x,
        decode_batch=b,
        kv_transfer_s=t_kv,
        saturated=saturated,
        **_wave(load, wd.burst_fraction, work, n, 1.0),
        # joining a prefill step, then landing in a decode step: half of each on average
        join_s=(t_one + t) / 2.0,
        cohort_prompts=zero,
        cohort_cost_s=zero,
    )


def with_concurrency(load: LoadArrays, concurrency: np.ndarray) -> LoadArrays:
    """The same load as a closed loop of ``concurrency`` clients (max-throughput runs)."""
    return replace(load, concurrency=concurrency, rate_per_s=np.full_like(concurrency, np.nan))
