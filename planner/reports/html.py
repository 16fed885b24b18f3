"""The HTML report: one self-contained page (plotly.js inlined, no network), the xlsx's charts
and tables."""

from __future__ import annotations

import html
import math

import plotly.graph_objects as go
import plotly.io as pio

from planner.reports import present as pr
from planner.reports.breakdowns import latency_table, memory_table
from planner.reports.plan_view import PlanView, as_float, flat_rows, parse_plan
from planner.reports.table import Table
from planner.reports.tables import (
    PER_GPU,
    PER_GPU_LABEL,
    PER_USER,
    PER_USER_LABEL,
    headline,
    metric_xy,
    sheet_tables,
)

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;
max-width:1200px;color:#222}
h1{font-size:22px}h2{font-size:18px;border-bottom:1px solid #ccc;padding-bottom:4px;margin-top:32px}
h3{font-size:14px;color:#1f4e79;margin:16px 0 4px}
table{border-collapse:collapse;font-size:12px;margin-bottom:8px}
th,td{border:1px solid #ddd;padding:3px 8px;text-align:left;white-space:nowrap}
th{background:#dde7f0}td.n{text-align:right;font-variant-numeric:tabular-nums}
.note{color:#777;font-style:italic;font-size:12px}.wrap{overflow-x:auto}
nav a{margin-right:12px}
"""


def fmt_cell(value: object, kind: str = "num") -> str:
    """Display text of one cell (the xlsx keeps the exact value; the page rounds for reading)."""
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return pr.num(value) if isinstance(value, bool) else str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return "-"
    return pr.show_kind(kind, value)


def table_html(table: Table) -> str:
    """One table as escaped HTML."""
    parts = [f"<h3>{html.escape(table.title)}</h3>"]
    if table.note:
        parts.append(f'<p class="note">{html.escape(table.note)}</p>')
    if not table.rows:
        return "".join(parts)
    head = "".join(f"<th>{html.escape(c)}</th>" for c in table.columns)
    body: list[str] = []
    for row in table.rows:
        cells = []
        for col, value in zip(table.columns, row, strict=True):
            number = isinstance(value, int | float) and not isinstance(value, bool)
            cls = ' class="n"' if number else ""
            text = fmt_cell(value, table.kind(len(body), col))
            cells.append(f"<td{cls}>{html.escape(text)}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    parts.append(
        f'<div class="wrap"><table><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )
    return "".join(parts)


def pareto_figure(view: PlanView) -> go.Figure:
    """Output tokens/s per GPU vs per user: candidates, Pareto front and the recommendation."""
    fig = go.Figure()
    cands = [metric_xy(c) for c in view.candidates]
    front = sorted(xy for xy in (metric_xy(p) for p in flat_rows(view.pareto)) if None not in xy)
    cands = [xy for xy in cands if None not in xy]
    if cands:
        fig.add_trace(
            go.Scatter(
                x=[p[0] for p in cands],
                y=[p[1] for p in cands],
                mode="markers",
                name="top candidates",
                marker={"size": 6, "color": "#9db4cc"},
            )
        )
    fig.add_trace(
        go.Scatter(
            x=[p[0] for p in front],
            y=[p[1] for p in front],
            mode="lines+markers",
            name="Pareto front",
            marker={"size": 8},
            line={"shape": "hv"},
        )
    )
    best = headline(view)
    bx, by = as_float(best.get(PER_USER)), as_float(best.get(PER_GPU))
    if bx is not None and by is not None:
        fig.add_trace(
            go.Scatter(
                x=[bx],
                y=[by],
                mode="markers",
                name="recommended",
                marker={"size": 14, "symbol": "diamond", "color": "#c00000"},
            )
        )
    fig.update_layout(
        title="Throughput per GPU vs per user",
        xaxis_title=PER_USER_LABEL,
        yaxis_title=PER_GPU_LABEL,
        height=420,
        margin={"t": 50},
    )
    return fig


def latency_figure(view: PlanView) -> go.Figure:
    """Horizontal bars: share of step time per op kind (one trace per step)."""
    table = latency_table(view)
    fig = go.Figure()
    col = "Share of step (%)"
    share = table.columns.index(col) if col in table.columns else None
    steps = list(dict.fromkeys(r[0] for r in table.rows))
    for step in steps:
        rows = [r for r in table.rows if r[0] == step]
        fig.add_trace(
            go.Bar(
                y=[r[1] for r in rows],
                x=[r[share] for r in rows] if share else [],
                orientation="h",
                name=str(step),
            )
        )
    ops = {r[1] for r in table.rows}
    fig.update_layout(
        title="Share of step time per op kind",
        xaxis_tickformat=".0%",
        xaxis_title="share of step time (%)",
        yaxis_autorange="reversed",
        height=120 + 28 * max(len(ops), 6),
        margin={"t": 50},
    )
    return fig


def memory_figure(view: PlanView) -> go.Figure:
    """Stacked bars: GB per GPU of each memory component, one bar per role."""
    table = memory_table(view)
    gb_cols = [i for i, c in enumerate(table.columns) if c.startswith("Memory per GPU")]
    fig = go.Figure()
    for row in table.rows:
        fig.add_trace(
            go.Bar(
                x=[table.columns[i] for i in gb_cols],
                y=[row[i] for i in gb_cols],
                name=str(row[0]),
                hovertemplate="%{y:.3g} GB",
            )
        )
    fig.update_layout(
        title="Memory per GPU (GB)", barmode="stack", yaxis_title="GB", height=380, margin={"t": 50}
    )
    return fig


def _figures_html(view: PlanView) -> dict[str, str]:
    """Chart divs keyed by the section they belong to; plotly.js is inlined once, in the first."""
    figs = {
        "Pareto": pareto_figure(view),
        "Latency breakdown": latency_figure(view),
        "Memory breakdown": memory_figure(view),
    }
    out = {}
    for i, (name, fig) in enumerate(figs.items()):
        out[name] = pio.to_html(
            fig,
            include_plotlyjs=(i == 0),
            full_html=False,
            config={"displaylogo": False},
            div_id=f"chart-{i}",
        )
    return out


def render_html(view: PlanView) -> str:
    """The whole page for a validated plan."""
    title = f"Serving plan: {view.model} ({view.best.gpus} x {view.gpu})"
    charts = _figures_html(view)
    sheets = sheet_tables(view)
    sections = []
    for name, tables in sheets.items():
        anchor = name.lower().replace(" ", "-")
        body = charts.get(name, "") + "".join(table_html(t) for t in tables)
        if name == "Pareto":
            body += '<p class="note">The points are the rows of the Candidates table.</p>'
        sections.append(f'<section id="{anchor}"><h2>{html.escape(name)}</h2>{body}</section>')
    nav = "".join(f'<a href="#{n.lower().replace(" ", "-")}">{html.escape(n)}</a>' for n in sheets)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title>"
        f"<style>{_CSS}</style></head><body><h1>{html.escape(title)}</h1><nav>{nav}</nav>"
        f"{''.join(sections)}</body></html>\n"
    )


def build_html(plan: dict[str, object]) -> str:
    """HTML report of a decoded plan file (raises PlannerInputError when it is not a plan)."""
    return render_html(parse_plan(plan))
