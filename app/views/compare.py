"""Compare GPUs page: one workload planned on each GPU type, side by side."""

from __future__ import annotations

import dataclasses
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app import inputs as ui_in
from app import planning
from app.plan_results import config_text, pct_value
from app.ui import FieldErrors, error_text, fmt_money, gpu_names, guarded
from hardware.errors import PlannerInputError
from planner.reports import present
from solvers.counts import MAX_BUDGET_GPUS

BUDGET_HELP = f"Up to {MAX_BUDGET_GPUS:,} GPUs, the largest budget the search prices."

DEFAULT_GPUS = ("h100_sxm", "h200_sxm", "b200_sxm")

st.header("Compare GPUs")
st.caption(
    "The same model, workload and SLOs planned on each GPU type: what it costs per million "
    "output tokens and how many GPUs it needs."
)


def _upload_name(key: str) -> str:
    return str(getattr(st.session_state.get(key), "name", "") or "")


def _inputs(errors: FieldErrors) -> planning.PlanInputs | None:
    left, mid, right = st.columns(3, gap="large")
    model, gpus, lengths = None, [], None
    with left:
        with errors.field("Model", _upload_name("cmp_model_file")):
            model = ui_in.model_input("cmp")
        with errors.field("GPU types"):
            gpus = ui_in.gpus_input("cmp", default=DEFAULT_GPUS)
        max_gpus = int(
            st.number_input(
                "GPU budget (max GPUs)",
                min_value=1,
                max_value=MAX_BUDGET_GPUS,
                value=8,
                help=BUDGET_HELP,
                key="cmp_max_gpus",
            )
        )
    with mid:
        with errors.field("Trace CSV", _upload_name("cmp_trace")):
            lengths = ui_in.lengths_input("cmp")
        load = ui_in.load_input("cmp")
    with right:
        slo = ui_in.slo_input("cmp")
        mode = st.selectbox(
            "Mode", planning.MODES, format_func=planning.MODE_LABELS.get, key="cmp_mode"
        )
        backend = st.selectbox("Backend", planning.BACKENDS, key="cmp_backend")
        objective = st.selectbox("Objective", planning.OBJECTIVES, index=0, key="cmp_objective")
    if model is None or not gpus or lengths is None or errors:
        return None
    return planning.PlanInputs(
        model=model,
        gpus=tuple(gpus),
        max_gpus=max_gpus,
        price_per_gpu_hour=None,
        isl=lengths[0],
        osl=lengths[1],
        load=load,
        slo=slo,
        mode=mode,
        backend=backend,
        objective=objective,
    )


def compare_rows(given: planning.PlanInputs) -> list[dict[str, Any]]:
    """One row per GPU type: the plan on that GPU alone, or why there is none (raw values)."""
    names, pct = gpu_names(), given.slo.percentile
    rows = []
    for gpu in given.gpus:
        row: dict[str, Any] = {"GPU": names.get(gpu, gpu)}
        try:
            plan = planning.run_plan(dataclasses.replace(given, gpus=(gpu,)))
        except PlannerInputError as exc:
            rows.append(
                {**row, "binding constraint": "infeasible", "note": f"no plan: {error_text(exc)}"}
            )
            continue
        best, pred = plan["best"], plan["best"]["predicted"]
        rows.append(
            {
                **row,
                "GPUs needed": best["gpus"],
                "$ per 1M output tokens": best["cost_per_million_output_tokens"],
                "$ per hour": best.get("cost_per_hour_usd"),
                f"TTFT {pct} (ms)": pct_value(pred.get("ttft_ms"), pct),
                f"TPOT {pct} (ms)": pct_value(pred.get("tpot_ms"), pct),
                "output tok/s per GPU": pred.get("output_tok_s_per_gpu"),
                "output tok/s per user": pred.get("output_tok_s_per_user"),
                "binding constraint": plan["binding_constraint"],
                "note": plan.get("binding", {}).get("sentence", ""),
                "configuration": config_text(best["deployment"], best["gpus"], row["GPU"]),
            }
        )
    return rows


def display_frame(rows: list[dict[str, Any]], pct: str) -> pd.DataFrame:
    """The comparison as people read it: a number or the reason in every row, units in the names."""
    out = []
    for r in rows:
        ok = r.get("GPUs needed") is not None
        out.append(
            {
                "GPU type": r["GPU"],
                "Result": "meets the SLOs" if ok else r.get("note", "no plan"),
                "GPUs needed": present.count(r.get("GPUs needed")),
                "Cost per 1M output tokens ($)": present.num(r.get("$ per 1M output tokens")),
                "Cost per hour ($)": present.num(r.get("$ per hour")),
                f"TTFT {pct} (ms)": present.num(r.get(f"TTFT {pct} (ms)")),
                f"TPOT {pct} (ms)": present.num(r.get(f"TPOT {pct} (ms)")),
                "Output tokens/s per GPU": present.num(r.get("output tok/s per GPU")),
                "Output tokens/s per user": present.num(r.get("output tok/s per user")),
                "Binding constraint": r.get("binding constraint", "-"),
                "Configuration": r.get("configuration", "-"),
            }
        )
    return pd.DataFrame(out)


def _chart(frame: pd.DataFrame) -> go.Figure:
    ok = frame.dropna(subset=["$ per 1M output tokens"])
    fig = go.Figure(
        go.Bar(
            x=ok["GPU"],
            y=ok["$ per 1M output tokens"],
            text=ok["GPUs needed"],
            texttemplate="%{text} GPUs",
            hovertemplate="%{x}: $%{y:.3g} per 1M tokens",
        )
    )
    fig.update_layout(yaxis_title="$ per 1M output tokens", height=360, margin={"t": 20})
    return fig


def _show(rows: list[dict[str, Any]]) -> None:
    frame = pd.DataFrame(rows)
    for col in ("GPUs needed", "$ per 1M output tokens", "note"):
        if col not in frame:
            frame[col] = None
    ok = frame.dropna(subset=["$ per 1M output tokens"])
    if len(ok):
        cheapest = ok.loc[ok["$ per 1M output tokens"].idxmin()]
        with st.container(border=True, key="compare_answer"):
            st.metric(
                f"Cheapest: {cheapest['GPU']}",
                fmt_money(cheapest["$ per 1M output tokens"]) + " per 1M tokens",
            )
            st.caption(cheapest["configuration"])
        st.plotly_chart(_chart(frame), key="compare_chart")
    else:
        st.error("No GPU type meets the SLOs within the budget; see the notes below.")
    pct = next((c.split()[1] for c in frame.columns if c.startswith("TTFT ")), "p90")
    with st.container(key="compare_table"):
        st.table(display_frame(rows, pct).set_index("GPU type"))
    for r in rows:
        if r.get("GPUs needed") is None:
            st.warning(f"{r['GPU']}: {r.get('note', 'no plan')}", icon="⚠️")


def _page() -> None:
    errors = FieldErrors()
    given = _inputs(errors)
    pressed = st.button("Compare", type="primary", key="cmp_button")
    if errors:
        st.caption("Fix the marked field to compare.")
    elif given is not None and (pressed or "compare_rows" not in st.session_state):
        with guarded("results"):
            st.session_state["compare_rows"] = None  # a failed run leaves no stale answer behind
            st.session_state["compare_given"] = given
            st.session_state["compare_rows"] = compare_rows(given)
    rows = st.session_state.get("compare_rows")
    if rows:
        if given != st.session_state.get("compare_given"):
            # style before warning: elements stream in order (see plan._results)
            st.markdown(
                "<style>.st-key-compare_results{opacity:0.4;filter:grayscale(1)}</style>",
                unsafe_allow_html=True,
            )
            st.warning(planning.STALE_TEXT.replace("Plan", "Compare"), icon="⏳")
        with guarded("results"), st.container(key="compare_results"):
            _show(rows)


_page()
