"""Traffic page: opens on the default generated day; its numbers are ``planner capacity``'s."""

from __future__ import annotations

from pathlib import Path

import openpyxl
import pytest

from app.ui import fmt_money
from planner.cli.output import to_jsonable
from planner.reports import present
from planner.reports.capacity_sheet import capacity_xlsx
from planner.workload.trace_gen import TraceSpec, generate
from solvers.capacity import CapacityRequest, capacity
from tests.app.conftest import no_errors, page, widget


def test_default_day_equals_library() -> None:
    at = page("traffic")
    no_errors(at)
    spec = TraceSpec(
        hours=24,
        peak_rate=4.0,
        daily_ratio=4.0,
        bursts_per_day=6,
        burst_minutes=10,
        burst_factor=3,
        isl_mean=4000,  # the shared workload's lengths
        osl_mean=500,
        seed=7,
    )
    want = to_jsonable(
        capacity(
            generate(spec)[0],
            CapacityRequest(
                model="llama-3.1-70b",
                gpus=("h200_sxm",),  # the shared GPUs and SLOs (the Plan page's)
                ttft_ms=5000,
                tpot_ms=40,
                percentile="p90",
                window_s=900,
                scale_up_s=300,
                worker_max_gpus=4,
                backend="vllm",
            ),
        )
    )
    assert at.metric[0].value == fmt_money(want["autoscaled"]["cost"])
    assert at.metric[1].value == fmt_money(want["static_peak"]["cost"])
    fleet = at.dataframe[0].value.set_index("Deployment")
    assert fleet.loc["static for the mean", "Windows missing the SLO"] == present.count(
        want["static_mean"]["windows_violating"]
    )
    windows = at.dataframe[1].value
    assert windows["GPUs"].tolist() == [present.count(w["gpus"]) for w in want["windows"]]
    assert all(len(v.replace(",", "").replace(".", "")) <= 6 for v in windows["Rate (requests/s)"])
    assert any("objective: cost" in c.value for c in at.caption)
    assert len(at.get("plotly_chart")) == 1


def test_capacity_sheet(tmp_path: Path) -> None:
    tr = generate(TraceSpec(hours=2, peak_rate=3, isl_mean=1000, osl_mean=200, seed=1))[0]
    cap = to_jsonable(
        capacity(
            tr,
            CapacityRequest(
                model="llama-3.1-8b", gpus=("h100",), ttft_ms=500, tpot_ms=25, worker_max_gpus=1
            ),
        )
    )
    cap["trace"]["source"] = '=HYPERLINK("x")'
    path = tmp_path / "c.xlsx"
    path.write_bytes(capacity_xlsx(cap))
    ws = openpyxl.load_workbook(path)["Capacity"]
    assert ws.cell(2, 1).value.startswith("trace =HYPERLINK")  # a string, never a formula
    heads = [c.value for c in ws[10]]
    rows = list(ws.iter_rows(min_row=11, values_only=True))
    assert len(rows) == len(cap["windows"])
    assert [r[heads.index("GPUs")] for r in rows] == [w["gpus"] for w in cap["windows"]]
    assert ws.cell(5, 3).value == pytest.approx(cap["autoscaled"]["gpu_hours"])


def test_upload_mode_waits_for_a_file() -> None:
    at = page("traffic")
    widget(at.radio, "traffic_source").set_value("Upload CSV").run()
    no_errors(at)
    assert any("Upload a trace" in c.value for c in at.caption)
    assert any("inputs changed" in w.value for w in at.warning)  # the old day is stale


def test_zero_rate_and_garbage_csv_keep_the_form() -> None:
    at = page("traffic")
    widget(at.number_input, "traffic_peak").set_value(0.0).run()
    assert not at.exception
    assert any("must be > 0" in m.value for m in at.markdown)
    assert any("inputs changed" in w.value for w in at.warning)
    assert at.button(key="traffic_button").disabled  # no request while a field is invalid
    widget(at.radio, "traffic_source").set_value("Upload CSV").run()
    widget(at.file_uploader, "traffic_upload").set_value(("t.csv", b"x\n1\n", "text/csv")).run()
    assert not at.exception
    assert any(e.value.startswith("Trace CSV: ") for e in at.error)
    assert at.button(key="traffic_button")  # the form stays


def test_agent_sessions_show_hit_rate_per_tier_and_gpus() -> None:
    from planner.workload.trace_gen import AgenticSpec, generate_agentic
    from solvers.prefix_tiers import PrefixRequest, prefix_capacity

    at = page("traffic")
    widget(at.radio, "traffic_source").set_value("Agent sessions").run()
    widget(at.number_input, "traffic_ssd_kv").set_value(500.0).run()
    at.button(key="traffic_button").click().run()
    no_errors(at)
    req = CapacityRequest(
        model="llama-3.1-70b",
        gpus=("h200_sxm",),
        ttft_ms=5000,
        tpot_ms=40,
        window_s=900,
        scale_up_s=300,
        worker_max_gpus=4,  # the page's defaults
    )
    want = to_jsonable(
        prefix_capacity(generate_agentic(AgenticSpec(seed=7)), req, PrefixRequest(ssd_kv_gib=500))
    )["prefix_cache"]
    table = next(d.value for d in at.dataframe if "KV tiers" in d.value.columns)
    assert list(table["KV tiers"]) == [
        "no prefix cache",
        "HBM",
        "HBM + host memory",
        "HBM + host memory + SSD",
    ]
    assert list(table["GPUs (most at once)"]) == [
        present.count(s["gpus_max"]) for s in want["scenarios"]
    ]
    assert list(table["Hit rate priced (%)"]) == [
        present.pct(s["prefix_hit"]) for s in want["scenarios"]
    ]
    assert "None" not in table.to_string()
