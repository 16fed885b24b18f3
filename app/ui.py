"""Shared page helpers: error display, cached catalog loads and number formatting.

Nothing here computes a prediction; it only turns library answers into text a person reads.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import streamlit as st
from pydantic import ValidationError

from hardware.catalog import all_gpus
from hardware.errors import PlannerInputError
from planner.models import bundled_models

LOG = logging.getLogger("planner.app")


def validation_text(exc: ValidationError) -> str:
    """One line from a pydantic error: the field path and the first message."""
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"]) or exc.title
    more = f" (and {len(exc.errors()) - 1} more)" if len(exc.errors()) > 1 else ""
    return f"{loc}: {err['msg']}{more}"


def error_text(exc: BaseException) -> str:
    """What the page shows for an error raised while answering a request."""
    if isinstance(exc, PlannerInputError):
        return str(exc)
    if isinstance(exc, ValidationError):
        return validation_text(exc)
    return f"unexpected error ({type(exc).__name__}): {exc}"


@contextmanager
def guarded(what: str = "") -> Iterator[None]:
    """Turn any error of the block into ``st.error`` (one line, no traceback); the page goes on."""
    try:
        yield
    except Exception as exc:  # st.stop/rerun are BaseException and pass through
        if not isinstance(exc, PlannerInputError | ValidationError):
            LOG.exception("unexpected error in %s", what or "page")
        st.error((f"{what}: " if what else "") + error_text(exc))


@st.cache_data(show_spinner=False)
def gpu_names() -> dict[str, str]:
    """GPU key -> display name, bundled specs."""
    return {key: spec.name for key, spec in sorted(all_gpus().items())}


@st.cache_data(show_spinner=False)
def model_names() -> dict[str, str]:
    """Bundled model key -> display name."""
    return {key: m.name for key, m in sorted(bundled_models().items())}


def fmt(value: Any, digits: int = 3) -> str:
    """A number as people read it: 3 significant digits, thousands separators, '-' for none."""
    if value is None:
        return "-"
    if isinstance(value, bool | str):
        return str(value)
    x = float(value)
    if x != x:  # NaN
        return "-"
    if abs(x) >= 10 ** digits:
        return f"{x:,.0f}"
    return f"{x:.{digits}g}"


def fmt_ms(value_s_or_ms: float | None, already_ms: bool = True) -> str:
    """Milliseconds with their unit."""
    if value_s_or_ms is None:
        return "-"
    ms = value_s_or_ms if already_ms else value_s_or_ms * 1e3
    return f"{fmt(ms)} ms"


def fmt_money(value: float | None) -> str:
    """Dollars with two decimals (cost per million tokens, per hour)."""
    return "-" if value is None else f"${value:,.2f}"
