"""Replay a timed trace through the step-level simulator, replica by replica.

Each replica runs the scheduling of :func:`planner.perf.simulator.simulate` (FCFS prefill chunks in
the
free budget, decode requests one token per step, the same cached step times and per-request
overhead) on the requests routed to it. Requests are routed round-robin over the replicas serving
their window (a schedule of replica counts per window, as ``planner capacity`` plans); a replica
dropped at a window boundary finishes what it holds. Replicas share nothing, so each is simulated
on its own.

A replica's steps between events are all alike (same running requests, no prompt to admit), so
the replay advances over them at once (``_advance``): one loop turn per arrival, prefill step or
completion instead of one per decode step. The times it gives equal ``simulate``'s step by step
(checked by ``tests/planner/perf/test_replay.py`` on the same arrivals).
"""

from __future__ import annotations

import heapq
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypedDict

import numpy as np

from hardware.catalog import get_gpu
from planner.engines import DEFAULT_ENGINE
from planner.model.spec import ModelSpec
from planner.perf.batch import KV_DTYPES, WEIGHT_QUANTS, parallel_arrays
from planner.perf.deployment import WorkerConfig
from planner.perf.opgraph import StepMix
from planner.perf.serving import MIN_FREE_CHUNK
from planner.perf.simulator import TOKEN_BUCKET, _StepClock
from planner.perf.step import step_time


class RowClock(_StepClock):
    """``_StepClock`` that prices every running-request count of a (prompt tokens, prompts) pair in
    one vectorized call, at the middle of the prompt-token bucket (so a step's time does not depend
    on which step first filled its bucket). Far fewer pricing calls than one per new step mix."""

    def __init__(
        self,
        m: ModelSpec,
        gpu_key: str,
        w: WorkerConfig,
        backend: str,
        ctx: float,
        hardware_dirs: tuple[str, ...] = (),
    ) -> None:
        super().__init__(m, gpu_key, w, backend, ctx)
        k = w.max_num_seqs + 1
        p = w.parallel
        gpu = get_gpu(gpu_key, hardware_dirs)
        full = [
            np.full(k, float(v))
            for v in (
                p.tp,
                p.pp,
                p.dp,
                p.ep,
                WEIGHT_QUANTS.index(w.weight_quant),
                KV_DTYPES.index(w.kv_dtype),
            )
        ]
        self.row_par = parallel_arrays(gpu, *full)
        self.rows: dict[tuple[int, int], np.ndarray] = {}
        self.k = k

    def __call__(self, b: int, p: int, prompts: int) -> float:
        key = (p // TOKEN_BUCKET, prompts)
        row = self.rows.get(key)
        if row is None:
            tokens = float(p) if p < TOKEN_BUCKET else (key[0] + 0.5) * TOKEN_BUCKET
            f = lambda v: np.full(self.k, float(v))  # noqa: E731
            mix = StepMix(
                np.arange(self.k, dtype=float),
                f(self.ctx),
                f(tokens),
                f(max(tokens / max(prompts, 1), 1.0)),
                f(0),
            )
            row = step_time(self.m, self.row_par, mix, self.pricer, **self.cal.step_kwargs())
            self.rows[key] = row
        return float(row[min(b, self.k - 1)])


PROGRESS_EVERY_S = 2.0
"""Seconds between progress lines of long runs (the first comes after as long)."""


class Progress:
    """Progress lines of long work (``planner capacity``, trace replays), at most one every
    ``PROGRESS_EVERY_S``, handed to ``sink`` (the caller's terminal; the core prints nothing)."""

    def __init__(self, sink: Callable[[str], None]) -> None:
        self.t0 = time.perf_counter()
        self.next = PROGRESS_EVERY_S
        self.sink = sink

    def __call__(self, line: str) -> None:
        now = time.perf_counter() - self.t0
        if now >= self.next:
            self.sink(line)
            self.next = now + PROGRESS_EVERY_S


def no_progress(line: str) -> None:
    """The default progress callback: drop the line."""


@dataclass
class _Replica:
    """Event-skipping state of one simulated engine."""

    clock: _StepClock
    chunk: float
    max_seqs: int
    now: float = 0.0
    steps: int = 0  # decode steps so far (every running request gains a token per step)

    def run(
        self, arr: np.ndarray, isl: np.ndarray, osl: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """First-token and finish times (s) of requests arriving at ``arr`` (sorted)."""
        n = arr.size
        first, finish = np.full(n, np.nan), np.full(n, np.nan)
        left = isl.astype(float).copy()
        waiting: deque[int] = deque()
        running: list[tuple[int, int]] = []  # heap of (decode step at which it finishes, request)
        nxt, done = 0, 0
        while done < n:
            while nxt < n and arr[nxt] <= self.now:
                waiting.append(nxt)
                nxt += 1
            if not waiting and not running:
                self.now = max(self.now, float(arr[nxt]))
                continue
            plan, used = self._plan(waiting, left, len(running))
            if not plan:
                self._advance(running, float(arr[nxt]) if nxt < n and not waiting else math.inf)
            else:
                self.now += self.clock(len(running), int(used), len(plan))
                self.steps += 1
            while running and running[0][0] <= self.steps:
                finish[heapq.heappop(running)[1]] = self.now
                done += 1
            for i, take in plan:
                left[i] -= take
                if left[i] <= 0:
                    waiting.remove(i)
                    first[i] = self.now
                    if osl[i] > 1:
                        heapq.heappush(running, (self.steps + int(osl[i]) - 1, i))
                    else:
                        finish[i] = self.now
                        done += 1
        return first, finish

    def _plan(
        self, waiting: deque[int], left: np.ndarray, running: int
    ) -> tuple[list[tuple[int, int]], float]:
        """Prompt chunks of the next step (as ``simulate``) and the prompt tokens they use."""
        free = max(self.chunk - running, MIN_FREE_CHUNK)
        plan, budget, slots = [], free, self.max_seqs - running
        for i in waiting:
            if budget <= 0 or slots <= 0:
                break
            take = int(min(left[i], budget))
            plan.append((i, take))
            budget -= take
            slots -= 1
        return plan, free - budget

    def _advance(self, running: list[tuple[int, int]], next_arrival: float) -> None:
        """Decode-only steps up to the next completion or the step that admits the next arrival."""
        t = self.clock(len(running), 0, 0)
        k = running[0][0] - self.steps
        if math.isfinite(next_arrival):
            k = min(k, max(1, math.ceil((next_arrival - self.now) / t)))
            while k > 1 and self.now + (k - 1) * t >= next_arrival:  # float rounding of the ceil
                k -= 1
        self.now += k * t
        self.steps += k


@dataclass(frozen=True)
class ReplayResult:
    """Per-request TTFT and TPOT (s; TPOT NaN where OSL = 1) and the replica that served it."""

    ttft_s: np.ndarray
    tpot_s: np.ndarray
    replica: np.ndarray


def route(window_of: np.ndarray, replicas: np.ndarray) -> np.ndarray:
    """Round-robin replica of every request: the k-th request of the trace goes to replica
    k mod n, with n the replicas of its window."""
    n = np.maximum(replicas[window_of], 1)
    return np.arange(window_of.size) % n


def replay(
    m: ModelSpec,
    gpu_key: str,
    worker: WorkerConfig,
    arrival_s: np.ndarray,
    isl: np.ndarray,
    osl: np.ndarray,
    replica: np.ndarray,
    *,
    backend: str = DEFAULT_ENGINE,
    clock: _StepClock | None = None,
    progress: Callable[[str], None] = no_progress,
) -> ReplayResult:
    """Simulate every replica on its requests. The step clock prices decode at the context mean
    ISL + mean OSL / 2, as ``simulate`` (default: a :class:`RowClock`); ``progress`` gets a line
    after each replica."""
    ctx = float(np.mean(isl) + np.mean(osl) / 2.0)
    clock = clock or RowClock(m, gpu_key, worker, backend, ctx)
    first, finish = np.full(arrival_s.size, np.nan), np.full(arrival_s.size, np.nan)
    reps = np.unique(replica)
    for k, r in enumerate(reps):
        idx = np.flatnonzero(replica == r)
        eng = _Replica(clock, float(worker.max_num_batched_tokens), worker.max_num_seqs)
        first[idx], finish[idx] = eng.run(arrival_s[idx], isl[idx], osl[idx])
        progress(f"replay: {k + 1}/{reps.size} replicas simulated")
    ttft = first - arrival_s + clock.cal.request_overhead_s.value
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(osl > 1, (finish - first) / np.maximum(osl - 1, 1), np.nan)
    return ReplayResult(ttft, tpot, replica)


def window_index(arrival_s: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Index of the window each arrival falls in (windows start at ``starts``, sorted)."""
    return np.clip(np.searchsorted(starts, arrival_s, side="right") - 1, 0, starts.size - 1)


PERCENTILES = {"p50": 50.0, "p90": 90.0, "p99": 99.0}


def _pcts(x: np.ndarray) -> dict[str, float | None]:
    """Mean and p50/p90/p99 in ms of the finite entries of ``x`` (s); None when there are none."""
    x = x[np.isfinite(x)]
    if not x.size:
        return {"mean": None, **{k: None for k in PERCENTILES}}
    return {
        "mean": float(np.mean(x)) * 1e3,
        **{k: float(np.percentile(x, q)) * 1e3 for k, q in PERCENTILES.items()},
    }


class WindowStats(TypedDict):
    """Requests and their TTFT/TPOT mean and percentiles (ms; None without finite entries)."""

    requests: int
    ttft_ms: dict[str, float | None]
    tpot_ms: dict[str, float | None]


def by_window(res: ReplayResult, window_of: np.ndarray, count: int) -> list[WindowStats]:
    """Requests and TTFT/TPOT mean and percentiles (ms) of the requests arriving in each window."""
    order = np.argsort(window_of, kind="stable")
    bounds = np.searchsorted(window_of[order], np.arange(count + 1))
    out: list[WindowStats] = []
    for k in range(count):
        sel = order[bounds[k] : bounds[k + 1]]
        out.append(
            {
                "requests": int(sel.size),
                "ttft_ms": _pcts(res.ttft_s[sel]),
                "tpot_ms": _pcts(res.tpot_s[sel]),
            }
        )
    return out


def overall(res: ReplayResult) -> WindowStats:
    """The same over every replayed request."""
    return {
        "requests": int(res.ttft_s.size),
        "ttft_ms": _pcts(res.ttft_s),
        "tpot_ms": _pcts(res.tpot_s),
    }
