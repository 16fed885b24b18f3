"""Kernels page: latency vs size for one GPU and op family; measured points against the model."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app import inputs as ui_in
from app import kernel_inputs as ki
from app import shared
from app.ui import UNCALIBRATED_MARK, gpu_calibration, gpu_label, gpu_names, guarded
from planner.reports import present

st.header("Kernels", anchor=False)
st.caption(
    "How long one op takes on one GPU as its size grows: the planner's lookup (measured, "
    "interpolated, fitted or uncalibrated roofline) against the fitted model alone and the "
    "measured rows of the table."
)


def _gpu() -> str:
    """One GPU: the first of the shared GPU types unless changed here."""
    names = gpu_names()
    first = next(iter(shared.store()["gpus"]), ui_in.DEFAULT_GPU)
    keys = list(names)
    return str(
        st.selectbox(
            "GPU type",
            keys,
            index=keys.index(first) if first in keys else 0,
            format_func=gpu_label,
            key="kernels_gpu",
        )
    )


def _inputs() -> tuple[str, str, str, int, int, str]:
    cols = st.columns(3)
    with cols[0]:
        gpu = _gpu()
    op = cols[1].selectbox("Op family", ki.OPS, key="kernels_op")
    default_folder = ki.DEFAULT_FOLDER if ki.EXTERNAL_DATA.is_dir() else ""
    folder = (
        cols[2]
        .text_input(
            "Measured tables folder (empty = bundled)", value=default_folder, key="kernels_folder"
        )
        .strip()
    )
    swept, lo, hi = ki.SWEEP[op]
    c = st.columns(2)
    low = int(
        c[0].number_input(f"{swept} from", min_value=1, value=lo, step=1, key=f"kernels_{op}_lo")
    )
    high = int(
        c[1].number_input(f"{swept} to", min_value=2, value=hi, step=1, key=f"kernels_{op}_hi")
    )
    return gpu, op, folder, low, high, swept


def _chart(op: str, swept: str, curve: pd.DataFrame, measured: pd.DataFrame, gpu: str) -> go.Figure:
    fig = go.Figure()
    fig.add_scatter(
        x=curve[swept],
        y=curve["lookup_us"],
        mode="lines+markers",
        name="planner lookup" + (f" {UNCALIBRATED_MARK}" if gpu_calibration(gpu)[1] else ""),
        text=curve["provenance"],
        hovertemplate=f"{swept}=%{{x}}<br>%{{y:.4g}} us<br>%{{text}}",
    )
    fig.add_scatter(
        x=curve[swept],
        y=curve["model_us"],
        mode="lines",
        name="model (no tables)",
        line={"dash": "dash"},
    )
    fig.add_scatter(
        x=curve[swept],
        y=curve["roofline_bound_us"],
        mode="lines",
        name="100% roofline bound",
        line={"dash": "dot"},
    )
    if len(measured):
        fig.add_scatter(
            x=measured[swept],
            y=measured["measured_us"],
            mode="markers",
            name="measured",
            marker={"size": 9, "symbol": "x"},
        )
    fig.update_layout(
        xaxis_type="log",
        yaxis_type="log",
        xaxis={"title": f"{swept} (size)", "tickformat": ",.3~s"},
        yaxis={"title": "latency (us)", "tickformat": ",.3~s"},
        height=460,
        margin={"t": 30},
        title=f"{op} on {gpu_label(gpu)}",
    )
    return fig


def _show(gpu: str, op: str, folder: str, low: int, high: int, swept: str) -> None:
    db, where, model_only = ki.lookup_db(gpu, folder)
    table = db.tables.get(op)
    fixed, mask = ki.fixed_inputs(op, table)
    sizes = ki.sweep_sizes(low, high)
    cols = {**fixed, swept: sizes}
    got = ki.price(db, op, cols)
    model = ki.price(ki.model_only(db), op, cols)
    bound = ki.roofline_bound(db, op, cols)
    curve = pd.DataFrame(
        {
            swept: sizes,
            "lookup_us": got.seconds * 1e6,
            "provenance": got.provenance,
            "model_us": model.seconds * 1e6,
            "roofline_bound_us": bound * 1e6,
        }
    )
    measured = pd.DataFrame({swept: [], "measured_us": []})
    if table is not None and mask is not None and mask.any():
        measured = pd.DataFrame(
            {swept: table.keys[swept][mask], "measured_us": table.latency_s[mask] * 1e6}
        )
        measured = measured.sort_values(swept)
    if model_only or gpu_calibration(gpu)[1]:
        with st.container(key="kernels_uncalibrated"):
            st.warning(
                f"No measured {op} rows for {gpu_names().get(gpu, gpu)} in {where}: "
                "the curve is the model's alone. "
                + (gpu_calibration(gpu)[1] or "Its fit comes from other tables of this GPU."),
                icon="⚠️",
            )
    st.plotly_chart(_chart(op, swept, curve, measured, gpu), key="kernels_chart")
    st.caption(
        f"Measured rows from {where}: {len(measured)} in this slice"
        + ("" if table is not None else f" (no {op} table for {gpu_names().get(gpu, gpu)})")
    )
    counts = curve["provenance"].value_counts()
    st.markdown("**Provenance of the lookup:** " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    st.session_state["kernels_curve"] = curve  # exact values behind the rounded table
    shown = curve.rename(
        columns={
            "lookup_us": "Planner lookup (us)",
            "model_us": "Model alone (us)",
            "roofline_bound_us": "100% roofline bound (us)",
            "provenance": "Provenance",
            swept: f"{swept} (size)",
        }
    )
    for col in ("Planner lookup (us)", "Model alone (us)", "100% roofline bound (us)"):
        shown[col] = [present.num(v) for v in shown[col]]
    shown[f"{swept} (size)"] = [present.count(v) for v in shown[f"{swept} (size)"]]
    st.dataframe(shown, hide_index=True, key="kernels_table")
    with st.expander("Where these numbers come from"):
        st.markdown("\n".join(ki.provenance_lines(db, gpu, folder)))


with guarded("kernels"):
    _show(*_inputs())
