"""Traffic page: a timed trace in (uploaded or generated); GPUs per window and autoscaled vs
static cost out."""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app import inputs as ui_in
from app import shared
from app.plan_form import invalid_note
from app.plan_results import config_text
from app.planning import BACKENDS
from app.prefix_view import prefix_input, show_prefix
from app.ui import FieldErrors, calibration_notes, fmt, fmt_money, gpu_label, guarded, mark_stale
from hardware.errors import PlannerInputError
from planner.cli.output import to_jsonable
from planner.reports import present
from planner.reports.capacity_sheet import capacity_xlsx
from planner.workload.spec import max_lengths
from planner.workload.trace_gen import AgenticSpec, TraceSpec, generate, generate_agentic
from planner.workload.traces import Trace, read_trace
from solvers.capacity import CapacityRequest, capacity
from solvers.prefix_tiers import PrefixRequest, prefix_capacity

st.header("Traffic", anchor=False)
st.caption(
    "Plan for traffic as it arrives: a time-stamped trace (ours: arrival_s,isl,osl, or BurstGPT's "
    "columns) is split into windows; each window gets the fewest replicas that meet the SLO at the "
    "rate its bursts reach. Autoscaling is compared with a static fleet sized for the peak and one "
    "sized for the mean."
)


@st.cache_data(show_spinner=False, max_entries=4)
def _uploaded(data: bytes, name: str) -> Trace:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / Path(name).name
        path.write_bytes(data)
        return read_trace(path)


@st.cache_data(show_spinner=False, max_entries=4)
def _generated(spec: TraceSpec) -> Trace:
    return generate(spec)[0]


@st.cache_data(show_spinner=False, max_entries=8)
def _capacity(_trace: Trace, key: str, req: CapacityRequest) -> dict[str, Any]:
    """The capacity answer as JSON-ready data (``key`` identifies the trace for the cache)."""
    return to_jsonable(capacity(_trace, req))


def _number(
    errors: FieldErrors,
    col: Any,
    name: str,
    label: str,
    default: float,
    rule: tuple[float, float, str],
    at_least: bool = False,
) -> float:
    """A page field (key ``traffic_<name>``) checked against ``rule`` = (lowest, highest, unit):
    above the lowest (at least it, with ``at_least``) and at most the highest."""
    with col:
        value = float(st.number_input(label, value=default, key=f"traffic_{name}"))
        low, high, unit = rule
        if (value < low if at_least else value <= low) or value > high:
            word = "≥" if at_least else ">"
            ui_in.flag(errors, label, f"must be {word} {low:g} and ≤ {high:,.10g} {unit}".strip())
    return value


def _check_lengths(errors: FieldErrors, isl: float, osl: float) -> None:
    """The shared mean lengths against their rules and the model's maximum positions (as
    ``planner plan`` checks them, ``planner.workload.spec.max_lengths``)."""
    if isl < 1 or osl < 1:
        ui_in.flag(errors, "Mean lengths", "ISL and OSL must be ≥ 1 token (set on the Plan page)")
        return
    key = str(shared.store()["model"])
    spec = ui_in.bundled_spec(key)
    try:
        max_lengths(isl, osl, None, None, spec.max_position_embeddings, spec.name)
    except PlannerInputError as exc:
        ui_in.flag(errors, "Mean lengths", exc.message)


def _trace_input(errors: FieldErrors) -> tuple[Trace | None, str]:
    source = st.radio(
        "Trace",
        ("Generate", "Agent sessions", "Upload CSV"),
        horizontal=True,
        key="traffic_source",
        help="Agent sessions: multi-turn prompts that share prefixes (with KV block ids), "
        "for prefix caching.",
    )
    if source == "Agent sessions":
        return _agentic(errors)
    if source == "Upload CSV":
        up = st.file_uploader(
            "arrival_s,isl,osl or BurstGPT CSV", type=["csv"], key="traffic_upload"
        )
        if up is None:
            st.caption("Upload a trace, or generate one.")
            return None, ""
        with errors.field("Trace CSV", up.name):
            return _uploaded(up.getvalue(), up.name), f"upload:{up.name}:{up.size}"
        return None, ""
    c1, c2 = st.columns(2)
    hours = _number(errors, c1, "hours", "Hours", 24.0, (0, 24.0 * 7, "h"))
    peak = _number(errors, c2, "peak", "Daily peak rate (requests/s)", 4.0, (0, 1e4, "requests/s"))
    ratio = _number(errors, c1, "ratio", "Peak / trough", 4.0, (1, 100.0, ""), at_least=True)
    bursts = _number(errors, c2, "bursts", "Bursts per day", 6.0, (0, 100.0, ""), at_least=True)
    minutes = _number(errors, c1, "burst_min", "Burst length (min)", 10.0, (0, 240.0, "min"))
    factor = _number(
        errors, c2, "burst_factor", "Burst factor (x rate)", 3.0, (1, 100.0, ""), at_least=True
    )
    seed = int(st.number_input("Seed", 0, 2**31 - 1, 7, key="traffic_seed"))
    isl, osl = (float(shared.store()[k]) for k in ("isl", "osl"))
    st.caption(f"Mean lengths from the shared workload: ISL {isl:,.0f}, OSL {osl:,.0f} tokens.")
    _check_lengths(errors, isl, osl)
    if errors:
        return None, ""
    spec = TraceSpec(
        hours=hours,
        peak_rate=peak,
        daily_ratio=ratio,
        bursts_per_day=bursts,
        burst_minutes=minutes,
        burst_factor=factor,
        isl_mean=isl,
        osl_mean=osl,
        seed=seed,
    )
    return _generated(spec), f"gen:{spec.model_dump_json()}"


def _agentic(errors: FieldErrors) -> tuple[Trace | None, str]:
    c1, c2 = st.columns(2)
    sessions = _number(errors, c1, "sessions", "Sessions", 200.0, (1, 20000, ""), at_least=True)
    rate = _number(errors, c2, "session_rate", "Session starts (per s)", 0.2, (0, 1e4, "per s"))
    seed = int(st.number_input("Seed", 0, 2**31 - 1, 7, key="traffic_agentic_seed"))
    if errors:
        return None, ""
    spec = AgenticSpec(sessions=int(sessions), session_rate=rate, seed=seed)
    return _agentic_trace(spec), f"agentic:{spec.model_dump_json()}"


@st.cache_data(show_spinner=False, max_entries=4)
def _agentic_trace(spec: AgenticSpec) -> Trace:
    return generate_agentic(spec)


@st.cache_data(show_spinner=False, max_entries=8)
def _prefix_capacity(
    _trace: Trace, key: str, req: CapacityRequest, preq: PrefixRequest
) -> dict[str, Any]:
    """The capacity answer with prefix caching priced (``key`` identifies the trace)."""
    return to_jsonable(prefix_capacity(_trace, req, preq))


def _prefix_fields(errors: FieldErrors) -> PrefixRequest:
    def number(col: Any, name: str, label: str, default: float) -> float:
        return _number(errors, col, name, label, default, (0, 1e5, "GiB"), at_least=True)

    return prefix_input(number)


def _request(errors: FieldErrors) -> CapacityRequest | None:
    model = ui_in.bundled_model_input("Model")
    gpus = ui_in.gpus_input(errors)
    slo = ui_in.slo_input(errors, "traffic")
    objective = ui_in.objective_input()
    backend = ui_in.choice_input("backend", "Backend", {b: b for b in BACKENDS})
    c1, c2 = st.columns(2)
    window = _number(errors, c1, "window", "Window (min)", 15.0, (1, 1440.0, "min"), at_least=True)
    scale_up = _number(
        errors, c2, "scale_up", "Scale-up delay (s)", 300.0, (0, 86400.0, "s"), at_least=True
    )
    worker = int(
        _number(
            errors, c1, "worker_gpus", "Most GPUs per replica", 4.0, (1, 64, "GPUs"), at_least=True
        )
    )
    if errors:
        return None
    return CapacityRequest(
        model=model,
        gpus=tuple(gpus),
        ttft_ms=slo.ttft_ms,
        tpot_ms=slo.tpot_ms,
        percentile=slo.percentile,
        window_s=window * 60,
        scale_up_s=scale_up,
        worker_max_gpus=worker,
        backend=backend,
        objective=objective,  # type: ignore[arg-type]
    )


def traffic_chart(cap: dict[str, Any]) -> go.Figure:
    """Arrival rate per window (bars) with the autoscaled GPUs on a second axis (steps)."""
    wins = cap["windows"]
    hours = [w["start_s"] / 3600.0 for w in wins]
    fig = go.Figure()
    fig.add_bar(
        x=hours, y=[w["rate"] for w in wins], name="arrival rate (req/s)", marker_color="#9ecae1"
    )
    fig.add_scatter(
        x=hours,
        y=[w["design_rate"] for w in wins],
        name="design rate (req/s)",
        mode="lines",
        line={"color": "#3182bd", "dash": "dot"},
    )
    fig.add_scatter(
        x=hours,
        y=[w["gpus"] for w in wins],
        name="GPUs (autoscaled)",
        yaxis="y2",
        line={"shape": "hv", "color": "#d62728"},
    )
    fig.update_layout(
        xaxis={"title": "window start (h)", "tickformat": ",.3~g"},
        yaxis={"title": "requests/s", "tickformat": ",.3~g", "rangemode": "tozero"},
        yaxis2={
            "title": "GPUs",
            "overlaying": "y",
            "side": "right",
            "rangemode": "tozero",
            "tickformat": ",d",
            "dtick": max(1, math.ceil(max((w["gpus"] for w in wins), default=1) / 5)),
            "showgrid": False,
        },
        legend={"orientation": "h"},
        margin={"t": 30},
    )
    return fig


def _fleet_frame(cap: dict[str, Any]) -> pd.DataFrame:
    rows = []
    for name, key in (
        ("autoscaled", "autoscaled"),
        ("static for the peak", "static_peak"),
        ("static for the mean", "static_mean"),
    ):
        f = cap[key]
        rows.append(
            {
                "Deployment": name,
                "GPUs (most at once)": present.count(f["gpus"]),
                "GPU-hours": present.num(f["gpu_hours"]),
                "Cost ($)": present.num(f["cost"]),
                "Windows missing the SLO": present.count(f["windows_violating"]),
            }
        )
    return pd.DataFrame(rows)


def _windows(cap: dict[str, Any]) -> pd.DataFrame:
    pct = cap["slo"]["percentile"]
    return pd.DataFrame(
        [
            {
                "Start (h)": present.num(w["start_s"] / 3600),
                "Requests": present.count(w["requests"]),
                "Rate (requests/s)": present.num(w["rate"]),
                "Design rate (requests/s)": present.num(w["design_rate"]),
                "Gap CV": present.num(w["arrival_cv"]),
                "GPUs": present.count(w["gpus"]),
                f"TTFT {pct} (ms)": present.num(w["ttft_ms"][pct]),
                f"TPOT {pct} (ms)": present.num(w["tpot_ms"][pct]),
                "Meets the SLO": "yes" if w["meets_slo"] else "no",
            }
            for w in cap["windows"]
        ]
    )


def _show(cap: dict[str, Any], objective: str) -> None:
    auto, peak, mean = cap["autoscaled"], cap["static_peak"], cap["static_mean"]
    with st.container(border=True, key="traffic_answer"):
        gpu = str(cap["gpu"])
        st.caption(f"Each window sized by the objective: {objective}")
        st.markdown(f"**Replica:** {config_text(cap['deployment'], None, gpu_label(gpu))}")
        m1, m2, m3 = st.columns(3)
        m1.metric("Autoscaled", fmt_money(auto["cost"]))
        m1.caption(f"{fmt(auto['gpu_hours'])} GPU-hours")
        m2.metric("Static for the peak", fmt_money(peak["cost"]))
        m2.caption(f"{present.count(peak['gpus'])} GPUs all day")
        m3.metric("Static for the mean", fmt_money(mean["cost"]))
        m3.caption(f"misses the SLO in {present.count(mean['windows_violating'])} windows")
        calibration_notes([gpu], "traffic")
    show_prefix(cap)
    st.plotly_chart(traffic_chart(cap), key="traffic_chart")
    st.dataframe(_fleet_frame(cap), hide_index=True, key="traffic_fleet")
    st.dataframe(_windows(cap), hide_index=True, key="traffic_windows")
    st.caption(str(cap["method"]))
    d1, d2 = st.columns(2)
    d1.download_button(
        "capacity.json (for planner simulate --deployment)",
        json.dumps(cap, indent=2),
        file_name="capacity.json",
        key="traffic_json",
    )
    d2.download_button(
        "capacity.xlsx", capacity_xlsx(cap), file_name="capacity.xlsx", key="traffic_xlsx"
    )


def _page() -> None:
    errors = FieldErrors()
    button = st.sidebar.container()
    results = st.container()
    with st.sidebar:
        shared.bad_query_note()
        st.markdown("##### Model, GPUs and targets")
        req = _request(errors)
        st.markdown("##### Traffic")
        trace, key = _trace_input(errors)
        preq = None
        if trace is not None and trace.blocks is not None:
            st.markdown("##### Prefix caching (the trace has KV block ids)")
            preq = _prefix_fields(errors)
    pressed = button.button(
        "Size the fleet",
        type="primary",
        key="traffic_button",
        disabled=bool(errors) or trace is None,
        width="stretch",
    )
    given = (
        (key, req.model_dump_json(), preq.model_dump_json() if preq else "")
        if req is not None and trace is not None and not errors
        else None
    )
    with results:
        invalid_note(errors, "size the fleet")
        if trace is not None:
            st.caption(
                f"{len(trace):,} requests over {trace.duration_s / 3600:.3g} h ({trace.layout})"
            )
        fresh = pressed or "traffic_result" not in st.session_state
        if given is not None and trace is not None and req is not None and fresh:
            st.session_state["traffic_result"] = None  # a failed run leaves no stale answer
            with guarded("results"), st.spinner("sizing every window ..."):
                cap = (
                    _prefix_capacity(trace, key, req, preq)
                    if preq is not None
                    else _capacity(trace, key, req)
                )
                st.session_state["traffic_result"] = (cap, given)
        result = st.session_state.get("traffic_result")
        if result is not None:
            cap, used = result
            if given != used:
                mark_stale("traffic_results", "Size the fleet")
            with guarded("results"), st.container(key="traffic_results"):
                _show(cap, json.loads(used[1]).get("objective", "cost"))


_page()
