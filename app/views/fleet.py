"""Fleet page: several workload classes and GPU pools in; the MILP's minimum-cost fleet out."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pandas as pd
import streamlit as st

from app import inputs as ui_in
from app.plan_form import invalid_note
from app.plan_results import config_columns
from app.planning import BACKENDS, UPLOADED_KEY, check_fleet_models
from app.ui import (
    FieldErrors,
    calibration_notes,
    fmt,
    fmt_money,
    gpu_label,
    gpu_names,
    guarded,
    mark_stale,
    model_names,
)
from planner.reports import present
from solvers.fleet import FleetResult, FleetSpec, GpuPool, WorkloadClass, load_spec, solve_fleet

EXAMPLE = Path(__file__).resolve().parents[2] / "solvers" / "examples" / "fleet.yaml"
CLASS_COLUMNS = ["name", "model", "rate_per_s", "isl", "osl", "ttft_ms", "tpot_ms", "percentile"]
POOL_COLUMNS = ["gpu", "available", "price_per_gpu_hour"]

st.header("Fleet", anchor=False)
st.caption(
    "Several classes of traffic, several GPU types: how many replicas of which configuration "
    "on which GPU serve every class within its SLOs at the lowest $/hour (a MILP, solved to "
    "proven optimality)."
)


@st.cache_data(show_spinner=False)
def _spec_from_yaml(data: bytes) -> FleetSpec:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fleet.yaml"
        path.write_bytes(data)
        return load_spec(path)


def _default_spec(errors: FieldErrors) -> FleetSpec:
    """The uploaded fleet YAML, or the example when none is given or it cannot be read (its
    error shown under the upload; the form stays)."""
    upload = st.file_uploader(
        "Start from a fleet YAML (optional)", type=["yaml", "yml"], key="fleet_yaml"
    )
    if upload is not None:
        with errors.field("Fleet YAML", upload.name):
            return _served_models_only(_spec_from_yaml(upload.getvalue()))
    return _spec_from_yaml(EXAMPLE.read_bytes())


def _served_models_only(spec: FleetSpec) -> FleetSpec:
    return check_fleet_models(spec, st.session_state.get(UPLOADED_KEY, set()))


def _tables(spec: FleetSpec) -> tuple[pd.DataFrame, pd.DataFrame]:
    classes = pd.DataFrame([c.model_dump() for c in spec.classes], columns=CLASS_COLUMNS)
    pools = pd.DataFrame([p.model_dump() for p in spec.gpus], columns=POOL_COLUMNS)
    return classes, pools


def _none_if_nan(value: object) -> object:
    return None if isinstance(value, float) and value != value else value


def _spec(
    classes: pd.DataFrame, pools: pd.DataFrame, backend: str, max_per_replica: int
) -> FleetSpec:
    """The library spec from the edited tables (pydantic names the bad cell's field)."""
    return FleetSpec(
        classes=tuple(
            WorkloadClass(**{k: _none_if_nan(v) for k, v in row.items()})
            for row in classes.dropna(how="all").to_dict("records")
        ),
        gpus=tuple(
            GpuPool(**{k: _none_if_nan(v) for k, v in row.items()})
            for row in pools.dropna(how="all").to_dict("records")
        ),
        max_gpus_per_replica=max_per_replica,
        backend=backend,
    )


def _class_rules(errors: FieldErrors, classes: pd.DataFrame) -> None:
    """Each class row's numbers against their rules, the message under the table."""
    rules = (
        ("rate_per_s", "rate (requests/s)", "requests/s"),
        ("isl", "ISL", "tokens"),
        ("osl", "OSL", "tokens"),
        ("ttft_ms", "TTFT SLO", "ms"),
        ("tpot_ms", "TPOT SLO", "ms"),
    )
    for i, row in enumerate(classes.dropna(how="all").to_dict("records")):
        name = row.get("name") or f"row {i + 1}"
        for col, label, unit in rules:
            value = _none_if_nan(row.get(col))
            if value is None or not isinstance(value, int | float) or value <= 0:
                ui_in.flag(errors, f"Class {name}: {label}", f"must be > 0 {unit}")


def _inputs(errors: FieldErrors) -> FleetSpec | None:
    base = _default_spec(errors)
    classes, pools = _tables(base)
    st.markdown("##### Workload classes")
    models = model_names()
    classes = st.data_editor(
        classes,
        num_rows="dynamic",
        hide_index=True,
        key="fleet_classes",
        column_config={
            "model": st.column_config.SelectboxColumn("model", options=list(models), required=True),
            "percentile": st.column_config.SelectboxColumn(
                "percentile", options=["p50", "p90", "p99"]
            ),
            "rate_per_s": st.column_config.NumberColumn("rate (requests/s)"),
            "ttft_ms": st.column_config.NumberColumn("TTFT SLO (ms)"),
            "tpot_ms": st.column_config.NumberColumn("TPOT SLO (ms)"),
            "isl": st.column_config.NumberColumn("ISL (tokens)"),
            "osl": st.column_config.NumberColumn("OSL (tokens)"),
        },
    )
    _class_rules(errors, classes)
    st.markdown("##### GPU pools")
    pools = st.data_editor(
        pools,
        num_rows="dynamic",
        hide_index=True,
        key="fleet_pools",
        column_config={
            "gpu": st.column_config.SelectboxColumn(
                "GPU",
                options=list(gpu_names()),
                format_func=lambda k: gpu_label(str(k)),
                required=True,
            ),
            "available": st.column_config.NumberColumn("GPUs available", min_value=0),
            "price_per_gpu_hour": st.column_config.NumberColumn(
                "$/GPU-hour (empty = catalog)", min_value=0.0
            ),
        },
    )
    cols = st.columns(2)
    backend = cols[0].selectbox(
        "Backend", BACKENDS, index=BACKENDS.index(base.backend), key="fleet_backend"
    )
    max_per = int(
        cols[1].number_input(
            "Max GPUs per replica",
            min_value=1,
            max_value=72,
            value=base.max_gpus_per_replica,
            key="fleet_max_per_replica",
        )
    )
    if errors:
        return None
    with errors.field("Fleet tables"):
        return _served_models_only(_spec(classes, pools, backend, max_per))
    return None


@st.cache_data(show_spinner=False, max_entries=16)
def _solve(spec_json: str) -> FleetResult:
    return solve_fleet(FleetSpec.model_validate_json(spec_json))


def class_frame(result: FleetResult, spec: FleetSpec) -> pd.DataFrame:
    """One row per assignment: class, GPU, replicas, the replica's parts as columns, and the
    latency it was checked with against the class's SLO."""
    slo = {c.name: c for c in spec.classes}
    rows = []
    for a in result.assignments:
        c = slo[a.workload_class]
        rows.append(
            {
                "Class": a.workload_class,
                "GPU type": gpu_label(a.gpu),
                "Replicas": present.count(a.replicas),
                "GPUs per replica": present.count(a.gpus_per_replica),
                **config_columns(a.config),
                "Requests/s per replica": present.num(a.requests_per_s_per_replica),
                "Percentile": c.percentile,
                "TTFT (ms)": present.num(a.ttft_ms),
                "TTFT SLO (ms)": present.num(c.ttft_ms),
                "TPOT (ms)": present.num(a.tpot_ms),
                "TPOT SLO (ms)": present.num(c.tpot_ms),
                "Meets the SLO": _meets(a.ttft_ms, c.ttft_ms) and _meets(a.tpot_ms, c.tpot_ms),
                "Cost ($/hour)": present.num(a.cost_per_hour_usd),
            }
        )
    frame = pd.DataFrame(rows)
    if len(frame):
        frame["Meets the SLO"] = frame["Meets the SLO"].map({True: "yes", False: "no"})
    return frame


def _meets(value: float | None, limit: float) -> bool:
    return value is not None and value <= limit


def pool_frame(result: FleetResult, spec: FleetSpec) -> pd.DataFrame:
    """Per pool: GPUs used, bought (whole purchase units) and available, and the share used."""
    rows = []
    for p in spec.gpus:
        used, bought = result.gpus_by_type.get(p.gpu, 0), result.gpus_bought_by_type.get(p.gpu)
        rows.append(
            {
                "GPU pool": gpu_label(p.gpu),
                "GPUs used": present.count(used),
                "GPUs bought": present.count(bought),
                "GPUs available": present.count(p.available),
                "Pool used (%)": present.pct(used / p.available if p.available else None),
            }
        )
    return pd.DataFrame(rows)


def _show(result: FleetResult, spec: FleetSpec) -> None:
    with st.container(border=True, key="fleet_answer"):
        st.caption(f"Cheapest fleet that meets every class's SLO (objective: {spec.objective})")
        cols = st.columns(4)
        cols[0].metric("Fleet cost ($/hour)", fmt_money(result.cost_per_hour_usd))
        cols[1].metric("GPUs bought", present.count(sum(result.gpus_bought_by_type.values())))
        cols[2].metric("Binding limit", result.binding_constraint.split(" (")[0])
        cols[3].metric("Proven optimal", "yes" if result.optimal else "no")
        st.markdown(
            f"**Binding:** {result.binding_constraint}; {result.options:,} options considered, "
            f"solved by {result.solver} in {fmt(result.solve_seconds)} s ({result.status})."
        )
        calibration_notes(sorted({a.gpu for a in result.assignments}), "fleet")
    st.markdown("##### Latency per class against its SLO")
    st.dataframe(class_frame(result, spec), hide_index=True, key="fleet_assignments")
    st.markdown("##### Use of each GPU pool")
    st.dataframe(pool_frame(result, spec), hide_index=True, key="fleet_pools_used")


def _page() -> None:
    errors = FieldErrors()
    button = st.container()
    results = st.container()
    spec = _inputs(errors)
    pressed = button.button(
        "Solve fleet", type="primary", key="fleet_button", disabled=bool(errors)
    )
    with results:
        invalid_note(errors, "solve")
        if spec is not None and (pressed or "fleet_result" not in st.session_state):
            st.session_state["fleet_result"] = None  # a failed solve leaves no stale answer
            with guarded("results"):
                st.session_state["fleet_result"] = (_solve(spec.model_dump_json()), spec)
        result = st.session_state.get("fleet_result")
        if result is not None:
            answer, used = result
            if spec != used:
                mark_stale("fleet_results", "Solve fleet")
            with guarded("results"), st.container(key="fleet_results"):
                _show(answer, used)


_page()
