"""Plan page: model, GPUs, workload and SLOs in; the recommended deployment and its evidence out."""

from __future__ import annotations

import streamlit as st

from app import inputs as ui_in
from app import planning
from app.plan_results import show_plan
from app.ui import gpu_names, guarded

st.header("Plan a deployment")
st.caption("The cheapest configuration that meets your latency targets, the Pareto front of "
           "throughput per GPU vs per user, and ready-to-run engine configs.")


def _inputs() -> planning.PlanInputs | None:
    left, mid, right = st.columns(3, gap="large")
    with left:
        st.markdown("##### Model and hardware")
        model = ui_in.model_input("plan")
        gpus = ui_in.gpus_input("plan")
        max_gpus = int(st.number_input("GPU budget (max GPUs)", min_value=1, max_value=4096, value=8,
                                       step=1, key="plan_max_gpus"))
        price = ui_in.price_input("plan", gpus)
    with mid:
        st.markdown("##### Workload")
        isl, osl, load = ui_in.workload_input("plan")
    with right:
        st.markdown("##### Targets and engine")
        slo = ui_in.slo_input("plan", robust_option=True)
        mode = st.selectbox("Mode", planning.MODES, format_func=planning.MODE_LABELS.get, key="plan_mode")
        backend = st.selectbox("Backend", planning.BACKENDS, key="plan_backend")
        objective = st.selectbox("Objective", planning.OBJECTIVES, key="plan_objective")
    if model is None:
        return None
    return planning.PlanInputs(model=model, gpus=tuple(gpus), max_gpus=max_gpus, price_per_gpu_hour=price, isl=isl, osl=osl,
                               load=load, slo=slo, mode=mode, backend=backend, objective=objective)


def _page() -> None:
    with guarded("inputs"):
        given = _inputs()
        pressed = st.button("Plan", type="primary", key="plan_button")
        if given is None:
            return
        # the first visit plans the defaults so the page opens on an answer
        if pressed or "plan_result" not in st.session_state:
            st.session_state["plan_result"] = None  # a failed plan leaves no stale answer behind
            st.session_state["plan_result"] = (planning.run_plan(given), given)
    result = st.session_state.get("plan_result")
    if result is None:
        return
    with guarded("results"):
        plan, used = result
        if used.isl.dist != "fixed" or used.osl.dist != "fixed" or used.isl.samples:
            isl, osl = planning.planned_lengths(used.isl, used.osl)
            st.info(f"Planned at the mean lengths: ISL {isl}, OSL {osl} tokens (the planner sizes for one "
                    "ISL/OSL pair).")
        gpu = plan["best"]["deployment"]["gpu"]
        show_plan(plan, gpu_names().get(gpu, gpu), used.backend)


_page()
