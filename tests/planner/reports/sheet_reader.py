"""Read the report's tables back from an openpyxl worksheet
(title row, optional note, header, rows)."""

from __future__ import annotations

from typing import Any

from openpyxl.worksheet.worksheet import Worksheet


def read_table(ws: Worksheet, title: str) -> list[dict[str, Any]]:
    """Rows of the table titled ``title`` as dicts keyed by its header."""
    rows = list(ws.iter_rows(values_only=True))
    start = next(i for i, r in enumerate(rows) if r and r[0] == title)
    head = start + 1
    if rows[head][1] is None and rows[head + 1][0] is not None:  # a note line
        head += 1
    header = [h for h in rows[head] if h is not None]
    out = []
    for r in rows[head + 1 :]:
        if all(v is None for v in r):
            break
        out.append(dict(zip(header, r[: len(header)], strict=True)))
    return out


def read_kv(ws: Worksheet, title: str) -> dict[str, Any]:
    """An Item / Value table as a dict."""
    return {r["Item"]: r["Value"] for r in read_table(ws, title)}
