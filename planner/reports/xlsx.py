"""The spreadsheet report: one sheet per concern, native Excel charts, values (never formulas).

Built entirely in memory with xlsxwriter; ``build_xlsx`` returns the file's bytes.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass

import xlsxwriter
from xlsxwriter.format import Format
from xlsxwriter.workbook import Workbook
from xlsxwriter.worksheet import Worksheet

from planner.reports.plan_view import PlanView, parse_plan
from planner.reports.present import excel_format_for
from planner.reports.table import Table
from planner.reports.tables import PER_GPU_LABEL, PER_USER_LABEL, SHEETS, sheet_tables

CHART_ROWS = 20
"""Rows kept free above the Pareto table for its chart."""
MAX_COL_WIDTH = 90
_FMT_SPECS: dict[str, dict[str, object]] = {
    "title": {"bold": True, "font_size": 14},
    "table": {"bold": True, "font_size": 11, "font_color": "#1f4e79"},
    "note": {"italic": True, "font_color": "#7f7f7f"},
    "header": {"bold": True, "bg_color": "#dde7f0", "bottom": 1, "text_wrap": True},
    "plain": {},
    "wrap": {"text_wrap": True, "valign": "top"},
}


@dataclass(frozen=True)
class Placed:
    """Where a table landed: its sheet, first and last data row, first column."""

    sheet: str
    first_row: int
    last_row: int
    col: int
    table: Table

    def column(self, name: str) -> int | None:
        """Absolute column index of ``name`` (or of a dotted column ending with it)."""
        for i, c in enumerate(self.table.columns):
            if c == name or c.endswith(f".{name}"):
                return self.col + i
        return None


class Formats(dict[str, Format]):
    """The workbook's cell formats, number formats added on first use."""

    def __init__(self, wb: Workbook) -> None:
        super().__init__({k: wb.add_format(v) for k, v in _FMT_SPECS.items()})
        self.wb = wb

    def number(self, num_format: str) -> Format:
        key = f"num:{num_format}"
        if key not in self:
            self[key] = self.wb.add_format({"num_format": num_format})
        return self[key]


def _cell_format(value: object, kind: str, fmts: dict[str, Format]) -> Format:
    """4 significant figures for quantities, exact counts, % for shares (the cell keeps the value);
    text longer than a column wraps."""
    if isinstance(value, str) and len(value) > MAX_COL_WIDTH:
        return fmts["wrap"]
    if (
        not isinstance(value, int | float)
        or isinstance(value, bool)
        or not isinstance(fmts, Formats)
    ):
        return fmts["plain"]
    if kind == "gb":  # memory detail cells hold bytes: shown as GB
        return fmts.number(excel_format_for(value / 1e9) + ",,,")
    if isinstance(value, int) and kind not in ("pct", "money"):
        kind = "count"
    return fmts.number(excel_format_for(value, kind))


def _write_cell(ws: Worksheet, row: int, col: int, value: object, fmt: Format) -> None:
    """Typed write: strings never become formulas or links, non-finite numbers become blanks."""
    if isinstance(value, bool):
        ws.write_boolean(row, col, value)
    elif isinstance(value, int | float):
        if math.isfinite(value):
            ws.write_number(row, col, value, fmt)
        else:
            ws.write_blank(row, col, None)
    elif value is None:
        ws.write_blank(row, col, None)
    else:
        ws.write_string(row, col, str(value), fmt)


def _write_table(ws: Worksheet, row: int, table: Table, fmts: dict[str, Format]) -> tuple[int, int]:
    """Write ``table`` from ``row``; return (first data row, next free row)."""
    ws.write_string(row, 0, table.title, fmts["table"])
    row += 1
    if table.note:
        ws.write_string(row, 0, table.note, fmts["note"])
        row += 1
    for c, name in enumerate(table.columns):
        ws.write_string(row, c, name, fmts["header"])
    first = row + 1
    for r, cells in enumerate(table.rows, start=first):
        for c, value in enumerate(cells):
            kind = table.kind(r - first, table.columns[c])
            _write_cell(ws, r, c, value, _cell_format(value, kind, fmts))
    return first, first + len(table.rows) + 1


def _set_widths(ws: Worksheet, tables: list[Table]) -> None:
    widths: dict[int, int] = {}
    for t in tables:
        for row in (t.columns, *t.rows):
            for c, v in enumerate(row):
                text = f"{v:,.4g}" if isinstance(v, float) else str(v)
                widths[c] = max(widths.get(c, 8), min(len(text) + 2, MAX_COL_WIDTH))
    for c, w in widths.items():
        ws.set_column(c, c, w)


def _write_sheet(
    wb: Workbook, name: str, tables: list[Table], title: str, fmts: dict[str, Format]
) -> list[Placed]:
    ws = wb.add_worksheet(name)
    ws.write_string(0, 0, title, fmts["title"])
    row = 2 + (CHART_ROWS if name == "Pareto" else 0)
    if name == "Pareto":
        ws.write_string(row, 0, "The points are the rows of the Candidates sheet.", fmts["note"])
    placed = []
    for table in tables:
        first, row = _write_table(ws, row, table, fmts)
        placed.append(Placed(name, first, first + len(table.rows) - 1, 0, table))
    _set_widths(ws, tables)
    ws.freeze_panes(1, 0)
    ws.set_landscape()
    ws.fit_to_pages(1, 0)  # printed (or converted to PDF) one page wide
    return placed


def _row_of(placed: Placed, item: str) -> int | None:
    for i, row in enumerate(placed.table.rows):
        if row and row[0] == item:
            return placed.first_row + i
    return None


def _pareto_chart(wb: Workbook, cands: Placed, preds: Placed) -> None:
    """Scatter of output tokens/s per GPU (y) vs per user (x): candidates and the recommendation."""
    x_col, y_col = cands.column(PER_USER_LABEL), cands.column(PER_GPU_LABEL)
    bx, by = _row_of(preds, PER_USER_LABEL), _row_of(preds, PER_GPU_LABEL)
    has_front = x_col is not None and y_col is not None and bool(cands.table.rows)
    has_best = bx is not None and by is not None
    if not (has_front or has_best):
        return
    chart = wb.add_chart({"type": "scatter"})
    assert chart is not None
    if has_front:
        chart.add_series(
            {
                "name": "candidates (Pareto front and best by the objective)",
                "categories": [cands.sheet, cands.first_row, x_col, cands.last_row, x_col],
                "values": [cands.sheet, cands.first_row, y_col, cands.last_row, y_col],
                "marker": {"type": "circle", "size": 6},
            }
        )
    if has_best:
        chart.add_series(
            {
                "name": "recommended",
                "categories": [preds.sheet, bx, 1, bx, 1],
                "values": [preds.sheet, by, 1, by, 1],
                "marker": {"type": "diamond", "size": 10, "fill": {"color": "#c00000"}},
            }
        )
    chart.set_title({"name": "Throughput per GPU vs per user"})
    chart.set_x_axis({"name": PER_USER_LABEL, "major_gridlines": {"visible": True}})
    chart.set_y_axis({"name": PER_GPU_LABEL})
    chart.set_size({"width": 760, "height": 380})
    wb.get_worksheet_by_name("Pareto").insert_chart(2, 0, chart)


def _step_groups(lat: Placed) -> list[tuple[str, int, int]]:
    """(step, first row, last row) of each step's block of rows in the long latency table."""
    groups: list[tuple[str, int, int]] = []
    for i, row in enumerate(lat.table.rows):
        r = lat.first_row + i
        if groups and groups[-1][0] == row[0]:
            groups[-1] = (row[0], groups[-1][1], r)
        else:
            groups.append((str(row[0]), r, r))
    return groups


def _latency_chart(wb: Workbook, lat: Placed) -> None:
    """Horizontal bars: share of step time per op kind, one chart series per step."""
    share = lat.column("Share of step (%)")
    if share is None or not lat.table.rows:
        return  # xlsxwriter refuses a chart without series; the sheet's note says why
    chart = wb.add_chart({"type": "bar"})
    assert chart is not None
    for step, first, last in _step_groups(lat):
        chart.add_series(
            {
                "name": step,
                "categories": [lat.sheet, first, lat.col + 1, last, lat.col + 1],
                "values": [lat.sheet, first, share, last, share],
            }
        )
    chart.set_title({"name": "Share of step time per op kind"})
    chart.set_x_axis({"name": "share of step time (%)", "num_format": "0%"})
    chart.set_y_axis({"reverse": True})
    chart.set_size({"width": 640, "height": 24 * max(len(lat.table.rows), 8) + 120})
    anchor = len(lat.table.columns) + 1
    wb.get_worksheet_by_name(lat.sheet).insert_chart(2, anchor, chart)


def _memory_chart(wb: Workbook, mem: Placed) -> None:
    """Stacked columns: GB per GPU of each memory component, one column per role."""
    if not mem.table.rows:
        return
    chart = wb.add_chart({"type": "column", "subtype": "stacked"})
    assert chart is not None
    gb_cols = [i for i, c in enumerate(mem.table.columns) if c.startswith("Memory per GPU")]
    for r in range(len(mem.table.rows)):
        row = mem.first_row + r
        chart.add_series(
            {
                "name": [mem.sheet, row, mem.col],
                "categories": [
                    mem.sheet,
                    mem.first_row - 1,
                    gb_cols[0],
                    mem.first_row - 1,
                    gb_cols[-1],
                ],
                "values": [mem.sheet, row, gb_cols[0], row, gb_cols[-1]],
            }
        )
    chart.set_title({"name": "Memory per GPU (GB)"})
    chart.set_y_axis({"name": "GB"})
    # beside the 2-column details
    wb.get_worksheet_by_name(mem.sheet).insert_chart(mem.last_row + 3, 3, chart)


def render_xlsx(view: PlanView) -> bytes:
    """The workbook for a validated plan, as bytes."""
    buf = io.BytesIO()
    wb = xlsxwriter.Workbook(
        buf, {"in_memory": True, "strings_to_urls": False, "strings_to_formulas": False}
    )
    fmts = Formats(wb)
    placed: dict[str, list[Placed]] = {}
    for name, tables in sheet_tables(view).items():
        placed[name] = _write_sheet(wb, name, tables, f"{view.model}: {name}", fmts)
    assert tuple(placed) == SHEETS
    _pareto_chart(wb, placed["Candidates"][0], placed["Summary"][1])
    _latency_chart(wb, placed["Latency breakdown"][0])
    _memory_chart(wb, placed["Memory breakdown"][0])
    wb.set_properties({"title": f"Serving plan: {view.model}", "comments": "planner report"})
    wb.close()
    return buf.getvalue()


def build_xlsx(plan: dict[str, object]) -> bytes:
    """Spreadsheet report of a decoded plan file (PlannerInputError when it is not a plan)."""
    return render_xlsx(parse_plan(plan))
