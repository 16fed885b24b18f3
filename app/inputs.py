"""Input widgets shared by the pages: model, GPUs, workload, SLOs, objective.

Shared inputs use one widget key on every page (``app.shared``) and are kept in the URL. Every
field checks its own value as it is drawn and shows the rule it breaks right under it, in the
rule's words ("must be > 0 ms"); the page then runs no request (``FieldErrors``).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

import streamlit as st

from app import shared
from app.ui import FieldErrors, gpu_names, model_names
from hardware.catalog import get_gpu
from hardware.errors import PlannerInputError
from planner.cli.field_help import description
from planner.model.bundled import MAX_CONFIG_BYTES, load_model, parse_config_text
from planner.model.spec import ModelSpec
from planner.workload.spec import LengthDist, LengthSpec, Workload, max_lengths, read_trace
from solvers.counts import MAX_BUDGET_GPUS
from solvers.plan import PlanRequest

DEFAULT_MODEL = str(shared.FIELDS["model"].default)
DEFAULT_GPU = "h200_sxm"
DEFAULT_TTFT_MS = float(shared.FIELDS["ttft"].default)
"""p90 TTFT SLO of the default plan: 64 clients of 4000-token prompts on 8 GPUs queue for prefill
(start-up wave and closed-loop queueing), so about 3 s is the best a 70B model reaches on 8 x
H200."""
DEFAULT_TPOT_MS = float(shared.FIELDS["tpot"].default)
PERCENTILES = ("p50", "p90", "p99")
Percentile = Literal["p50", "p90", "p99"]
LENGTH_SHAPES: tuple[LengthDist, ...] = ("fixed", "uniform", "normal", "lognormal")
MAX_CV = 4.0
OBJECTIVE_LABELS = {
    "cost": "cost (cheapest that meets the SLO)",
    "throughput-per-gpu": "output tokens/s per GPU",
    "gpus": "fewest GPUs",
    "energy": "fewest joules per token",
}


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


def flag(errors: FieldErrors, name: str, message: str) -> None:
    """Mark field ``name`` invalid: its message right under it, and no request runs."""
    errors.messages[name] = message
    st.markdown(f":red[⚠️ {name}: {message}]")


def _shared_number(
    errors: FieldErrors, name: str, label: str, rule: tuple[float, float | None, str], **kw: Any
) -> Any:
    """A shared number field checked against ``rule`` = (lowest, highest or None, unit words):
    the lowest is exclusive for floats (> 0 ms) and inclusive for whole numbers (>= 1)."""
    value = st.number_input(label, key=shared.seed(name), **kw)
    shared.remember(name, value)
    low, high, unit = rule
    if isinstance(value, float) and value <= low:
        flag(errors, label, f"must be > {low:g} {unit}")
    elif isinstance(value, int) and value < low:
        flag(errors, label, f"must be ≥ {low:g} {unit}")
    elif high is not None and value > high:
        flag(errors, label, f"must be ≤ {high:,.10g} {unit}")
    return value


@st.cache_resource(show_spinner=False)
def bundled_spec(key: str) -> ModelSpec:
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


def bundled_model_input(label: str = "Bundled model") -> str:
    """The shared bundled model key."""
    names = model_names()
    keys = list(names)
    key = st.selectbox(label, keys, format_func=lambda k: names[k], key=shared.seed("model", keys))
    return str(shared.remember("model", key))


def model_input(page: str) -> ModelChoice | None:
    """Bundled model or an uploaded ``config.json``; None until a file is uploaded."""
    source = st.radio(
        "Model", ["Bundled", "Upload config.json"], horizontal=True, key=f"{page}_model_src"
    )
    if source == "Bundled":
        key = bundled_model_input()
        return ModelChoice(ref=key, spec=bundled_spec(key), uploaded=False)
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
        f"Uploaded: {model_id or spec.name} ({spec.family}, {spec.num_layers} layers, "
        f"{spec.quant.weight_format} weights)"
    )
    return ModelChoice(
        ref=upload.name, spec=spec, uploaded=True, raw_text=text, model_id=spec.hf_id
    )


def model_label(choice: ModelChoice) -> str:
    """How the page names a model: the bundled display name, or the uploaded model's id."""
    return choice.model_id or choice.spec.name


def gpus_input(errors: FieldErrors, label: str = "GPU types") -> list[str]:
    """The shared GPU keys (at least one)."""
    names = gpu_names()
    chosen = st.multiselect(
        label,
        list(names),
        format_func=lambda k: names[k],
        key=shared.seed("gpus", list(names)),
    )
    shared.remember("gpus", list(chosen))
    if not chosen:
        flag(errors, label, "choose at least one GPU type")
    return list(chosen)


def budget_input(errors: FieldErrors) -> int:
    """The shared GPU budget."""
    return int(
        _shared_number(
            errors,
            "max_gpus",
            "GPU budget (max GPUs)",
            (1, MAX_BUDGET_GPUS, "GPUs"),
            step=1,
            help=f"Up to {MAX_BUDGET_GPUS:,} GPUs, the largest budget the search prices.",
        )
    )


def price_input(errors: FieldErrors, page: str, gpus: list[str]) -> float | None:
    """Price per GPU-hour override in USD (None = each GPU's catalog price, listed below it)."""
    label = "Price per GPU-hour (USD, 0 = catalog price)"
    price = st.number_input(
        label,
        value=0.0,
        step=0.1,
        format="%.2f",
        key=f"{page}_price",
        help=description(PlanRequest, "price_per_gpu_hour"),
    )
    if price < 0:
        flag(errors, label, "must be ≥ 0 USD")
    catalog = ", ".join(f"{get_gpu(g).name} ${get_gpu(g).price_per_gpu_hour_usd:.2f}" for g in gpus)
    st.caption(f"Catalog prices: {catalog}")
    return float(price) if price > 0 else None


def _shape_input(errors: FieldErrors, page: str, which: str) -> tuple[LengthDist, float]:
    cols = st.columns(2)
    shape = cols[0].selectbox(
        f"{which.upper()} distribution", LENGTH_SHAPES, key=f"{page}_{which}_dist"
    )
    label = f"{which.upper()} CV"
    cv = cols[1].number_input(
        label,
        value=0.0 if shape == "fixed" else 0.5,
        step=0.1,
        disabled=shape == "fixed",
        key=f"{page}_{which}_cv_{shape == 'fixed'}",
    )
    if shape != "fixed" and not 0 <= cv <= MAX_CV:
        flag(errors, label, f"must be between 0 and {MAX_CV:g}")
    return shape, 0.0 if shape == "fixed" else float(cv)


def _length_input(errors: FieldErrors, page: str, which: str) -> LengthSpec | None:
    label = f"{which.upper()} mean (tokens)"
    mean = _shared_number(errors, which, label, (1, None, "token"), step=100)
    shape, cv = _shape_input(errors, page, which)
    if label in errors.messages:
        return None
    return LengthSpec(mean=float(mean), dist=shape, cv=cv)


def _trace_lengths(data: bytes) -> tuple[LengthSpec, LengthSpec]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.csv"
        path.write_bytes(data)
        return read_trace(path)


def lengths_input(errors: FieldErrors, page: str) -> tuple[LengthSpec, LengthSpec] | None:
    """ISL and OSL: values (shared), distributions, or a CSV trace with columns isl,osl."""
    how = st.radio("Lengths", ["Values", "CSV trace"], horizontal=True, key=f"{page}_len_src")
    if how == "CSV trace":
        upload = st.file_uploader(
            "Trace CSV (columns isl,osl; one request per row)", type=["csv"], key=f"{page}_trace"
        )
        if upload is not None:
            with errors.field("Trace CSV", upload.name):
                isl, osl = _trace_lengths(upload.getvalue())
                st.caption(
                    f"Trace: {len(isl.samples):,} requests, mean ISL {isl.mean:,.0f}, mean OSL "
                    f"{osl.mean:,.0f} tokens"
                )
                return isl, osl
            return None
        st.caption("No trace uploaded yet: using the values below.")
    isl_v, osl_v = _length_input(errors, page, "isl"), _length_input(errors, page, "osl")
    return (isl_v, osl_v) if isl_v is not None and osl_v is not None else None


def check_context(
    errors: FieldErrors, model: ModelChoice | None, lengths: tuple[LengthSpec, LengthSpec] | None
) -> tuple[int, int] | None:
    """The longest prompt and answer the deployment must accept (``planner.workload.spec
    .max_lengths``, as ``planner plan`` computes them), or a message under the ISL field when a
    mean request is longer than the model's maximum positions."""
    if model is None or lengths is None:
        return None
    isl, osl = (max(1, round(x.mean)) for x in lengths)
    try:
        return max_lengths(
            isl, osl, None, None, model.spec.max_position_embeddings, model_label(model)
        )
    except PlannerInputError as exc:
        flag(errors, "ISL mean (tokens)", exc.message)
        return None


def load_input(errors: FieldErrors) -> dict[str, float | int]:
    """Closed loop (concurrent clients) or open loop (requests/s); returns Workload keyword args."""
    modes = list(shared.FIELDS["load"].choices)
    mode = st.radio("Load", modes, horizontal=True, key=shared.seed("load", modes))
    shared.remember("load", mode)
    if mode == "Concurrency":
        n = _shared_number(
            errors,
            "conc",
            "Concurrent clients",
            (1, 100_000, "client"),
            step=8,
            help=description(Workload, "concurrency"),
        )
        return {"concurrency": int(n)}
    if mode == "Rate":
        r = _shared_number(
            errors,
            "rate",
            "Arrival rate (requests/s, Poisson)",
            (0, 100_000, "requests/s"),
            step=1.0,
            help=description(Workload, "rate_per_s"),
        )
        return {"rate_per_s": float(r)}
    return {}


def make_workload(
    isl: LengthSpec, osl: LengthSpec, load: dict[str, float | int]
) -> Workload | None:
    """A library ``Workload``, or None when no load was given (plan for best throughput)."""
    if not load:
        return None
    return Workload(isl=isl, osl=osl, **load)  # type: ignore[arg-type]


def slo_input(errors: FieldErrors, page: str, robust_option: bool = False) -> SloChoice:
    """TTFT and TPOT targets at one percentile (shared)."""
    cols = st.columns(2)
    with cols[0]:
        ttft = _shared_number(
            errors,
            "ttft",
            "TTFT SLO (ms)",
            (0, None, "ms"),
            step=100.0,
            help=description(PlanRequest, "ttft_ms"),
        )
    with cols[1]:
        tpot = _shared_number(
            errors,
            "tpot",
            "TPOT SLO (ms)",
            (0, None, "ms"),
            step=5.0,
            help=description(PlanRequest, "tpot_ms"),
        )
    pct = st.selectbox(
        "Percentile",
        PERCENTILES,
        key=shared.seed("pct", list(PERCENTILES)),
        help=description(PlanRequest, "percentile"),
    )
    shared.remember("pct", pct)
    robust = not robust_option or st.checkbox(
        "Meet the SLO at the upper edge of the 80% prediction band (as `planner plan` does)",
        value=True,
        key=f"{page}_robust",
        help="Off: the SLO is checked against the point prediction; the band and the headroom "
        "to its edge are shown with the recommendation either way.",
    )
    return SloChoice(
        ttft_ms=float(ttft),
        tpot_ms=float(tpot),
        percentile=cast(Percentile, pct),
        confidence=0.8 if robust else 0.0,
    )


def choice_input(name: str, label: str, labels: dict[str, str] | None = None) -> str:
    """A shared selectbox among ``shared.FIELDS[name].choices`` (or ``labels``' keys)."""
    options: list[str] = list(labels or shared.FIELDS[name].choices)
    words: dict[str, str] = labels or {}

    def shown(value: str) -> str:
        return words.get(value, value)

    value = st.selectbox(label, options, format_func=shown, key=shared.seed(name, options))
    return str(shared.remember(name, value))


def objective_input() -> str:
    """The shared objective (default: cost, the cheapest plan that meets the SLO)."""
    return choice_input("objective", "Objective", OBJECTIVE_LABELS)
