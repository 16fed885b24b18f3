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

from app.ui import fmt, fmt_money, gpu_names, guarded, readable
from planner.emitters.bundle import build_bundle
from planner.emitters.plan_file import parse_plan as parse_emit_plan
from planner.reports import present as pr
from planner.reports import tables as rt
from planner.reports.html import memory_figure
from planner.reports.plan_view import PlanView, as_float, flat_rows, parse_plan

PER_GPU, PER_USER = rt.PER_GPU, rt.PER_USER
METRIC_KEYS = {PER_GPU, PER_USER}
TOP_N = 10
"""Rows of the candidates table shown before the user filters or asks for more."""


def config_text(dep: Mapping[str, Any], gpus: int | None = None, gpu_label: str = "") -> str:
    """The deployment as a readable sentence (``planner.reports.present.config_sentence``)."""
    return pr.config_sentence(dep, gpus, gpu_label)


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
    text = f"{level:.0%} prediction band, calibrated on measured deployments: " + "; ".join(parts)
    prov = pred.get("provenance")
    source = prov.get("bands") if isinstance(prov, Mapping) else None
    return f"{text}. From {source}." if isinstance(source, str) and source else text


def headroom_frame(plan: Mapping[str, Any]) -> pd.DataFrame:
    """Every limit of the recommendation: predicted value, limit, headroom."""
    rows = [
        {
            "Limit": h["limit_name"],
            "Predicted": f"{pr.num(h['value'])} {h['unit']}",
            "Limit value": f"{pr.num(h['limit'])} {h['unit']}",
            "Headroom (%)": pr.pct(h.get("headroom")),
        }
        for h in plan.get("binding", {}).get("headroom", [])
    ]
    return pd.DataFrame(rows, columns=["Limit", "Predicted", "Limit value", "Headroom (%)"])


def recommendation(plan: Mapping[str, Any], gpu_label: str) -> None:
    """The card: configuration, predicted latency vs SLO, throughput, cost, binding constraint."""
    best = plan["best"]
    pred = best.get("predicted", {})
    slo = plan.get("slo", {})
    pct = slo.get("percentile", "p90")
    with st.container(border=True, key="recommendation"):
        st.subheader(f"{best.get('gpus')} x {gpu_label} for {plan.get('model')}")
        sentence = config_text(best["deployment"], best.get("gpus"), gpu_label)
        st.markdown(f"**Configuration:** {sentence}")
        cols = st.columns(4)
        for col, key in zip(cols[:2], ("ttft_ms", "tpot_ms"), strict=True):
            value, limit = pct_value(pred.get(key), pct), as_float(slo.get(key))
            room = (
                f"{pr.pct(1 - value / limit)} headroom to {pr.ms(limit)}"
                if value and limit
                else None
            )
            col.metric(pr.label(key, pct), f"{fmt(value)} ms", room, delta_color="off")
        cols[2].metric(pr.label(PER_GPU), fmt(pred.get(PER_GPU)))
        cols[3].metric(pr.label(PER_USER), fmt(pred.get(PER_USER)))
        cols = st.columns(4)
        cols[0].metric(
            "Cost per 1M output tokens", fmt_money(best.get("cost_per_million_output_tokens"))
        )
        budget = plan.get("max_gpus")
        cols[1].metric(
            "GPUs",
            fmt(best.get("gpus")),
            f"of {budget} in the budget" if budget else None,
            delta_color="off",
        )
        cols[2].metric("Requests/s", fmt(pred.get("requests_per_s")))
        cols[3].metric("Binding constraint", str(plan.get("binding_constraint") or "-"))
        sentence = plan.get("binding", {}).get("sentence")
        if sentence:
            st.markdown(f"**Why this and not more:** {sentence}")
        bands = band_caption(plan, pct)
        if bands:
            st.caption(bands)
        st.dataframe(headroom_frame(plan), hide_index=True, key="headroom_table")
        st.caption(
            f"{fmt(plan.get('candidates_evaluated'))} candidates evaluated in "
            f"{fmt(plan.get('search_seconds'))} s."
        )


def _hover(row: Mapping[str, Any], pct: str = "") -> str:
    return "<br>".join(
        f"{pr.label(k, pct)}: {pr.show(k, v)}" for k, v in row.items() if v is not None
    )


def _per_user_band(pred: Mapping[str, Any], per_user: float) -> dict[str, Any] | None:
    """Error bar of tokens/s per user from the mean TPOT band (tokens/s per user = 1000 / TPOT)."""
    band = pred.get("tpot_ms_band")
    mean = band.get("mean") if isinstance(band, Mapping) else None
    if not isinstance(mean, Mapping):
        return None
    lo, hi = as_float(mean.get("lo")), as_float(mean.get("hi"))
    if not lo or not hi:
        return None
    return {
        "type": "data",
        "symmetric": False,
        "array": [max(1000.0 / lo - per_user, 0.0)],
        "arrayminus": [max(per_user - 1000.0 / hi, 0.0)],
        "visible": True,
    }


def pareto_chart(view: PlanView) -> go.Figure:
    """Output tok/s per GPU vs per user; hover shows each configuration; the pick is a star."""
    rows = flat_rows(view.pareto)
    pts = [(rt.metric_xy(r), r) for r in rows]
    pts = [(xy, r) for xy, r in pts if xy[0] is not None and xy[1] is not None]
    pct = str(view.slo.get("percentile", ""))
    fig = go.Figure()
    cands = [(rt.metric_xy(c), c) for c in view.candidates]
    cands = [(xy, c) for xy, c in cands if None not in xy]
    if cands:
        fig.add_scatter(
            x=[xy[0] for xy, _ in cands],
            y=[xy[1] for xy, _ in cands],
            mode="markers",
            name="top candidates",
            text=[_hover(c, pct) for _, c in cands],
            hovertemplate="%{text}<extra></extra>",
            marker={"size": 6, "color": "#9db4cc"},
        )
    fig.add_scatter(
        x=[xy[0] for xy, _ in pts],
        y=[xy[1] for xy, _ in pts],
        mode="lines+markers",
        name="Pareto front",
        text=[_hover(r, pct) for _, r in pts],
        hovertemplate="%{text}<extra></extra>",
        marker={"size": 9},
        line={"shape": "hv", "width": 1},
    )
    pred = view.best.predicted
    bx, by = as_float(pred.get(PER_USER)), as_float(pred.get(PER_GPU))
    if bx is not None and by is not None:
        fig.add_scatter(
            x=[bx],
            y=[by],
            mode="markers",
            name="recommended",
            text=[config_text(view.best.deployment, view.best.gpus)],
            hovertemplate="%{text}<extra>recommended</extra>",
            marker={"size": 18, "symbol": "star", "color": "#d62728", "line": {"width": 1}},
        )
    fig.update_layout(
        xaxis_title=pr.label(PER_USER),
        yaxis_title=pr.label(PER_GPU),
        height=440,
        margin={"t": 30},
        legend={"orientation": "h", "y": 1.08},
    )
    return fig


def table_frame(table: rt.Table) -> pd.DataFrame:
    """A report table as a DataFrame (exact values; mixed-type columns become text for Arrow)."""
    frame = pd.DataFrame(list(table.rows), columns=list(table.columns))
    for col in frame.columns:
        kinds = {type(v) for v in frame[col] if v is not None}
        if pd.api.types.is_object_dtype(frame[col]) and len(kinds) > 1:
            frame[col] = frame[col].map(lambda v: "" if v is None else str(v))
    return frame


def latency_frame(breakdown: Any) -> pd.DataFrame:
    """Step time per op kind for each step the plan reports, without op kinds that take no time."""
    rows = [
        {"Step": step, "Op kind": op, "Time (ms)": ms, "Share of step (%)": share}
        for step, op, ms, share in pr.step_rows(breakdown)
    ]
    return pd.DataFrame(rows, columns=["Step", "Op kind", "Time (ms)", "Share of step (%)"])


def latency_chart(frame: pd.DataFrame) -> go.Figure:
    """Horizontal bars of ms per op kind, one trace per step kind."""
    fig = go.Figure()
    for step, part in frame.groupby("Step", sort=False):
        fig.add_bar(
            y=part["Op kind"],
            x=part["Time (ms)"],
            orientation="h",
            name=str(step),
            customdata=part["Share of step (%)"],
            hovertemplate="%{y}: %{x:.3g} ms (%{customdata:.1%})",
        )
    fig.update_layout(
        xaxis_title="time per step (ms)",
        yaxis_autorange="reversed",
        barmode="group",
        height=120 + 26 * max(frame["Op kind"].nunique(), 6),
        margin={"t": 20},
    )
    return fig


def latency_display(frame: pd.DataFrame) -> pd.DataFrame:
    """The latency table as people read it (4 significant figures, shares in %)."""
    out = frame.copy()
    out["Time (ms)"] = [pr.num(v) for v in out["Time (ms)"]]
    out["Share of step (%)"] = [pr.pct(v) for v in out["Share of step (%)"]]
    return out


CANDIDATE_KEYS = (
    "mode",
    "gpu",
    "gpus",
    "ttft_ms",
    "tpot_ms",
    PER_GPU,
    PER_USER,
    "requests_per_s",
    "cost_per_million_output_tokens",
    "clients_per_worker",
    "pareto",
    "config",
)


def candidates_frame(view: PlanView) -> pd.DataFrame:
    """Every candidate the plan kept (top by the objective, plus the Pareto points), raw values."""
    frame = pd.DataFrame(rt.candidate_rows(view))
    keys = [k for k in CANDIDATE_KEYS if k in frame and frame[k].notna().any()]
    return frame[keys]


def top_n(
    view: PlanView,
    n: int,
    sort_by: str = PER_GPU,
    modes: tuple[str, ...] = (),
    gpus: tuple[str, ...] = (),
) -> pd.DataFrame:
    """The first ``n`` candidates by ``sort_by`` (descending; ascending for latency and cost)."""
    frame = candidates_frame(view)
    if modes:
        frame = frame[frame["mode"].isin(modes)]
    if gpus:
        frame = frame[frame["gpu"].isin(gpus)]
    if sort_by in frame:
        ascending = sort_by in ("ttft_ms", "tpot_ms", "cost_per_million_output_tokens", "gpus")
        frame = frame.sort_values(sort_by, ascending=ascending, kind="stable")
    return frame.head(n).reset_index(drop=True)


def candidates_section(view: PlanView) -> None:
    """The candidates table with sort, filters and size."""
    pct = str(view.slo.get("percentile", "p90"))
    frame = candidates_frame(view)
    keys = (PER_GPU, PER_USER, "ttft_ms", "tpot_ms", "cost_per_million_output_tokens", "gpus")
    sortable = [k for k in keys if k in frame]
    cols = st.columns(4)
    sort_by = cols[0].selectbox(
        "Sort by", sortable, format_func=lambda k: pr.label(k, pct), key="top_sort"
    )
    modes = cols[1].multiselect("Mode", sorted(frame["mode"].unique()), key="top_modes")
    gpus = cols[2].multiselect("GPU type", sorted(frame["gpu"].unique()), key="top_gpus")
    n = int(
        cols[3].number_input(
            "Rows",
            min_value=1,
            max_value=max(len(frame), 1),
            value=min(TOP_N, max(len(frame), 1)),
            key="top_rows",
        )
    )
    shown = top_n(view, n, sort_by, tuple(modes), tuple(gpus))
    st.markdown(
        f"#### Top {len(shown)} of {len(frame)} candidates kept "
        f"({fmt(view.candidates_evaluated)} evaluated)"
    )
    st.dataframe(readable(shown, percentile=pct), hide_index=True, key="top_n")


def why_not_frame(plan: Mapping[str, Any]) -> pd.DataFrame:
    """Each GPU type asked for: its best plan side by side, or the reason it has none."""
    pct = plan.get("slo", {}).get("percentile", "p90")
    names = gpu_names()
    rows = []
    for gpu, entry in plan.get("per_gpu_type", {}).items():
        best = entry.get("best") or {}
        noun = _OBJECTIVE_NOUN.get(plan.get("objective"), "points")
        verdict = (
            "recommended"
            if entry.get("chosen")
            else entry.get("reason") or f"fewer {noun} than the recommendation"
        )
        rows.append(
            {
                "GPU type": names.get(gpu) or pr.gpu_name(gpu),  # or a prefill+decode pair
                "GPUs": pr.count(best.get("gpus")),
                pr.label("ttft_ms", pct): pr.num(best.get(f"ttft_{pct}_ms")),
                pr.label("tpot_ms", pct): pr.num(best.get(f"tpot_{pct}_ms")),
                pr.label(PER_GPU): pr.num(best.get(PER_GPU)),
                pr.label("cost_per_million_output_tokens"): pr.num(
                    best.get("cost_per_million_output_tokens")
                ),
                "Why not": verdict,
            }
        )
    return pd.DataFrame(rows)


_OBJECTIVE_NOUN = {
    "throughput-per-gpu": "output tokens/s per GPU",
    "cost": "savings",
    "gpus": "GPUs saved",
}


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
    cols[0].download_button(
        "Plan (JSON)", plan_json, file_name="plan.json", mime="application/json", key="dl_plan"
    )
    if not plan.get("best", {}).get("deployment", {}).get("hf_id"):
        cols[1].info(
            "Engine configs need the model id of the uploaded config's weights "
            "(the field next to the upload)."
        )
    else:
        with cols[1], guarded("engine configs"):
            cols[1].download_button(
                f"Engine configs ({backend}, zip)",
                engine_zip(plan_json, backend),
                file_name=f"{backend}_configs.zip",
                mime="application/zip",
                key="dl_zip",
            )
    if reports_available():
        with cols[2], guarded("report"):
            cols[2].download_button(
                "Report (xlsx)",
                xlsx_report(plan_json),
                file_name="plan_report.xlsx",
                mime="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
                key="dl_xlsx",
            )


def details(view: PlanView, plan: Mapping[str, Any]) -> None:
    """Why-not per GPU type, candidates, latency and memory breakdowns, provenance."""
    if len(plan.get("per_gpu_type", {})) > 1:
        st.markdown("#### Each GPU type you selected")
        with st.container(key="why_not"):
            st.table(why_not_frame(plan).set_index("GPU type"))
    candidates_section(view)
    left, right = st.columns(2)
    with left:
        st.markdown("#### Step time per op kind")
        frame = latency_frame(view.best.predicted.get("step_breakdown"))
        st.plotly_chart(latency_chart(frame), key="latency_chart")
        st.dataframe(latency_display(frame), hide_index=True, key="latency_table")
    with right:
        st.markdown("#### Memory per GPU")
        st.plotly_chart(memory_figure(view), key="memory_chart")
        st.dataframe(table_display(rt.memory_table(view)), hide_index=True, key="memory_table")
    with st.expander("Provenance of the numbers", expanded=False):
        st.dataframe(
            table_display(rt.provenance_table(view)), hide_index=True, key="provenance_table"
        )
    with st.expander("Alternatives per mode and assumptions", expanded=False):
        alt = rt.alternatives_table(view)
        if alt is not None:
            st.dataframe(table_display(alt), hide_index=True, key="alternatives_table")
        st.dataframe(
            table_display(rt.assumptions_table(view)), hide_index=True, key="assumptions_table"
        )


def table_display(table: rt.Table) -> pd.DataFrame:
    """A report table as text cells, rounded the way the HTML report rounds them."""
    rows = [
        [_cell(table, i, c, v) for c, v in zip(table.columns, row, strict=True)]
        for i, row in enumerate(table.rows)
    ]
    return pd.DataFrame(rows, columns=list(table.columns))


def _cell(table: rt.Table, i: int, column: str, value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return pr.num(value) if isinstance(value, bool) else str(value)
    return pr.show_kind(table.kind(i, column), value)


def show_plan(plan: Mapping[str, Any], gpu_label: str, backend: str) -> None:
    """Every result section of a plan."""
    view = parse_plan(dict(plan))
    recommendation(plan, gpu_label)
    st.markdown("#### Pareto front")
    with st.container(key="pareto_chart"):
        st.plotly_chart(pareto_chart(view), key="pareto")
    downloads(plan, backend)
    details(view, plan)
