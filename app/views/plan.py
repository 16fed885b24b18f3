"""Plan page: model, GPUs, workload and SLOs in; the recommended deployment and its evidence out.

The form always stays: a bad input marks its own field and the Plan button remains. A result
carries the inputs it was made for; when the form differs it greys out and says so.
"""

from __future__ import annotations

import streamlit as st
from pydantic import ValidationError

from app import inputs as ui_in
from app import planning
from app.calibration_view import calibration_section
from app.plan_results import show_plan
from app.ui import LOG, FieldErrors, error_text, gpu_names
from hardware.errors import PlannerInputError
from solvers.counts import MAX_BUDGET_GPUS

STALE_TEXT = planning.STALE_TEXT

BUDGET_HELP = f"Up to {MAX_BUDGET_GPUS:,} GPUs, the largest budget the search prices."

st.header("Plan a deployment")
st.caption(
    "The cheapest configuration that meets your latency targets, the Pareto front of "
    "throughput per GPU vs per user, and ready-to-run engine configs."
)


def _model_column(errors: FieldErrors) -> tuple[object, list[str], int, float | None]:
    st.markdown("##### Model and hardware")
    model, gpus, price = None, [], None
    with errors.field("Model", _upload_name("plan_model_file")):
        model = ui_in.model_input("plan")
    with errors.field("GPU types"):
        gpus = ui_in.gpus_input("plan")
    max_gpus = int(
        st.number_input(
            "GPU budget (max GPUs)",
            min_value=1,
            max_value=MAX_BUDGET_GPUS,
            value=8,
            help=BUDGET_HELP,
            step=1,
            key="plan_max_gpus",
        )
    )
    with errors.field("Price per GPU-hour"):
        price = ui_in.price_input("plan", gpus) if gpus else None
    return model, gpus, max_gpus, price


def _upload_name(key: str) -> str:
    upload = st.session_state.get(key)
    return str(getattr(upload, "name", "") or "")


def _inputs(errors: FieldErrors) -> planning.PlanInputs | None:
    left, mid, right = st.columns(3, gap="large")
    with left:
        model, gpus, max_gpus, price = _model_column(errors)
    with mid:
        st.markdown("##### Workload")
        lengths = None
        with errors.field("Trace CSV", _upload_name("plan_trace")):
            lengths = ui_in.lengths_input("plan")
        load = ui_in.load_input("plan")
    with right:
        st.markdown("##### Targets and engine")
        slo = ui_in.slo_input("plan", robust_option=True)
        mode = st.selectbox(
            "Mode", planning.MODES, format_func=planning.MODE_LABELS.get, key="plan_mode"
        )
        backend = st.selectbox("Backend", planning.BACKENDS, key="plan_backend")
        objective = st.selectbox("Objective", planning.OBJECTIVES, key="plan_objective")
    calibration = calibration_section()
    if model is None or not gpus or lengths is None or errors:
        return None
    return planning.PlanInputs(
        model=model,
        gpus=tuple(gpus),
        max_gpus=max_gpus,  # type: ignore[arg-type]
        price_per_gpu_hour=price,
        isl=lengths[0],
        osl=lengths[1],
        load=load,
        slo=slo,
        mode=mode,
        backend=backend,
        objective=objective,
        calibration=calibration,
    )


def _run(given: planning.PlanInputs) -> None:
    st.session_state["plan_result"] = None  # a failed plan leaves no stale answer behind
    st.session_state["plan_error"] = None
    try:
        st.session_state["plan_result"] = (planning.run_plan(given), given)
    except Exception as exc:  # the answer's error is shown where the answer would be
        if not isinstance(exc, PlannerInputError | ValidationError):
            LOG.exception("unexpected error while planning")
        upload = given.model.ref if given.model.uploaded else ""
        st.session_state["plan_error"] = error_text(exc, upload)


def _results(given: planning.PlanInputs | None) -> None:
    err = st.session_state.get("plan_error")
    if err:
        st.error(f"No plan: {err}")
    result = st.session_state.get("plan_result")
    if result is None:
        return
    plan, used = result
    stale = given != used
    if stale:
        # the style goes first: Streamlit streams elements in order, so the page never shows the
        # warning over a result that is not yet greyed
        st.markdown(
            "<style>.st-key-plan_results{opacity:0.4;filter:grayscale(1)}</style>",
            unsafe_allow_html=True,
        )
        st.warning(STALE_TEXT, icon="⏳")
    with st.container(key="plan_results"):
        if used.isl.dist != "fixed" or used.osl.dist != "fixed" or used.isl.samples:
            isl, osl = planning.planned_lengths(used.isl, used.osl)
            st.info(
                f"Planned at the mean lengths: ISL {isl:,}, OSL {osl:,} tokens (the planner "
                "sizes for one ISL/OSL pair)."
            )
        if used.calibration is not None:
            with st.container(key="plan_calibration_note"):
                st.info(f"Planned with the {used.calibration.label}.")
        gpu = plan["best"]["deployment"]["gpu"]
        show_plan(plan, gpu_names().get(gpu, gpu), used.backend)


def _page() -> None:
    errors = FieldErrors()
    given = _inputs(errors)
    pressed = st.button("Plan", type="primary", key="plan_button")
    if errors:
        st.caption("Fix the marked field to plan.")
    elif given is not None and (pressed or "plan_result" not in st.session_state):
        _run(given)  # the first visit plans the defaults so the page opens on an answer
    _results(given)


_page()
