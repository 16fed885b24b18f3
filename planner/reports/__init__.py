"""Reports of a plan file: a spreadsheet with native charts, a self-contained HTML page and a CSV.

The web UI and the ``planner report`` command call ``build_xlsx`` / ``build_html`` / ``build_csv``
with the decoded plan; each validates it (``PlannerInputError`` naming the missing field).
"""

from planner.reports.csv_report import build_csv
from planner.reports.html import build_html
from planner.reports.plan_view import PlanView, load_plan, parse_plan
from planner.reports.tables import SHEETS
from planner.reports.xlsx import build_xlsx

__all__ = ["SHEETS", "PlanView", "build_csv", "build_html", "build_xlsx", "load_plan", "parse_plan"]
