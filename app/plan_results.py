"""Plan page results: recommendation card, Pareto chart, top-N, breakdowns, provenance, downloads.

Everything shown is read from the plan dict (``PlanResult.to_plan_dict()``, the same JSON that
``planner plan --format json`` prints); tables come from ``planner.reports.tables`` so the page, the
spreadsheet and the HTML report agree.
"""

from __future__ import annotations

import importlib.util
import io
import json
import zipfile
from collections.abc import Mapping
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app.ui import fmt, fmt_money, guarded
from planner.emitters.bundle import build_bundle
from planner.emitters.plan_file import parse_plan as parse_emit_plan
from planner.reports import tables as rt
from planner.reports.html import memory_figure
from planner.reports.plan_view import PlanView, as_float, flat_rows, parse_plan

PER_GPU, PER_USER = rt.PER_GPU, rt.PER_USER
METRIC_KEYS = {PER_GPU, PER_USER}
TOP_N = 10


def worker_text(role: str, w: Mapping[str, Any]) -> str:
    """'2 x TP4 PP1' plus the engine knobs of one role."""
    p = w.get("parallel", {})
    split = f"TP{p.get('tp', 1)}" + "".join(f" {k.upper()}{p[k]}" for k in ("pp", "dp", "ep") if p.get(k, 1) > 1)
    knobs = (f"max_num_seqs {w.get('max_num_seqs')}, chunk {w.get('max_num_batched_tokens')}, "
             f"mem {w.get('gpu_memory_utilization')}, KV {w.get('kv_dtype')}, weights {w.get('weight_quant')}")
    name = "" if role == "agg" else f"{role}: "
    return f"{name}{w.get('workers', 1)} x {split} ({knobs})"


def config_text(dep: Mapping[str, Any]) -> str:
    """The deployment in one line, as people say it."""
    roles = ("agg",) if dep.get("mode") == "agg" else ("prefill", "decode")
    parts = [worker_text(r, dep[r]) for r in roles if isinstance(dep.get(r), Mapping)]
    return f"{dep.get('mode')} · " + " + ".join(parts)


def pct_value(stats: Any, pct: str) -> float | None:
    """A percentile of a metric given as {mean, p50, ...} (or a bare number)."""
    if isinstance(stats, Mapping):
        return as_float(stats.get(pct))
    return as_float(stats)


def band_caption(plan: Mapping[str, Any], pct: str) -> str:
    """The calibrated prediction bands of the recommendation and its SLO headroom, in one line."""
    best = plan["best"]
    pred, head = best.get("predicted", {}), best.get("headroom", {})
    parts = []
    for metric, name in (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT")):
        band = pred.get(f"{metric}_band")
        if isinstance(band, Mapping) and isinstance(band.get(pct), Mapping):
            edge = head.get(metric[:4], {}) if isinstance(head, Mapping) else {}
            ratio = f" (SLO / band edge {fmt(edge.get('slo_over_band_edge'))})" if edge else ""
            lo, hi = fmt(band[pct].get("lo")), fmt(band[pct].get("hi"))
            parts.append(f"{name} {pct} {lo}-{hi} ms{ratio}")
    if not parts:
        return ""
    level = pred.get("ttft_ms_band", {}).get("level", 0.8)
    return f"{level:.0%} prediction band, calibrated on measured deployments: " + "; ".join(parts)


def recommendation(plan: Mapping[str, Any], gpu_label: str) -> None:
    """The card: configuration, predicted latency at the SLO percentile, throughput, cost, binding."""
    best = plan["best"]
    pred = best.get("predicted", {})
    pct = plan.get("slo", {}).get("percentile", "p90")
    with st.container(border=True, key="recommendation"):
        st.subheader(f"{best.get('gpus')} x {gpu_label} for {plan.get('model')}")
        st.markdown(f"**Configuration:** {config_text(best['deployment'])}")
        cols = st.columns(4)
        cols[0].metric(f"TTFT {pct}", f"{fmt(pct_value(pred.get('ttft_ms'), pct))} ms")
        cols[1].metric(f"TPOT {pct}", f"{fmt(pct_value(pred.get('tpot_ms'), pct))} ms")
        cols[2].metric("Output tok/s per GPU", fmt(pred.get(PER_GPU)))
        cols[3].metric("Output tok/s per user", fmt(pred.get(PER_USER)))
        band = band_caption(plan, pct)
        if band:
            st.caption(band)
        cols = st.columns(4)
        cols[0].metric("Cost per 1M output tokens", fmt_money(best.get("cost_per_million_output_tokens")))
        cols[1].metric("GPUs", fmt(best.get("gpus")))
        cols[2].metric("Requests/s", fmt(pred.get("requests_per_s")))
        cols[3].metric("Binding constraint", str(plan.get("binding_constraint") or "-"))
        st.caption(f"{fmt(plan.get('candidates_evaluated'))} candidates evaluated in "
                   f"{fmt(plan.get('search_seconds'))} s.")


def _hover(row: Mapping[str, Any]) -> str:
    return "<br>".join(f"{k}: {fmt(v) if isinstance(v, float) else v}" for k, v in row.items())


def _per_user_band(pred: Mapping[str, Any], per_user: float) -> dict[str, Any] | None:
    """Error bar of tokens/s per user from the mean TPOT band (tokens/s per user = 1000 / TPOT)."""
    band = pred.get("tpot_ms_band")
    mean = band.get("mean") if isinstance(band, Mapping) else None
    if not isinstance(mean, Mapping):
        return None
    lo, hi = as_float(mean.get("lo")), as_float(mean.get("hi"))
    if not lo or not hi:
        return None
    return {"type": "data", "symmetric": False, "array": [max(1000.0 / lo - per_user, 0.0)],
            "arrayminus": [max(per_user - 1000.0 / hi, 0.0)], "visible": True}


def pareto_chart(view: PlanView) -> go.Figure:
    """Output tok/s per GPU vs per user; hover shows each configuration; the chosen point is a star."""
    rows = flat_rows(view.pareto)
    pts = [(rt.metric_xy(r), r) for r in rows]
    pts = [(xy, r) for xy, r in pts if xy[0] is not None and xy[1] is not None]
    fig = go.Figure()
    fig.add_scatter(x=[xy[0] for xy, _ in pts], y=[xy[1] for xy, _ in pts], mode="lines+markers",
                    name="Pareto front", text=[_hover(r) for _, r in pts], hovertemplate="%{text}<extra></extra>",
                    marker={"size": 9}, line={"shape": "hv", "width": 1})
    pred = view.best.predicted
    bx, by = as_float(pred.get(PER_USER)), as_float(pred.get(PER_GPU))
    if bx is not None and by is not None:
        fig.add_scatter(x=[bx], y=[by], mode="markers", name="recommended",
                        text=[config_text(view.best.deployment)], hovertemplate="%{text}<extra>recommended</extra>",
                        marker={"size": 18, "symbol": "star", "color": "#d62728",
                                "line": {"width": 1}},
                        error_x=_per_user_band(pred, bx))
    fig.update_layout(xaxis_title="output tokens/s per user", yaxis_title="output tokens/s per GPU",
                      height=440, margin={"t": 30}, legend={"orientation": "h", "y": 1.08})
    return fig


def table_frame(table: rt.Table) -> pd.DataFrame:
    """A report table as a DataFrame (exact values; mixed-type columns become text for Arrow)."""
    frame = pd.DataFrame(list(table.rows), columns=list(table.columns))
    for col in frame.columns:
        if pd.api.types.is_object_dtype(frame[col]) and len({type(v) for v in frame[col] if v is not None}) > 1:
            frame[col] = frame[col].map(lambda v: "" if v is None else str(v))
    return frame


def latency_frame(breakdown: Any) -> pd.DataFrame:
    """Step time per op kind for each step the plan reports (``{step: {op: ms}}``), with shares."""
    rows = []
    steps = breakdown if isinstance(breakdown, Mapping) else {}
    for step, ops in steps.items():
        if not isinstance(ops, Mapping):
            continue
        total = sum(float(v) for v in ops.values() if isinstance(v, int | float))
        for op, ms in ops.items():
            if isinstance(ms, int | float):
                rows.append({"step": step, "op kind": op, "ms": float(ms),
                             "share": float(ms) / total if total > 0 else 0.0})
    return pd.DataFrame(rows, columns=["step", "op kind", "ms", "share"])


def latency_chart(frame: pd.DataFrame) -> go.Figure:
    """Horizontal bars of ms per op kind, one trace per step kind."""
    fig = go.Figure()
    for step, part in frame.groupby("step", sort=False):
        fig.add_bar(y=part["op kind"], x=part["ms"], orientation="h", name=str(step),
                    customdata=part["share"], hovertemplate="%{y}: %{x:.3g} ms (%{customdata:.1%})")
    fig.update_layout(xaxis_title="ms per step", yaxis_autorange="reversed", barmode="group",
                      height=120 + 26 * max(frame["op kind"].nunique(), 6), margin={"t": 20})
    return fig


def top_n(view: PlanView, n: int) -> pd.DataFrame:
    """The ``n`` configurations with the highest output tok/s per GPU (candidates, else the front)."""
    frame = table_frame(rt.candidates_table(view))
    if PER_GPU in frame:
        frame = frame.sort_values(PER_GPU, ascending=False, kind="stable")
    return frame.head(n).reset_index(drop=True)


@st.cache_data(show_spinner=False, max_entries=32)
def engine_zip(plan_json: str, backend: str) -> bytes:
    """Every file of the ``backend`` bundle (launch, YAML, benchmark.sh, PLAN.md) in one zip."""
    files = build_bundle(parse_emit_plan(json.loads(plan_json)), backend)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for f in files:
            info = zipfile.ZipInfo(f"{backend}/{f.name}")
            info.external_attr = (0o755 if f.executable else 0o644) << 16
            zf.writestr(info, f.text)
    return buf.getvalue()


def reports_available() -> bool:
    """True when the spreadsheet writer (``planner.reports.xlsx``) is installed."""
    return importlib.util.find_spec("planner.reports.xlsx") is not None


@st.cache_data(show_spinner=False, max_entries=32)
def xlsx_report(plan_json: str) -> bytes:
    """The spreadsheet report of the plan."""
    from planner.reports import build_xlsx

    return build_xlsx(json.loads(plan_json))


def downloads(plan: Mapping[str, Any], backend: str) -> None:
    """Plan JSON, engine configs (zip) for the chosen backend, and the xlsx report."""
    plan_json = json.dumps(plan, indent=1, sort_keys=False, default=str)
    cols = st.columns(3)
    cols[0].download_button("Plan (JSON)", plan_json, file_name="plan.json", mime="application/json",
                            key="dl_plan")
    if not plan.get("best", {}).get("deployment", {}).get("hf_id"):
        cols[1].info("Engine configs need the model id of the uploaded config's weights "
                     "(the field next to the upload).")
    else:
        with cols[1], guarded("engine configs"):
            cols[1].download_button(f"Engine configs ({backend}, zip)", engine_zip(plan_json, backend),
                                    file_name=f"{backend}_configs.zip", mime="application/zip",
                                    key="dl_zip")
    if reports_available():
        with cols[2], guarded("report"):
            cols[2].download_button("Report (xlsx)", xlsx_report(plan_json), file_name="plan_report.xlsx",
                                    mime="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
                                    key="dl_xlsx")


def details(view: PlanView) -> None:
    """Top-N, latency and memory breakdowns, provenance."""
    st.markdown(f"#### Top {TOP_N} configurations")
    st.dataframe(top_n(view, TOP_N), hide_index=True, key="top_n")
    left, right = st.columns(2)
    with left:
        st.markdown("#### Latency breakdown per op kind")
        frame = latency_frame(view.best.predicted.get("step_breakdown"))
        st.plotly_chart(latency_chart(frame), key="latency_chart")
        st.dataframe(frame, hide_index=True, key="latency_table")
    with right:
        st.markdown("#### Memory per GPU")
        st.plotly_chart(memory_figure(view), key="memory_chart")
        st.dataframe(table_frame(rt.memory_table(view)), hide_index=True, key="memory_table")
    with st.expander("Provenance of the numbers", expanded=False):
        st.dataframe(table_frame(rt.provenance_table(view)), hide_index=True, key="provenance_table")
    with st.expander("Alternatives per mode and assumptions", expanded=False):
        alt = rt.alternatives_table(view)
        if alt is not None:
            st.dataframe(table_frame(alt), hide_index=True, key="alternatives_table")
        st.dataframe(table_frame(rt.assumptions_table(view)), hide_index=True, key="assumptions_table")


def show_plan(plan: Mapping[str, Any], gpu_label: str, backend: str) -> None:
    """Every result section of a plan."""
    view = parse_plan(dict(plan))
    recommendation(plan, gpu_label)
    st.markdown("#### Pareto front")
    with st.container(key="pareto_chart"):
        st.plotly_chart(pareto_chart(view), key="pareto")
    downloads(plan, backend)
    details(view)


