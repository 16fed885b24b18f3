"""Compare GPUs and Fleet pages: the numbers shown equal the library's; errors are one line."""

from __future__ import annotations

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from app.ui import error_text, fmt, fmt_money
from hardware.errors import PlannerInputError
from solvers.fleet import FleetSpec, GpuPool, WorkloadClass, load_spec, solve_fleet
from solvers.plan import PlanRequest, plan
from tests.app.conftest import APP, PAGE_TIMEOUT_S, no_errors, page, widget

# the UI plans at the 80% band edge unless the Plan page's band-edge box is unticked
BASE = {
    "model": "llama-3.1-70b",
    "max_gpus": 8,
    "isl": 4000,
    "osl": 500,
    "concurrency": 64,
    "ttft_ms": 5000.0,
    "tpot_ms": 40.0,
    "percentile": "p90",
    "confidence": 0.8,
    "objective": "cost",
}
EXAMPLE = APP.parent / "solvers" / "examples" / "fleet.yaml"


def test_compare_rows_equal_one_plan_per_gpu() -> None:
    at = page("compare")
    widget(at.multiselect, "in_gpus").set_value(["h100_sxm", "b200_sxm", "a100_sxm"])
    widget(at.number_input, "in_isl").set_value(2000)
    at.button(key="cmp_button").click().run()
    no_errors(at)
    shown = pd.DataFrame(at.session_state["compare_rows"]).set_index("GPU")
    table = at.table[0].value
    assert list(table.index) == ["H100-SXM", "B200", "A100-SXM-80GB"]  # every GPU asked for
    for gpu, name in (
        ("h100_sxm", "H100-SXM"),
        ("b200_sxm", "B200"),
        ("a100_sxm", "A100-SXM-80GB"),
    ):
        try:
            want = plan(PlanRequest(**{**BASE, "gpus": (gpu,), "isl": 2000})).to_plan_dict()
        except PlannerInputError as exc:
            assert error_text(exc) in shown.loc[name, "note"]
            assert table.loc[name, "Result"].startswith("no plan: ")  # the reason, not None
            continue
        assert shown.loc[name, "GPUs needed"] == want["best"]["gpus"]
        assert (
            shown.loc[name, "$ per 1M output tokens"]
            == want["best"]["cost_per_million_output_tokens"]
        )
        assert shown.loc[name, "TPOT p90 (ms)"] == want["best"]["predicted"]["tpot_ms"]["p90"]
        assert table.loc[name, "TPOT p90 (ms)"] == fmt(want["best"]["predicted"]["tpot_ms"]["p90"])
        assert table.loc[name, "Result"] == "meets the SLOs"
    # the objective (cost: the lowest $ per 1M total tokens of a closed loop) names the pick
    ok = shown.dropna(subset=["$ per 1M total tokens"])
    cheapest = ok["$ per 1M total tokens"].idxmin()
    assert at.metric[0].label == f"Cheapest that meets the SLO (objective: cost): {cheapest}"
    assert at.metric[0].value == (
        f"{fmt_money(ok.loc[cheapest, '$ per hour'])}/hour, "
        f"{int(ok.loc[cheapest, 'GPUs bought'])} GPUs bought"
    )


def test_compare_with_no_feasible_gpu_says_why() -> None:
    at = page("compare")
    widget(at.multiselect, "in_gpus").set_value(["h100_sxm", "h200_sxm", "b200_sxm"])
    widget(at.number_input, "in_tpot").set_value(0.01)
    at.button(key="cmp_button").click().run()
    assert not at.exception
    assert "No GPU type meets the SLOs" in at.error[0].value
    results = at.table[0].value["Result"]
    assert len(results) == 3 and all(r.startswith("no plan: ") for r in results)


def test_fleet_default_equals_solve_fleet() -> None:
    at = page("fleet")
    no_errors(at)
    want = solve_fleet(load_spec(EXAMPLE))
    got = {m.label: m.value for m in at.metric}
    assert got["Fleet cost ($/hour)"] == fmt_money(want.cost_per_hour_usd)
    assert got["GPUs bought"] == fmt(sum(want.gpus_bought_by_type.values()))
    shown = at.dataframe[0].value  # the results stand above the form
    assert len(shown) == len(want.assignments)
    spec = load_spec(EXAMPLE)
    for row, a in zip(shown.to_dict("records"), want.assignments, strict=True):
        c = next(c for c in spec.classes if c.name == a.workload_class)
        assert row["Class"] == a.workload_class and "_" not in row["GPU type"]
        assert row["TTFT (ms)"] == fmt(a.ttft_ms) and row["Percentile"] == c.percentile
        assert row["TPOT SLO (ms)"] == fmt(c.tpot_ms)
        assert row["Meets the SLO"] == "yes"  # every option is checked against its class's SLO
        assert "None" not in str(row) and "tp1 pp1" not in str(row)
    pools = at.dataframe[1].value
    assert list(pools["GPUs available"]) == [fmt(p.available) for p in spec.gpus]


def test_fleet_edits_resolve_and_bad_cells_are_one_line() -> None:
    at = page("fleet")
    widget(at.number_input, "fleet_max_per_replica").set_value(4)
    widget(at.selectbox, "fleet_backend").set_value(
        "trtllm"
    )  # sglang: no 4-GPU replica meets chat TPOT at its band
    at.button(key="fleet_button").click().run()
    no_errors(at)
    base = load_spec(EXAMPLE)
    want = solve_fleet(
        FleetSpec(classes=base.classes, gpus=base.gpus, max_gpus_per_replica=4, backend="trtllm")
    )
    assert at.metric[0].value == fmt_money(want.cost_per_hour_usd)


@pytest.fixture
def fleet_script() -> AppTest:
    return AppTest.from_file(str(APP / "views" / "fleet.py"), default_timeout=PAGE_TIMEOUT_S)


def test_fleet_yaml_upload_and_impossible_fleet(fleet_script: AppTest) -> None:
    at = fleet_script.run()
    bad = (
        b"classes:\n  - {name: x, model: llama-3.1-70b, rate_per_s: 500, isl: 4000, osl: 500, "
        b"ttft_ms: 100, tpot_ms: 5}\ngpus:\n  - {gpu: l4, available: 1}\n"
    )
    widget(at.file_uploader, "fleet_yaml").set_value(("fleet.yaml", bad, "text/yaml"))
    at.button(key="fleet_button").click().run()
    assert not at.exception
    spec = FleetSpec(
        classes=(
            WorkloadClass(
                name="x",
                model="llama-3.1-70b",
                rate_per_s=500,
                isl=4000,
                osl=500,
                ttft_ms=100,
                tpot_ms=5,
            ),
        ),
        gpus=(GpuPool(gpu="l4", available=1),),
    )
    with pytest.raises(PlannerInputError) as caught:
        solve_fleet(spec)
    assert at.error[0].value == f"results: {caught.value}"
    assert not at.metric
    widget(at.file_uploader, "fleet_yaml").set_value(
        ("fleet.yaml", b"classes: [", "text/yaml")
    ).run()
    assert not at.exception and "fleet" in at.error[0].value.lower()
    widget(at.file_uploader, "fleet_yaml").set_value(None).run()  # back to the example
    at.button(key="fleet_button").click().run()
    no_errors(at)


def test_main_navigation_opens_every_page() -> None:
    at = AppTest.from_file(str(APP / "main.py"), default_timeout=PAGE_TIMEOUT_S).run()
    no_errors(at)
    assert at.header[0].value == "Plan a deployment"
    for path, title in (
        ("views/compare.py", "Compare GPUs"),
        ("views/fleet.py", "Fleet"),
        ("views/kernels.py", "Kernels"),
    ):
        at.switch_page(path).run()
        no_errors(at)
        assert at.header[0].value == title


def test_fleet_zero_rate_keeps_the_form_and_greys_the_old_fleet(fleet_script: AppTest) -> None:
    at = fleet_script.run()
    no_errors(at)
    zero = (
        b"classes:\n  - {name: x, model: llama-3.1-8b, rate_per_s: 0, isl: 1000, osl: 100, "
        b"ttft_ms: 1000, tpot_ms: 50}\ngpus:\n  - {gpu: h100_sxm, available: 8}\n"
    )
    widget(at.file_uploader, "fleet_yaml").set_value(("fleet.yaml", zero, "text/yaml")).run()
    assert not at.exception
    assert any(e.value.startswith("Fleet YAML: ") and "rate_per_s" in e.value for e in at.error)
    assert at.button(key="fleet_button")  # the form stays, the example tables under it
    assert any(d.key == "fleet_classes" for d in at.dataframe)
    assert any("inputs changed" in w.value for w in at.warning)
