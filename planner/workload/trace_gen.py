"""Synthetic time-stamped traces: a daily cycle and bursts as a time-varying rate (seedable).

The rate is lambda(t) = base(t) · burst(t): base(t) runs between ``peak_rate / daily_ratio`` (at
``trough_hour``) and ``peak_rate`` twelve hours later along a raised cosine; burst(t) is
``burst_factor`` inside each burst and 1 elsewhere. Bursts last ``burst_minutes`` and start at
seeded random times that do not overlap. Arrivals come from time rescaling (Cinlar's theorem: a
unit-rate renewal process mapped through the inverse of Lambda(t) = integral of lambda has rate
lambda(t)): gaps of Gamma(1/cv^2, cv^2) in the rescaled time give Poisson arrivals for cv = 1 and
burstier ones (the BurstGPT study fits Gamma gaps, CV above 1, to its API traffic) for cv > 1.
Prompt and answer lengths are lognormal with the given CV around a mean that may follow the day
(``length_daily_swing``; production lengths shift with the hour, BurstGPT sec. 3). The bursts are a
change of rate over minutes, not the gap distribution the analytic sizing assumes for one rate.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from hardware.errors import PlannerInputError
from planner.workload.mooncake import BLOCK_TOKENS, MAX_TIMESTAMP_MS, MS_PER_S, PrefixBlocks
from planner.workload.traces import Trace

_FROZEN = ConfigDict(frozen=True, extra="forbid")
SECONDS_PER_DAY = 86400.0
RATE_GRID_S = 1.0
"""Resolution of the integrated rate Lambda(t), seconds."""


class TraceSpec(BaseModel):
    """What a synthetic trace looks like."""

    model_config = _FROZEN
    hours: float = Field(default=24.0, gt=0, le=24 * 31, description="Length of the trace, hours.")
    peak_rate: float = Field(
        default=4.0, gt=0, le=1e5, description="Daily-cycle peak rate outside bursts, requests/s."
    )
    daily_ratio: float = Field(
        default=4.0, ge=1, le=1000, description="Daily peak rate / trough rate."
    )
    trough_hour: float = Field(
        default=4.0, ge=0, lt=24, description="Hour of the day of the trough."
    )
    bursts_per_day: float = Field(default=6.0, ge=0, le=100, description="Bursts per 24 hours.")
    burst_minutes: float = Field(
        default=10.0, gt=0, le=240, description="Length of one burst, minutes."
    )
    burst_factor: float = Field(
        default=3.0, ge=1, le=100, description="Rate multiplier inside a burst."
    )
    arrival_cv: float = Field(
        default=1.0, gt=0, le=10, description="CV of gaps at a constant rate (1 = Poisson)."
    )
    isl_mean: float = Field(default=1024.0, ge=1, le=1e6, description="Mean prompt length, tokens.")
    isl_cv: float = Field(default=0.5, ge=0, le=4, description="CV of prompt lengths (lognormal).")
    osl_mean: float = Field(default=256.0, ge=1, le=1e6, description="Mean answer length, tokens.")
    osl_cv: float = Field(default=0.5, ge=0, le=4, description="CV of answer lengths (lognormal).")
    length_daily_swing: float = Field(
        default=0.0,
        ge=0,
        le=0.9,
        description="Mean lengths move by this share over the day: (1 - s) x at the trough, "
        "(1 + s) x at the peak.",
    )
    seed: int = Field(default=0, ge=0, description="Random seed (same seed, same trace).")


class Generated(BaseModel):
    """A synthetic trace's bursts (the trace itself is returned beside it)."""

    model_config = _FROZEN
    bursts: tuple[tuple[float, float], ...] = Field(description="(start_s, end_s) of every burst.")


def _daily(spec: TraceSpec, t: np.ndarray) -> np.ndarray:
    """The daily cycle at times ``t`` (s): -1 at the trough hour, +1 twelve hours later."""
    return -np.cos(2.0 * np.pi * (t / SECONDS_PER_DAY - spec.trough_hour / 24.0))


def base_rate(spec: TraceSpec, t: np.ndarray) -> np.ndarray:
    """Daily-cycle rate at times ``t`` (s), requests/s, without bursts."""
    trough = spec.peak_rate / spec.daily_ratio
    return trough + (spec.peak_rate - trough) * (1.0 + _daily(spec, t)) / 2.0


def burst_windows(spec: TraceSpec, rng: np.random.Generator) -> tuple[tuple[float, float], ...]:
    """Non-overlapping bursts at random starts (at least one burst length apart)."""
    total = spec.hours * 3600.0
    n = int(round(spec.bursts_per_day * spec.hours / 24.0))
    length = spec.burst_minutes * 60.0
    slots = int(total // (2 * length))
    if n == 0 or slots == 0:
        return ()
    picks = np.sort(rng.choice(slots, size=min(n, slots), replace=False))
    return tuple((float(s * 2 * length), float(s * 2 * length + length)) for s in picks)


def rate(spec: TraceSpec, t: np.ndarray, bursts: tuple[tuple[float, float], ...]) -> np.ndarray:
    """lambda(t), requests/s, bursts included."""
    lam = base_rate(spec, t)
    for a, b in bursts:
        lam = np.where((t >= a) & (t < b), lam * spec.burst_factor, lam)
    return lam


def _lengths(rng: np.random.Generator, n: int, mean: np.ndarray, cv: float) -> np.ndarray:
    if cv == 0:
        return np.maximum(np.round(mean), 1).astype(np.int64)
    s2 = np.log1p(cv * cv)
    x = rng.lognormal(np.log(mean) - s2 / 2.0, np.sqrt(s2), n)
    return np.maximum(np.round(x), 1).astype(np.int64)


def generate(spec: TraceSpec) -> tuple[Trace, Generated]:
    """The trace and its bursts; deterministic in ``spec`` (seed included)."""
    rng = np.random.default_rng(spec.seed)
    total = spec.hours * 3600.0
    bursts = burst_windows(spec, rng)
    grid = np.arange(0.0, total + RATE_GRID_S, RATE_GRID_S)
    lam = rate(spec, grid[:-1] + RATE_GRID_S / 2.0, bursts)
    cum = np.concatenate([[0.0], np.cumsum(lam * RATE_GRID_S)])
    shape = 1.0 / spec.arrival_cv**2
    expect = int(cum[-1] * 1.05 + 10.0 * np.sqrt(cum[-1]) + 10)
    u = np.cumsum(rng.gamma(shape, 1.0 / shape, expect))
    while u[-1] < cum[-1]:
        u = np.concatenate([u, u[-1] + np.cumsum(rng.gamma(shape, 1.0 / shape, expect // 10 + 10))])
    u = u[u < cum[-1]]
    t = np.interp(u, cum, grid)
    n = t.shape[0]
    swing = 1.0 + spec.length_daily_swing * _daily(spec, t)
    isl = _lengths(rng, n, spec.isl_mean * swing, spec.isl_cv)
    osl = _lengths(rng, n, spec.osl_mean * swing, spec.osl_cv)
    desc = f"synthetic seed {spec.seed}"
    return Trace(t, isl, osl, source=desc, layout="synthetic"), Generated(bursts=bursts)


class AgenticSpec(BaseModel):
    """Multi-turn agent sessions (``planner gen-trace --agentic``). Every default is an editable
    assumption of a coding-agent shape, not a measurement: a shared system prompt with tool
    definitions, then turns whose prompt is the previous prompt, the previous answer and a new
    tool output or user message (the context grows turn by turn)."""

    model_config = _FROZEN
    sessions: int = Field(default=200, ge=1, le=20000, description="Sessions generated.")
    session_rate: float = Field(
        default=0.2, gt=0, le=1e4, description="Session starts per second (Poisson)."
    )
    turns_mean: float = Field(
        default=8.0, ge=1, le=1000, description="Mean turns per session (geometric, >= 1)."
    )
    think_s: float = Field(
        default=15.0,
        ge=0,
        le=86400,
        description="Mean gap from one turn's arrival to the next turn's, seconds (exponential); "
        "it stands for the answer's latency plus the tool's or user's time.",
    )
    system_tokens: int = Field(
        default=4096, ge=0, le=10**6, description="Tokens of the shared system prompt and tools."
    )
    system_prompts: int = Field(
        default=4, ge=1, le=10**6, description="Distinct system prompts (one per session, uniform)."
    )
    user_tokens: float = Field(
        default=400.0, ge=1, le=1e6, description="Mean tokens of a user message (lognormal)."
    )
    tool_tokens: float = Field(
        default=1500.0, ge=1, le=1e6, description="Mean tokens of a tool output (lognormal)."
    )
    tool_share: float = Field(
        default=0.7, ge=0, le=1, description="Share of later turns that add a tool output."
    )
    osl_mean: float = Field(
        default=300.0, ge=1, le=1e6, description="Mean answer tokens (lognormal)."
    )
    length_cv: float = Field(
        default=1.0, ge=0, le=4, description="CV of message, tool-output and answer lengths."
    )
    max_context_tokens: int = Field(
        default=131072,
        ge=1024,
        le=10**7,
        description="A session ends before a prompt plus its answer would exceed this, tokens.",
    )
    seed: int = Field(default=0, ge=0, description="Random seed (same seed, same trace).")


class _BlockIds:
    """Mooncake block ids of growing contexts: a full block keeps its id, a partial last block
    gets a new one each turn (its prefix hash changes once more tokens follow)."""

    def __init__(self, block_tokens: int) -> None:
        self.block_tokens, self.next = block_tokens, 0

    def fresh(self, n: int) -> list[int]:
        out = list(range(self.next, self.next + n))
        self.next += n
        return out

    def prompt(self, full: list[int], tokens: int) -> list[int]:
        """Ids of a prompt of ``tokens`` starting with the full blocks ``full`` (extended)."""
        full.extend(self.fresh(tokens // self.block_tokens - len(full)))
        return full[: tokens // self.block_tokens] + self.fresh(int(tokens % self.block_tokens > 0))


def _session_turns(
    spec: AgenticSpec, rng: np.random.Generator, ids: _BlockIds, shared: list[int]
) -> list[tuple[float, int, int, list[int]]]:
    """(gap_s, isl, osl, block ids) of one session's turns."""
    turns = int(rng.geometric(1.0 / spec.turns_mean))
    full, context, out = list(shared), spec.system_tokens, []
    for k in range(turns):
        tool = k > 0 and rng.random() < spec.tool_share
        mean = np.array([spec.tool_tokens if tool else spec.user_tokens, spec.osl_mean])
        add, osl = (int(v) for v in _lengths(rng, 2, mean, spec.length_cv))
        if context + add + osl > spec.max_context_tokens:
            break
        context += add
        gap = float(rng.exponential(spec.think_s)) if k else 0.0
        out.append((gap, context, osl, ids.prompt(full, context)))
        context += osl
    return out


def generate_agentic(spec: AgenticSpec) -> Trace:
    """Sessions of growing prompts with Mooncake block ids and session numbers, sorted by
    arrival; deterministic in ``spec`` (seed included)."""
    rng = np.random.default_rng(spec.seed)
    ids = _BlockIds(BLOCK_TOKENS)
    shared = [ids.fresh(spec.system_tokens // BLOCK_TOKENS) for _ in range(spec.system_prompts)]
    starts = np.cumsum(rng.exponential(1.0 / spec.session_rate, spec.sessions))
    t, isl, osl, sess, blocks = [], [], [], [], []
    for s, start in enumerate(starts):
        now = float(start)
        for gap, n_in, n_out, b in _session_turns(
            spec, rng, ids, shared[int(rng.integers(spec.system_prompts))]
        ):
            now += gap
            t.append(now)
            isl.append(n_in)
            osl.append(n_out)
            sess.append(s)
            blocks.append(b)
    if not t:
        raise PlannerInputError(
            "--max-context-tokens", "no turn fits; raise it or shorten the system prompt"
        )
    if max(t) - float(starts[0]) > MAX_TIMESTAMP_MS / MS_PER_S:
        raise PlannerInputError(
            "--session-rate", "the sessions span more time than a trace holds; raise the rate"
        )
    order = np.argsort(np.array(t), kind="stable")
    counts = np.array([len(blocks[i]) for i in order], dtype=np.int64)
    flat = np.array([v for i in order for v in blocks[i]], dtype=np.int64)
    return Trace(
        np.array(t)[order] - float(starts[0]),
        np.array(isl, dtype=np.int64)[order],
        np.array(osl, dtype=np.int64)[order],
        source=f"agentic seed {spec.seed}",
        layout="synthetic",
        blocks=PrefixBlocks(flat, np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)),
        session=np.array(sess, dtype=np.int64)[order],
    )
