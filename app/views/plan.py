"""Plan page: model, GPUs, workload and SLOs in (the sidebar); the recommended deployment and its
evidence out.

The form always stays: a bad input marks its own field and no plan runs until it is fixed. A
result carries the inputs it was made for; when the form differs it greys out and says so.
"""

from __future__ import annotations

import streamlit as st
from pydantic import ValidationError

from app import inputs as ui_in
from app import planning
from app.calibration_view import calibration_section
from app.plan_form import invalid_note, plan_form
from app.plan_results import show_plan
from app.ui import LOG, FieldErrors, error_text, guarded, mark_stale
from hardware.errors import PlannerInputError

st.header("Plan a deployment", anchor=False)


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
    if given != used:
        mark_stale("plan_results", "Plan")
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
        power: dict[str, object] = {}
        with guarded("power"):
            power = planning.plan_power(plan, used)
        show_plan(plan, used.backend, ui_in.model_label(used.model), power)


def _price(errors: FieldErrors, gpus: list[str]) -> float | None:
    return ui_in.price_input(errors, "plan", gpus)


def _page() -> None:
    errors = FieldErrors()
    button = st.sidebar.container()
    results = st.container()
    given = plan_form("plan", errors, _price)
    calibration = calibration_section()
    if given is not None and calibration is not None:
        given = planning.PlanInputs(**{**given.__dict__, "calibration": calibration})
    pressed = button.button(
        "Plan", type="primary", key="plan_button", disabled=bool(errors), width="stretch"
    )
    with results:
        invalid_note(errors, "plan")
        if given is not None and (pressed or "plan_result" not in st.session_state):
            with st.spinner("Planning ..."):
                _run(given)  # the first visit plans the form's values: a link opens on its plan
        _results(given)


_page()
