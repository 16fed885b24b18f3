"""Input widgets shared by the pages: model, GPUs, workload, SLOs.

Each function draws its widgets (keys prefixed per page so pages keep their own values) and returns
library objects (``ModelSpec``, ``Workload``); bad input raises ``PlannerInputError`` for
``ui.guarded`` to show as one line.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import streamlit as st

from app.ui import gpu_names, model_names
from hardware.catalog import get_gpu
from hardware.errors import PlannerInputError
from planner.cli.field_help import description
from planner.model.bundled import MAX_CONFIG_BYTES, load_model, parse_config_text
from planner.model.spec import ModelSpec
from planner.workload.spec import LengthDist, LengthSpec, Workload, read_trace
from solvers.plan import PlanRequest

DEFAULT_MODEL = "llama-3.1-70b"
DEFAULT_GPU = "h200_sxm"
DEFAULT_ISL = 4000
DEFAULT_OSL = 500
DEFAULT_TTFT_MS = 5000.0
"""p90 TTFT SLO of the default plan: 64 clients of 4000-token prompts on 8 GPUs queue for prefill
(start-up wave and closed-loop queueing), so about 3 s is the best a 70B model reaches on 8 x
H200."""
DEFAULT_TPOT_MS = 40.0
PERCENTILES = ("p50", "p90", "p99")
LENGTH_SHAPES: tuple[LengthDist, ...] = ("fixed", "uniform", "normal", "lognormal")


@dataclass(frozen=True)
class ModelChoice:
    """The model to plan for: a bundled key, or an uploaded config parsed into a spec."""

    ref: str
    spec: ModelSpec
    uploaded: bool
    raw_text: str = ""
    model_id: str = ""


@dataclass(frozen=True)
class SloChoice:
    """Latency targets at one percentile, milliseconds."""

    ttft_ms: float
    tpot_ms: float
    percentile: Literal["p50", "p90", "p99"]
    confidence: float = 0.8  # > 0: meet the SLO at the upper edge of the band of this level


@st.cache_resource(show_spinner=False)
def _bundled_spec(key: str) -> ModelSpec:
    return load_model(key)


@st.cache_data(show_spinner=False, max_entries=16)
def _uploaded_spec(text: str, name: str, model_id: str) -> ModelSpec:
    return parse_config_text(text, name=Path(name).stem, model_id=model_id)


def _upload_text(data: bytes, name: str) -> str:
    if len(data) > MAX_CONFIG_BYTES:  # refuse before decoding megabytes
        raise PlannerInputError(
            "config.json", f"{name} is larger than {MAX_CONFIG_BYTES} bytes; not a config.json"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PlannerInputError("config.json", f"{name} is not UTF-8 text") from exc


def model_input(page: str) -> ModelChoice | None:
    """Bundled model or an uploaded ``config.json``; None until a file is uploaded."""
    source = st.radio(
        "Model", ["Bundled", "Upload config.json"], horizontal=True, key=f"{page}_model_src"
    )
    if source == "Bundled":
        names = model_names()
        keys = list(names)
        key = st.selectbox(
            "Bundled model",
            keys,
            index=keys.index(DEFAULT_MODEL),
            format_func=lambda k: names[k],
            key=f"{page}_model",
        )
        return ModelChoice(ref=key, spec=_bundled_spec(key), uploaded=False)
    upload = st.file_uploader(
        "config.json (Hugging Face format)", type=["json"], key=f"{page}_model_file"
    )
    if upload is None:
        st.info("Upload a config.json to plan for it.")
        return None
    model_id = st.text_input(
        "Model id of these weights (HF id such as Qwen/Qwen3-32B-FP8, or a local path)",
        key=f"{page}_model_id",
        help="The identity the engine configs load. Without it the plan is shown but no engine "
        "configs are written: a config.json alone does not say whose weights it describes.",
    ).strip()
    text = _upload_text(upload.getvalue(), upload.name)
    spec = _uploaded_spec(text, upload.name, model_id)
    st.caption(
        f"Uploaded: {spec.name} ({spec.family}, {spec.num_layers} layers, "
        f"{spec.quant.weight_format} weights)"
    )
    return ModelChoice(
        ref=upload.name, spec=spec, uploaded=True, raw_text=text, model_id=spec.hf_id
    )


def gpu_input(page: str, label: str = "GPU type") -> str:
    """One GPU key."""
    names = gpu_names()
    keys = list(names)
    return st.selectbox(
        label,
        keys,
        index=keys.index(DEFAULT_GPU),
        format_func=lambda k: names[k],
        key=f"{page}_gpu",
    )


def gpus_input(
    page: str, default: tuple[str, ...] = (DEFAULT_GPU,), label: str = "GPU types"
) -> list[str]:
    """Several GPU keys (at least one)."""
    names = gpu_names()
    chosen = st.multiselect(
        label,
        list(names),
        default=list(default),
        format_func=lambda k: names[k],
        key=f"{page}_gpus",
    )
    if not chosen:
        raise PlannerInputError("GPU types", "choose at least one GPU type")
    return list(chosen)


def price_input(page: str, gpus: list[str]) -> float | None:
    """Price per GPU-hour override in USD (None = each GPU's catalog price, listed below it)."""
    price = st.number_input(
        "Price per GPU-hour (USD, 0 = catalog price)",
        min_value=0.0,
        value=0.0,
        step=0.1,
        format="%.2f",
        key=f"{page}_price",
        help=description(PlanRequest, "price_per_gpu_hour"),
    )
    catalog = ", ".join(f"{get_gpu(g).name} ${get_gpu(g).price_per_gpu_hour_usd:.2f}" for g in gpus)
    st.caption(f"Catalog prices: {catalog}")
    return float(price) if price > 0 else None


def _length_input(page: str, which: str, default: int) -> LengthSpec:
    cols = st.columns(3)
    mean = cols[0].number_input(
        f"{which.upper()} mean (tokens)",
        min_value=1,
        max_value=1_000_000,
        value=default,
        step=100,
        key=f"{page}_{which}",
    )
    shape = cols[1].selectbox(
        f"{which.upper()} distribution", LENGTH_SHAPES, key=f"{page}_{which}_dist"
    )
    cv = cols[2].number_input(
        f"{which.upper()} CV",
        min_value=0.0,
        max_value=4.0,
        value=0.0 if shape == "fixed" else 0.5,
        step=0.1,
        disabled=shape == "fixed",
        key=f"{page}_{which}_cv_{shape == 'fixed'}",
    )
    return LengthSpec(mean=float(mean), dist=shape, cv=0.0 if shape == "fixed" else float(cv))


def _trace_lengths(data: bytes) -> tuple[LengthSpec, LengthSpec]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.csv"
        path.write_bytes(data)
        return read_trace(path)


def lengths_input(page: str) -> tuple[LengthSpec, LengthSpec]:
    """ISL and OSL: fixed values, distributions, or a CSV trace with columns isl,osl."""
    how = st.radio("Lengths", ["Values", "CSV trace"], horizontal=True, key=f"{page}_len_src")
    if how == "CSV trace":
        upload = st.file_uploader(
            "Trace CSV (columns isl,osl; one request per row)", type=["csv"], key=f"{page}_trace"
        )
        if upload is not None:
            isl, osl = _trace_lengths(upload.getvalue())
            st.caption(
                f"Trace: {len(isl.samples)} requests, mean ISL {isl.mean:.0f}, mean OSL "
                f"{osl.mean:.0f}"
            )
            return isl, osl
        st.caption("No trace uploaded yet: using the values below.")
    return _length_input(page, "isl", DEFAULT_ISL), _length_input(page, "osl", DEFAULT_OSL)


def load_input(page: str, default_mode: str = "Concurrency") -> dict[str, float | int]:
    """Closed loop (concurrent clients) or open loop (requests/s); returns Workload keyword args."""
    modes = ["Concurrency", "Rate", "Best throughput"]
    mode = st.radio(
        "Load", modes, index=modes.index(default_mode), horizontal=True, key=f"{page}_load"
    )
    if mode == "Concurrency":
        n = st.number_input(
            "Concurrent clients",
            min_value=1,
            max_value=100_000,
            value=64,
            step=8,
            key=f"{page}_conc",
            help=description(Workload, "concurrency"),
        )
        return {"concurrency": int(n)}
    if mode == "Rate":
        r = st.number_input(
            "Arrival rate (requests/s, Poisson)",
            min_value=0.01,
            max_value=100_000.0,
            value=5.0,
            step=1.0,
            key=f"{page}_rate",
            help=description(Workload, "rate_per_s"),
        )
        return {"rate_per_s": float(r)}
    return {}


def workload_input(
    page: str, default_load: str = "Concurrency"
) -> tuple[LengthSpec, LengthSpec, dict[str, float | int]]:
    """Lengths and load of the workload (the load is empty for 'best throughput')."""
    isl, osl = lengths_input(page)
    return isl, osl, load_input(page, default_load)


def make_workload(
    isl: LengthSpec, osl: LengthSpec, load: dict[str, float | int]
) -> Workload | None:
    """A library ``Workload``, or None when no load was given (plan for best throughput)."""
    if not load:
        return None
    return Workload(isl=isl, osl=osl, **load)  # type: ignore[arg-type]


def slo_input(page: str, robust_option: bool = False) -> SloChoice:
    """TTFT and TPOT targets at one percentile."""
    cols = st.columns(3)
    ttft = cols[0].number_input(
        "TTFT SLO (ms)",
        min_value=0.001,
        max_value=1e7,
        value=DEFAULT_TTFT_MS,
        step=100.0,
        key=f"{page}_ttft",
        help=description(PlanRequest, "ttft_ms"),
    )
    tpot = cols[1].number_input(
        "TPOT SLO (ms)",
        min_value=0.001,
        max_value=1e6,
        value=DEFAULT_TPOT_MS,
        step=5.0,
        key=f"{page}_tpot",
        help=description(PlanRequest, "tpot_ms"),
    )
    pct = cols[2].selectbox(
        "Percentile",
        PERCENTILES,
        index=1,
        key=f"{page}_pct",
        help=description(PlanRequest, "percentile"),
    )
    robust = not robust_option or st.checkbox(
        "Meet the SLO at the upper edge of the 80% prediction band (as `planner plan` does)",
        value=True,
        key=f"{page}_robust",
        help="Off: the SLO is checked against the point prediction; the band and the headroom "
        "to its edge are shown with the recommendation either way.",
    )
    return SloChoice(
        ttft_ms=float(ttft), tpot_ms=float(tpot), percentile=pct, confidence=0.8 if robust else 0.0
    )
