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

from app import shared
from app.ui import (
    UNCALIBRATED_MARK,
    calibration_notes,
    fmt,
    fmt_money,
    gpu_calibration,
    gpu_label,
    guarded,
    readable,
)
from planner.emitters.bundle import build_bundle
from planner.emitters.plan_file import parse_plan as parse_emit_plan
from planner.reports import present as pr
from planner.reports import tables as rt
from planner.reports.html import memory_figure
from planner.reports.plan_view import PlanView, as_float, flat_rows, parse_plan
from solvers.binding import at_confidence

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


HEADLINES = {
    "cost": "Cheapest deployment that meets the SLO",
    "throughput-per-gpu": "Most output tokens/s per GPU that meets the SLO",
    "gpus": "Fewest GPUs that meet the SLO",
    "energy": "Fewest joules per token that meet the SLO",
}
"""Headline of the recommendation per objective (``solvers.plan_models.Objective``)."""


def headline(plan: Mapping[str, Any]) -> str:
    """What the recommendation is best at, naming the objective the plan used."""
    objective = str(plan.get("objective") or plan.get("settings", {}).get("objective") or "cost")
    return f"{HEADLINES.get(objective, objective)} (objective: {objective})"


def role_gpus(dep: Mapping[str, Any]) -> str:
    """'prefill on H100-SXM, decode on H200-SXM' where a disaggregated plan names each role's
    GPU type (``prefill_gpu`` / ``decode_gpu``), else ''."""
    parts = [
        f"{role} on {gpu_label(str(dep[f'{role}_gpu']))}"
        for role in ("prefill", "decode")
        if dep.get(f"{role}_gpu")
    ]
    return ", ".join(parts)


def slo_check(plan: Mapping[str, Any]) -> str:
    """Each latency limit at the plan's confidence: band edge (or prediction) against the SLO and
    the probability it is met."""
    best, slo = plan["best"], plan.get("slo", {})
    room = best.get("headroom") if isinstance(best.get("headroom"), Mapping) else {}
    pct = str(slo.get("percentile", "p90"))
    conf = as_float(room.get("confidence")) or 0.0
    parts = []
    for key, name in (("ttft", "TTFT"), ("tpot", "TPOT")):
        limit = as_float(slo.get(f"{key}_ms"))
        got = room.get(key) if isinstance(room, Mapping) else None
        one: Mapping[str, Any] = got if isinstance(got, Mapping) else {}
        edge = as_float(one.get("band_edge_ms")) if conf else None
        value = edge if edge is not None else pct_value(best["predicted"].get(f"{key}_ms"), pct)
        if value is None or limit is None:
            continue
        ok = "meets" if value <= limit else "misses"
        prob = as_float(one.get("probability_met"))
        where = at_confidence(conf if edge is not None else 0.0) or " at the point prediction"
        chance = f", met with probability {pr.pct(prob)}" if prob is not None else ""
        parts.append(f"{name} {pct} {pr.ms(value)}{where} {ok} the {pr.ms(limit)} SLO{chance}")
    return "; ".join(parts)


def power_line(pw: Mapping[str, Any]) -> str:
    """Power and energy of the recommendation (``app.planning.plan_power``)."""
    if not pw:
        return ""
    how = " (estimated here by planner.perf.power)" if pw.get("computed_here") else ""
    return (
        f"**Power:** {fmt(pw.get('deployment_kw'))} kW board power "
        f"({fmt(pw.get('avg_power_w_per_gpu'))} W per GPU), "
        f"{fmt(pw.get('j_per_output_token'))} J per output token, "
        f"{fmt(pw.get('kwh_per_day'))} kWh/day, energy "
        f"{fmt_money(pw.get('energy_cost_usd_per_day'))} per day at "
        f"{fmt_money(pw.get('electricity_price_usd_per_kwh'))}/kWh, PUE {fmt(pw.get('pue'))}{how}"
    )


def _latency_metric(col: Any, plan: Mapping[str, Any], key: str, mark: str) -> None:
    pct = str(plan.get("slo", {}).get("percentile", "p90"))
    value = pct_value(plan["best"]["predicted"].get(f"{key}_ms"), pct)
    limit = as_float(plan.get("slo", {}).get(f"{key}_ms"))
    col.metric(pr.label(f"{key}_ms", pct), pr.ms(value) + mark)
    if value and limit:
        col.caption(f"SLO {pr.ms(limit)}: {pr.pct(1 - value / limit)} headroom")


def recommendation(plan: Mapping[str, Any], model: str, power: Mapping[str, Any]) -> None:
    """The card: what was chosen and why, its cost, the SLO check and the binding limit; sized to
    end within the first 800 px of a 1280 x 800 window."""
    best = plan["best"]
    gpu = str(best["deployment"]["gpu"])
    label = gpu_label(gpu)
    with st.container(border=True, key="recommendation"):
        st.caption(headline(plan))
        st.subheader(f"{best.get('gpus')} x {label} for {model}", anchor=False)
        roles = role_gpus(best["deployment"])
        sentence = config_text(best["deployment"], None, label)
        st.markdown(f"**Configuration:** {sentence}" + (f" ({roles})" if roles else ""))
        cols = st.columns(5)
        # numbers of a GPU without calibrated kernel data carry the mark (explained below)
        mark = f" {UNCALIBRATED_MARK}" if gpu_calibration(gpu)[1] else ""
        cols[0].metric("Cost ($/hour)", fmt_money(best.get("cost_per_hour_usd")) + mark)
        cols[0].caption(
            f"{fmt_money(best.get('cost_per_million_total_tokens'))} per 1M total tokens"
        )
        _latency_metric(cols[1], plan, "ttft", mark)
        _latency_metric(cols[2], plan, "tpot", mark)
        bought = best.get("gpus_bought", best.get("gpus"))
        cols[3].metric("GPUs bought", pr.count(bought))
        cols[3].caption(f"{pr.count(best.get('gpus'))} used of {pr.count(plan.get('max_gpus'))}")
        cols[4].metric("Binding limit", str(plan.get("binding_constraint") or "-"))
        check = slo_check(plan)
        if check:
            st.markdown(f"**SLO check:** {check}.")
        why = plan.get("binding", {}).get("sentence")
        if why:
            st.markdown(f"**Why this and not more:** {config_words(str(why))}")
        energy = power_line(power)
        if energy:
            st.markdown(energy)
        for key, title in (
            ("role_types", "Two GPU types"),
            ("speculative_decision", "Speculative decoding"),
        ):
            said = plan.get(key) if isinstance(plan.get(key), Mapping) else {}
            text = said.get("sentence") or said.get("why")
            if text:
                st.markdown(f"**{title}:** {text}")
        calibration_notes([gpu], "card")


def evidence(plan: Mapping[str, Any]) -> None:
    """Below the card: every limit's headroom, the prediction bands and the search's size."""
    pct = str(plan.get("slo", {}).get("percentile", "p90"))
    st.dataframe(headroom_frame(plan), hide_index=True, key="headroom_table")
    bands = band_caption(plan, pct)
    if bands:
        st.caption(bands)
    st.caption(
        f"{fmt(plan.get('candidates_evaluated'))} candidates evaluated in "
        f"{fmt(plan.get('search_seconds'))} s."
    )


def links(plan: Mapping[str, Any]) -> None:
    """Links that open Compare and Traffic with this plan's inputs (the URL carries them)."""
    gpus = list(plan.get("settings", {}).get("gpus") or [plan["best"]["gpu"]])
    compare = gpus if len(gpus) > 1 else [*gpus, *(g for g in COMPARE_WITH if g not in gpus)]
    with st.container(key="plan_links", horizontal=True):
        st.markdown(f"[Compare these GPUs ↗]({shared.link('compare', gpus=compare)})")
        st.markdown(f"[Size for a day of traffic ↗]({shared.link('traffic')})")


COMPARE_WITH = ("h100_sxm", "h200_sxm", "b200_sxm")
"""GPUs a one-GPU plan's Compare link adds, so the comparison has something to compare."""


def _hover(row: Mapping[str, Any], pct: str = "") -> str:
    """A point's values as lines: display names, the configuration as its parts."""
    lines = [
        f"{pr.label(k, pct)}: {gpu_label(str(v)) if k == 'gpu' else pr.show(k, v)}"
        for k, v in row.items()
        if v is not None and k not in ("config", "score")
    ]
    parts = config_columns(str(row.get("config", "")))
    return "<br>".join(lines + [f"{k}: {v}" for k, v in parts.items()])


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


GPU_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf")
MODE_SYMBOLS = {"agg": "circle", "disagg": "diamond"}
AXIS = {"tickformat": ",.3~s", "hoverformat": ",.4~g"}
"""Ticks at 3 significant figures."""


def _groups(view: PlanView) -> dict[tuple[str, str], list[tuple[tuple[float, float], Any]]]:
    """Candidates and Pareto points with both metrics, by (GPU, mode)."""
    out: dict[tuple[str, str], list[tuple[tuple[float, float], Any]]] = {}
    seen: set[tuple[float, float]] = set()
    for row in [*flat_rows(view.pareto), *view.candidates]:
        xy = rt.metric_xy(row)
        if xy[0] is None or xy[1] is None or xy in seen:
            continue
        seen.add(xy)  # type: ignore[arg-type]
        out.setdefault((str(row.get("gpu")), str(row.get("mode"))), []).append((xy, row))  # type: ignore[arg-type]
    return out


def pareto_chart(view: PlanView) -> go.Figure:
    """Output tok/s per GPU vs per user, coloured by GPU type, shaped by mode; the TPOT SLO as a
    line (1000 / TPOT tokens/s per user: points right of it meet it); the pick is a star."""
    pct = str(view.slo.get("percentile", ""))
    fig = go.Figure()
    groups = _groups(view)
    colours = {
        g: GPU_COLOURS[i % len(GPU_COLOURS)] for i, g in enumerate(sorted({g for g, _ in groups}))
    }
    for (gpu, mode), pts in sorted(groups.items()):
        pts.sort(key=lambda p: p[0][0])
        fig.add_scatter(
            x=[xy[0] for xy, _ in pts],
            y=[xy[1] for xy, _ in pts],
            mode="markers",
            name=f"{gpu_label(gpu)}, {MODE_LABELS.get(mode, mode)}",
            text=[_hover(r, pct) for _, r in pts],
            hovertemplate="%{text}<extra></extra>",
            marker={"size": 9, "color": colours[gpu], "symbol": MODE_SYMBOLS.get(mode, "square")},
        )
    tpot = as_float(view.slo.get("tpot_ms"))
    if tpot:
        fig.add_vline(
            x=1000.0 / tpot,
            line={"dash": "dash", "color": "#d62728"},
            annotation_text=f"TPOT SLO {pr.ms(tpot)} = {pr.num(1000.0 / tpot)} tokens/s per user",
            annotation_position="top right",
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
        xaxis={"title": pr.label(PER_USER), **AXIS},
        yaxis={"title": pr.label(PER_GPU), **AXIS},
        height=420,
        margin={"t": 30},
        legend={"orientation": "h", "y": -0.2},
    )
    return fig


MODE_LABELS = {"agg": "aggregated", "disagg": "disaggregated"}


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
)


def candidates_frame(view: PlanView) -> pd.DataFrame:
    """Every candidate the plan kept (top by the objective, plus the Pareto points), raw values;
    the configuration as columns (``config_columns``)."""
    frame = pd.DataFrame(rt.candidate_rows(view))
    keys = [k for k in CANDIDATE_KEYS if k in frame and frame[k].notna().any()]
    parts = pd.DataFrame([config_columns(str(c)) for c in frame.get("config", [])]).fillna("-")
    return pd.concat([frame[keys].reset_index(drop=True), parts], axis=1)


_ROLE = pr.CONFIG_ROLE
config_words = pr.config_words


def config_columns(config: str) -> dict[str, str]:
    """A candidate's configuration summary (``solvers.plan_core``'s 'agg tp2 pp1 x4 seqs 256
    chunk 2048 kv fp8') as labelled columns: split, replicas, batch and KV dtype per role."""
    out: dict[str, str] = {}
    for m in _ROLE.finditer(config):
        role = {"P": "Prefill", "D": "Decode"}.get(m["role"] or "", "")

        def col(name: str, role: str = role) -> str:  # 'Replicas', 'Prefill replicas', KV kept
            first = name[0].lower() if role and name[1].islower() else name[0]
            return f"{role} {first}{name[1:]}".strip()

        split = f"TP{m['tp']} PP{m['pp']}" + (f" DP{m['dp']}" if m["dp"] else "")
        out[col("Split")] = split + (f" EP{m['ep']}" if m["ep"] else "")
        out[col("Replicas")] = m["x"]
        out[col("Max running requests")] = m["seqs"]
        out[col("Chunk (tokens)")] = f"{int(m['chunk']):,}"
        out[col("KV dtype")] = m["kv"]
    return out


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
    gpus = cols[2].multiselect(
        "GPU type", sorted(frame["gpu"].unique()), format_func=gpu_label, key="top_gpus"
    )
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
    shown["gpu"] = shown["gpu"].map(gpu_label)
    st.markdown(
        f"#### Top {len(shown)} of {len(frame)} candidates kept "
        f"({fmt(view.candidates_evaluated)} evaluated)"
    )
    st.dataframe(readable(shown, percentile=pct), hide_index=True, key="top_n")


def why_not_frame(plan: Mapping[str, Any]) -> pd.DataFrame:
    """Each GPU type asked for: its best plan (GPUs bought, $/h, $ per 1M total tokens, what binds
    it) side by side, or the reason it has none."""
    pct = plan.get("slo", {}).get("percentile", "p90")
    noun = _OBJECTIVE_NOUN.get(str(plan.get("objective")), "points")
    rows = []
    for gpu, entry in plan.get("per_gpu_type", {}).items():
        best = entry.get("best") or {}
        binding = entry.get("binding") if isinstance(entry.get("binding"), Mapping) else {}
        verdict = (
            "recommended"
            if entry.get("chosen")
            else entry.get("reason") or f"fewer {noun} than the recommendation"
        )
        rows.append(
            {
                "GPU type": gpu_label(gpu),
                "Verdict": verdict,
                "GPUs bought": pr.count(best.get("gpus_bought", best.get("gpus"))),
                "GPUs used": pr.count(best.get("gpus")),
                "Cost ($/hour)": pr.num(best.get("cost_per_hour_usd")),
                "Cost per 1M total tokens ($)": pr.num(best.get("cost_per_million_total_tokens")),
                pr.label("ttft_ms", pct): pr.num(best.get(f"ttft_{pct}_ms")),
                pr.label("tpot_ms", pct): pr.num(best.get(f"tpot_{pct}_ms")),
                pr.label(PER_GPU): pr.num(best.get(PER_GPU)),
                "Binding limit": str(binding.get("constraint") or "-") if best else "-",
            }
        )
    return pd.DataFrame(rows)


_OBJECTIVE_NOUN = {
    "throughput-per-gpu": "output tokens/s per GPU",
    "cost": "savings",
    "gpus": "GPUs saved",
    "energy": "joules per token saved",
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


def show_plan(
    plan: Mapping[str, Any], backend: str, model: str, power: Mapping[str, Any] | None = None
) -> None:
    """Every result section of a plan: the card first (above the fold), then the evidence."""
    view = parse_plan(dict(plan))
    recommendation(plan, model, power or {})
    links(plan)
    if plan.get("per_gpu_type"):
        st.markdown("#### Each GPU type you selected")
        with st.container(key="why_not"):
            st.table(why_not_frame(plan).set_index("GPU type"))
        calibration_notes(list(plan["per_gpu_type"]), "per_gpu")
    evidence(plan)
    st.markdown("#### Pareto front")
    with st.container(key="pareto_chart"):
        st.plotly_chart(pareto_chart(view), key="pareto")
    st.caption(
        "Colour: GPU type; shape: mode. The dashed line is the TPOT SLO (tokens/s per user = "
        "1000 / TPOT ms): points to its right meet it. TTFT is not on these axes; each point's "
        "hover gives it."
    )
    downloads(plan, backend)
    details(view, plan)
