"""Fleet page: several workload classes and GPU pools in; the MILP's minimum-cost fleet out."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pandas as pd
import streamlit as st

from app.planning import BACKENDS, UPLOADED_KEY, check_fleet_models
from app.ui import fmt, fmt_money, gpu_names, guarded, model_names, readable
from solvers.fleet import FleetResult, FleetSpec, GpuPool, WorkloadClass, load_spec, solve_fleet

EXAMPLE = Path(__file__).resolve().parents[2] / "solvers" / "examples" / "fleet.yaml"
CLASS_COLUMNS = ["name", "model", "rate_per_s", "isl", "osl", "ttft_ms", "tpot_ms", "percentile"]
POOL_COLUMNS = ["gpu", "available", "price_per_gpu_hour"]

st.header("Fleet")
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


def _default_spec() -> FleetSpec:
    upload = st.file_uploader(
        "Start from a fleet YAML (optional)", type=["yaml", "yml"], key="fleet_yaml"
    )
    if upload is not None:
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


def _inputs() -> FleetSpec:
    base = _default_spec()
    classes, pools = _tables(base)
    st.markdown("##### Workload classes")
    models = list(model_names())
    classes = st.data_editor(
        classes,
        num_rows="dynamic",
        hide_index=True,
        key="fleet_classes",
        column_config={
            "model": st.column_config.SelectboxColumn("model", options=models, required=True),
            "percentile": st.column_config.SelectboxColumn(
                "percentile", options=["p50", "p90", "p99"]
            ),
            "rate_per_s": st.column_config.NumberColumn("rate (req/s)", min_value=0.0),
        },
    )
    st.markdown("##### GPU pools")
    pools = st.data_editor(
        pools,
        num_rows="dynamic",
        hide_index=True,
        key="fleet_pools",
        column_config={
            "gpu": st.column_config.SelectboxColumn(
                "gpu", options=list(gpu_names()), required=True
            ),
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
    return _served_models_only(_spec(classes, pools, backend, max_per))


@st.cache_data(show_spinner=False, max_entries=16)
def _solve(spec_json: str) -> FleetResult:
    return solve_fleet(FleetSpec.model_validate_json(spec_json))


def _show(result: FleetResult) -> None:
    with st.container(border=True, key="fleet_answer"):
        cols = st.columns(4)
        cols[0].metric("Fleet cost per hour", fmt_money(result.cost_per_hour_usd))
        cols[1].metric("GPUs", fmt(sum(result.gpus_by_type.values())))
        cols[2].metric("Solver status", f"{result.status} ({result.solver})")
        cols[3].metric("Solve time (s)", fmt(result.solve_seconds))
        st.markdown(
            f"**Binding constraint:** {result.binding_constraint}  \n"
            f"**Proven optimal:** {'yes' if result.optimal else 'no'} ({result.solution_status}); "
            f"{result.options:,} options considered."
        )
    st.markdown("##### Replicas per class")
    frame = pd.DataFrame([a.model_dump() for a in result.assignments])
    st.dataframe(readable(frame), hide_index=True, key="fleet_assignments")
    st.markdown("##### GPUs by type")
    names = gpu_names()
    st.bar_chart(
        pd.DataFrame({"GPUs": {names.get(k, k): v for k, v in result.gpus_by_type.items()}})
    )


def _page() -> None:
    with guarded("inputs"):
        spec = _inputs()
        if (
            st.button("Solve fleet", type="primary", key="fleet_button")
            or "fleet_result" not in st.session_state
        ):
            st.session_state["fleet_result"] = None  # a failed solve leaves no stale answer behind
            st.session_state["fleet_result"] = _solve(spec.model_dump_json())
    result = st.session_state.get("fleet_result")
    if result is not None:
        with guarded("results"):
            _show(result)


_page()
