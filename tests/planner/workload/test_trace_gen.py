"""Synthetic traces: seedable, the daily cycle and the bursts where they were asked for."""

from __future__ import annotations

import numpy as np
import pytest

from planner.workload.trace_gen import TraceSpec, base_rate, generate
from planner.workload.windows import split


def test_same_seed_same_trace() -> None:
    a, ga = generate(TraceSpec(hours=2, seed=5))
    b, gb = generate(TraceSpec(hours=2, seed=5))
    c, _ = generate(TraceSpec(hours=2, seed=6))
    np.testing.assert_array_equal(a.arrival_s, b.arrival_s)
    np.testing.assert_array_equal(a.isl, b.isl)
    assert ga == gb and len(a) != len(c)


def test_daily_cycle_and_bursts() -> None:
    spec = TraceSpec(
        hours=24,
        peak_rate=5.0,
        daily_ratio=4.0,
        bursts_per_day=4,
        burst_minutes=10,
        burst_factor=3.0,
        seed=11,
    )
    tr, gen = generate(spec)
    assert len(gen.bursts) == 4
    assert tr.arrival_s[0] >= 0 and tr.arrival_s[-1] <= 24 * 3600
    expected = float(np.mean(base_rate(spec, np.arange(0, 86400.0)))) * 86400
    extra = spec.burst_factor - 1.0
    expected += sum(
        (b - a) * extra * float(np.mean(base_rate(spec, np.arange(a, b)))) for a, b in gen.bursts
    )
    assert len(tr) == pytest.approx(expected, rel=0.02)
    t, day = tr.arrival_s, 3600.0
    in_burst = np.zeros(t.size, dtype=bool)
    for a, b in gen.bursts:
        in_burst |= (t >= a) & (t < b)
    trough = np.count_nonzero(((t // day) == 4) & ~in_burst) / day
    peak = np.count_nonzero(((t // day) == 16) & ~in_burst) / day
    assert peak / trough == pytest.approx(4.0, rel=0.15)
    a, b = gen.bursts[0]
    inside = np.count_nonzero((t >= a) & (t < b)) / (b - a)
    assert inside / float(np.mean(base_rate(spec, np.arange(a, b)))) == pytest.approx(3.0, rel=0.15)
    assert np.mean(tr.isl) == pytest.approx(spec.isl_mean, rel=0.03)


def test_window_stats_see_bursts_as_rate() -> None:
    """A burst inside a window raises its design rate well above its mean rate, while the local gap
    CV stays near 1 (Poisson at every rate) and the raw gap CV of the window rises."""
    spec = TraceSpec(
        hours=6, peak_rate=4.0, daily_ratio=1.0, bursts_per_day=8, burst_minutes=10, seed=2
    )
    tr, gen = generate(spec)
    wins = split(tr, 900.0, 0.9)
    a, _ = gen.bursts[0]
    w = wins[int(a // 900)]
    calm = [
        x for x in wins if not any(s < x.start_s + 900 and e > x.start_s for s, e in gen.bursts)
    ]
    assert w.design_rate > 1.5 * w.rate or w.design_rate > 2.5 * spec.peak_rate
    assert w.local_cv == pytest.approx(1.0, abs=0.1)
    assert w.arrival_cv > max(x.arrival_cv for x in calm)
    assert all(x.design_rate == pytest.approx(4.0, rel=0.25) for x in calm)


def test_lengths_follow_the_day() -> None:
    spec = TraceSpec(
        hours=24, peak_rate=2.0, osl_mean=300, osl_cv=0.3, length_daily_swing=0.5, seed=4
    )
    tr, _ = generate(spec)
    hour = tr.arrival_s // 3600
    trough, peak = tr.osl[hour == 4].mean(), tr.osl[hour == 16].mean()
    assert trough == pytest.approx(150, rel=0.08) and peak == pytest.approx(450, rel=0.08)
    flat, _ = generate(spec.model_copy(update={"length_daily_swing": 0.0}))
    assert np.array_equal(flat.arrival_s, tr.arrival_s)
