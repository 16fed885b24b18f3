"""Shared page helpers: error display, cached catalog loads and number formatting.

Nothing here computes a prediction; it only turns library answers into text a person reads.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import streamlit as st
from pydantic import ValidationError

from hardware.catalog import all_gpus
from hardware.errors import PlannerInputError
from planner.model.bundled import bundled_models
from planner.reports import present

FLAG_WORDS = {
    "--ttft-ms": "TTFT SLO",
    "--tpot-ms": "TPOT SLO",
    "--max-gpus": "GPU budget",
    "--gpu": "GPU types",
    "--model": "Model",
    "--isl": "ISL",
    "--osl": "OSL",
    "--rate": "Arrival rate",
    "--concurrency": "Concurrent clients",
    "--trace": "Trace CSV",
    "--spec": "Fleet YAML",
    "--price-per-gpu-hour": "Price per GPU-hour",
    "--percentile": "Percentile",
}
"""CLI flag -> the UI field that sets it (errors raised by the library name the CLI flag)."""
_SCI = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?e[+-]?\d+(?![\w.])")
_LONG = re.compile(r"(?<![\w.])-?\d+\.\d{4,}(?![\w.])")
_TMP_PATH = re.compile(r"(?:/[^\s:/]+)*/(?:tmp|var/folders)/[^\s:]*")

LOG = logging.getLogger("planner.app")


def validation_text(exc: ValidationError) -> str:
    """One line from a pydantic error: the field path and the first message."""
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"]) or exc.title
    more = f" (and {len(exc.errors()) - 1} more)" if len(exc.errors()) > 1 else ""
    return f"{loc}: {err['msg']}{more}"


def ui_words(text: str, upload_name: str = "") -> str:
    """A library message in the UI's words: field names instead of CLI flags, no server paths,
    numbers rounded to 4 significant figures."""
    text = _TMP_PATH.sub(upload_name or "the uploaded file", text)
    for flag, word in sorted(FLAG_WORDS.items(), key=lambda kv: -len(kv[0])):
        text = text.replace(flag, word)
    text = _SCI.sub(lambda m: present.num(float(m.group(0))), text)
    return _LONG.sub(lambda m: present.num(float(m.group(0))), text)


def error_text(exc: BaseException, upload_name: str = "") -> str:
    """What the page shows for an error raised while answering a request."""
    if isinstance(exc, PlannerInputError):
        field = FLAG_WORDS.get(exc.field, exc.field)
        return ui_words(f"{field}: {exc.message}", upload_name)
    if isinstance(exc, ValidationError):
        return ui_words(validation_text(exc), upload_name)
    return f"unexpected error ({type(exc).__name__}): {exc}"


class FieldErrors:
    """Errors of the form's fields: each is shown under its own field; the form stays whole."""

    def __init__(self) -> None:
        self.messages: dict[str, str] = {}

    @contextmanager
    def field(self, name: str, upload_name: str = "") -> Iterator[None]:
        """Run a field's widgets; an error is shown right there and remembered under ``name``."""
        try:
            yield
        except Exception as exc:  # st.stop/rerun are BaseException and pass through
            if not isinstance(exc, PlannerInputError | ValidationError):
                LOG.exception("unexpected error in field %s", name)
            self.messages[name] = error_text(exc, upload_name).removeprefix(f"{name}: ")
            st.error(f"{name}: {self.messages[name]}", icon="⚠️")

    def __bool__(self) -> bool:
        return bool(self.messages)


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


def fmt(value: Any) -> str:
    """A number as people read it (``planner.reports.present.num``): 4 significant figures."""
    if isinstance(value, str):
        return value
    return present.num(value)


def fmt_ms(value: float | None) -> str:
    """Milliseconds with their unit."""
    return present.ms(value)


def fmt_money(value: float | None) -> str:
    """Dollars (cost per million tokens, per hour)."""
    return present.money(value)


def readable(frame: Any, keys: list[str] | None = None, percentile: str | None = None) -> Any:
    """A DataFrame of raw values shown for people: columns renamed with unit and percentile,
    numbers as text at 4 significant figures (counts exact, shares in %)."""
    out = frame.copy()
    for col in list(out.columns):
        key = str(col)
        out[col] = [present.show(key, v) for v in out[col]]
    out.columns = [present.label(str(c), percentile) for c in out.columns]
    return out[[present.label(k, percentile) for k in keys]] if keys else out


UNCALIBRATED_MARK = "†"
"""Beside every number priced without a kernel fit of the GPU's own."""


@st.cache_data(show_spinner=False)
def gpu_calibration(key: str) -> tuple[str, str]:
    """(kind, one line) of what prices this GPU's kernels (``kernels_db.transfer.calibration``):
    kind 'fitted', 'transferred:<donor>' or 'roofline_uncalibrated'; the line is empty when
    fitted."""
    from hardware.catalog import get_gpu
    from kernels_db.transfer import calibration

    spec = get_gpu(key)
    kind = str(calibration(spec)["kind"])
    if kind == "fitted":
        return kind, ""
    if kind.startswith("transferred:"):
        donor = get_gpu(kind.split(":", 1)[1]).name
        return "transferred", (
            f"{UNCALIBRATED_MARK} {spec.name} has no measured kernel data of its own: its numbers "
            f"use {donor}'s fit scaled by peak FLOP/s and bandwidth (transferred)."
        )
    return kind, (
        f"{UNCALIBRATED_MARK} {spec.name} has no measured kernel data: its numbers are the "
        "roofline model with default efficiencies (roofline_uncalibrated), not calibrated."
    )


def gpu_label(key: str) -> str:
    """The GPU's display name, marked when it has no calibrated kernel data (a prefill/decode
    pair of two types, ``pre+dec``: each role's)."""
    if "+" in key:
        pre, dec = key.split("+", 1)
        return f"prefill {gpu_label(pre)}, decode {gpu_label(dec)}"
    name = gpu_names().get(key, key)
    return f"{name} {UNCALIBRATED_MARK}" if gpu_calibration(key)[1] else name


def calibration_notes(keys: list[str] | tuple[str, ...], where: str) -> None:
    """One line per GPU among ``keys`` without calibrated kernel data (container
    ``uncalibrated_<where>``)."""
    types = [t for k in keys for t in k.split("+")]  # a prefill/decode pair: each type
    lines = [gpu_calibration(k)[1] for k in dict.fromkeys(types)]
    lines = [line for line in lines if line]
    if lines:
        with st.container(key=f"uncalibrated_{where}"):
            st.caption("  \n".join(lines))


def mark_stale(container: str, button: str) -> None:
    """Grey the results in container ``container`` and say which button refreshes them. The style
    goes first: Streamlit streams elements in order, so the page never shows the warning over a
    result that is not yet greyed."""
    st.markdown(
        f"<style>.st-key-{container}{{opacity:0.4;filter:grayscale(1)}}</style>",
        unsafe_allow_html=True,
    )
    st.warning(f"inputs changed - press {button}", icon="⏳")
