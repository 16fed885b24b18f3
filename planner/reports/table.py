"""The one record every writer renders: a titled grid of plain cells."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Table:
    """A titled grid: column names and rows of plain cells (str, int, float, bool or None)."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    note: str = ""
    formats: dict[str, str] = field(default_factory=dict)
    """Column name -> display kind: 'pct' (share), 'num' (2 decimals); other numbers as they come."""


def kv_table(title: str, pairs: Mapping[str, Any], note: str = "") -> Table:
    """Two-column Item / Value table."""
    rows = tuple((k, v) for k, v in pairs.items())
    return Table(title, ("Item", "Value"), rows, note)


def rows_table(title: str, rows: list[dict[str, Any]], note: str = "") -> Table:
    """Table from flat dict rows (shared keys become the columns, missing cells are blank)."""
    columns: list[str] = []
    for row in rows:
        columns.extend(c for c in row if c not in columns)
    body = tuple(tuple(row.get(c) for c in columns) for row in rows)
    return Table(title, tuple(columns), body, note)
