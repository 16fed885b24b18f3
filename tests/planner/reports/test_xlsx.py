"""The spreadsheet opens with openpyxl, has every sheet and both native charts, and holds the plan's numbers.

Numbers are compared to 1 part in 1e15: xlsxwriter stores numbers with 16 significant digits (``%.16G``),
as Excel itself does, so the last binary digits of a double may differ.
"""

from __future__ import annotations

import io
from typing import Any

import openpyxl
import pytest
from openpyxl.chart import BarChart, ScatterChart
from openpyxl.workbook.workbook import Workbook

from planner.reports import SHEETS, build_xlsx
from planner.reports.plan_view import flat_rows
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
    assert front.xVal.numRef.f.startswith("Pareto!") and front.yVal.numRef.f.startswith("Pareto!")
    header = next(r for r in wb["Pareto"].iter_rows() if r[1].value == "gpu" or r[0].value == "mode")
    col_of = {c.value: c.column_letter for c in header}
    assert f"${col_of['output_tok_s_per_user']}$" in front.xVal.numRef.f
    assert f"${col_of['output_tok_s_per_gpu']}$" in front.yVal.numRef.f
    best = scatter.series[1]
    ref = best.yVal.numRef.f  # e.g. Summary!$B$21
    assert ref.startswith("Summary!$B$")
    cell = wb["Summary"][ref.split("!")[1].replace("$", "")]
    assert same(cell.value, plan["best"]["predicted"]["output_tok_s_per_gpu"])
    bar = next(c for c in wb["Latency breakdown"]._charts if isinstance(c, BarChart))
    assert bar.series[0].val.numRef.f.startswith("'Latency breakdown'!")


def test_summary_numbers_equal_plan(plan: dict[str, Any]) -> None:
    summary = read_kv(_open(plan)["Summary"], "Recommendation")
    pred, best = plan["best"]["predicted"], plan["best"]
    assert summary["model"] == plan["model"] and summary["gpu"] == plan["gpu"]
    assert summary["GPUs"] == best["gpus"]
    assert same(summary["cost per 1M output tokens ($)"], best["cost_per_million_output_tokens"])
    assert summary["binding constraint"] == plan["binding_constraint"]
    for metric in ("ttft_ms", "tpot_ms"):
        for p, value in pred[metric].items():
            assert same(summary[f"{metric} {p}"], value)
    for key in ("output_tok_s_per_gpu", "output_tok_s_per_user", "requests_per_s"):
        assert same(summary[key], pred[key])
    assert summary["candidates evaluated"] == plan["candidates_evaluated"]


def test_pareto_rows_equal_plan(plan: dict[str, Any]) -> None:
    rows = read_table(_open(plan)["Pareto"], "Pareto front")
    expected = flat_rows(plan["pareto"])
    assert len(rows) == len(expected) > 0
    for got, want in zip(rows, expected, strict=True):
        assert set(got) == set(want)
        assert all(same(got[k], want[k]) for k in want), (got, want)


def test_alternatives_side_by_side(solver_plan: dict[str, Any]) -> None:
    alts = read_table(_open(solver_plan)["Summary"], "Alternatives (best of each mode)")
    by_item = {r["Item"]: r for r in alts}
    for mode, choice in solver_plan["alternatives"].items():
        if choice is None:
            continue
        assert by_item["mode"][mode] == choice["mode"]
        assert same(by_item["output_tok_s_per_gpu"][mode], choice["predicted"]["output_tok_s_per_gpu"])


def test_latency_shares_of_solver_ms(solver_plan: dict[str, Any]) -> None:
    """The solver gives milliseconds per op kind of a decode step; the sheet adds their shares."""
    (role, ms), = solver_plan["best"]["predicted"]["step_breakdown"].items()
    rows = read_table(_open(solver_plan)["Latency breakdown"], "Share of step time per op kind")
    label = role.removesuffix("_ms").replace("_", " ")
    total = sum(ms.values())
    for r in rows:
        assert same(r[f"ms ({label})"], ms[r["op kind"]])
        assert r[f"share ({label})"] == pytest.approx(ms[r["op kind"]] / total, rel=1e-12)
    assert {r["op kind"] for r in rows} == set(ms)


def test_synthetic_shares(synthetic_plan: dict[str, Any]) -> None:
    wb = _open(synthetic_plan)
    lat = read_table(wb["Latency breakdown"], "Share of step time per op kind")
    assert {r["op kind"]: r["share"] for r in lat} == synthetic_plan["best"]["predicted"]["step_breakdown"]


def test_memory_equals_plan(plan: dict[str, Any]) -> None:
    wb = _open(plan)
    roles = plan["best"]["predicted"]["memory"]
    roles = {"all": roles} if "weights_bytes_per_gpu" in roles else roles
    table = read_table(wb["Memory breakdown"], "Memory per GPU")
    for role, plan_mem in roles.items():
        col = "GB per GPU" if role == "all" else f"GB per GPU ({role})"
        mem = {r["component"]: r[col] for r in table}
        assert mem["weights"] == pytest.approx(plan_mem["weights_bytes_per_gpu"] / 1e9, rel=1e-12)
        assert mem["KV cache"] == pytest.approx(plan_mem["kv_budget_bytes_per_gpu"] / 1e9, rel=1e-12)
        detail = read_kv(wb["Memory breakdown"], f"Memory plan ({role})")
        assert detail["kv_capacity_tokens"] == plan_mem["kv_capacity_tokens"]
        assert same(detail["budget_bytes_per_gpu"], plan_mem["budget_bytes_per_gpu"])


def test_values_not_formulas(plan: dict[str, Any]) -> None:
    plan["binding_constraint"] = "=1+1"  # text that looks like a formula stays text
    wb = _open(plan)
    for ws in wb:
        for row in ws.iter_rows():
            assert all(c.data_type != "f" for c in row), ws.title
    assert read_kv(wb["Summary"], "Recommendation")["binding constraint"] == "=1+1"


def test_disaggregated_share_roles(disagg_plan: dict[str, Any]) -> None:
    wb = _open(disagg_plan)
    lat = read_table(wb["Latency breakdown"], "Share of step time per op kind")
    assert {"share (prefill)", "share (decode)"} <= set(lat[0])
    decode = {r["op kind"]: r["share (decode)"] for r in lat if r["share (decode)"] is not None}
    assert decode == {"attention_decode": 0.6, "gemm_mlp": 0.4}
    assert len(wb["Latency breakdown"]._charts[0].series) == 2
    mem = read_table(wb["Memory breakdown"], "Memory per GPU")
    assert {"GB per GPU (prefill)", "GB per GPU (decode)"} <= set(mem[0])


def test_minimal_plan_still_renders(plan: dict[str, Any]) -> None:
    for key in ("pareto", "alternatives", "candidates_evaluated", "search_seconds"):
        plan.pop(key, None)
    plan["best"]["predicted"] = {"output_tok_s_per_gpu": 10.0, "output_tok_s_per_user": 5.0}
    wb = _open(plan)
    assert tuple(wb.sheetnames) == SHEETS
    assert wb["Pareto"]._charts
