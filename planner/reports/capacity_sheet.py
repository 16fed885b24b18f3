"""The Capacity sheet: windows of a ``planner capacity`` answer, the fleet comparison and a native
chart of the arrival rate with the GPUs per window on a second axis.

``add_capacity_sheet(workbook, capacity_dict)`` adds the sheet to any xlsxwriter workbook (the
plan report can call it); ``capacity_xlsx(capacity_dict)`` builds a workbook holding only it.
Cells are typed writes: strings never become formulas or links, non-finite numbers stay blank.
"""

from __future__ import annotations

import io
import math

import xlsxwriter
from xlsxwriter.chart import Chart
from xlsxwriter.format import Format
from xlsxwriter.workbook import Workbook
from xlsxwriter.worksheet import Worksheet

from hardware.errors import PlannerInputError
from hardware.jsontypes import as_list, as_mapping

SHEET = "Capacity"
FLEET_ROW = 3
"""Row of the fleet comparison's header (the windows table starts below it)."""


def window_columns(pct: str) -> list[tuple[str, str]]:
    """(header, key) of the windows table; keys are dotted paths into a window of the JSON."""
    return [
        ("window", "#"),
        ("start (h)", "start_h"),
        ("requests", "requests"),
        ("rate (req/s)", "rate"),
        ("design rate (req/s)", "design_rate"),
        ("gap CV", "arrival_cv"),
        ("ISL mean (tokens)", "isl_mean"),
        ("OSL mean (tokens)", "osl_mean"),
        ("replicas", "replicas"),
        ("GPUs", "gpus"),
        (f"TTFT {pct} (ms)", f"ttft_ms.{pct}"),
        (f"TPOT {pct} (ms)", f"tpot_ms.{pct}"),
        ("meets SLO", "meets_slo"),
        ("config", "config"),
    ]


def _get(row: dict[str, object], key: str) -> object:
    cur: object = row
    for part in key.split("."):
        cur = cur.get(part) if isinstance(cur, dict) else None
    return cur


def _write(ws: Worksheet, r: int, c: int, value: object) -> None:
    """Typed write: bool and str as text, finite numbers as numbers, the rest blank."""
    if isinstance(value, bool) or isinstance(value, str):
        ws.write_string(r, c, str(value))
    elif isinstance(value, int | float) and math.isfinite(float(value)):
        ws.write_number(r, c, float(value))
    else:
        ws.write_blank(r, c, None)


def _g(value: object) -> str:
    """A number in ``%g`` form (other values as text)."""
    return f"{value:g}" if isinstance(value, int | float) else str(value)


def _number(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PlannerInputError(where, f"must be a number, got {value!r}")
    return float(value)


def _fleet(ws: Worksheet, cap: dict[str, object], bold: Format) -> None:
    heads = ["deployment", "GPUs (max)", "GPU-hours", "cost ($)", "windows violating SLO"]
    for c, h in enumerate(heads):
        ws.write_string(FLEET_ROW, c, h, bold)
    for r, (name, key) in enumerate(
        (
            ("autoscaled", "autoscaled"),
            ("static peak", "static_peak"),
            ("static mean", "static_mean"),
        ),
        start=FLEET_ROW + 1,
    ):
        f = as_mapping(cap[key], f"capacity: {key}")
        for c, v in enumerate(
            (name, f["gpus"], f["gpu_hours"], f["cost"], f.get("windows_violating", 0))
        ):
            _write(ws, r, c, v)


POWER_COLUMNS = (
    ("board W per GPU (mean)", "avg_power_w_per_gpu"),
    ("board kW", "deployment_kw"),
    ("J per output token", "j_per_output_token"),
    ("J per total token", "j_per_total_token"),
    ("facility kWh per day", "kwh_per_day"),
    ("energy $ per day", "energy_cost_usd_per_day"),
    ("GPUs + energy $ per hour", "total_cost_usd_per_hour"),
)
"""The power block (the static-mean fleet at the trace's mean rate: ``planner capacity``'s
``power`` object), beside the fleet table."""


def _power(ws: Worksheet, cap: dict[str, object], bold: Format) -> None:
    power = cap.get("power")
    if not isinstance(power, dict):
        return
    first = 6  # one blank column after the fleet table's five
    ws.write_string(FLEET_ROW - 1, first, "static mean fleet at the trace's mean rate", bold)
    for c, (head, key) in enumerate(POWER_COLUMNS, start=first):
        ws.write_string(FLEET_ROW, c, head, bold)
        _write(ws, FLEET_ROW + 1, c, power.get(key))


def _chart(wb: Workbook, first: int, last: int, rate_col: int, gpu_col: int) -> Chart:
    chart = wb.add_chart({"type": "column"})
    chart.add_series(
        {
            "name": "arrival rate (req/s)",
            "categories": [SHEET, first, 1, last, 1],
            "values": [SHEET, first, rate_col, last, rate_col],
            "gap": 10,
        }
    )
    line = wb.add_chart({"type": "line"})
    line.add_series(
        {
            "name": "GPUs",
            "categories": [SHEET, first, 1, last, 1],
            "values": [SHEET, first, gpu_col, last, gpu_col],
            "y2_axis": True,
        }
    )
    chart.combine(line)
    chart.set_title({"name": "Arrival rate and GPUs per window"})
    chart.set_x_axis({"name": "window start (h)"})
    chart.set_y_axis({"name": "requests/s"})
    line.set_y2_axis({"name": "GPUs"})
    chart.set_size({"width": 900, "height": 360})
    return chart


def add_capacity_sheet(wb: Workbook, cap: dict[str, object]) -> Worksheet:
    """Add the Capacity sheet for ``cap`` (the JSON of ``planner capacity``) to ``wb``."""
    ws = wb.add_worksheet(SHEET)
    bold = wb.add_format({"bold": True})
    slo = as_mapping(cap["slo"], "capacity: slo")
    trace = as_mapping(cap["trace"], "capacity: trace")
    windows = as_list(cap["windows"], "capacity: windows")
    pct = str(slo["percentile"])
    ws.write_string(
        0,
        0,
        f"{cap['model']} on {cap['gpu']} ({cap['backend']}): SLO {pct} TTFT <= "
        f"{_g(slo['ttft_ms'])} ms, TPOT <= {_g(slo['tpot_ms'])} ms; windows of "
        f"{_g(_number(cap['window_s'], 'capacity: window_s') / 60)} min; "
        f"scale-up {_g(cap['scale_up_s'])} s",
        bold,
    )
    ws.write_string(
        1,
        0,
        f"trace {trace['source']}: {trace['requests']} requests; "
        f"${_g(cap['price_per_gpu_hour'])} per GPU-hour",
    )
    _fleet(ws, cap, bold)
    _power(ws, cap, bold)
    top = FLEET_ROW + 6
    cols = window_columns(pct)
    for c, (head, _) in enumerate(cols):
        ws.write_string(top, c, head, bold)
    for i, item in enumerate(windows):
        w = as_mapping(item, f"capacity: windows[{i}]")
        row = {**w, "#": i, "start_h": _number(w["start_s"], "capacity: start_s") / 3600.0}
        for c, (_, key) in enumerate(cols):
            _write(ws, top + 1 + i, c, _get(row, key))
    ws.set_column(0, len(cols) - 2, 12)
    ws.set_column(len(cols) - 1, len(cols) - 1, 48)
    if windows:
        keys = [k for _, k in cols]
        chart = _chart(wb, top + 1, top + len(windows), keys.index("rate"), keys.index("gpus"))
        ws.insert_chart(top, len(cols) + 1, chart)
    return ws


def capacity_xlsx(cap: dict[str, object]) -> bytes:
    """A workbook with the Capacity sheet only, as bytes."""
    buf = io.BytesIO()
    wb = xlsxwriter.Workbook(
        buf,
        {
            "in_memory": True,
            "strings_to_formulas": False,
            "strings_to_urls": False,
            "strings_to_numbers": False,
        },
    )
    add_capacity_sheet(wb, cap)
    wb.close()
    return buf.getvalue()
