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
    # passes grow with log2 of the answer (gallop up, then bisect), not with the budget
    assert len(calls) <= 2 + 2 * int(np.ceil(np.log2(5000)))
    assert sum(calls) < 300 * (dense + 16)


def test_checks_grow_with_the_answer_not_the_budget() -> None:
    calls: list[int] = []

    def check(i: np.ndarray, n: np.ndarray) -> np.ndarray:
        calls.append(int(i.size))
        return n >= 5

    assert fewest_counts(np.array([100_000]), check, dense=1)[0] == 5
    assert len(calls) <= 2 + 2 * 3  # n = 1, n_max, then 2, 4, 8 and the bisection between 4 and 8


def test_weight_gives_up_options_that_cannot_win() -> None:
    """Option 1 (8 GPUs per worker) needs 3 workers = 24 GPUs; option 0 (1 GPU) needs 40."""
    thresh, w = np.array([40, 3]), np.array([1, 8])
    got = fewest_counts(np.array([1000, 125]), lambda i, n: n >= thresh[i], dense=1, weight=w)
    assert got[1] == 3 and got[0] >= 40 and got[0] * w[0] > 24


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
