"""A quantity as text for people: the rounding rule every output shares (4 significant figures,
exact counts, milliseconds with the unit). Pure functions with no dependencies, so that the solvers'
explanations and the presentation layer (``planner.reports.present``) print the same numbers.
"""

from __future__ import annotations

import math
import numbers

SIG_FIGS = 4
"""Significant figures of a measured or predicted quantity shown to a person."""


def finite(value: object) -> float | None:
    """``value`` as a float when it is a finite real number (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    f = float(value)
    return f if math.isfinite(f) else None


def num(value: object, sig: int = SIG_FIGS) -> str:
    """A quantity rounded to ``sig`` significant figures, with thousands separators; '-' for none.

    Integers (Python ``int``) are counts and print exactly.
    """
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, numbers.Integral):
        return f"{int(value):,}"
    x = finite(value)
    if x is None:
        return "-" if value is None or isinstance(value, float) else str(value)
    if x == 0:
        return "0"
    mag = math.floor(math.log10(abs(x)))
    decimals = sig - 1 - mag
    rounded = round(x, decimals)
    if decimals <= 0:
        return f"{rounded:,.0f}"
    text = f"{rounded:,.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def count(value: object) -> str:
    """An exact count (GPUs, clients, tokens of a size): no rounding beyond the integer."""
    x = finite(value)
    return "-" if x is None else f"{round(x):,}"


def ms(value: object) -> str:
    """Milliseconds with the unit."""
    x = finite(value)
    return "-" if x is None else f"{num(x)} ms"
