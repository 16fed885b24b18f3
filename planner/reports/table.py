"""The one record every writer renders: a titled grid of plain cells."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Table:
    """A titled grid: column names and rows of plain cells (str, int, float, bool or None)."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[object, ...], ...]
    note: str = ""
    formats: dict[str, str] = field(default_factory=dict)
    """Column name -> display kind (``planner.reports.present.kind_of``): 'count', 'pct', 'money',
    'gb', 'num' or 'text'; numbers of other columns show 4 significant figures."""
    row_kinds: tuple[str, ...] = ()
    """Display kind per row, for Item / Value tables whose rows hold different quantities."""

    def kind(self, row: int, column: str) -> str:
        """The display kind of one cell: its column's, else its row's, else 'num'."""
        if column in self.formats:
            return self.formats[column]
        if row < len(self.row_kinds):
            return self.row_kinds[row]
        return "num"


def kv_table(
    title: str, pairs: Mapping[str, object], note: str = "", kinds: Mapping[str, str] | None = None
) -> Table:
    """Two-column Item / Value table (``kinds``: display kind per item)."""
    rows = tuple((k, v) for k, v in pairs.items())
    row_kinds = tuple((kinds or {}).get(k, "num") for k in pairs)
    return Table(title, ("Item", "Value"), rows, note, {"Item": "text"}, row_kinds)


def rows_table(title: str, rows: list[dict[str, object]], note: str = "") -> Table:
    """Table from flat dict rows (shared keys become the columns, missing cells are blank)."""
    columns: list[str] = []
    for row in rows:
        columns.extend(c for c in row if c not in columns)
    body = tuple(tuple(row.get(c) for c in columns) for row in rows)
    return Table(title, tuple(columns), body, note)
