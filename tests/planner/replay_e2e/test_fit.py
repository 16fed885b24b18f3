"""The generic refit of engine constants (``planner.replay_e2e.fit``): grids, bounds and the joint
search."""

from __future__ import annotations

import pandas as pd

from planner.replay_e2e.fit import CONSTANTS, joint_pick


def test_grids_lie_inside_the_bounds() -> None:
    for c in CONSTANTS:
        lo, hi = c.bounds
        assert (
            lo <= min(c.grid) and max(c.grid) <= hi and c.start in c.grid and c.unit and c.meaning
        )


def test_the_joint_search_finds_the_pair_a_coordinate_search_stops_short_of() -> None:
    """Two engines whose rows trade a shared share (i) against each one's overhead (j): their
    loss is least at i = 1 with j = 1, but from j = 0 a search of i alone stays at i = 0 (i = 1
    with j = 0 is worse) and from i = 0 a search of j alone stays at j = 0."""
    loss = {(0, 0): 0.30, (0, 1): 0.35, (1, 0): 0.40, (1, 1): 0.10}
    rows = [
        {"backend": b, "i": i, "j": j, "e": e + (0.01 if b == "vllm" else 0.0) + 0.001 * r}
        for b in ("sglang", "vllm")
        for (i, j), e in loss.items()
        for r in range(3)
    ]
    err = pd.DataFrame(rows)
    assert joint_pick(err) == (1, {"sglang": 1, "vllm": 1})
    # each engine takes its own best partner value for the chosen share
    err.loc[(err.backend == "vllm") & (err.i == 1) & (err.j == 0), "e"] = 0.05
    assert joint_pick(err) == (1, {"sglang": 1, "vllm": 0})


def test_every_partner_is_a_per_engine_constant_of_the_same_modes_and_metric() -> None:
    by_name = {c.name: c for c in CONSTANTS}
    partnered = [c for c in CONSTANTS if c.partner]
    assert {c.name for c in partnered} == {"burst_fraction", "disagg_burst_fraction"}
    for c in partnered:
        d = by_name[c.partner or ""]
        assert c.shared and not d.shared and d.modes == c.modes and d.metrics == c.metrics
