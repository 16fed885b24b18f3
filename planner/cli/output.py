"""Shared CLI output: JSON for machines, aligned tables for people."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel

from planner.reports.present import num


def to_jsonable(obj: Any) -> Any:
    """Convert pydantic models, numpy scalars/arrays and tuples into plain JSON values."""
    if isinstance(obj, BaseModel):
        return to_jsonable(obj.model_dump(mode="json"))
    if isinstance(obj, Mapping):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [to_jsonable(v) for v in obj.tolist()]
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating | float):
        f = float(obj)
        return f if math.isfinite(f) else None
    if isinstance(obj, np.bool_):
        return bool(obj)
    return obj


def print_json(obj: Any) -> None:
    """Print one JSON object on stdout."""
    sys.stdout.write(json.dumps(to_jsonable(obj), indent=2) + "\n")


def stderr_line(line: str) -> None:
    """A progress callback for the core's long work: one line on stderr."""
    sys.stderr.write(line + "\n")


def fmt_num(x: Any) -> str:
    """Human formatting (``planner.reports.present.num``): exact integers, 4 significant figures."""
    if isinstance(x, bool) or x is None:
        return str(x)
    if isinstance(x, int | np.integer | float | np.floating):
        return num(x)
    return str(x)


def render_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None) -> str:
    """Left-aligned text table of ``rows`` (list of dicts)."""
    if not rows:
        return "(no rows)"
    cols = list(columns or rows[0].keys())
    # a cell without a value (None) reads '-', as in the reports
    cells = [["-" if r.get(c) is None else fmt_num(r.get(c, "")) for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    line = "  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True))
    sep = "  ".join("-" * w for w in widths)
    body = ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join([line, sep, *body])


def render_kv(pairs: Mapping[str, Any], title: str = "") -> str:
    """Two-column key/value block."""
    width = max((len(k) for k in pairs), default=0)
    lines = [title] if title else []
    lines += [f"  {k.ljust(width)}  {fmt_num(v)}" for k, v in pairs.items()]
    return "\n".join(lines)
