"""Compare GPUs page: one workload planned on each GPU type, side by side."""

from __future__ import annotations

import dataclasses
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app import planning
from app.plan_form import invalid_note, plan_form
from app.plan_results import config_text, pct_value
from app.ui import (
    FieldErrors,
    calibration_notes,
    error_text,
    fmt_money,
    gpu_label,
    guarded,
    mark_stale,
)
from hardware.errors import PlannerInputError
from planner.reports import present

st.header("Compare GPUs", anchor=False)
st.caption(
    "The same model, workload and SLOs planned on each GPU type: what it costs and how many GPUs "
    "it needs. Inputs are shared with the other pages."
)


def compare_rows(given: planning.PlanInputs) -> list[dict[str, Any]]:
    """One row per GPU type: the plan on that GPU alone, or why there is none (raw values)."""
    pct = given.slo.percentile
    rows = []
    for gpu in given.gpus:
        row: dict[str, Any] = {"GPU": gpu_label(gpu), "key": gpu}
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
                "$ per 1M total tokens": best.get("cost_per_million_total_tokens"),
                "GPUs bought": best.get("gpus_bought", best["gpus"]),
                f"TTFT {pct} (ms)": pct_value(pred.get("ttft_ms"), pct),
                f"TPOT {pct} (ms)": pct_value(pred.get("tpot_ms"), pct),
                "output tok/s per GPU": pred.get("output_tok_s_per_gpu"),
                "output tok/s per user": pred.get("output_tok_s_per_user"),
                "binding constraint": plan["binding_constraint"],
                "score": -float(best.get("score", 0.0)) if "score" in best else None,
                "note": plan.get("binding", {}).get("sentence", ""),
                "configuration": config_text(best["deployment"], best["gpus"], row["GPU"]),
            }
        )
    return rows


def display_frame(rows: list[dict[str, Any]], pct: str) -> pd.DataFrame:
    """The comparison as people read it: a number or the reason in every row, units in the names
    (each configuration is listed under the table)."""
    out = []
    for r in rows:
        ok = r.get("GPUs needed") is not None
        out.append(
            {
                "GPU type": r["GPU"],
                "Result": "meets the SLOs" if ok else r.get("note", "no plan"),
                "GPUs used": present.count(r.get("GPUs needed")),
                "GPUs bought": present.count(r.get("GPUs bought")),
                "Cost ($/hour)": present.num(r.get("$ per hour")),
                "Cost per 1M total tokens ($)": present.num(r.get("$ per 1M total tokens")),
                "Cost per 1M output tokens ($)": present.num(r.get("$ per 1M output tokens")),
                f"TTFT {pct} (ms)": present.num(r.get(f"TTFT {pct} (ms)")),
                f"TPOT {pct} (ms)": present.num(r.get(f"TPOT {pct} (ms)")),
                "Output tokens/s per GPU": present.num(r.get("output tok/s per GPU")),
                "Binding limit": r.get("binding constraint", "-"),
            }
        )
    return pd.DataFrame(out)


def _chart(frame: pd.DataFrame) -> go.Figure:
    ok = frame.dropna(subset=["$ per 1M total tokens"])
    fig = go.Figure(
        go.Bar(
            x=ok["GPU"],
            y=ok["$ per 1M total tokens"],
            text=[f"{present.count(n)} GPUs" for n in ok["GPUs bought"]],
            hovertemplate="%{x}: $%{y:.4g} per 1M total tokens",
        )
    )
    fig.update_layout(
        yaxis={"title": "$ per 1M total tokens", "tickformat": ",.3~g"},
        height=300,
        margin={"t": 20},
    )
    return fig


# objective -> (headline word, column it ranks by; lower wins, the score is negated)
BEST_WORDS = {
    "cost": ("Cheapest", "$ per 1M total tokens"),
    "throughput-per-gpu": ("Most output tokens/s per GPU", "score"),
    "gpus": ("Fewest GPUs", "GPUs bought"),
}


def best_row(frame: pd.DataFrame, objective: str, rate: bool = False) -> pd.Series:
    """The GPU type the objective picks, as the planner ranks (``solvers.plan_models``): cost is
    the lowest $/hour at a requested rate, else the lowest $ per 1M total tokens; ties go to
    fewer GPUs bought, then to the lower $ per 1M total tokens."""
    column = BEST_WORDS.get(objective, BEST_WORDS["cost"])[1]
    if objective == "cost" and rate:
        column = "$ per hour"
    keys = list(dict.fromkeys([column, "GPUs bought", "$ per 1M total tokens"]))
    ok = frame.dropna(subset=keys)
    return ok.sort_values(keys, kind="stable").iloc[0]


def _show(rows: list[dict[str, Any]], given: planning.PlanInputs) -> None:
    frame = pd.DataFrame(rows)
    for col in ("GPUs needed", "GPUs bought", "$ per 1M total tokens", "score", "note"):
        if col not in frame:
            frame[col] = None
    ok = frame.dropna(subset=["$ per 1M total tokens"])
    if len(ok):
        pick = best_row(frame, given.objective, "rate_per_s" in given.load)
        word = BEST_WORDS.get(given.objective, BEST_WORDS["cost"])[0]
        with st.container(border=True, key="compare_answer"):
            st.metric(
                f"{word} that meets the SLO (objective: {given.objective}): {pick['GPU']}",
                f"{fmt_money(pick['$ per hour'])}/hour, {present.count(pick['GPUs bought'])} "
                f"GPUs bought",
            )
            st.caption(f"{fmt_money(pick['$ per 1M total tokens'])} per 1M total tokens")
            st.caption(pick["configuration"])
            calibration_notes([str(pick["key"])], "compare_best")
    else:
        st.error("No GPU type meets the SLOs within the budget; see the notes below.")
    pct = given.slo.percentile
    with st.container(key="compare_table"):
        st.table(display_frame(rows, pct).set_index("GPU type"))
    calibration_notes([str(k) for k in frame["key"]], "compare_table")
    with st.container(key="compare_configs"):
        st.markdown(
            "\n".join(
                f"- **{r['GPU']}:** {r['configuration']}" for r in rows if "configuration" in r
            )
        )
    if len(ok):
        st.plotly_chart(_chart(frame), key="compare_chart")
    for r in rows:
        if r.get("GPUs needed") is None:
            st.warning(f"{r['GPU']}: {r.get('note', 'no plan')}", icon="⚠️")


def _page() -> None:
    errors = FieldErrors()
    button = st.sidebar.container()
    results = st.container()
    given = plan_form("cmp", errors)
    pressed = button.button(
        "Compare", type="primary", key="cmp_button", disabled=bool(errors), width="stretch"
    )
    with results:
        invalid_note(errors, "compare")
        if given is not None and (pressed or "compare_rows" not in st.session_state):
            with guarded("results"), st.spinner("Planning on each GPU type ..."):
                st.session_state["compare_rows"] = None  # a failed run leaves no stale answer
                st.session_state["compare_given"] = given
                st.session_state["compare_rows"] = compare_rows(given)
        rows = st.session_state.get("compare_rows")
        used = st.session_state.get("compare_given")
        if rows and used is not None:
            if given != used:
                mark_stale("compare_results", "Compare")
            with guarded("results"), st.container(key="compare_results"):
                _show(rows, used)


_page()
