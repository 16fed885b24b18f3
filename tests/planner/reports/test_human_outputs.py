"""Human-facing outputs of a default and a disaggregated plan: no non-integer with more than 4
significant figures, and every quantity column named with its unit.

Scanned: the xlsx as Excel displays it (number formats), the HTML tables, PLAN.md's Predicted
section, the CLI text of ``planner plan`` and the Plan page's tables (AppTest).
"""

from __future__ import annotations

import io
import json
import re
from typing import Any

import pytest

from planner.reports import build_html, build_xlsx
from planner.reports.present import COUNT_NAMES, TEXT_NAMES
from solvers.plan import PlanRequest, plan

DEFAULT = {
    "model": "llama-3.1-70b",
    "gpus": ("h200_sxm",),
    "max_gpus": 8,
    "isl": 4000,
    "osl": 500,
    "concurrency": 64,
    "ttft_ms": 5000.0,
    "tpot_ms": 40.0,
    "percentile": "p90",
    # formatting of both modes: the forced agg plan misses 40 ms at the band edge
    "confidence": 0.0,
}
NUMBER = re.compile(r"(?<![\w.])-?\d[\d,]*\.(\d+)(?![\w.])")
SCIENTIFIC = re.compile(r"\d\.?\d*e[+-]\d+", re.IGNORECASE)
UNIT = re.compile(r"\([^)]+\)|/s\b|\bper 1M\b")
WORDS = (
    set(COUNT_NAMES.values())
    | set(TEXT_NAMES.values())
    | {
        "Item",
        "Value",
        "Quantity",
        "Predicted",
        "SLO",
        "Limit",
        "Limit value",
        "Unit",
        "Role",
        "Split",
        "Step",
        "Op kind",
        "Component",
        "Source",
        "GPU type",
        "Why not",
        "Recommended",
        "What binds it, or why it has no plan",
        "Band",
        "aggregated",
        "disaggregated (prefill/decode)",
        "metric",
        "quantity",
        "value",
        "Result",
        "Rank",
        "GPU types asked for",
        "GPU memory for the engine (%)",
        "Binding constraint",
        "Objective",
        "GPUs needed",
        "GPUs used",
        "GPUs bought",
        "Binding limit",
        "Verdict",
    }
)
"""Column names that are words (or counts) rather than measured quantities."""


@pytest.fixture(scope="module", params=["agg", "disagg"])
def plan_dict(request: pytest.FixtureRequest) -> dict[str, Any]:
    req = PlanRequest(**DEFAULT, mode=request.param)  # type: ignore[arg-type]
    return plan(req).to_plan_dict()


def too_precise(text: str) -> list[str]:
    """Numbers with a decimal part printed with more than 4 significant figures."""
    bad = [m.group(0) for m in SCIENTIFIC.finditer(text)]
    for m in NUMBER.finditer(text):
        digits = m.group(0).replace(",", "").replace("-", "").replace(".", "").lstrip("0")
        if len(digits) > 4:
            bad.append(m.group(0))
    return bad


def unitless(columns: list[str]) -> list[str]:
    """Columns neither words nor with a unit (a role's own column, 'Prefill replicas', is read as
    its column's name, 'Replicas')."""

    def bare(c: str) -> str:
        rest = re.sub(r"^(Prefill|Decode) ", "", c)
        return rest if rest == c or rest.startswith("KV") else rest.capitalize()

    return [c for c in columns if c and bare(c) not in WORDS and not UNIT.search(c)]


def test_scanner_catches_what_it_should() -> None:
    got = set(too_precise("TTFT 3.3916995938483234 ms and 1.11e+03 ms"))
    assert got == {"1.11e+03", "3.3916995938483234"}
    assert too_precise("2,932 ms, 28.49 ms, 0.0001234, 12,350") == []
    assert unitless(["ttft_ms", "TTFT p90 (ms)", "GPUs"]) == ["ttft_ms"]


def _excel_text(value: Any, number_format: str) -> str:
    """A cell as Excel shows it under its number format (the subset our writer uses)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return "" if value is None else str(value)
    if number_format.endswith("%"):
        decimals = number_format.split(".")[1].count("0") if "." in number_format else 0
        return f"{value * 100:.{decimals}f}%"
    scale = number_format.count(",,")
    fmt = number_format.rstrip(",")
    v = value / (1e9 if scale else 1)
    decimals = fmt.split(".")[1].count("0") if "." in fmt else 0
    return f"{v:,.{decimals}f}"


def test_xlsx_display(plan_dict: dict[str, Any]) -> None:
    from openpyxl import load_workbook

    wb = load_workbook(io.BytesIO(build_xlsx(plan_dict)))
    for ws in wb:
        rows = list(ws.iter_rows())
        for i, row in enumerate(rows):
            shown = " ".join(_excel_text(c.value, c.number_format) for c in row)
            assert not too_precise(shown), (ws.title, shown)
            # a header row is the row above a row of numbers, below a title
            if (
                i + 1 < len(rows)
                and any(isinstance(c.value, float) for c in rows[i + 1])
                and all(isinstance(c.value, str) or c.value is None for c in row)
            ):
                names = [str(c.value) for c in row if c.value is not None]
                if names and names[0] not in ("Item",):
                    assert not unitless(names), (ws.title, names)


def test_html_tables(plan_dict: dict[str, Any]) -> None:
    page = build_html(plan_dict)
    tables = re.findall(r"<table>.*?</table>", page, flags=re.S)
    assert tables
    for t in tables:
        heads = re.findall(r"<th>(.*?)</th>", t)
        assert not unitless([h.replace("&#x27;", "'") for h in heads]), heads
        cells = " ".join(re.findall(r"<td[^>]*>(.*?)</td>", t))
        assert not too_precise(cells), cells[:500]


def test_plan_md(plan_dict: dict[str, Any]) -> None:
    from planner.emitters.bundle import build_bundle
    from planner.emitters.plan_file import parse_plan

    bundle = build_bundle(parse_plan(json.loads(json.dumps(plan_dict))), "vllm")
    files = {f.name: f.text for f in bundle}
    text = files["PLAN.md"]
    assert not too_precise(text)
    assert "| - | -" not in text.split("## Predicted")[1].split("##")[0]  # no empty rows
    predicted = text.split("## Predicted")[1].split("## ")[0]
    for line in predicted.splitlines():
        if line.startswith("| ") and "---" not in line and not line.startswith("| metric"):
            name = line.split("|")[1].strip()
            assert name in WORDS or UNIT.search(name) or name.startswith(("TTFT", "TPOT")), name
    if "ttft_ms_band" in plan_dict["best"]["predicted"]:  # the calibrated bands (issue 17)
        assert "| TTFT 80% band |" in predicted and "| TPOT 80% band |" in predicted
        assert "Bands: engine=" in predicted


def test_cli_text(plan_dict: dict[str, Any]) -> None:
    from planner.cli.cmd_plan import plan_table

    mode = plan_dict["best"]["mode"]
    text = plan_table(plan(PlanRequest(**DEFAULT, mode=mode)))  # type: ignore[arg-type]
    assert not too_precise(text), too_precise(text)
    header = next(line for line in text.splitlines() if line.startswith("mode "))
    cols = [c.strip() for c in re.split(r"\s{2,}", header) if c.strip()]
    assert not unitless([c for c in cols if c not in ("mode", "configuration")]), cols


def _scan_page(at: Any) -> None:
    for df in at.dataframe:
        frame = df.value
        assert not unitless([str(c) for c in frame.columns]), list(frame.columns)
        assert not too_precise(frame.to_string()), frame.to_string()[:500]
    for table in at.table:
        assert not unitless([str(c) for c in table.value.columns]), list(table.value.columns)
        assert not too_precise(table.value.to_string())
    for m in at.metric:
        assert not too_precise(f"{m.value} {m.delta or ''}"), m.value
    for text in (*at.markdown, *at.caption, *at.warning, *at.info):
        assert not too_precise(text.value), text.value


@pytest.mark.parametrize("mode", ["agg", "disagg"])
def test_plan_page_tables(mode: str) -> None:
    from tests.app.conftest import no_errors, page, widget

    at = page("plan")
    widget(at.selectbox, "in_mode").set_value(mode)
    widget(at.checkbox, "plan_robust").set_value(False)  # agg misses 40 ms at the band edge
    at.button(key="plan_button").click().run()
    no_errors(at)
    assert at.session_state["plan_result"][0]["best"]["mode"] == mode
    _scan_page(at)


def test_compare_page_tables() -> None:
    from tests.app.conftest import no_errors, page

    at = page("compare")
    no_errors(at)
    _scan_page(at)
