"""The inputs every page shares (model, GPUs, workload, SLOs, objective), kept in the URL.

Each shared input has one widget key (``in_<name>``) used by every page, so a value typed on the
Plan page is there on Compare and Traffic. Streamlit forgets the state of widgets a page does not
draw, so the values also live in ``st.session_state[STORE]`` (a plain dict) and in the URL query
(``st.query_params``): opening a URL with ``?model=...&gpus=...`` fills the form. A value the URL
gives that cannot be read keeps the default and the page says which one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import streamlit as st

from planner.engines import DEFAULT_ENGINE

STORE = "shared_inputs"
"""Session state: the last value of every shared input (survives page switches)."""
BAD_QUERY = "shared_bad_query"
"""Session state: query parameters that could not be read, shown once."""
PREFIX = "in_"


def _floats(text: str) -> float:
    return float(text)


def _ints(text: str) -> int:
    return int(float(text))


def _gpu_list(text: str) -> list[str]:
    return [g for g in text.split(",") if g]


@dataclass(frozen=True)
class Field:
    """One shared input: its default and how the URL spells it."""

    default: Any
    parse: Callable[[str], Any] = str
    choices: tuple[str, ...] = ()


FIELDS: dict[str, Field] = {
    "model": Field("llama-3.1-70b"),
    "gpus": Field(["h200_sxm"], _gpu_list),
    "max_gpus": Field(8, _ints),
    "isl": Field(4000, _ints),
    "osl": Field(500, _ints),
    "load": Field("Concurrency", choices=("Concurrency", "Rate", "Best throughput")),
    "conc": Field(64, _ints),
    "rate": Field(5.0, _floats),
    "ttft": Field(5000.0, _floats),
    "tpot": Field(40.0, _floats),
    "pct": Field("p90", choices=("p50", "p90", "p99")),
    "objective": Field("cost", choices=("cost", "throughput-per-gpu", "gpus", "energy")),
    "mode": Field("auto", choices=("auto", "agg", "disagg")),
    "backend": Field(DEFAULT_ENGINE),
}
"""Name -> field. ``gpus`` is comma separated in the URL; numbers are plain decimals."""


def _from_query() -> dict[str, Any]:
    values: dict[str, Any] = {}
    bad: list[str] = []
    for name, f in FIELDS.items():
        raw = st.query_params.get(name)
        if raw is None:
            continue
        try:
            value = f.parse(raw)
        except ValueError:
            bad.append(name)
            continue
        if f.choices and value not in f.choices:
            bad.append(name)
            continue
        values[name] = value
    st.session_state[BAD_QUERY] = bad
    return values


def store() -> dict[str, Any]:
    """The shared values of this session, read from the URL on its first run."""
    if STORE not in st.session_state:
        st.session_state[STORE] = {k: f.default for k, f in FIELDS.items()} | _from_query()
    return st.session_state[STORE]  # type: ignore[no-any-return]


def key(name: str) -> str:
    """The widget key of a shared input (the same on every page)."""
    return PREFIX + name


def seed(name: str, allowed: list[str] | None = None) -> str:
    """Put the stored value of ``name`` into its widget's state before the widget is drawn (a
    value not among ``allowed`` falls back to the default) and return the widget key."""
    k = key(name)
    if k in st.session_state:
        # a widget of the same key on another page is a new widget to Streamlit: set the value
        # again so the new one starts from it instead of its own default
        st.session_state[k] = st.session_state[k]
    else:
        value = store()[name]
        if allowed is not None:
            if isinstance(value, list):
                value = [v for v in value if v in allowed] or FIELDS[name].default
            elif value not in allowed:
                value = FIELDS[name].default
        st.session_state[k] = value
    return k


def remember(name: str, value: Any) -> Any:
    """Keep a widget's value in the store and the URL; returns it."""
    store()[name] = value
    _write_query()
    return value


def _text(value: Any) -> str:
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return f"{value:g}" if isinstance(value, float) else str(value)


def query() -> dict[str, str]:
    """The shared values as URL query parameters (those that differ from the defaults)."""
    values = store()
    return {
        name: _text(values[name])
        for name, f in FIELDS.items()
        if name in values and values[name] != f.default
    }


def _write_query() -> None:
    want = query()
    for name in FIELDS:
        if name in st.query_params and name not in want:
            del st.query_params[name]
    for name, text in want.items():
        if st.query_params.get(name) != text:
            st.query_params[name] = text


def link(page: str, **override: Any) -> str:
    """A relative link to ``page`` carrying the shared inputs (``override``: other values)."""
    q = query() | {name: _text(value) for name, value in override.items()}
    return f"/{page}" + (f"?{urlencode(q)}" if q else "")


def bad_query_note() -> None:
    """Say which URL values could not be read (they keep their defaults)."""
    store()  # the first run reads the URL
    bad = st.session_state.get(BAD_QUERY) or []
    if bad:
        st.warning(
            "The link's value of " + ", ".join(bad) + " could not be read; the default is used.",
            icon="⚠️",
        )
