"""Rows of ``silicon_measured.csv`` named unmodellable (``unmodellable.yaml``): each is off by more
than 3x on TTFT or TPOT for a cause that is not the serving system's, with the note that gives the
evidence. ``python -m lab.prepare_e2e`` writes each named row's cause into the layout's
``unmodellable`` column, which ``planner validate e2e`` counts in ``off_by_3x``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hardware.errors import PlannerInputError
from hardware.input_files import read_yaml

UNMODELLABLE_FILE = Path(__file__).with_name("unmodellable.yaml")
NOTES_DIR = Path(__file__).with_name("notes")


@dataclass(frozen=True)
class NamedRow:
    """One row of ``UNMODELLABLE_FILE``: why it is off, and where the evidence is written."""

    cause: str
    note: str


def named_unmodellable(path: Path = UNMODELLABLE_FILE) -> dict[str, NamedRow]:
    """Row id -> ``NamedRow`` of the unmodellable list (an input error naming the file and entry
    when an entry lacks an id, names an unknown cause or a note that does not exist)."""
    raw = read_yaml(path, "calibration YAML", "unmodellable")
    if not isinstance(raw, dict) or not isinstance(raw.get("causes"), dict):
        raise PlannerInputError("unmodellable", f"{path}: needs 'causes' and 'rows'")
    causes, rows = raw["causes"], raw.get("rows")
    if not isinstance(rows, list):
        raise PlannerInputError("unmodellable", f"{path}: 'rows' is not a list")
    out: dict[str, NamedRow] = {}
    for i, row in enumerate(rows):
        where = f"{path}: rows[{i}]"
        if not isinstance(row, dict) or not isinstance(row.get("id"), str) or not row["id"]:
            raise PlannerInputError("unmodellable", f"{where}: needs an 'id'")
        if row.get("cause") not in causes:
            raise PlannerInputError(
                "unmodellable", f"{where}: cause {row.get('cause')!r} not one of {sorted(causes)}"
            )
        note = str(row.get("note", ""))
        if "/" in note or not (NOTES_DIR / note).is_file():
            raise PlannerInputError("unmodellable", f"{where}: note {note!r} not in {NOTES_DIR}")
        if row["id"] in out:
            raise PlannerInputError("unmodellable", f"{where}: {row['id']} listed twice")
        out[row["id"]] = NamedRow(str(row["cause"]), note)
    return out
