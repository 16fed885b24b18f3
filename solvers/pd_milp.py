"""MILP: prefill/decode worker counts and per-phase configuration for a target request rate.

Options are worker configurations that already meet the SLO at their operating point: prefill
option i serves ``cap_i`` requests/s (capacity x the utilization its TTFT SLO allows), decode option
j serves ``cap_j`` requests/s at a batch whose TPOT meets the SLO. Each option belongs to a
compatibility group (weight dtype, KV dtype; the prefill and decode options may be of two GPU
types, each option carrying its own price); one group, one prefill and one decode option are
chosen::

    min  sum_g (price_p P_g + price_d D_g)   (P_g, D_g = GPUs bought per role in group g: whole
                                              purchase units of that role's type when set)
    s.t. sum_i cap_i x_i >= R,  sum_j cap_j y_j >= R
         x_i <= M a_i, y_j <= M b_j, sum a = sum b = sum z = 1, a_i, b_j <= z_group
         P_g >= sum_{i in g} gp_i x_i,  D_g >= sum_{j in g} gd_j y_j,  sum_g P_g + D_g <= max_gpus

With ``objective="gpus"`` every price is 1. Within a group and worker size only the option with the
largest capacity can be optimal, so the others are dropped before the solve (exact).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pulp

from solvers.milp import MilpOutcome, solve


@dataclass(frozen=True)
class PhaseOptions:
    """Options of one phase: group label, GPUs per worker, capacity (requests/s), $/GPU-hour (of
    the phase's GPU type)."""

    group: np.ndarray
    gpus: np.ndarray
    capacity_per_s: np.ndarray
    price: np.ndarray


@dataclass(frozen=True)
class PdSolution:
    """Chosen options (indices into the inputs), worker counts, GPUs, $/hour and solver proof."""

    prefill: int
    decode: int
    x: int
    y: int
    gpus: int
    cost_per_hour: float
    outcome: MilpOutcome


def dominant(o: PhaseOptions) -> np.ndarray:
    """Indices of the largest-capacity option per (group, GPUs per worker)."""
    order = np.lexsort((-o.capacity_per_s, o.gpus, o.group))
    keys = np.stack([o.group[order], o.gpus[order]], axis=1)
    first = np.ones(order.size, dtype=bool)
    first[1:] = np.any(keys[1:] != keys[:-1], axis=1)
    return order[first]


Units = int | None | tuple[int | None, int | None]
"""GPUs per purchase unit: one for both roles, or (prefill's, decode's); None = single GPUs."""


def role_units(node_gpus: Units) -> tuple[int | None, int | None]:
    """(prefill, decode) purchase units of ``node_gpus``."""
    return node_gpus if isinstance(node_gpus, tuple) else (node_gpus, node_gpus)


def bought(used: int, unit: int | None) -> int:
    """GPUs bought for ``used`` GPUs in whole units of ``unit`` (None: singly)."""
    return math.ceil(used / unit) * unit if unit else used


def _round(
    prob: pulp.LpProblem,
    total: pulp.LpAffineExpression,
    node_gpus: int | None,
    name: str,
    big: int,
) -> pulp.LpVariable | pulp.LpAffineExpression:
    """``total`` GPUs, bought in whole units of ``node_gpus`` (a constraint added to ``prob``)."""
    if not node_gpus:
        return total
    nodes = pulp.LpVariable(name, 0, math.ceil(big / node_gpus), cat="Integer")
    prob += nodes * node_gpus >= total
    return nodes * node_gpus


def solve_pd(
    pre: PhaseOptions,
    dec: PhaseOptions,
    rate_per_s: float,
    max_gpus: int,
    *,
    node_gpus: Units = None,
    objective: Literal["gpus", "cost"] = "gpus",
) -> PdSolution | None:
    """Minimum-GPU (or -cost) P/D sizing, each role bought in whole purchase units of its own GPU
    type (``node_gpus``); None when no combination fits ``max_gpus``."""
    unit_p, unit_d = role_units(node_gpus)
    pi, di = dominant(pre), dominant(dec)
    groups = sorted(set(pre.group[pi].tolist()) & set(dec.group[di].tolist()))
    if not groups:
        return None
    prob = pulp.LpProblem("pd_sizing", pulp.LpMinimize)
    z = {g: pulp.LpVariable(f"z_{g}", cat="Binary") for g in groups}
    a = {i: pulp.LpVariable(f"a_{i}", cat="Binary") for i in pi if pre.group[i] in z}
    b = {j: pulp.LpVariable(f"b_{j}", cat="Binary") for j in di if dec.group[j] in z}
    x = {i: pulp.LpVariable(f"x_{i}", 0, max_gpus, cat="Integer") for i in a}
    y = {j: pulp.LpVariable(f"y_{j}", 0, max_gpus, cat="Integer") for j in b}
    cost_terms, gpu_terms = [], []
    for g in groups:
        used_p = pulp.lpSum(int(pre.gpus[i]) * x[i] for i in a if pre.group[i] == g)
        used_d = pulp.lpSum(int(dec.gpus[j]) * y[j] for j in b if dec.group[j] == g)
        billed_p = _round(prob, used_p, unit_p, f"units_p_{g}", max_gpus)
        billed_d = _round(prob, used_d, unit_d, f"units_d_{g}", max_gpus)
        gpu_terms += [billed_p, billed_d]
        by_cost = objective == "cost"
        price_p = float(pre.price[pi][pre.group[pi] == g][0]) if by_cost else 1.0
        price_d = float(dec.price[di][dec.group[di] == g][0]) if by_cost else 1.0
        cost_terms += [price_p * billed_p, price_d * billed_d]
    prob += pulp.lpSum(cost_terms)
    prob += pulp.lpSum(float(pre.capacity_per_s[i]) * x[i] for i in a) >= rate_per_s
    prob += pulp.lpSum(float(dec.capacity_per_s[j]) * y[j] for j in b) >= rate_per_s
    prob += pulp.lpSum(gpu_terms) <= max_gpus
    prob += pulp.lpSum(z.values()) == 1
    prob += pulp.lpSum(a.values()) == 1
    prob += pulp.lpSum(b.values()) == 1
    for i in a:
        prob += x[i] <= max_gpus * a[i]
        prob += a[i] <= z[int(pre.group[i])]
    for j in b:
        prob += y[j] <= max_gpus * b[j]
        prob += b[j] <= z[int(dec.group[j])]
    out = solve(prob)
    if not out.optimal:
        return None
    i = next(k for k in a if (a[k].value() or 0) > 0.5)
    j = next(k for k in b if (b[k].value() or 0) > 0.5)
    xi, yj = round(x[i].value() or 0), round(y[j].value() or 0)
    gp, gd = bought(xi * int(pre.gpus[i]), unit_p), bought(yj * int(dec.gpus[j]), unit_d)
    cost = gp * float(pre.price[i]) + gd * float(dec.price[j])
    return PdSolution(int(i), int(j), xi, yj, gp + gd, cost, out)


def brute_force_pd(
    pre: PhaseOptions,
    dec: PhaseOptions,
    rate_per_s: float,
    max_gpus: int,
    *,
    node_gpus: Units = None,
    objective: Literal["gpus", "cost"] = "gpus",
) -> float | None:
    """Reference answer by enumeration: the optimal objective value (tests)."""
    unit_p, unit_d = role_units(node_gpus)
    best: float | None = None
    for i in range(pre.group.size):
        for j in range(dec.group.size):
            if pre.group[i] != dec.group[j]:
                continue
            gp = bought(
                math.ceil(rate_per_s / pre.capacity_per_s[i] - 1e-9) * int(pre.gpus[i]), unit_p
            )
            gd = bought(
                math.ceil(rate_per_s / dec.capacity_per_s[j] - 1e-9) * int(dec.gpus[j]), unit_d
            )
            if gp + gd > max_gpus:
                continue
            by_cost = objective == "cost"
            val = gp * float(pre.price[i]) + gd * float(dec.price[j]) if by_cost else gp + gd
            best = val if best is None or val < best else best
    return best
