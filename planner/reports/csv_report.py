"""The CSV report: one candidates table for machines (full precision; unit, percentile in names)."""

from __future__ import annotations

import csv
import io

from planner.reports.plan_view import PlanView, flat_rows, parse_plan
from planner.reports.present import machine_name
from planner.safe_files import csv_cell


def candidate_rows(view: PlanView) -> list[dict[str, object]]:
    """Top candidates (``rank`` 1 = the recommendation's score) and every other Pareto point.

    Latency columns carry the SLO percentile (``ttft_p90_ms``); a ``pareto`` column says whether a
    row is on the throughput-per-GPU vs per-user front.
    """
    pct = str(view.slo.get("percentile", "p90"))
    rows = [{"rank": i, **c} for i, c in enumerate(view.candidates, start=1)]
    seen = {(r.get("config"), r.get("gpu")) for r in rows}
    for p in flat_rows(view.pareto):
        if (p.get("config"), p.get("gpu")) not in seen:
            named = {machine_name(k, pct): v for k, v in p.items()}
            rows.append({"rank": None, **named, "pareto": True})
    return rows


def render_csv(view: PlanView) -> str:
    """CSV text; floats use Python's shortest round-trip repr, so they read back exactly."""
    rows = candidate_rows(view)
    columns: list[str] = []
    for row in rows:
        columns.extend(c for c in row if c not in columns)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n", restval="")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: "" if v is None else csv_cell(v) for k, v in row.items()})
    return buf.getvalue()


def build_csv(plan: dict[str, object]) -> str:
    """CSV report of a decoded plan file (raises PlannerInputError when it is not a plan)."""
    return render_csv(parse_plan(plan))
