"""HTML page (self-contained, same charts and tables) and CSV
(one candidates table, exact numbers)."""

from __future__ import annotations

import csv
import html
import io
import re
from typing import Any

import pytest

from planner.errors import PlannerInputError
from planner.reports import SHEETS, build_csv, build_html, parse_plan
from planner.reports.html import fmt_cell
from planner.reports.present import num


def test_html_is_self_contained(plan: dict[str, Any]) -> None:
    page = build_html(plan)
    assert not re.search(r"<script[^>]+src=", page), "plotly.js must be inline, not fetched"
    assert "plotly.js v" in page and len(page) > 1_000_000  # the bundle itself is in the page
    assert page.count("plotly.js v") == 1  # inlined once, not per chart
    assert page.count("Plotly.newPlot") == 3  # Pareto, latency and memory charts
    for sheet in SHEETS:
        assert f"<h2>{sheet}</h2>" in page


def test_html_tables_hold_plan_values(plan: dict[str, Any]) -> None:
    page = build_html(plan)
    assert plan["model"] in page
    assert html.escape(plan.get("binding", {}).get("sentence", plan["binding_constraint"])) in page
    per_gpu = plan["best"]["predicted"]["output_tok_s_per_gpu"]
    assert f'<td class="n">{fmt_cell(per_gpu)}</td>' in page  # 4 significant digits on the page
    assert fmt_cell(per_gpu) == num(per_gpu)
    for entry in plan["pareto"]:
        assert f">{fmt_cell(entry['output_tok_s_per_user'])}<" in page


def test_html_escapes_text(plan: dict[str, Any]) -> None:
    plan["binding_constraint"] = "<script>alert(1)</script>"
    plan.pop("binding", None)
    page = build_html(plan)
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_csv_is_one_candidates_table(plan: dict[str, Any]) -> None:
    rows = list(csv.DictReader(io.StringIO(build_csv(plan))))
    kept = plan.get("candidates") or []
    pct = plan["slo"]["percentile"]
    assert [r["rank"] for r in rows[: len(kept)]] == [str(i + 1) for i in range(len(kept))]
    for row, entry in zip(rows, kept, strict=False):
        assert float(row["output_tok_s_per_gpu"]) == entry["output_tok_s_per_gpu"]  # full precision
        assert float(row[f"ttft_{pct}_ms"]) == entry[f"ttft_{pct}_ms"]
    by_config = {r.get("config") or str(i): r for i, r in enumerate(rows)}
    for i, entry in enumerate(plan["pareto"]):  # every Pareto point is a row
        row = by_config[entry.get("config") or str(i)]
        assert row["pareto"] == "True"
        assert float(row["output_tok_s_per_user"]) == entry["output_tok_s_per_user"]
    if kept:  # the solver's plan: latency columns named with the percentile
        assert "ttft_ms" not in rows[0] and f"tpot_{pct}_ms" in rows[0]


@pytest.mark.parametrize(
    ("drop", "field"),
    [("model", "model"), ("workload", "workload"), ("best", "best")],
)
def test_not_a_plan_names_the_field(plan: dict[str, Any], drop: str, field: str) -> None:
    del plan[drop]
    with pytest.raises(PlannerInputError, match=f"missing field '{field}'"):
        parse_plan(plan)


def test_nested_missing_field(plan: dict[str, Any]) -> None:
    del plan["best"]["predicted"]
    with pytest.raises(PlannerInputError, match="missing field 'best.predicted'"):
        build_html(plan)
    with pytest.raises(PlannerInputError, match="expected a JSON object"):
        build_csv([1, 2])  # type: ignore[arg-type]
