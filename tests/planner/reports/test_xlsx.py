"""The spreadsheet opens with openpyxl, has every sheet and both native charts, and holds the plan's
numbers.

Numbers are compared to 1 part in 1e15: xlsxwriter stores numbers with 16 significant digits
(``%.16G``), as Excel itself does, so the last binary digits of a double may differ.
"""

from __future__ import annotations

import io
from typing import Any

import openpyxl
import pytest
from openpyxl.chart import BarChart, ScatterChart
from openpyxl.workbook.workbook import Workbook

from planner.reports import SHEETS, build_xlsx
from planner.reports.present import MODE_WORDS
from planner.reports.tables import PER_GPU_LABEL, PER_USER_LABEL
from tests.planner.reports.sheet_reader import read_kv, read_table

XLSX_REL = 1e-15


def _open(plan: dict[str, Any]) -> Workbook:
    return openpyxl.load_workbook(io.BytesIO(build_xlsx(plan)))


def same(got: Any, want: Any) -> bool:
    """Equal, numbers to the 16 digits an xlsx cell keeps."""
    if isinstance(want, float) and isinstance(got, int | float):
        return got == pytest.approx(want, rel=XLSX_REL, abs=0)
    return bool(got == want)


def test_all_sheets_and_charts(plan: dict[str, Any]) -> None:
    wb = _open(plan)
    assert tuple(wb.sheetnames) == SHEETS
    pareto_charts = wb["Pareto"]._charts
    latency_charts = wb["Latency breakdown"]._charts
    assert any(isinstance(c, ScatterChart) for c in pareto_charts)
    assert any(isinstance(c, BarChart) for c in latency_charts)


def test_charts_point_at_the_tables(plan: dict[str, Any]) -> None:
    wb = _open(plan)
    scatter = next(c for c in wb["Pareto"]._charts if isinstance(c, ScatterChart))
    front = scatter.series[0]
    assert front.xVal.numRef.f.startswith("Candidates!")
    assert front.yVal.numRef.f.startswith("Candidates!")
    header = next(r for r in wb["Candidates"].iter_rows() if r[0].value in ("Rank", "Mode"))
    col_of = {c.value: c.column_letter for c in header}
    assert f"${col_of[PER_USER_LABEL]}$" in front.xVal.numRef.f
    assert f"${col_of[PER_GPU_LABEL]}$" in front.yVal.numRef.f
    best = scatter.series[1]
    ref = best.yVal.numRef.f  # e.g. Summary!$B$21
    assert ref.startswith("Summary!$B$")
    cell = wb["Summary"][ref.split("!")[1].replace("$", "")]
    assert same(cell.value, plan["best"]["predicted"]["output_tok_s_per_gpu"])
    bar = next(c for c in wb["Latency breakdown"]._charts if isinstance(c, BarChart))
    assert bar.series[0].val.numRef.f.startswith("'Latency breakdown'!")


def test_summary_is_short_and_equals_plan(plan: dict[str, Any]) -> None:
    ws = _open(plan)["Summary"]
    assert ws.max_row < 40  # a short human table, not a dump of every field
    deploy = read_kv(ws, "What to deploy")
    best, pred, pct = plan["best"], plan["best"]["predicted"], plan["slo"]["percentile"]
    assert deploy["Model"] == plan["model"] and deploy["GPUs"] == best["gpus"]
    assert str(best["gpus"]) in deploy["Configuration"]
    sentence = plan.get("binding", {}).get("sentence", plan["binding_constraint"])
    assert deploy["Binding constraint"] == sentence
    preds = {r["Quantity"]: r for r in read_table(ws, "Predictions")}
    for metric, name in (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT")):
        row = preds[f"{name} {pct} (ms)"]
        assert same(row["Predicted"], pred[metric][pct])
        assert row["SLO"] == plan["slo"][metric]
        assert row["Headroom (%)"] == pytest.approx(1 - pred[metric][pct] / plan["slo"][metric])
        assert same(preds[f"{name} mean (ms)"]["Predicted"], pred[metric]["mean"])
    assert same(preds[PER_GPU_LABEL]["Predicted"], pred["output_tok_s_per_gpu"])
    cost = read_kv(ws, "Cost")
    assert same(cost["Cost per 1M output tokens ($)"], best["cost_per_million_output_tokens"])


def test_number_formats_show_four_significant_figures(solver_plan: dict[str, Any]) -> None:
    ws = _open(solver_plan)["Summary"]
    formats = {c.number_format for row in ws.iter_rows() for c in row if isinstance(c.value, float)}
    assert "General" not in formats
    assert all(f.startswith("#,##0") or f.endswith("%") for f in formats), formats


def test_one_candidates_table(plan: dict[str, Any]) -> None:
    wb = _open(plan)
    assert not read_titles(wb["Pareto"])  # the Pareto sheet holds the chart, not a copy of the rows
    rows = read_table(wb["Candidates"], "Candidates")
    kept = plan.get("candidates") or []
    pareto_only = [
        p
        for p in plan["pareto"]
        if p.get("config") not in {c["config"] for c in kept} or p.get("config") is None
    ]
    assert len(rows) == len(kept) + len(pareto_only) > 0
    pct = plan["slo"]["percentile"]
    for got, want in zip(rows, kept, strict=False):
        assert same(got[PER_GPU_LABEL], want["output_tok_s_per_gpu"])
        assert same(got[f"TTFT {pct} (ms)"], want[f"ttft_{pct}_ms"])
    for got, want in zip(rows[len(kept) :], pareto_only, strict=True):
        assert same(got[PER_USER_LABEL], want["output_tok_s_per_user"])


def read_titles(ws: Any) -> list[str]:
    """Table titles written below the sheet title (bold blue cells in column A)."""
    return [
        c.value
        for c in ws["A"][2:]
        if c.value and c.font and c.font.color is not None and c.font.bold
    ]


def test_alternatives_side_by_side(solver_plan: dict[str, Any]) -> None:
    alts = read_table(_open(solver_plan)["Candidates"], "Best plan of each mode")
    by_item = {r["Item"]: r for r in alts}
    for mode, choice in solver_plan["alternatives"].items():
        col = MODE_WORDS[mode]
        if choice is None:
            assert by_item["Configuration"][col] == "none meets the SLOs"
            continue
        assert same(by_item[PER_GPU_LABEL][col], choice["predicted"]["output_tok_s_per_gpu"])


def test_latency_of_solver_ms(solver_plan: dict[str, Any]) -> None:
    """The solver gives ms per op kind; the sheet lists those that take time, with shares."""
    ((_, ms),) = solver_plan["best"]["predicted"]["step_breakdown"].items()
    rows = read_table(_open(solver_plan)["Latency breakdown"], "Step time per op kind")
    total = sum(ms.values())
    for r in rows:
        assert same(r["Time (ms)"], ms[r["Op kind"]])
        assert r["Share of step (%)"] == pytest.approx(ms[r["Op kind"]] / total, rel=1e-12)
    assert {r["Op kind"] for r in rows} == {k for k, v in ms.items() if v > 0}  # no 0 ms rows


def test_synthetic_shares(synthetic_plan: dict[str, Any]) -> None:
    wb = _open(synthetic_plan)
    lat = read_table(wb["Latency breakdown"], "Step time per op kind")
    assert {r["Op kind"]: r["Share of step (%)"] for r in lat} == synthetic_plan["best"][
        "predicted"
    ]["step_breakdown"]


def test_memory_equals_plan(plan: dict[str, Any]) -> None:
    wb = _open(plan)
    roles = plan["best"]["predicted"]["memory"]
    roles = {"all": roles} if "weights_bytes_per_gpu" in roles else roles
    table = read_table(wb["Memory breakdown"], "Memory per GPU")
    for role, plan_mem in roles.items():
        col = "Memory per GPU (GB)" if role == "all" else f"Memory per GPU, {role} (GB)"
        mem = {r["Component"]: r[col] for r in table}
        assert mem["weights"] == pytest.approx(plan_mem["weights_bytes_per_gpu"] / 1e9, rel=1e-12)
        kv_gb = plan_mem["kv_budget_bytes_per_gpu"] / 1e9
        assert mem["KV cache"] == pytest.approx(kv_gb, rel=1e-12)
        detail = read_kv(wb["Memory breakdown"], f"Memory plan ({role})")
        assert detail["KV capacity (tokens)"] == plan_mem["kv_capacity_tokens"]
        budget_gb = plan_mem["budget_bytes_per_gpu"] / 1e9
        assert detail["Engine memory per GPU (GB)"] == pytest.approx(budget_gb, rel=1e-12)


def test_values_not_formulas(plan: dict[str, Any]) -> None:
    plan["binding_constraint"] = "=1+1"  # text that looks like a formula stays text
    plan.pop("binding", None)
    wb = _open(plan)
    for ws in wb:
        for row in ws.iter_rows():
            assert all(c.data_type != "f" for c in row), ws.title
    assert read_kv(wb["Summary"], "What to deploy")["Binding constraint"] == "=1+1"


def test_disaggregated_steps(disagg_plan: dict[str, Any]) -> None:
    wb = _open(disagg_plan)
    lat = read_table(wb["Latency breakdown"], "Step time per op kind")
    assert {r["Step"] for r in lat} == {"prefill of one prompt", "decode step"}
    decode = {r["Op kind"]: r["Share of step (%)"] for r in lat if r["Step"] == "decode step"}
    assert decode == {"attention_decode": 0.6, "gemm_mlp": 0.4}
    assert len(wb["Latency breakdown"]._charts[0].series) == 2
    mem = read_table(wb["Memory breakdown"], "Memory per GPU")
    assert {"Memory per GPU, prefill (GB)", "Memory per GPU, decode (GB)"} <= set(mem[0])


def test_minimal_plan_still_renders(plan: dict[str, Any]) -> None:
    for key in ("pareto", "alternatives", "candidates_evaluated", "search_seconds", "candidates"):
        plan.pop(key, None)
    plan["best"]["predicted"] = {"output_tok_s_per_gpu": 10.0, "output_tok_s_per_user": 5.0}
    wb = _open(plan)
    assert tuple(wb.sheetnames) == SHEETS
    assert wb["Pareto"]._charts
