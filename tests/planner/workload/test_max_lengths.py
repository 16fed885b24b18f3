"""``max_lengths``: the longest prompt and answer a deployment must accept."""

from __future__ import annotations

import pytest

from planner.errors import PlannerInputError
from planner.workload.spec import MAX_LENGTH_FACTOR, max_lengths


def test_default_is_twice_the_mean() -> None:
    assert MAX_LENGTH_FACTOR == 2.0
    assert max_lengths(2000, 300, None, None, 131_072, "m") == (4000, 600)


def test_stated_lengths_are_kept() -> None:
    assert max_lengths(1000, 8000, 32_000, 16_000, 163_840, "m") == (32_000, 16_000)


def test_a_stated_length_above_the_model_names_the_limit() -> None:
    with pytest.raises(PlannerInputError, match="maximum positions \\(131,072 tokens\\)") as exc:
        max_lengths(1000, 100, 200_000, None, 131_072, "llama")
    assert exc.value.field == "--max-isl"


def test_a_stated_pair_longer_than_the_model_is_refused() -> None:
    with pytest.raises(PlannerInputError, match="100,000 \\+ 100,000 tokens"):
        max_lengths(1000, 100, 100_000, 100_000, 131_072, "m")


def test_a_stated_length_below_the_mean_is_refused() -> None:
    with pytest.raises(PlannerInputError, match="below the mean"):
        max_lengths(4000, 500, 1000, None, 131_072, "m")


def test_defaults_are_shortened_to_fit_the_model() -> None:
    """gpt-j (2,048 positions), ISL 800 / OSL 400: 1,600 + 800 do not fit; both shrink in
    proportion and still hold the mean request."""
    isl, osl = max_lengths(800, 400, None, None, 2048, "gpt-j")
    assert isl + osl == 2048 and isl >= 800 and osl >= 400
    assert max_lengths(800, 400, None, 1200, 2048, "gpt-j") == (848, 1200)


def test_a_mean_request_longer_than_the_model_is_refused() -> None:
    with pytest.raises(PlannerInputError, match="mean request of 3,000 tokens"):
        max_lengths(2000, 1000, None, None, 2048, "gpt-j")
