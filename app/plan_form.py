"""The form of the Plan and Compare pages, in the sidebar: the shared inputs (``app.shared``)
plus what the page adds. It returns the page's ``PlanInputs``, or None while any field is
invalid (each invalid field shows its message under it)."""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from app import inputs as ui_in
from app import planning, shared
from app.ui import FieldErrors


def _upload_name(key: str) -> str:
    return str(getattr(st.session_state.get(key), "name", "") or "")


def plan_form(
    page: str,
    errors: FieldErrors,
    extra: Callable[[FieldErrors, list[str]], float | None] | None = None,
) -> planning.PlanInputs | None:
    """Draw the form in the sidebar; ``extra`` draws page fields under the GPUs (its value is the
    price override)."""
    with st.sidebar:
        shared.bad_query_note()
        st.markdown("##### Model and hardware")
        model = None
        with errors.field("Model", _upload_name(f"{page}_model_file")):
            model = ui_in.model_input(page)
        gpus = ui_in.gpus_input(errors)
        max_gpus = ui_in.budget_input(errors)
        price = extra(errors, gpus) if extra is not None and gpus else None
        st.markdown("##### Workload")
        lengths = ui_in.lengths_input(errors, page)
        limits = ui_in.check_context(errors, model, lengths)
        load = ui_in.load_input(errors)
        st.markdown("##### Targets")
        slo = ui_in.slo_input(errors, page, robust_option=page == "plan")
        objective = ui_in.objective_input()
        mode = ui_in.choice_input("mode", "Mode", planning.MODE_LABELS)
        backend = ui_in.choice_input("backend", "Backend", {b: b for b in planning.BACKENDS})
    if model is None or lengths is None or errors:
        return None
    return planning.PlanInputs(
        model=model,
        gpus=tuple(gpus),
        max_gpus=max_gpus,
        price_per_gpu_hour=price,
        isl=lengths[0],
        osl=lengths[1],
        load=load,
        slo=slo,
        mode=mode,
        backend=backend,
        objective=objective,
        max_lengths=limits,
    )


def invalid_note(errors: FieldErrors, what: str) -> None:
    """Under the button: which fields to fix (no request runs meanwhile)."""
    if errors:
        st.error(f"Fix {', '.join(errors.messages)} to {what} (marked in the form).", icon="⚠️")
