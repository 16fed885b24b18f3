"""Queueing formulas for the prefill stage and latency percentiles (vectorized, seconds).

Closed loop (N clients, think time 0): the prefill stage is a queue, decode a delay of Z seconds.
A request that needs ``t_own`` seconds alone, where each queued prompt costs ``work`` seconds of the
stage, has the asymptotic-bound response R = max(t_own, N·work - Z) (``closed_loop_response``):
engines prefill all waiting prompts of a step together, so below the knee a prompt waits only for
the step boundary (in t_own). Checked against ``planner simulate`` (the same step model; closed
loops of 32-256 clients past the start-up wave, lognormal ISL/OSL with CV 0.3 or 1, 13 runs from
1024/128 to 8192/1024 on Qwen3-32B, Llama-3.1-8B and -70B): the bound is within 16% of the simulated
mean TTFT on 11 and 33-43% low on the two next to the knee, where Schweitzer/Reiser mean value
analysis (prompts served one after another), the model before, put 1.2-4x the simulated TTFT. The
run's first wave of N clients that start together is priced separately (``wave_mix_response``).
Open loop: Pollaczek-Khinchine mean wait for M/G/1,
Kingman's G/G/1 approximation for bursty (gamma) arrivals, and an exponential tail
P(W > w) = rho·exp(-rho·w / E[W]) for percentiles (exact for M/M/1, close for M/D/1 tails).

Admission wait: a closed loop of N clients over C < N running slots keeps the engine full, so a new
request always finds exactly N - C requests queued ahead (every client is either running or queued)
and waits for N - C slot releases. That wait is nearly the same for every request (FIFO): its mean
is (N - C)/X, and its spread comes only from the variability of the slot holding time (the OSL
distribution). The time to k departures of a superposition of C renewal processes of total rate X
has variance k·cs^2/X^2 for large k (Cox, "Renewal Theory", 1962, sec. 5.5), hence a normal
quantile mean·(1 + z·cs/sqrt(k)).
"""

from __future__ import annotations

import numpy as np
from scipy import special

Z_SCORES: dict[str, float] = {"p50": 0.0, "p90": 1.2815515655446004, "p99": 2.3263478740408408}
"""Standard normal quantiles for the named percentiles."""
QUANTILES: dict[str, float] = {"p50": 0.5, "p90": 0.9, "p99": 0.99}


def closed_loop_response(
    t_own: np.ndarray, work: np.ndarray, z: np.ndarray, n: np.ndarray
) -> np.ndarray:
    """Steady-state prefill-stage response R (s) of a closed loop of ``n`` clients: the asymptotic
    bound R = max(t_own, N·work - Z) (Lazowska et al. 1984, ch. 5, one queueing centre and a delay
    Z).

    The prefill stage is a batch server: each step prefills every waiting prompt up to the chunk
    budget, so a prompt does not queue behind the others until the prompts arriving per step need
    more than the budget, the knee N* = (Z + work)/work; past it the stage is busy all the time
    (X = 1/work) and R = N/X - Z. See the module docstring for the check against
    ``planner simulate``.
    """
    return np.maximum(t_own, n * work - z)


def lockstep_response(t_own: np.ndarray, work: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Mean response when the N clients arrive together (benchmark clients start at once and a fixed
    OSL keeps them finishing in the same step): the k-th of N waits for k-1 prefills, mean
    (N-1)/2."""
    return t_own + burst_wait(work, n)


def burst_wait(work: np.ndarray, n: np.ndarray, group: np.ndarray | float = 1.0) -> np.ndarray:
    """Extra mean wait (s) of the N requests that start together, over a lone prompt's own prefill.
    The engine prefills them ``group`` g at a time (as many prompts as one step's chunk budget
    holds), and the k-th gets its first token at the end of step ceil(k/g): mean (N + g)/2 prompts'
    work, of which one is its own, so the wait is (N + g - 2)/2 prefills of ``work`` seconds
    ((N-1)/2 for g = 1). A run of W waves sees this on its first N requests only, so the run's mean
    gains burst_wait(work/W): ``work`` is passed already scaled by 1/W."""
    return work * np.maximum(n + group - 2.0, 0.0) / 2.0


def wave_mix_response(
    t_own: np.ndarray,
    r_steady: np.ndarray,
    work: np.ndarray,
    n: np.ndarray,
    burst: np.ndarray | float,
    group: np.ndarray | float = 1.0,
) -> np.ndarray:
    """Run-mean response (s) of a closed-loop benchmark of W waves (N·W requests) whose first wave
    starts in lockstep: a share ``burst`` = 1/W of the requests waits ``burst_wait`` (and not the
    steady-state wait as well), the rest the steady-state wait r_steady - t_own."""
    return t_own + (1.0 - burst) * (r_steady - t_own) + burst_wait(work * burst, n, group)


def mg1_wait(
    rate: np.ndarray, work: np.ndarray, cs2: np.ndarray | float, ca2: np.ndarray | float
) -> np.ndarray:
    """Mean queueing delay (s): Kingman (ca2 + cs2)/2 · rho/(1-rho) · E[S];
    = P-K for Poisson arrivals."""
    rho = rate * work
    with np.errstate(divide="ignore", invalid="ignore"):
        w = (ca2 + cs2) / 2.0 * rho / (1.0 - rho) * work
    return np.where(rho < 1.0, w, np.inf)


def wait_quantile(mean_wait: np.ndarray, rho: np.ndarray, q: float) -> np.ndarray:
    """q-quantile of the waiting time under P(W > w) = rho·exp(-rho·w/E[W])."""
    rho = np.clip(rho, 1e-12, None)
    with np.errstate(divide="ignore", invalid="ignore"):
        w = mean_wait / rho * np.log(rho / (1.0 - q))
    return np.where(rho > 1.0 - q, np.nan_to_num(w, nan=np.inf, posinf=np.inf), 0.0)


def admission_wait_quantile(
    mean_wait: np.ndarray, queued_ahead: np.ndarray, hold_cs2: np.ndarray, z: float
) -> np.ndarray:
    """Quantile (s) of the admission wait: mean·(1 + z·cs/sqrt(k)) with k = ``queued_ahead``
    releases awaited and ``hold_cs2`` the squared CV of the slot holding time (see module
    docstring), >= 0."""
    spread = np.sqrt(np.maximum(hold_cs2, 0.0) / np.maximum(queued_ahead, 1.0))
    return np.maximum(mean_wait * (1.0 + z * spread), 0.0)


def tpot_quantile(
    mean_tpot: np.ndarray, interference: np.ndarray, events: np.ndarray, z: float
) -> np.ndarray:
    """TPOT quantile of one request: its steps meet a Poisson(``events``) number of prefills whose
    cost adds ``interference`` seconds per step on average, so TPOT ~ mean +
    z·interference/sqrt(events)."""
    return mean_tpot + z * interference / np.sqrt(np.maximum(events, 1.0))


JOIN_ATOMS = 8
"""Equal-probability atoms of the uniform wait for the next step boundary (``own_quantiles``), at
the low end of their shares (i/8 of the range): a quantile read from them is at most the
continuous one, and within 1/8 of the range of it."""
LENGTH_ATOMS = 8
"""Equal-probability atoms of the prompt-length factor where lengths vary (``own_quantiles``)."""
COHORT_MAX = 7
"""Most co-scheduled prompts ``own_quantiles`` counts (the Poisson tail beyond it is put there)."""


def weighted_quantiles(
    atoms: np.ndarray, weights: np.ndarray, qs: list[float] | tuple[float, ...]
) -> list[np.ndarray]:
    """Per column of ``atoms`` (shape (A, K)) with probabilities ``weights`` (same shape, each
    column summing to 1), the smallest atom whose cumulative probability reaches each q
    (non-decreasing in q)."""
    order = np.argsort(atoms, axis=0, kind="stable")
    xs = np.take_along_axis(atoms, order, 0)
    cw = np.cumsum(np.take_along_axis(weights, order, 0), axis=0)
    out = []
    for q in qs:
        idx = np.minimum((cw < q - 1e-9).sum(axis=0), xs.shape[0] - 1)
        out.append(np.take_along_axis(xs, idx[None, :], 0)[0])
    return out


def own_quantiles(
    fixed_s: np.ndarray,
    join_s: np.ndarray,
    prefill_s: np.ndarray,
    length_cs2: np.ndarray,
    cohort: np.ndarray,
    cohort_cost_s: np.ndarray,
    qs: list[float] | tuple[float, ...],
) -> list[np.ndarray]:
    """Quantiles (s) of a prompt's own time to first token with no queue ahead of it, the sum of
    independent parts (K candidates each):

    - ``fixed_s``: the per-request overhead, the same for every request;
    - the wait for the next step boundary, uniform over 0..2 ``join_s`` (where in the batch cycle
      the prompt arrives);
    - its own prefill ``prefill_s`` times the length factor of its prompt (lognormal with mean 1
      and squared CV ``length_cs2``; 1 for fixed lengths);
    - the prompts that join its prefill step (prefill interference): Poisson with mean
      ``cohort`` (arrivals per step), ``cohort_cost_s`` seconds each; every prompt of a step gets
      its first token at the end of that step, so each co-scheduled prompt delays it.

    The mean is fixed + join + prefill + cohort·cost. Quantiles of the sum are read from a grid
    of weighted atoms (``JOIN_ATOMS`` x ``LENGTH_ATOMS`` where lengths vary x 0..``COHORT_MAX``
    prompts), so they are ordered in q. Checked against ``planner simulate`` at p90
    (tests/planner/perf/test_closed_loop_percentiles.py)."""
    k = fixed_s.shape[0]
    u = np.arange(JOIN_ATOMS) / JOIN_ATOMS
    varies = bool(np.any(length_cs2 > 0.0))
    g = (np.arange(LENGTH_ATOMS) + 0.5) / LENGTH_ATOMS if varies else np.array([0.5])
    sigma2 = np.log1p(np.maximum(length_cs2, 0.0))
    z = special.ndtri(g)[:, None]
    length = np.exp(-sigma2 / 2.0 + z * np.sqrt(sigma2)) if varies else np.ones((1, k))
    n = np.arange(COHORT_MAX + 1, dtype=float)[:, None]
    lam = np.maximum(np.nan_to_num(cohort), 0.0)
    # Poisson(lam) probabilities of n: exp(n ln lam - lam - ln n!), xlogy giving 0 ln 0 = 0
    pmf = np.exp(special.xlogy(n, lam[None, :]) - lam[None, :] - special.gammaln(n + 1.0))
    pmf[-1] = np.maximum(1.0 - pmf[:-1].sum(axis=0), 0.0)  # the tail at COHORT_MAX
    base = fixed_s[None, None, None, :] + 2.0 * join_s * u[:, None, None, None]
    atoms = (
        base
        + (prefill_s * length)[None, :, None, :]
        + (np.nan_to_num(cohort_cost_s) * n)[None, None, :, :]
    )
    weights = np.broadcast_to(pmf[None, None, :, :] / (JOIN_ATOMS * len(g)), atoms.shape)
    shape = (-1, k)
    return weighted_quantiles(atoms.reshape(shape), weights.reshape(shape), qs)
