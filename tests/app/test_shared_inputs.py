"""Shared inputs: a URL fills the form on every page; each field checks its rule out loud and no
request runs while one is broken; uncalibrated GPUs are marked."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from app import shared
from tests.app.conftest import APP, PAGE_TIMEOUT_S, no_errors


def _with_query(name: str, **query: str) -> AppTest:
    at = AppTest.from_file(str(APP / "views" / f"{name}.py"), default_timeout=PAGE_TIMEOUT_S)
    for k, v in query.items():
        at.query_params[k] = v
    return at.run()


def _marks(at: AppTest) -> list[str]:
    return [m.value for m in at.markdown if m.value.startswith(":red[")]


def test_a_url_fills_the_form_and_plans_it() -> None:
    at = _with_query(
        "plan", model="llama-3.1-8b", gpus="h100_sxm,b200_sxm", ttft="2000", objective="gpus"
    )
    no_errors(at)
    used = at.session_state["plan_result"][1]
    assert used.model.ref == "llama-3.1-8b" and used.gpus == ("h100_sxm", "b200_sxm")
    assert used.slo.ttft_ms == 2000.0 and used.objective == "gpus"
    assert at.session_state["plan_result"][0]["objective"] == "gpus"
    assert any("(objective: gpus)" in c.value for c in at.caption)


def test_the_link_carries_only_what_differs() -> None:
    at = _with_query("plan", tpot="45")
    store = at.session_state[shared.STORE]
    assert store["tpot"] == 45.0 and store["objective"] == "cost"  # cost is the default
    assert at.query_params["tpot"] == "45" and "objective" not in at.query_params
    links = [m.value for m in at.markdown if "Compare these GPUs" in m.value]
    assert links and "tpot=45" in links[0] and "gpus=h200_sxm%2Ch100_sxm%2Cb200_sxm" in links[0]


def test_an_unreadable_url_value_keeps_the_default_and_says_so() -> None:
    at = _with_query("plan", isl="many", pct="p42")
    assert not at.exception
    assert any("isl, pct could not be read" in w.value for w in at.warning)
    assert at.session_state["plan_result"][1].slo.percentile == "p90"


def test_bad_values_are_named_under_their_field_and_nothing_runs() -> None:
    at = _with_query("plan", ttft="0", tpot="-5", conc="0")
    assert not at.exception
    marks = _marks(at)
    assert ":red[⚠️ TTFT SLO (ms): must be > 0 ms]" in marks
    assert ":red[⚠️ TPOT SLO (ms): must be > 0 ms]" in marks
    assert ":red[⚠️ Concurrent clients: must be ≥ 1 client]" in marks
    assert "plan_result" not in at.session_state  # no request ran
    assert at.button(key="plan_button").disabled


def test_a_length_above_the_model_limit_names_the_limit() -> None:
    at = _with_query("plan", isl="200000")
    assert not at.exception
    marks = _marks(at)
    assert any("Llama-3.1-70B's maximum positions (131,072 tokens)" in m for m in marks), marks
    assert "plan_result" not in at.session_state


def test_compare_marks_an_uncalibrated_gpu() -> None:
    at = _with_query("compare", gpus="mi300x,h200_sxm")
    no_errors(at)
    table = at.table[0].value
    assert "MI300X †" in table.index and "H200-SXM" in table.index
    assert any("MI300X has no measured kernel data" in c.value for c in at.caption)


def test_inputs_follow_the_user_from_page_to_page() -> None:
    at = AppTest.from_file(str(APP / "main.py"), default_timeout=PAGE_TIMEOUT_S).run()
    next(w for w in at.number_input if w.key == "in_tpot").set_value(33.0).run()
    for path in ("views/compare.py", "views/traffic.py", "views/plan.py"):
        at.switch_page(path).run()
        assert not at.exception
        assert next(w for w in at.number_input if w.key == "in_tpot").value == 33.0, path


def test_compare_at_a_rate_picks_the_lowest_dollars_per_hour_then_fewer_gpus() -> None:
    at = _with_query("compare", load="Rate", rate="4", gpus="h100_sxm,h200_sxm,b200_sxm")
    no_errors(at)
    rows = [r for r in at.session_state["compare_rows"] if r.get("GPUs bought") is not None]
    pick = min(rows, key=lambda r: (r["$ per hour"], r["GPUs bought"]))
    assert at.metric[0].label.endswith(f"(objective: cost): {pick['GPU']}")


def test_an_uncalibrated_gpu_marks_the_card_numbers() -> None:
    at = _with_query("plan", gpus="mi300x")
    no_errors(at)
    got = {m.label: m.value for m in at.metric}
    for label in ("Cost ($/hour)", "TTFT p90 (ms)", "TPOT p90 (ms)"):
        assert got[label].endswith(" †"), label
    assert any("MI300X has no measured kernel data" in c.value for c in at.caption)


def test_traffic_refuses_lengths_above_the_model_limit() -> None:
    at = _with_query("traffic", isl="200000")
    assert not at.exception
    assert any("maximum positions (131,072 tokens)" in m for m in _marks(at))
    assert "traffic_result" not in at.session_state  # nothing ran


def test_role_gpus_are_named_where_the_plan_gives_them() -> None:
    from app.plan_results import role_gpus

    dep = {"mode": "disagg", "gpu": "h100_sxm", "prefill_gpu": "h100_sxm", "decode_gpu": "mi300x"}
    assert role_gpus(dep) == "prefill on H100-SXM, decode on MI300X †"
    assert role_gpus({"mode": "disagg", "gpu": "h100_sxm"}) == ""
