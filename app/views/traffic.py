"""Traffic page: a timed trace in (uploaded or generated); GPUs per window and autoscaled vs
static cost out."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app.planning import BACKENDS
from app.ui import fmt, fmt_money, gpu_names, guarded, model_names
from planner.cli.output import to_jsonable
from planner.reports.capacity_sheet import capacity_xlsx
from planner.workload.trace_gen import TraceSpec, generate
from planner.workload.traces import Trace, read_trace
from solvers.capacity import CapacityRequest, capacity

st.header("Traffic")
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


def _trace_input() -> tuple[Trace | None, str]:
    source = st.radio("Trace", ("Generate", "Upload CSV"), horizontal=True, key="traffic_source")
    if source == "Upload CSV":
        up = st.file_uploader(
            "arrival_s,isl,osl or BurstGPT CSV", type=["csv"], key="traffic_upload"
        )
        if up is None:
            return None, ""
        return _uploaded(up.getvalue(), up.name), f"upload:{up.name}:{up.size}"
    c1, c2, c3 = st.columns(3)
    spec = TraceSpec(
        hours=c1.number_input("Hours", 1.0, 24.0 * 7, 24.0, key="traffic_hours"),
        peak_rate=c1.number_input("Daily peak rate (req/s)", 0.01, 1e4, 4.0, key="traffic_peak"),
        daily_ratio=c1.number_input("Peak / trough", 1.0, 100.0, 4.0, key="traffic_ratio"),
        bursts_per_day=c2.number_input("Bursts per day", 0.0, 100.0, 6.0, key="traffic_bursts"),
        burst_minutes=c2.number_input(
            "Burst length (min)", 1.0, 240.0, 10.0, key="traffic_burst_min"
        ),
        burst_factor=c2.number_input(
            "Burst factor (x rate)", 1.0, 100.0, 3.0, key="traffic_burst_factor"
        ),
        isl_mean=c3.number_input("Mean ISL (tokens)", 1.0, 1e6, 2000.0, key="traffic_isl"),
        osl_mean=c3.number_input("Mean OSL (tokens)", 1.0, 1e6, 400.0, key="traffic_osl"),
        seed=int(c3.number_input("Seed", 0, 2**31 - 1, 7, key="traffic_seed")),
    )
    return _generated(spec), f"gen:{spec.model_dump_json()}"


def _request() -> CapacityRequest:
    c1, c2, c3 = st.columns(3)
    models, gpus = model_names(), gpu_names()
    model = c1.selectbox(
        "Model",
        list(models),
        index=list(models).index("llama-3.1-70b") if "llama-3.1-70b" in models else 0,
        format_func=models.get,
        key="traffic_model",
    )
    gpu = c1.selectbox(
        "GPU",
        list(gpus),
        index=list(gpus).index("h100_sxm") if "h100_sxm" in gpus else 0,
        format_func=gpus.get,
        key="traffic_gpu",
    )
    backend = c1.selectbox("Backend", BACKENDS, key="traffic_backend")
    ttft = c2.number_input("TTFT SLO (ms)", 1.0, 1e6, 800.0, key="traffic_ttft")
    tpot = c2.number_input("TPOT SLO (ms)", 1.0, 1e4, 30.0, key="traffic_tpot")
    pct = c2.selectbox("Percentile", ("p50", "p90", "p99"), index=1, key="traffic_pct")
    window = c3.number_input("Window (min)", 1.0, 1440.0, 15.0, key="traffic_window")
    scale_up = c3.number_input("Scale-up delay (s)", 0.0, 86400.0, 300.0, key="traffic_scale_up")
    worker = int(c3.number_input("Most GPUs per replica", 1, 64, 4, key="traffic_worker_gpus"))
    return CapacityRequest(
        model=model,
        gpus=(gpu,),
        ttft_ms=ttft,
        tpot_ms=tpot,
        percentile=pct,
        window_s=window * 60,
        scale_up_s=scale_up,
        worker_max_gpus=worker,
        backend=backend,
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
        xaxis_title="window start (h)",
        yaxis_title="requests/s",
        yaxis2={"title": "GPUs", "overlaying": "y", "side": "right", "rangemode": "tozero"},
        legend={"orientation": "h"},
        margin={"t": 30},
    )
    return fig


def _fleet_frame(cap: dict[str, Any]) -> pd.DataFrame:
    rows = []
    for name, key in (
        ("autoscaled", "autoscaled"),
        ("static peak", "static_peak"),
        ("static mean", "static_mean"),
    ):
        f = cap[key]
        rows.append(
            {
                "deployment": name,
                "GPUs (max)": f["gpus"],
                "GPU-hours": f["gpu_hours"],
                "cost ($)": f["cost"],
                "windows violating SLO": f["windows_violating"],
            }
        )
    return pd.DataFrame(rows)


def _show(cap: dict[str, Any]) -> None:
    auto, peak, mean = cap["autoscaled"], cap["static_peak"], cap["static_mean"]
    m1, m2, m3 = st.columns(3)
    m1.metric(
        "Autoscaled",
        fmt_money(auto["cost"]),
        f"{fmt(auto['gpu_hours'])} GPU-hours",
        delta_color="off",
    )
    m2.metric(
        "Static peak", fmt_money(peak["cost"]), f"{peak['gpus']} GPUs all day", delta_color="off"
    )
    m3.metric(
        "Static mean",
        fmt_money(mean["cost"]),
        f"misses the SLO in {mean['windows_violating']} windows",
        delta_color="off",
    )
    st.plotly_chart(traffic_chart(cap), key="traffic_chart")
    st.dataframe(_fleet_frame(cap), hide_index=True, key="traffic_fleet")
    pct = cap["slo"]["percentile"]
    frame = pd.DataFrame(
        [
            {
                "start (h)": w["start_s"] / 3600,
                "requests": w["requests"],
                "rate (req/s)": w["rate"],
                "design rate (req/s)": w["design_rate"],
                "gap CV": w["arrival_cv"],
                "GPUs": w["gpus"],
                f"TTFT {pct} (ms)": w["ttft_ms"][pct],
                f"TPOT {pct} (ms)": w["tpot_ms"][pct],
                "meets SLO": w["meets_slo"],
            }
            for w in cap["windows"]
        ]
    )
    st.dataframe(frame, hide_index=True, key="traffic_windows")
    st.caption(f"Replica: {cap['windows'][0]['config'].split(' x ', 1)[1]}. {cap['method']}")
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
    with guarded("inputs"):
        trace, key = _trace_input()
        req = _request()
        pressed = st.button("Size the fleet", type="primary", key="traffic_button")
        if trace is None:
            st.info("Upload a trace or generate one.")
            return
        st.caption(f"{len(trace):,} requests over {trace.duration_s / 3600:.3g} h ({trace.layout})")
        if pressed or "traffic_result" not in st.session_state:
            st.session_state["traffic_result"] = None
            with st.spinner("sizing every window ..."):
                st.session_state["traffic_result"] = _capacity(trace, key, req)
    cap = st.session_state.get("traffic_result")
    if cap is not None:
        with guarded("results"):
            _show(cap)


_page()
