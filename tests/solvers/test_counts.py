"""Worker counts without a grid: bisection against checking every count, and the count ladder."""

from __future__ import annotations

import numpy as np
import pytest

from solvers.counts import DENSE_COUNTS, around, count_ladder, fewest_counts


def _every_count(n_max: np.ndarray, thresh: np.ndarray) -> np.ndarray:
    out = np.zeros(n_max.size, dtype=int)
    for i, (m, t) in enumerate(zip(n_max, thresh, strict=True)):
        ok = [n for n in range(1, int(m) + 1) if n >= t]
        out[i] = ok[0] if ok else 0
    return out


@pytest.mark.parametrize("dense", [1, 8, DENSE_COUNTS])
def test_fewest_counts_equals_checking_every_count(dense: int) -> None:
    rng = np.random.default_rng(3)
    n_max = rng.integers(1, 5000, 300)
    thresh = rng.integers(1, 6000, 300)  # feasible from a threshold on (some never within n_max)
    calls: list[int] = []

    def check(i: np.ndarray, n: np.ndarray) -> np.ndarray:
        calls.append(int(i.size))
        return n >= thresh[i]

    got = fewest_counts(n_max, check, dense=dense)
    assert np.array_equal(got, _every_count(n_max, thresh))
    assert len(calls) <= 2 + int(
        np.ceil(np.log2(5000))
    )  # passes grow with log2(budget), not budget
    assert sum(calls) < 300 * (dense + 16)


def test_dense_counts_catch_a_feasible_pocket() -> None:
    """Feasible at 2, not at 3..9 (a pair outgrowing its scale-up domain), again from 10 on."""

    def check(i: np.ndarray, n: np.ndarray) -> np.ndarray:
        return (n == 2) | (n >= 10)

    assert fewest_counts(np.array([100]), check, dense=8)[0] == 2
    assert fewest_counts(np.array([1]), check, dense=8)[0] == 0


def test_count_ladder_dense_then_geometric() -> None:
    assert np.array_equal(count_ladder(5), np.arange(1, 6))
    lad = count_ladder(100_000)
    assert lad[0] == 1 and lad[-1] == 100_000 and np.all(np.diff(lad) > 0)
    assert np.array_equal(lad[:DENSE_COUNTS], np.arange(1, DENSE_COUNTS + 1))
    assert np.all(lad[DENSE_COUNTS:] / lad[DENSE_COUNTS - 1 : -1] <= 1.3)  # 25% steps, rounded up
    assert lad.size < 60


def test_around_stays_within_budget() -> None:
    i, c = around(np.array([3, 0, 10]), np.array([4, 9, 100]))
    assert set(zip(i.tolist(), c.tolist(), strict=True)) == {
        (0, 3),
        (0, 4),
        (2, 10),
        (2, 11),
        (2, 13),
        (2, 15),
        (2, 20),
    }
