"""Plan page: the numbers shown equal solvers.plan's answer; bad input is one readable line."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest

from app.plan_results import config_text, config_words, engine_zip, pct_value
from app.planning import STALE_TEXT
from app.ui import error_text, fmt, fmt_money
from planner.emitters.bundle import build_bundle
from planner.emitters.plan_file import parse_plan
from planner.model.bundled import MAX_CONFIG_BYTES, bundled_models
from planner.reports.plan_view import parse_plan as parse_report_plan
from planner.reports.tables import candidate_rows
from solvers.plan import PlanRequest, plan
from tests.app.conftest import no_errors, page, widget

# the UI plans at the 80% band edge unless the Plan page's band-edge box is unticked
DEFAULT = {
    "model": "llama-3.1-70b",
    "gpus": ("h200_sxm",),
    "max_gpus": 8,
    "isl": 4000,
    "osl": 500,
    "max_isl": 8000,  # as `planner plan`: twice the mean (planner.workload.spec.max_lengths)
    "max_osl": 1000,
    "concurrency": 64,
    "ttft_ms": 5000.0,
    "tpot_ms": 40.0,
    "percentile": "p90",
    "confidence": 0.8,
}


def metrics(at) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {m.label: m.value for m in at.metric}


def assert_shows(at, want: dict) -> None:  # type: ignore[no-untyped-def, type-arg]
    """The recommendation card shows exactly the library's numbers, formatted."""
    got = metrics(at)
    pct = want["slo"]["percentile"]
    pred = want["best"]["predicted"]
    assert got[f"TTFT {pct} (ms)"] == f"{fmt(pct_value(pred['ttft_ms'], pct))} ms"
    assert got[f"TPOT {pct} (ms)"] == f"{fmt(pct_value(pred['tpot_ms'], pct))} ms"
    assert got["Cost ($/hour)"] == fmt_money(want["best"]["cost_per_hour_usd"])
    assert got["GPUs bought"] == fmt(want["best"]["gpus_bought"])
    assert got["Binding limit"] == want["binding_constraint"]
    objective = want["objective"]
    assert any(f"(objective: {objective})" in c.value for c in at.caption)
    why = config_words(want["binding"]["sentence"])  # configurations in words
    assert any(why in m.value for m in at.markdown)
    sentence = config_text(want["best"]["deployment"], want["best"]["gpus"]).split(", ", 1)[1]
    assert any(sentence in m.value for m in at.markdown)
    assert at.session_state["plan_result"][0] == want


def test_default_plan_equals_library() -> None:
    at = page("plan")
    no_errors(at)
    want = plan(PlanRequest(**DEFAULT)).to_plan_dict()
    assert_shows(
        at, {**want, "search_seconds": at.session_state["plan_result"][0]["search_seconds"]}
    )
    charts = at.get("plotly_chart")
    assert len(charts) >= 3  # Pareto, latency, memory
    labels = [b.label for b in at.get("download_button")]
    assert labels == ["Plan (JSON)", "Engine configs (vllm, zip)", "Report (xlsx)"]
    top = next(d.value for d in at.dataframe if "On Pareto front" in d.value.columns)
    assert len(top) == min(10, len(want["candidates"]))
    best = max(want["candidates"], key=lambda c: c["output_tok_s_per_gpu"])
    assert top["Output tokens/s per GPU"].iloc[0] == fmt(best["output_tok_s_per_gpu"])
    assert "0" not in set(top.get("Clients per worker", []))  # no 0 clients in any mode


def test_changed_inputs_and_button_give_the_library_answer() -> None:
    at = page("plan")
    widget(at.multiselect, "in_gpus").set_value(["b200_sxm"])
    widget(at.number_input, "in_tpot").set_value(40.0)
    widget(at.selectbox, "in_pct").set_value("p99")
    widget(at.radio, "in_load").set_value("Rate").run()
    widget(at.number_input, "in_rate").set_value(4.0)
    widget(at.selectbox, "in_mode").set_value("agg")
    widget(at.selectbox, "in_backend").set_value("sglang")
    widget(at.number_input, "plan_price").set_value(2.5)
    at.button(key="plan_button").click().run()
    no_errors(at)
    req = {
        **DEFAULT,
        "gpus": ("b200_sxm",),
        "tpot_ms": 40.0,
        "percentile": "p99",
        "concurrency": None,
        "rate_per_s": 4.0,
        "mode": "agg",
        "backend": "sglang",
        "price_per_gpu_hour": 2.5,
    }
    want = plan(PlanRequest(**req)).to_plan_dict()
    assert_shows(
        at, {**want, "search_seconds": at.session_state["plan_result"][0]["search_seconds"]}
    )
    assert "B200" in at.subheader[0].value
    assert [b.label for b in at.get("download_button")][1] == "Engine configs (sglang, zip)"


def test_engine_zip_holds_the_emitted_bundle() -> None:
    want = plan(PlanRequest(**DEFAULT)).to_plan_dict()
    files = {f.name: f.text for f in build_bundle(parse_plan(want), "vllm")}
    with zipfile.ZipFile(io.BytesIO(engine_zip(json.dumps(want), "vllm"))) as zf:
        assert {n.removeprefix("vllm/"): zf.read(n).decode() for n in zf.namelist()} == files


def test_uploaded_config_plans_like_the_same_file_on_disk(tmp_path: Path) -> None:
    at = page("plan")
    widget(at.radio, "plan_model_src").set_value("Upload config.json").run()
    assert any("Upload a config.json" in i.value for i in at.info)
    text = bundled_models()["llama-3.1-8b"].path.read_bytes()
    widget(at.file_uploader, "plan_model_file").set_value(
        ("my-llama.json", text, "application/json")
    )
    at.button(key="plan_button").click().run()
    no_errors(at)
    on_disk = tmp_path / "my-llama.json"
    on_disk.write_bytes(text)
    want = plan(PlanRequest(**{**DEFAULT, "model": str(on_disk)})).to_plan_dict()
    got = at.session_state["plan_result"][0]
    assert got["best"] == want["best"]
    assert got["model"] == "my-llama"
    assert at.subheader[0].value.endswith("for my-llama")


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b'{"architectures": ["LlamaForCausalLM"], "hidden_size": ', "not valid JSON"),
        (b" " * (MAX_CONFIG_BYTES + 1), "larger than"),
        (b"\xff\xfe\x00binary", "not UTF-8"),
        (b'{"architectures": ["LlamaForCausalLM"]}', "config.json"),
    ],
)
def test_bad_upload_is_one_line_and_the_app_recovers(content: bytes, needle: str) -> None:
    at = page("plan")
    widget(at.radio, "plan_model_src").set_value("Upload config.json").run()
    widget(at.file_uploader, "plan_model_file").set_value(
        ("config.json", content, "application/json")
    ).run()
    assert not at.exception
    field = [e.value for e in at.error if e.value.startswith("Model: ")]  # marks its own field
    assert len(field) == 1 and needle in field[0]
    assert "Traceback" not in field[0] and "\n" not in field[0]
    assert at.button(key="plan_button")  # the form stays
    widget(at.radio, "plan_model_src").set_value("Bundled").run()
    at.button(key="plan_button").click().run()
    no_errors(at)
    assert metrics(at)["GPUs bought"]


def test_impossible_slo_is_a_readable_error_then_recovers() -> None:
    at = page("plan")
    widget(at.number_input, "in_tpot").set_value(0.001)
    at.button(key="plan_button").click().run()
    assert not at.exception
    with pytest.raises(Exception) as caught:
        plan(PlanRequest(**{**DEFAULT, "tpot_ms": 0.001}))
    assert at.error[0].value == f"No plan: {error_text(caught.value)}"
    assert "--tpot-ms" not in at.error[0].value and "TPOT SLO" in at.error[0].value
    assert not at.metric  # no stale recommendation under the error
    widget(at.number_input, "in_tpot").set_value(40.0)  # the default, met at the band edge
    at.button(key="plan_button").click().run()
    no_errors(at)
    assert metrics(at)["TPOT p90 (ms)"]


def test_trace_upload_plans_at_the_mean(tmp_path: Path) -> None:
    at = page("plan")
    widget(at.radio, "plan_len_src").set_value("CSV trace").run()
    trace = b"isl,osl\n1000,200\n3000,400\n2000,300\n"
    widget(at.file_uploader, "plan_trace").set_value(("trace.csv", trace, "text/csv"))
    at.button(key="plan_button").click().run()
    no_errors(at)
    req = {**DEFAULT, "isl": 2000, "osl": 300, "max_isl": 4000, "max_osl": 600}
    want = plan(PlanRequest(**req)).to_plan_dict()
    assert at.session_state["plan_result"][0]["best"] == want["best"]
    assert any("ISL 2,000, OSL 300" in i.value for i in at.info)
    widget(at.file_uploader, "plan_trace").set_value(("trace.csv", b"a,b\n1,2\n", "text/csv")).run()
    field = [e.value for e in at.error if e.value.startswith("Trace CSV: ")]
    assert not at.exception and len(field) == 1 and "isl,osl" in field[0]
    assert "/tmp" not in field[0]
    assert at.button(key="plan_button")  # the form stays
    assert any(STALE_TEXT in w.value for w in at.warning)  # the old result is marked stale


def test_changed_input_marks_the_result_stale() -> None:
    at = page("plan")
    assert not any(STALE_TEXT in w.value for w in at.warning)
    widget(at.number_input, "in_max_gpus").set_value(16).run()
    assert any(STALE_TEXT in w.value for w in at.warning)
    at.button(key="plan_button").click().run()
    assert not any(STALE_TEXT in w.value for w in at.warning)


def test_several_gpu_types_each_get_a_line() -> None:
    at = page("plan")
    widget(at.multiselect, "in_gpus").set_value(["h200_sxm", "l4", "b200_sxm"])
    at.button(key="plan_button").click().run()
    no_errors(at)
    why = at.table[0].value
    # a line per type, then one per prefill/decode pair of two of them (docs/heterogeneous.md)
    assert len(why) >= 3
    assert all(str(g).startswith("prefill ") for g in list(why.index)[3:])
    assert (why["Verdict"] == "recommended").sum() == 1
    assert all(isinstance(v, str) and v for v in why["Verdict"])
    for col in ("GPUs bought", "Cost ($/hour)", "Cost per 1M total tokens ($)", "Binding limit"):
        assert col in why.columns
    assert "None" not in why.to_string()


def test_rate_mode_shows_no_zero_clients() -> None:
    at = page("plan")
    widget(at.radio, "in_load").set_value("Rate").run()
    widget(at.number_input, "in_rate").set_value(1.0)
    at.button(key="plan_button").click().run()
    no_errors(at)
    top = next(d.value for d in at.dataframe if "On Pareto front" in d.value.columns)
    assert "Clients per worker" not in top.columns


def test_dense_model_has_no_empty_breakdown_rows() -> None:
    at = page("plan")
    lat = next(d.value for d in at.dataframe if "Op kind" in d.value.columns)
    assert "moe" not in set(lat["Op kind"])
    assert all(v not in ("0", "-") for v in lat["Time (ms)"])


def test_no_gpu_type_marks_that_field_and_keeps_the_form() -> None:
    at = page("plan")
    widget(at.multiselect, "in_gpus").set_value([]).run()
    assert not at.exception
    assert any("GPU types: choose at least one GPU type" in m.value for m in at.markdown)
    assert [e.value for e in at.error] == ["Fix GPU types to plan (marked in the form)."]
    assert at.button(key="plan_button") and any(STALE_TEXT in w.value for w in at.warning)


def test_candidates_sort_and_filter() -> None:
    at = page("plan")
    want = plan(PlanRequest(**DEFAULT)).to_plan_dict()
    rows = candidate_rows(parse_report_plan(want))  # the top candidates and every Pareto point
    widget(at.selectbox, "top_sort").set_value("ttft_ms").run()
    widget(at.number_input, "top_rows").set_value(len(rows)).run()
    top = next(d.value for d in at.dataframe if "On Pareto front" in d.value.columns)
    by_ttft = sorted(rows, key=lambda r: r["ttft_ms"])
    assert list(top["TTFT p90 (ms)"]) == [fmt(r["ttft_ms"]) for r in by_ttft]
    mode = str(rows[-1]["mode"])  # filter on a mode the candidates hold
    widget(at.multiselect, "top_modes").set_value([mode]).run()
    top = next(d.value for d in at.dataframe if "On Pareto front" in d.value.columns)
    assert set(top["Mode"]) == {mode}
    assert len(top) == sum(r["mode"] == mode for r in rows) > 0


def test_power_and_energy_sit_next_to_the_cost() -> None:
    from hardware.catalog import get_gpu
    from planner.model.bundled import load_model
    from planner.perf.deployment import Deployment
    from planner.perf.estimate import estimate
    from planner.workload.spec import LengthSpec, Workload

    at = page("plan")
    no_errors(at)
    got = at.session_state["plan_result"][0]
    dep = Deployment.model_validate(got["best"]["deployment"])
    work = Workload(isl=LengthSpec(mean=4000), osl=LengthSpec(mean=500), concurrency=64)
    est = estimate(
        load_model("llama-3.1-70b"),
        get_gpu(dep.gpu),
        work,
        agg=dep.agg,
        prefill=dep.prefill,
        decode=dep.decode,
    )
    assert est.output_tok_s_per_gpu == pytest.approx(
        got["best"]["predicted"]["output_tok_s_per_gpu"], rel=1e-9
    )  # the same deployment at the same load as the plan
    assert est.power is not None
    line = next(m.value for m in at.markdown if m.value.startswith("**Power:**"))
    assert f"{fmt(est.power.deployment_kw)} kW" in line
    assert f"{fmt(est.power.j_per_output_token)} J per output token" in line


def test_configuration_summaries_in_sentences_are_words() -> None:
    text = "next (5 GPUs, disagg P[tp1 pp2 x1 seqs 8 chunk 16384 kv bf16] D[tp2 pp1 x4 seqs 64 "
    text += "chunk 2048 kv fp8], 16 clients/worker)"
    assert config_words(text) == (
        "next (5 GPUs, prefill 1 x TP1 PP2, up to 8 running requests, 16,384-token chunks, KV "
        "bf16; decode 4 x TP2 PP1, up to 64 running requests, 2,048-token chunks, KV fp8, 16 "
        "clients/worker)"
    )


def test_the_plans_own_power_object_wins() -> None:
    from typing import Any, cast

    from app.planning import plan_power

    own = {"deployment_kw": 1.5, "j_per_output_token": 0.5}
    plan_dict: dict[str, Any] = {"best": {"power": own}, "workload": {}}
    assert plan_power(plan_dict, cast(Any, None)) == own  # no estimate runs
    assert plan_power({"best": {}, "power": own}, cast(Any, None)) == own


def test_energy_objective_heads_the_card_and_shows_the_plans_power() -> None:
    at = page("plan")
    widget(at.selectbox, "in_objective").set_value("energy")
    at.button(key="plan_button").click().run()
    no_errors(at)
    got = at.session_state["plan_result"][0]
    assert got["objective"] == "energy"
    assert any("Fewest joules per token" in c.value for c in at.caption)
    want = plan(PlanRequest(**DEFAULT, objective="energy")).to_plan_dict()
    assert got["best"]["power"] == want["best"]["power"]
    kw = fmt(want["best"]["power"]["deployment_kw"])
    assert any(f"{kw} kW board power" in m.value for m in at.markdown)


def test_a_pair_of_two_types_is_said_on_the_card() -> None:
    at = page("plan")
    widget(at.multiselect, "in_gpus").set_value(["h100_sxm", "h200_sxm"])
    at.button(key="plan_button").click().run()
    no_errors(at)
    said = at.session_state["plan_result"][0].get("role_types")
    assert said and said["sentence"]
    assert any(f"**Two GPU types:** {said['sentence']}" == m.value for m in at.markdown)
