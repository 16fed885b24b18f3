"""Plan page section "Calibrate to your benchmark results": upload, fit, compare, plan with it.

Uploads go through ``app.calibration_upload`` (safe unpacking) and ``planner calibrate e2e``'s
own reader and fit (``planner.calibration.data.load_data``, ``planner.calibration.profile
.calibrate``). The page shows every measured row next to its prediction with the packaged
constants and with the fitted ones, and offers the profile to the plan (``PlanInputs.calibration``).
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st
import yaml
from plotly.subplots import make_subplots

from app.calibration_upload import FIELD, unpack, without_folder
from app.ui import LOG, error_text
from hardware.errors import PlannerInputError
from planner.calibration.data import load_data
from planner.calibration.profile import Profile, calibrate, profile_text
from planner.reports import present

METRICS = (("ttft", "TTFT"), ("tpot", "TPOT"))
STATE = "plan_calibration"
"""Session state: the fitted profile of the current upload (a ``Fitted``), or None."""


@dataclass(frozen=True)
class Fitted:
    """A profile fitted in this session: its YAML, the label outputs name it by, and its files."""

    digest: str
    text: str
    label: str
    files: tuple[str, ...]
    skipped: tuple[str, ...]

    def profile(self) -> Profile:
        """The profile itself."""
        return Profile.model_validate(yaml.safe_load(self.text))


def _relative(prof: Profile, folder: Path) -> Profile:
    """``prof`` with the private folder's path removed from every file name it records."""
    text = json.dumps(prof.model_dump(mode="json"))
    text = text.replace(json.dumps(f"{folder}/")[1:-1], "").replace(
        json.dumps(str(folder))[1:-1], "."
    )
    return Profile.model_validate(json.loads(text))


@st.cache_data(show_spinner=False, max_entries=8)
def fit_uploads(uploads: tuple[tuple[str, bytes], ...]) -> Fitted:
    """Unpack, read and fit the uploads (cached by their content)."""
    digest = hashlib.sha256(b"".join(n.encode() + b"\0" + b for n, b in uploads)).hexdigest()
    with tempfile.TemporaryDirectory(prefix="planner-ui-results-") as tmp:
        folder = Path(tmp) / "results"
        folder.mkdir()
        got = unpack(list(uploads), folder)
        try:
            prof = _relative(calibrate(load_data(folder), progress=False), folder)
        except PlannerInputError as exc:
            raise PlannerInputError(FIELD, without_folder(exc.message, folder)) from None
    names = ", ".join(n for n, _ in uploads)
    names = names if len(names) <= 60 else names[:57] + "..."
    label = f"calibration profile uploaded in the UI ({names}; sha256 {digest[:12]})"
    return Fitted(digest, profile_text(prof), label, tuple(got.files), tuple(got.skipped))


def comparison_frame(prof: Profile) -> pd.DataFrame:
    """Every measured row with its prediction before and after calibration (raw numbers)."""
    recs = []
    for engine, eng in prof.engines.items():
        for r in eng.all_gpus.rows:
            rec: dict[str, Any] = {
                "engine": engine,
                "GPU": r.get("system"),
                "mode": r.get("mode"),
                "ISL (tokens)": r.get("isl"),
                "OSL (tokens)": r.get("osl"),
                "concurrency (clients)": r.get("concurrency"),
            }
            for m, name in METRICS:
                meas = float(r[f"silicon_{m}_ms"])
                before, after = float(r[f"pred_before_{m}_ms"]), float(r[f"pred_after_{m}_ms"])
                rec[f"measured {name} mean (ms)"] = meas
                rec[f"predicted {name} mean before (ms)"] = before
                rec[f"predicted {name} mean after (ms)"] = after
                rec[f"{name} error before (%)"] = 100.0 * abs(before - meas) / meas
                rec[f"{name} error after (%)"] = 100.0 * abs(after - meas) / meas
            recs.append(rec)
    return pd.DataFrame(recs)


def summary_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Median error per engine and mode, before and after."""
    out = []
    for (engine, mode), sub in frame.groupby(["engine", "mode"]):
        row: dict[str, Any] = {"engine": engine, "mode": mode, "rows": len(sub)}
        for _, name in METRICS:
            for when in ("before", "after"):
                row[f"{name} median error {when} (%)"] = float(
                    sub[f"{name} error {when} (%)"].median()
                )
        out.append(row)
    return pd.DataFrame(out)


def shown(frame: pd.DataFrame) -> pd.DataFrame:
    """Numbers as text at 3-4 significant figures (counts exact)."""
    out = frame.copy()
    for col in out.columns:
        if out[col].dtype.kind in "fi":
            out[col] = [present.num(float(v)) for v in out[col]]
    return out


def comparison_chart(frame: pd.DataFrame) -> go.Figure:
    """Predicted vs measured (log axes), before and after calibration, one panel per metric."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=[f"{n} mean (ms)" for _, n in METRICS])
    for col, (_, name) in enumerate(METRICS, start=1):
        meas = frame[f"measured {name} mean (ms)"].to_numpy(float)
        lo, hi = float(np.nanmin(meas)) / 1.5, float(np.nanmax(meas)) * 1.5
        fig.add_trace(
            go.Scatter(
                x=[lo, hi],
                y=[lo, hi],
                mode="lines",
                line={"dash": "dot", "color": "grey"},
                name="predicted = measured",
                showlegend=col == 1,
            ),
            row=1,
            col=col,
        )
        for when, color in (("before", "#b0b0b0"), ("after", "#1f77b4")):
            fig.add_trace(
                go.Scatter(
                    x=meas,
                    y=frame[f"predicted {name} mean {when} (ms)"],
                    mode="markers",
                    marker={"color": color, "size": 9},
                    name=f"predicted {when} calibration",
                    showlegend=col == 1,
                ),
                row=1,
                col=col,
            )
        fig.update_xaxes(type="log", title_text=f"measured {name} (ms)", row=1, col=col)
        fig.update_yaxes(type="log", title_text=f"predicted {name} (ms)", row=1, col=col)
    fig.update_layout(height=380, margin={"t": 40, "b": 10}, legend={"orientation": "h"})
    return fig


def _uploads() -> tuple[tuple[str, bytes], ...]:
    files = st.file_uploader(
        "Result files (vllm bench serve JSON, SGLang JSONL, deployment.json, CSV) or a results "
        "folder as .zip",
        type=["json", "jsonl", "csv", "zip"],
        accept_multiple_files=True,
        key="plan_results_upload",
        help="What benchmark.sh leaves in results/: each run folder holds the engine's native "
        "result file and deployment.json. Several run folders: zip the results folder.",
    )
    return tuple((f.name, f.getvalue()) for f in files or [])


def _show(fitted: Fitted) -> None:
    prof = fitted.profile()
    frame = comparison_frame(prof)
    st.markdown("###### Predicted vs measured, before and after calibration")
    with st.container(key="calibration_summary"):
        st.table(shown(summary_frame(frame)).set_index("engine"))
    with st.container(key="calibration_chart"):
        st.plotly_chart(comparison_chart(frame), key="calibration_plot")
    with st.container(key="calibration_table"):
        st.dataframe(shown(frame), hide_index=True)
    fits = [
        f"{engine}: fitted {', '.join(e.all_gpus.fitted) or 'nothing (packaged constants kept)'} "
        f"from {e.all_gpus.rows_used} rows"
        for engine, e in prof.engines.items()
    ]
    st.caption(
        "; ".join(fits)
        + (f"; skipped {len(fitted.skipped)} non-data files" if fitted.skipped else "")
    )
    st.download_button(
        "Calibration profile (YAML)",
        fitted.text,
        file_name="calibration-profile.yaml",
        mime="application/x-yaml",
        key="dl_profile",
    )


def calibration_section() -> Fitted | None:
    """The section; the profile to plan with (None: the packaged constants)."""
    with st.expander("Calibrate to your benchmark results", expanded=False):
        uploads = _uploads()
        if not uploads:
            st.caption(
                "Run the emitted benchmark.sh, then upload its results to fit the engine "
                "constants to your cluster (`planner calibrate e2e` does the same)."
            )
            return None
        try:
            with st.spinner("Fitting the engine constants to your results..."):
                fitted = fit_uploads(uploads)
        except Exception as exc:  # one line where the answer would be; the form stays
            if not isinstance(exc, PlannerInputError):
                LOG.exception("unexpected error while calibrating")
            st.error(error_text(exc), icon="⚠️")
            return None
        _show(fitted)
        use = st.checkbox("Plan with the fitted profile", value=True, key="plan_use_profile")
        return fitted if use else None
