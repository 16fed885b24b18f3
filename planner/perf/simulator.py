"""A small discrete-event simulator of one aggregated worker, driven by the same step model.

Each step: decode requests emit one token; FCFS waiting prompts fill the free chunk budget
(max_num_batched_tokens - decode requests, at least ``serving.MIN_FREE_CHUNK``) while running
requests stay under max_num_seqs; the step lasts ``step_time`` of that mix (cached per
(decode requests, prefill tokens rounded to 16)). A prompt's first token comes at the end of the
step that finishes its prefill, plus the engine's per-request overhead (as in the analytical
model). Used to cross-check the analytical queueing and tails.

A closed loop runs in steady state by default: the clients start from a random phase (requests
already decoding at uniform points of their answers), as ``estimate`` prices it; with
``Workload.bench_requests`` it is that benchmark run instead, its N clients starting together
(the lockstep start-up wave) and no warm-up dropped.
``tests/planner/perf/test_consistent_percentiles.py`` checks the two agree within 15% on mean and
p90 up
to a prefill utilisation of 0.8.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from hardware.catalog import get_gpu
from hardware.errors import PlannerInputError
from planner.engines import DEFAULT_ENGINE
from planner.engines.calibration import EnginePolicy, policy_of
from planner.model.spec import ModelSpec
from planner.perf.batch import KV_DTYPES, WEIGHT_QUANTS, parallel_arrays
from planner.perf.deployment import WorkerConfig
from planner.perf.opgraph import StepMix
from planner.perf.pricer import default_pricer
from planner.perf.serving import MIN_FREE_CHUNK
from planner.perf.step import step_time
from planner.workload.spec import Workload

TOKEN_BUCKET = 16


@dataclass
class _Req:
    arrival: float
    isl: int
    osl: int
    left: int
    first: float = -1.0
    finish: float = -1.0
    done_tokens: int = 0
    warm: bool = False  # a steady-state start's request already running at t = 0 (not measured)
    ready: int = 0  # first step that may schedule it (an overlapping scheduler formed the next)


@dataclass
class SimResult:
    """Per-request TTFT and TPOT (seconds) of the simulated requests after warm-up."""

    ttft_s: np.ndarray
    tpot_s: np.ndarray
    requests_per_s: float
    steps: int = 0
    extra: dict[str, float] = field(default_factory=dict)


class _StepClock:
    def __init__(
        self, m: ModelSpec, gpu_key: str, w: WorkerConfig, backend: str | EnginePolicy, ctx: float
    ) -> None:
        gpu = get_gpu(gpu_key)
        p = w.parallel
        one = [np.array([float(v)]) for v in (p.tp, p.pp, p.dp, p.ep)]
        self.par = parallel_arrays(
            gpu,
            one[0],
            one[1],
            one[2],
            one[3],
            np.array([float(WEIGHT_QUANTS.index(w.weight_quant))]),
            np.array([float(KV_DTYPES.index(w.kv_dtype))]),
        )
        self.m, self.pricer, self.cal, self.ctx = (
            m,
            default_pricer(gpu),
            policy_of(backend).calibration,
            ctx,
        )
        self.cache: dict[tuple[int, int, int], float] = {}

    def __call__(self, b: int, p: int, prompts: int) -> float:
        """Step time with ``b`` decode requests and ``p`` prompt tokens from ``prompts`` prompts."""
        key = (b, p // TOKEN_BUCKET, prompts)
        if key not in self.cache:
            a = lambda v: np.array([float(v)])  # noqa: E731
            mix = StepMix(a(b), a(self.ctx), a(p), a(max(p / max(prompts, 1), 1.0)), a(0))
            self.cache[key] = float(
                step_time(self.m, self.par, mix, self.pricer, **self.cal.step_kwargs())[0]
            )
        return self.cache[key]


def _arrivals(w: Workload, n: int, rng: np.random.Generator) -> np.ndarray:
    assert w.rate_per_s is not None
    if w.arrival == "gamma":
        shape = 1.0 / w.arrival_cv**2
        gaps = rng.gamma(shape, 1.0 / (w.rate_per_s * shape), n)
    else:
        gaps = rng.exponential(1.0 / w.rate_per_s, n)
    return np.cumsum(gaps)


def simulate(
    m: ModelSpec,
    gpu_key: str,
    w: Workload,
    worker: WorkerConfig,
    *,
    backend: str | EnginePolicy = DEFAULT_ENGINE,
    requests: int = 2000,
    seed: int = 0,
    warmup_frac: float = 0.1,
) -> SimResult:
    """Simulate ``requests`` requests (open loop at w.rate_per_s, or a closed loop of
    w.concurrency)."""
    rng = np.random.default_rng(seed)
    isl = w.isl.draw(requests, seed).astype(int)
    osl = w.osl.draw(requests, seed + 1).astype(int)
    clock = _StepClock(m, gpu_key, worker, backend, w.isl.mean + w.osl.mean / 2)
    closed = w.concurrency is not None
    arr = np.zeros(requests) if closed else _arrivals(w, requests, rng)
    pending = deque(
        _Req(float(arr[i]), int(isl[i]), int(osl[i]), int(isl[i] * (1 - w.prefix_hit)) or 1)
        for i in range(requests)
    )
    waiting: deque[_Req] = deque()
    running: list[_Req] = []
    done: list[_Req] = []
    now, steps, chunk = 0.0, 0, float(worker.max_num_batched_tokens)
    # an overlapping scheduler (``Engine.overlap_scheduler``) forms step n+1 while step n runs: a
    # request that arrives during step n waits for step n+2, and what step n computes reaches the
    # client at the end of step n+1 (``serving.OVERLAP_FIRST_TOKEN_STEPS``)
    lag = 1 if policy_of(backend).engine.overlap_scheduler is not None else 0
    shown: list[tuple[_Req, bool, bool]] = []  # (request, first token, finished) of the last step
    if closed:
        _start_clients(w, worker, pending, waiting, running, rng, steady=w.bench_requests is None)
    while len(done) < requests:
        while not closed and pending and pending[0].arrival <= now:
            r = pending.popleft()
            r.ready = steps + 1 + lag
            waiting.append(r)
        if not waiting and not running and not shown:
            now = pending[0].arrival
            continue
        free = max(chunk - len(running), MIN_FREE_CHUNK)
        plan, budget, slots = [], free, worker.max_num_seqs - len(running)
        for r in waiting:
            if budget <= 0 or slots <= 0 or r.ready > steps + 1:
                break
            take = int(min(r.left, budget))
            plan.append((r, take))
            budget -= take
            slots -= 1
        now += clock(len(running), int(free - budget), len(plan))
        steps += 1
        events: list[tuple[_Req, bool, bool]] = []
        for r in list(running):
            r.done_tokens += 1
            if r.done_tokens >= r.osl:
                running.remove(r)
                r.left = -1
                events.append((r, False, True))
        for r, take in plan:
            r.left -= take
            if r.left <= 0:
                waiting.remove(r)
                r.done_tokens = 1
                if r.osl > 1:
                    running.append(r)
                # a one-token answer ends with its prefill; its client asks again
                events.append((r, True, r.osl <= 1))
        if lag:
            events, shown = shown, events
        for r, first, finished in events:  # what reaches the clients at the end of this step
            if first:
                r.first = now
            if finished:
                r.finish = now
                done.append(r)
                _next_request(closed, pending, waiting, now, steps + 1 + lag)
    measured = [r for r in done if not r.warm]
    keep = sorted(measured, key=lambda r: r.arrival)[int(warmup_frac * len(measured)) :]
    if not keep:  # every request was one of the in-flight starts of the steady state
        raise PlannerInputError(
            "--requests",
            f"{requests:,} requests leave none to measure: the steady state starts "
            f"{len(done) - len(measured):,} of them already running (not measured); "
            f"use more requests than the {w.concurrency or 0:,} clients",
        )
    finish = np.array([r.first for r in keep])
    ttft = finish - np.array([r.arrival for r in keep]) + clock.cal.request_overhead_s.value
    span = max(now - keep[0].arrival, 1e-9)
    return SimResult(ttft_s=ttft, tpot_s=_tpots(keep), requests_per_s=len(keep) / span, steps=steps)


def _next_request(
    closed: bool, pending: deque[_Req], waiting: deque[_Req], now: float, ready: int
) -> None:
    """A closed-loop client whose request just finished sends its next one at ``now``; the engine
    may schedule it from step ``ready`` on."""
    if closed and pending:
        nxt = pending.popleft()
        nxt.arrival, nxt.ready = now, ready
        waiting.append(nxt)


def _start_clients(
    w: Workload,
    worker: WorkerConfig,
    pending: deque[_Req],
    waiting: deque[_Req],
    running: list[_Req],
    rng: np.random.Generator,
    *,
    steady: bool,
) -> None:
    """The N clients' first requests. A benchmark run (``steady`` False) starts them together, the
    lockstep start-up wave. The steady state starts from a random phase instead: up to
    max_num_seqs requests already decoding, each at a uniform point of its answer (the state a
    long run reaches once fixed lengths no longer keep clients in step), the rest waiting; those
    in-flight requests are not measured."""
    n = min(w.concurrency or 0, len(pending))
    for i in range(n):
        r = pending.popleft()
        if steady and i < worker.max_num_seqs and r.osl > 1:
            r.left, r.first, r.warm = 0, 0.0, True
            r.done_tokens = int(rng.integers(1, r.osl))
            running.append(r)
        else:
            waiting.append(r)


def _tpots(reqs: list[_Req]) -> np.ndarray:
    """Per-request TPOT: (finish - first token) / (OSL - 1), requests with OSL > 1."""
    return np.array([(r.finish - r.first) / (r.osl - 1) for r in reqs if r.osl > 1])
