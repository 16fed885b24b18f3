"""The CSV report: the Pareto front (and the candidate list when the plan kept one), one row per config."""

from __future__ import annotations

import csv
import io
from typing import Any

from planner.reports.plan_view import PlanView, flat_rows, parse_plan
from planner.safe_files import csv_cell


def render_csv(view: PlanView) -> str:
    """CSV text: a leading ``set`` column says whether a row is on the Pareto front or a candidate.

    Floats are written with Python's shortest round-trip repr, so they read back exactly; text
    cells that a spreadsheet would read as a formula are neutralised (``safe_files.csv_cell``).
    """
    rows = [{"set": "pareto", **r} for r in flat_rows(view.pareto)]
    rows += [{"set": "candidate", **r} for r in flat_rows(view.candidates)]
    columns: list[str] = ["set"]
    for row in rows:
        columns.extend(c for c in row if c not in columns)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n", restval="")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: "" if v is None else csv_cell(v) for k, v in row.items()})
    return buf.getvalue()


def build_csv(plan: dict[str, Any]) -> str:
    """CSV report of a decoded plan file (raises PlannerInputError when it is not a plan)."""
    return render_csv(parse_plan(plan))
